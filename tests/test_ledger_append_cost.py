"""The cheap append of issue 24 (≤ 1 ms per record) keeps every property of the slow one.

:meth:`Ledger.append` now takes a plain ``flock``, looks the key up once per key file, replaces the
head through a fixed temp name and, when the ledger and head are by ``stat`` as the same object left
them, chains onto the record it wrote without reading the files again. Each shortcut is tested
against what it must not change: mutual exclusion with ``filelock`` holders, a replaced key being
used, a planted link never followed, and a tampered ledger never laundered by the shortcut.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path

import pytest
from filelock import FileLock, Timeout

from sk_analytics.errors import InputError
from sk_analytics.files.flock import FlockLock
from sk_analytics.ledger.chain import Ledger, drop_stale_temps, head_path, read_records, verify
from sk_analytics.ledger.signing import ed25519_public_key


def _ledger(tmp_path: Path, n: int = 3) -> Ledger:
    ledger = Ledger(tmp_path)
    for i in range(n):
        ledger.append("event", {"i": i})
    return ledger


def test_the_append_lock_excludes_filelock_holders_and_other_descriptors(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl.lock"
    lock = FlockLock(path)
    with lock:
        with lock:  # re-entrant in the holding thread
            assert lock.is_locked
        with pytest.raises(Timeout):
            FileLock(str(path), timeout=0.05).acquire()
        fd = os.open(path, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    assert not lock.is_locked
    with FileLock(str(path), timeout=0.05):  # released: the other kind of holder gets it
        pass


def test_a_filelock_holder_blocks_the_append(tmp_path: Path) -> None:
    """A writer of an older sk-tune (filelock) and this one never append at the same time."""
    import threading

    ledger = _ledger(tmp_path, 1)
    done = threading.Event()
    with FileLock(str(ledger.path.with_name("ledger.jsonl.lock"))):
        worker = threading.Thread(target=lambda: (ledger.append("event", {"i": 1}), done.set()))
        worker.start()
        assert not done.wait(0.3)
        assert len(read_records(ledger.path)) == 1
    worker.join(60)  # the bound only matters when the append never gets the lock
    assert done.is_set() and len(read_records(ledger.path)) == 2


def test_a_replaced_signing_key_is_used_by_the_next_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    monkeypatch.setenv("SK_TUNE_SIGNING_KEY", str(keys / "a"))
    monkeypatch.setenv("SK_TUNE_TRUSTED_KEYS", str(keys / "trusted"))
    (tmp_path / "s").mkdir()
    ledger = Ledger(tmp_path / "s")
    first = ledger.append("event", {"i": 0})
    monkeypatch.setenv("SK_TUNE_SIGNING_KEY", str(keys / "b"))  # another key file: looked up again
    second = ledger.append("event", {"i": 1})
    assert first.sig["key"] != second.sig["key"]
    st = os.stat(keys / "b")
    (keys / "b").write_bytes((keys / "a").read_bytes())  # the same path and inode, another key: its mtime tells
    os.utime(keys / "b", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    third = ledger.append("event", {"i": 2})
    assert third.sig["key"] == first.sig["key"]


def test_same_size_edit_of_the_last_record_with_its_mtime_restored_is_not_laundered(tmp_path: Path) -> None:
    """The shortcut chains onto the hash this object signed, never onto the bytes someone put there."""
    ledger = _ledger(tmp_path)
    before = os.stat(ledger.path)
    lines = ledger.path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert '"i": 2' in lines[-1]
    lines[-1] = lines[-1].replace('"i": 2', '"i": 7')
    ledger.path.write_text("".join(lines), encoding="utf-8")
    os.utime(ledger.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    record = ledger.append("event", {"i": 3})
    assert record.prev == json.loads(lines[-1])["hash"]  # the genuine hash: the edit is not what it chains onto
    assert [(p.line, p.code) for p in verify(ledger.path).problems] == [(3, "hash")]


def test_an_append_by_another_writer_is_seen(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, 2)
    Ledger(tmp_path).append("event", {"i": "other"})
    record = ledger.append("event", {"i": 3})
    assert record.seq == 3 and verify(ledger.path).ok and not verify(ledger.path).warnings


def test_the_head_temp_is_never_followed_and_a_stale_one_is_overwritten(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, 1)
    temp = ledger.path.with_name(f".{head_path(ledger.path).name}.append.tmp")
    temp.write_text("left by a killed writer")
    ledger.append("event", {"i": 1})
    assert not temp.exists() and verify(ledger.path).ok
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    temp.symlink_to(victim)
    head_before = head_path(ledger.path).read_bytes()
    with pytest.raises(InputError, match="symbolic link"):
        ledger.append("event", {"i": 2})
    assert victim.read_text() == "untouched" and head_path(ledger.path).read_bytes() == head_before
    temp.unlink()
    assert verify(ledger.path).ok and len(verify(ledger.path).warnings) == 1  # the record landed, its head did not: re-anchored next
    assert ledger.append("event", {"i": 3}).seq == 3 and not verify(ledger.path).warnings


def test_a_killed_writers_head_temp_is_dropped_on_resume(tmp_path: Path) -> None:
    ledger = _ledger(tmp_path, 1)
    temp = ledger.path.with_name(f".{head_path(ledger.path).name}.append.tmp")
    temp.write_text("{")
    assert drop_stale_temps(ledger.path) == [temp.name] and not temp.exists()


def test_a_failed_head_write_leaves_the_old_head_and_no_temp(tmp_path: Path) -> None:
    from sk_analytics.files.io_seam import Fault, inject

    ledger = _ledger(tmp_path, 2)
    head_before = head_path(ledger.path).read_bytes()
    with inject(Fault(errno.ENOSPC, "atomic")), pytest.raises(OSError):
        ledger.append("event", {"i": 2})
    assert head_path(ledger.path).read_bytes() == head_before
    assert not list(tmp_path.glob(".*.tmp"))
    report = verify(ledger.path)
    assert report.ok and len(report.warnings) == 1  # one record past the head: the interrupted-append state
    assert ledger.append("event", {"i": 3}).seq == 3 and not verify(ledger.path).warnings


@pytest.mark.parametrize("blob", [b"", b"\x00\x00\x00\x0bssh-ed25519", b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + b"k" * 31,
                                  b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + b"k" * 33,
                                  b"\x00\x00\x00\x07ssh-rsa\x00\x00\x00\x20" + b"k" * 32])
def test_key_blobs_other_than_one_ed25519_key_are_refused(blob: bytes) -> None:
    with pytest.raises(ValueError):
        ed25519_public_key(blob)


def test_an_ed25519_key_blob_verifies_its_signatures() -> None:
    import base64

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    line = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    public = ed25519_public_key(base64.b64decode(line.split()[1]))
    public.verify(key.sign(b"payload"), b"payload")
