"""Ed25519 signatures over evidence: one signing key per user/host, one trusted-keys file.

A hash chain or a manifest fingerprint proves that evidence is self-consistent,
not who wrote it: anyone with write access can recompute every hash. A
signature made with a key kept *outside* every session folder closes that gap.

* **Signing key** — ``$SK_TUNE_SIGNING_KEY`` or ``~/.config/sk-tune/signing_key``
  (``$XDG_CONFIG_HOME`` respected). Created on first use (OpenSSH private key
  format, mode 0600, folder 0700); an existing unencrypted OpenSSH or PEM
  Ed25519 key can be named instead. A key readable by others is refused.
* **Trusted keys** — ``$SK_TUNE_TRUSTED_KEYS`` or ``trusted_keys`` beside the key,
  in git's *allowed-signers* form: ``NAME ssh-ed25519 AAAA… [comment]`` per
  line, ``#`` comments. The own key is appended when it is created.
* **Fingerprints** are OpenSSH's (``SHA256:`` + base64 of the key blob's
  SHA-256), so ``ssh-keygen -lf`` shows the same string.

Every signature covers ``sk-tune-signature-v1 NUL purpose NUL payload``: the
purpose (``ledger-record``, ``ledger-head``, ``collection-manifest``) keeps a
signature made for one kind of evidence from being replayed as another.
``cryptography`` is imported only when a key is loaded or a signature checked,
so the CLIs' ``--help`` stays fast. See ``docs/contract.md`` (signatures).
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import os
import socket
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.errors import IntegrityError, ReadFault, SkTuneError
from sk_analytics.files.io_seam import read_error

KEY_ENV = "SK_TUNE_SIGNING_KEY"
TRUSTED_ENV = "SK_TUNE_TRUSTED_KEYS"
KEY_TYPE = "ssh-ed25519"
DOMAIN = b"sk-tune-signature-v1"

#: rule id -> what it demands (the contract's RULES and the ledger's problem codes use these ids).
SIGNING_RULES: dict[str, str] = {
    "signing-key": "the signing key is an Ed25519 key file only its owner can read, outside every session folder",
    "trusted-keys": "the trusted-keys file exists outside the session folder, one `NAME ssh-ed25519 KEY` a line",
    "signed": "the evidence carries a signature {key, sig} (unsigned evidence was written before signing or forged)",
    "trusted-key": "the signature was made by a key listed in the trusted-keys file",
    "signature-valid": "the signature verifies: the evidence is byte-for-byte what the key holder signed",
}


class SignatureError(IntegrityError):
    """A key, a trusted-keys file or a signature violates a signing rule (exit 2)."""

    def __init__(self, rule: str, path: str | os.PathLike[str] | None, message: str) -> None:
        if rule not in SIGNING_RULES:
            raise KeyError(f"unknown signing rule {rule!r}")
        self.rule = rule
        self.path = None if path is None else str(path)
        self.detail = message
        super().__init__(f"{path}: rule {rule}: {message}" if path is not None else f"rule {rule}: {message}")


def _unreadable(rule: str, path: Path, exc: OSError, what: str) -> SkTuneError:
    """A key file the machine failed to read (:func:`~sk_analytics.files.io_seam.read_error`) is a
    ReadFault (exit 3, retried on resume); any other failed read breaks ``rule``."""
    error = read_error(path, exc, what)
    return error if isinstance(error, ReadFault) else SignatureError(rule, path, f"cannot read the {what}: {exc.strerror or exc}")


# --------------------------------------------------------------------------- locations


def _config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "sk-tune"


def key_path() -> Path:
    """Where the signing key is (``$SK_TUNE_SIGNING_KEY`` or the user's config dir)."""
    env = os.environ.get(KEY_ENV)
    return Path(env).expanduser() if env else _config_dir() / "signing_key"


def trusted_keys_path() -> Path:
    """Where the trusted-keys file is (``$SK_TUNE_TRUSTED_KEYS`` or beside the key)."""
    env = os.environ.get(TRUSTED_ENV)
    return Path(env).expanduser() if env else key_path().with_name("trusted_keys")


def forwarded_env() -> tuple[tuple[str, str], ...]:
    """The signing variables set here, as absolute paths: what a campaign driver hands to its nodes."""
    return tuple((name, os.path.abspath(os.path.expanduser(os.environ[name]))) for name in (KEY_ENV, TRUSTED_ENV) if os.environ.get(name))


def check_outside(path: Path, folder: str | os.PathLike[str], rule: str, what: str) -> None:
    """Refuse a key (or trusted-keys) ``path`` inside the session ``folder``: whoever can
    write the session could then replace the key that vouches for it."""
    p, f = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    if p == f or f in p.parents:
        raise SignatureError(rule, path, f"the {what} lies inside the session folder {folder}; keep it outside every session")


def fingerprint_of_blob(blob: bytes) -> str:
    """OpenSSH fingerprint of a public key blob (``SHA256:`` + unpadded base64)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii").rstrip("=")


def message(purpose: str, payload: str) -> bytes:
    """The exact bytes a signature covers (domain, purpose and payload, NUL separated)."""
    return b"\0".join((DOMAIN, purpose.encode("ascii"), payload.encode("utf-8")))


# --------------------------------------------------------------------------- signing


@dataclass(frozen=True)
class Signer:
    """A loaded private key: :meth:`sign` returns the ``{key, sig}`` object stored in evidence."""

    path: Path
    fingerprint: str
    public_line: str  # "ssh-ed25519 AAAA…"
    _key: Any = field(repr=False, compare=False)

    def sign(self, purpose: str, payload: str) -> dict[str, str]:
        sig = self._key.sign(message(purpose, payload))
        return {"key": self.fingerprint, "sig": base64.b64encode(sig).decode("ascii")}


_SIGNERS: dict[tuple[str, int, int, int], Signer] = {}


def signer(*, outside: str | os.PathLike[str] | None = None) -> Signer:
    """The signing key in effect, created on first use; refused inside ``outside`` (a session folder)."""
    path = key_path()
    if outside is not None:
        check_outside(path, outside, "signing-key", "signing key")
    if not path.exists():
        _create_key(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise _unreadable("signing-key", path, exc, "signing key") from exc
    cache_key = (str(path), st.st_mtime_ns, st.st_ino, st.st_mode)
    cached = _SIGNERS.get(cache_key)
    if cached is None:
        _check_private_mode(path, st)
        cached = _SIGNERS[cache_key] = _load_signer(path)
    return cached


def _check_private_mode(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise SignatureError("signing-key", path, "the signing key is not a regular file")
    if st.st_mode & 0o077:
        raise SignatureError(
            "signing-key", path, f"the signing key is readable by others (mode {stat.S_IMODE(st.st_mode):04o}); run chmod 600 on it"
        )


def _load_signer(path: Path) -> Signer:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _unreadable("signing-key", path, exc, "signing key") from exc
    key: object  # any key type the file holds; only Ed25519 passes the check below
    try:
        if data.lstrip().startswith(b"-----BEGIN OPENSSH PRIVATE KEY"):
            key = serialization.load_ssh_private_key(data, password=None)
        else:
            key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SignatureError("signing-key", path, f"not an unencrypted Ed25519 private key ({exc})") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError("signing-key", path, f"the key is {type(key).__name__}, expected Ed25519")
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode("ascii")
    return Signer(path, fingerprint_of_blob(base64.b64decode(line.split()[1])), line, key)


def _create_key(path: Path) -> None:
    """Write a new key (0600, folder 0700) without ever exposing a partial file, then trust it."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".signing_key.", dir=path.parent)  # mkstemp creates 0600
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(pem)
                fh.flush()
                os.fsync(fh.fileno())
            os.link(tmp, path)  # atomic and exclusive: a concurrent first use keeps the key that won
        except FileExistsError:
            return
        finally:
            os.unlink(tmp)
        line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode("ascii")
        add_trusted_key(trusted_keys_path(), f"{getpass.getuser()}@{socket.gethostname()}", line)
    except OSError as exc:
        raise SignatureError("signing-key", path, f"cannot create the signing key: {exc.strerror or exc}") from exc


def add_trusted_key(path: Path, name: str, public_line: str) -> None:
    """Append ``NAME ssh-ed25519 KEY`` to a trusted-keys file unless that key is already there."""
    blob = public_line.split()[1]
    if path.exists() and any(blob in line.split() for line in path.read_text(encoding="utf-8").splitlines()):
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    entry = f"{name} {KEY_TYPE} {blob} added-by-sk-tune\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, entry.encode("utf-8"))
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- verifying


@dataclass(frozen=True)
class TrustedKey:
    """One line of the trusted-keys file."""

    name: str
    fingerprint: str
    blob: bytes

    def label(self) -> str:
        """``NAME (SHA256:…)`` for messages."""
        return f"{self.name} ({self.fingerprint})"


@dataclass
class TrustedKeys:
    """The trusted-keys file: fingerprint -> key; :meth:`verify` checks one signature."""

    path: Path
    keys: dict[str, TrustedKey]
    _public: dict[str, Any] = field(default_factory=dict, repr=False)

    def verify(self, signature: Any, purpose: str, payload: str) -> TrustedKey:
        """The trusted key that made ``signature`` over ``payload``; raise :class:`SignatureError` otherwise.

        The error's ``path`` is left empty: the caller names the evidence file."""
        if signature is None:
            raise SignatureError("signed", None, f"no signature on this {purpose} (written before signing, or forged)")
        if not (isinstance(signature, dict) and set(signature) == {"key", "sig"}
                and isinstance(signature["key"], str) and isinstance(signature["sig"], str)):
            raise SignatureError("signed", None, f"the {purpose} signature is not an object {{key, sig}} of strings")
        trusted = self.keys.get(signature["key"])
        if trusted is None:
            raise SignatureError(
                "trusted-key", None, f"the {purpose} is signed by key {signature['key']}, which is not in {self.path}"
            )
        from cryptography.exceptions import InvalidSignature

        try:
            raw = base64.b64decode(signature["sig"], validate=True)
            self._public_key(trusted).verify(raw, message(purpose, payload))
        except (InvalidSignature, ValueError) as exc:
            raise SignatureError(
                "signature-valid", None,
                f"the {purpose} signature of {trusted.label()} does not match its content (changed after signing)",
            ) from exc
        return trusted

    def _public_key(self, trusted: TrustedKey) -> Any:
        key = self._public.get(trusted.fingerprint)
        if key is None:
            key = self._public[trusted.fingerprint] = ed25519_public_key(trusted.blob)
        return key


def ed25519_public_key(blob: bytes) -> Any:
    """The Ed25519 public key of an OpenSSH key blob (RFC 4253 strings ``ssh-ed25519``, 32 key bytes).

    Parsed here rather than by ``cryptography``'s OpenSSH loader, whose import (~50 ms) would
    be most of what ``ledger verify`` spends besides hashing; ValueError for any other blob."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    fields: list[bytes] = []
    at = 0
    while at < len(blob) and len(fields) < 3:
        if at + 4 > len(blob):
            raise ValueError("truncated key blob")
        size = int.from_bytes(blob[at:at + 4], "big")
        if at + 4 + size > len(blob):
            raise ValueError("truncated key blob")
        fields.append(blob[at + 4:at + 4 + size])
        at += 4 + size
    if at != len(blob) or len(fields) != 2 or fields[0] != KEY_TYPE.encode("ascii") or len(fields[1]) != 32:
        raise ValueError(f"not an {KEY_TYPE} key blob")
    return Ed25519PublicKey.from_public_bytes(fields[1])


_TRUSTED: dict[tuple[str, int, int, int], TrustedKeys] = {}


def trusted_keys(*, outside: str | os.PathLike[str] | None = None) -> TrustedKeys:
    """The trusted-keys file in effect, parsed (cached until it changes); refused inside ``outside``."""
    path = trusted_keys_path()
    if outside is not None:
        check_outside(path, outside, "trusted-keys", "trusted-keys file")
    try:
        st = path.stat()
    except FileNotFoundError as exc:
        raise SignatureError(
            "trusted-keys", path, f"no trusted-keys file (set {TRUSTED_ENV}, or sign once to create it with your own key)"
        ) from exc
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read forever
        from sk_analytics.files.io_seam import kind_of_mode

        raise SignatureError("trusted-keys", path, f"cannot read the trusted-keys file: {kind_of_mode(st.st_mode)}, not a regular file")
    cache_key = (str(path), st.st_mtime_ns, st.st_size, st.st_ino)
    cached = _TRUSTED.get(cache_key)
    if cached is None:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise _unreadable("trusted-keys", path, exc, "trusted-keys file") from exc
        except UnicodeDecodeError as exc:
            raise SignatureError("trusted-keys", path, f"cannot read the trusted-keys file: {exc}") from exc
        cached = _TRUSTED[cache_key] = TrustedKeys(path, parse_trusted_keys(text, path))
    return cached


def parse_trusted_keys(text: str, path: Path) -> dict[str, TrustedKey]:
    """Parse allowed-signers lines ``NAME ssh-ed25519 BASE64 [comment]`` (pure)."""
    keys: dict[str, TrustedKey] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) < 3 or parts[1] != KEY_TYPE:
            raise SignatureError("trusted-keys", f"{path}:{number}", f"expected `NAME {KEY_TYPE} BASE64KEY [comment]`, got {line[:60]!r}")
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except ValueError as exc:
            raise SignatureError("trusted-keys", f"{path}:{number}", "the key is not valid base64") from exc
        key = TrustedKey(parts[0], fingerprint_of_blob(blob), blob)
        keys.setdefault(key.fingerprint, key)
    return keys
