"""Signed evidence (issue 13, point 3): the key, the trusted-keys file, signed manifests and ledgers.

Every refusal is exit 2 with the rule named; a forger who can write the session but does not
hold a trusted key cannot re-seal a manifest or re-chain a ledger unnoticed."""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from contract_support import BASE_CONFIG, PROFILER_FILES, edit_manifest, make_collection

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract import MANIFEST_NAME, ContractIntegrityError, load_manifest
from sk_analytics.errors import ReadFault
from sk_analytics.fingerprint import fingerprint, sha256_file
from sk_analytics.ledger.chain import GENESIS, HEAD_PURPOSE, RECORD_PURPOSE, Ledger, head_body, head_path, verify
from sk_analytics.ledger.signing import KEY_ENV, TRUSTED_ENV, SignatureError, parse_trusted_keys, signer, trusted_keys

TARGET = PROFILER_FILES[0]


def _use_key(monkeypatch: pytest.MonkeyPatch, folder: Path, *, trusted: Path | None = None) -> Path:
    """Point signing at a key in ``folder`` (created on first use) and a trusted-keys file."""
    monkeypatch.setenv(KEY_ENV, str(folder / "signing_key"))
    monkeypatch.setenv(TRUSTED_ENV, str(trusted or folder / "trusted_keys"))
    return folder / "signing_key"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli(cli, "sk-analyze", list(argv))
    captured = capsys.readouterr()
    return code, captured.err + captured.out


# --------------------------------------------------------------------------- the key and the trusted-keys file


def test_key_created_on_first_use_owner_only_and_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_path = _use_key(monkeypatch, tmp_path / "cfg" / "sk-tune")
    key = signer()
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_path.parent.stat().st_mode) == 0o700
    assert key_path.read_bytes().startswith(b"-----BEGIN OPENSSH PRIVATE KEY")
    trusted = trusted_keys()
    assert list(trusted.keys) == [key.fingerprint] and key.fingerprint.startswith("SHA256:")
    assert trusted.keys[key.fingerprint].name.count("@") == 1  # user@host
    assert signer() is key  # cached, and not created twice
    assert len((tmp_path / "cfg" / "sk-tune" / "trusted_keys").read_text().splitlines()) == 1


def test_fingerprint_is_the_one_ssh_keygen_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_key(monkeypatch, tmp_path)
    key = signer()
    pub = tmp_path / "key.pub"
    pub.write_text(key.public_line + "\n")
    try:
        out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        pytest.skip("ssh-keygen not installed")
    assert key.fingerprint in out


def test_default_key_lives_in_the_user_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.delenv(TRUSTED_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    key = signer()
    assert key.path == tmp_path / "xdg" / "sk-tune" / "signing_key"
    assert key.fingerprint in trusted_keys().keys and trusted_keys().path == tmp_path / "xdg" / "sk-tune" / "trusted_keys"


def test_key_files_the_machine_cannot_read_are_environment_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO reading the key or the trusted-keys file: ReadFault (exit 3, a resume retries), never a broken signing rule;
    a trusted-keys path that is a folder stays the rule's refusal (exit 2)."""
    key_path = _use_key(monkeypatch, tmp_path / "k")
    signer()
    copy = tmp_path / "copy" / "signing_key"  # a key not cached yet, so it is read
    copy.parent.mkdir(mode=0o700)
    copy.write_bytes(key_path.read_bytes())
    copy.chmod(0o600)
    monkeypatch.setenv(KEY_ENV, str(copy))
    real_bytes, real_text = Path.read_bytes, Path.read_text

    def failing(real: Any, victim: Path) -> Any:
        def read(self: Path, *args: Any, **kwargs: Any) -> Any:
            if self == victim:
                raise OSError(errno.EIO, os.strerror(errno.EIO), str(self))
            return real(self, *args, **kwargs)
        return read

    monkeypatch.setattr(Path, "read_bytes", failing(real_bytes, copy))
    with pytest.raises(ReadFault) as err:
        signer()
    assert err.value.exit_code == 3 and err.value.one_line() == (
        f"{copy}: cannot read signing key: Input/output error (EIO), a fault of the machine, not of the input")
    monkeypatch.setattr(Path, "read_bytes", real_bytes)
    trusted = tmp_path / "k" / "trusted_keys"
    monkeypatch.setattr(Path, "read_text", failing(real_text, trusted))
    trusted.touch()  # a new mtime: the cached parse is not used
    with pytest.raises(ReadFault, match="cannot read trusted-keys file: Input/output error \\(EIO\\)"):
        trusted_keys()
    monkeypatch.setattr(Path, "read_text", real_text)
    folder = tmp_path / "folder"
    folder.mkdir()
    monkeypatch.setenv(TRUSTED_ENV, str(folder))
    with pytest.raises(SignatureError, match="rule trusted-keys: cannot read the trusted-keys file: a folder, not a regular file"):
        trusted_keys()


def test_key_readable_by_others_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_path = _use_key(monkeypatch, tmp_path)
    signer()
    key_path.chmod(0o644)
    with pytest.raises(SignatureError, match="rule signing-key: .*readable by others"):
        signer()


def test_key_or_trusted_file_inside_the_session_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = tmp_path / "session"
    _use_key(monkeypatch, session / "keys")
    with pytest.raises(SignatureError, match="rule signing-key: .*inside the session folder"):
        Ledger(session).append("event", {})
    assert not (session / "ledger.jsonl").exists()
    _use_key(monkeypatch, tmp_path / "keys", trusted=session / "trusted_keys")
    with pytest.raises(SignatureError, match="rule trusted-keys: .*inside the session folder"):
        trusted_keys(outside=session)


def test_key_that_cannot_be_created_is_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "a-file" / "signing_key"))
    with pytest.raises(SignatureError, match="a-file/signing_key: rule signing-key: cannot create the signing key"):
        signer()


def test_trusted_keys_file_errors_name_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(SignatureError, match=r"trusted:2: rule trusted-keys: expected `NAME ssh-ed25519"):
        parse_trusted_keys("# team keys\nalice ssh-rsa AAAA\n", tmp_path / "trusted")
    assert parse_trusted_keys("\n# nothing\n", tmp_path / "trusted") == {}


def test_missing_trusted_keys_file_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRUSTED_ENV, str(tmp_path / "absent"))
    with pytest.raises(SignatureError, match="rule trusted-keys: no trusted-keys file"):
        trusted_keys()


def test_signature_of_one_purpose_does_not_verify_as_another() -> None:
    key = signer()
    sig = key.sign(RECORD_PURPOSE, "ab" * 32)
    assert trusted_keys().verify(sig, RECORD_PURPOSE, "ab" * 32).fingerprint == key.fingerprint
    with pytest.raises(SignatureError, match="rule signature-valid"):
        trusted_keys().verify(sig, HEAD_PURPOSE, "ab" * 32)


# --------------------------------------------------------------------------- signed manifests


def _root(tmp_path: Path) -> Path:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    time.sleep(0.05)
    return root


def _refused(root: Path, rule: str, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    code, text = _cli(capsys, "contract", "verify", str(root), *extra)
    assert code == 2 and f"rule {rule}:" in text and text.count("\n") == 1, text
    with pytest.raises(ContractIntegrityError) as err:
        load_manifest(root, archive="--archive" in extra)
    assert err.value.rule == rule
    return text


def _forge_full_reseal(root: Path) -> None:
    """Edit a file and re-seal the manifest completely, as a forger without the key would:
    new sha256/size, the file's live stat, finalized_ns moved past it, fresh manifest_fingerprint."""
    (root / TARGET).write_text("forged kernel details\n")
    st = (root / TARGET).stat()

    def edit(m: dict[str, Any]) -> None:
        for rec in m["files"]["kernel_details"]:
            rec.update(sha256=sha256_file(root / TARGET), size=st.st_size, ctime_ns=st.st_ctime_ns, mtime_ns=st.st_mtime_ns,
                       inode=st.st_ino, device=st.st_dev)
        m["capture"]["finalized_ns"] = max(m["capture"]["finalized_ns"], st.st_ctime_ns, st.st_mtime_ns)

    edit_manifest(root, edit, refingerprint=True, resign=False)


def test_verify_names_the_signer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    code, text = _cli(capsys, "contract", "verify", str(root))
    assert code == 0 and f"signed by {trusted_keys().keys[signer().fingerprint].label()}" in text


@pytest.mark.parametrize("mode", ["live", "archive"])
def test_fully_resealed_forgery_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    root = _root(tmp_path)
    _forge_full_reseal(root)
    extra = ("--archive",) if mode == "archive" else ()
    text = _refused(root, "signature-valid", capsys, *extra)
    assert "does not match its content" in text and MANIFEST_NAME in text


def test_manifest_signed_by_an_untrusted_key_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forger re-seals with a key of their own: a valid signature, but not by a trusted key."""
    root = _root(tmp_path)
    trusted = os.environ[TRUSTED_ENV]
    _use_key(monkeypatch, tmp_path / "forger")
    _forge_full_reseal(root)
    edit_manifest(root, lambda m: None, refingerprint=True)  # signed with the forger's key
    forger = signer().fingerprint
    monkeypatch.setenv(TRUSTED_ENV, trusted)
    text = _refused(root, "trusted-key", capsys)
    assert forger in text and "not in" in text


def test_manifest_without_signature_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    edit_manifest(root, lambda m: m.pop("signature"), refingerprint=False)
    _refused(root, "signed", capsys, "--archive")


def test_unsigned_manifest_of_the_previous_version_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)

    def older(m: dict[str, Any]) -> None:
        m.pop("signature")
        m["schema_version"] = "sk-tune-collection-manifest-v2"

    edit_manifest(root, older, refingerprint=True, resign=False)
    code, text = _cli(capsys, "contract", "verify", str(root))
    assert code == 2 and "rule manifest-version:" in text and "without a signature" in text


def test_finalize_refuses_a_key_inside_the_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_key(monkeypatch, tmp_path / "baseline_profile" / "root" / "keys")
    with pytest.raises(ContractIntegrityError) as err:
        make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    assert err.value.rule == "signing-key"
    assert not (tmp_path / "baseline_profile" / "root" / MANIFEST_NAME).exists()


def test_archive_copy_passes_and_fails_on_one_byte_or_an_untrusted_signer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13: the archive check drops path/stat rules but keeps signatures and content."""
    root = _root(tmp_path)
    copy = tmp_path / "archive" / "root"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(root), str(copy)], check=True)
    assert _cli(capsys, "contract", "verify", str(copy), "--archive")[0] == 0
    _refused(copy, "session-binding", capsys)  # the live check refuses a copy
    data = bytearray((copy / MANIFEST_NAME).read_bytes())
    at = data.index(b'"sig": "') + len(b'"sig": "') + 5
    data[at] = ord("A") if data[at] != ord("A") else ord("B")  # one byte of the signature
    (copy / MANIFEST_NAME).write_bytes(bytes(data))
    _refused(copy, "signature-valid", capsys, "--archive")
    monkeypatch.setenv(TRUSTED_ENV, str(tmp_path / "empty_trusted"))
    (tmp_path / "empty_trusted").write_text("# nobody\n")
    _refused(root, "trusted-key", capsys, "--archive")


# --------------------------------------------------------------------------- signed ledgers


def _settled_ledger(folder: Path) -> Path:
    folder.mkdir(exist_ok=True)
    ledger = Ledger(folder)
    ledger.append("started", {"summary_zh": "开始"})  # not session_started: no session.json to prove (issue 24)
    for entry, status in (("auto-op-parallel-1", "accepted"), ("stream-fusion-0", "rejected"), ("split-mode-3", "rejected")):
        ledger.append("entry_settled", {"entry_id": entry, "status": status})
    ledger.append("handoff_written", {"outcome": "base"})
    return ledger.path


def _rechain(path: Path, flip: str) -> None:
    """Flip one entry to accepted and recompute every record hash and the head (no key: old signatures kept)."""
    prev, lines = GENESIS, []
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["data"].get("entry_id") == flip:
            rec["data"]["status"] = "accepted"
        rec["prev"] = prev
        rec["hash"] = prev = fingerprint({k: v for k, v in rec.items() if k not in ("hash", "sig")})
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    old = json.loads(head_path(path).read_text())
    head = head_body(len(lines) - 1, prev, path.stat().st_size)
    head_path(path).write_text(json.dumps({**head, "sig": old["sig"]}), encoding="utf-8")


def test_rechained_ledger_names_the_first_forged_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _settled_ledger(tmp_path)
    code, text = _cli(capsys, "ledger", "verify", str(tmp_path))
    assert code == 0 and "5 record(s) signed by" in text
    _rechain(path, "stream-fusion-0")
    report = verify(path)
    assert [(p.line, p.code) for p in report.problems] == [(3, "signature-valid"), (None, "signature-valid")]
    assert "2 later record(s)" in report.problems[0].message
    code, text = _cli(capsys, "ledger", "verify", str(tmp_path))
    assert code == 2 and "FAIL line 3 [rule signature-valid]" in text
    assert "ledger.jsonl:3: ledger verification failed" in text and "first: rule signature-valid" in text
    with pytest.raises(Exception, match="refusing to append"):
        Ledger(path).append("event", {})


def test_ledger_written_with_an_untrusted_key_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole ledger forged from scratch with the forger's own key: every signature valid, none trusted."""
    trusted = os.environ[TRUSTED_ENV]
    _use_key(monkeypatch, tmp_path / "forger")
    _settled_ledger(tmp_path / "session")
    forger = signer().fingerprint
    monkeypatch.setenv(TRUSTED_ENV, trusted)
    code, text = _cli(capsys, "ledger", "verify", str(tmp_path / "session"))
    assert code == 2 and "FAIL line 1 [rule trusted-key]" in text and forger in text


def test_second_trusted_key_without_hand_over_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team shares keys in one trusted-keys file, but a session keeps one signer unless handed over (issue 24)."""
    trusted = Path(os.environ[TRUSTED_ENV])
    (tmp_path / "session").mkdir()
    ledger = Ledger(tmp_path / "session")
    ledger.append("a", {})
    own = signer()
    _use_key(monkeypatch, tmp_path / "colleague", trusted=trusted)
    colleague = signer()  # created: appended to the same trusted-keys file as user@host
    ledger.append("b", {})
    report = verify(ledger.path)
    assert sorted(report.signers.values()) == [1, 1]  # both trusted and valid, yet one session has one signer
    labels = " ".join(report.signers)
    assert own.fingerprint in labels and colleague.fingerprint in labels
    assert [(p.line, p.code) for p in report.problems] == [(2, "one-signer")]
    assert colleague.fingerprint in report.problems[0].message and "signer_handover" in report.problems[0].message
