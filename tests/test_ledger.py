"""The session ledger: chain, head anchor, every tamper kind, crash states, CLI."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import IntegrityError
from sk_analytics.fingerprint import canonical_json, fingerprint
from sk_analytics.ledger.chain import GENESIS, HEAD_PURPOSE, Ledger, head_body, head_path, is_json_object_prefix, read_records, recover_torn_tail, verify
from sk_analytics.ledger.signing import signer


def _make(tmp_path: Path, n: int = 4) -> Path:
    ledger = Ledger(tmp_path)
    for i in range(n):
        ledger.append("event", {"i": i, "summary_zh": f"第{i}步"})
    return ledger.path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _codes(path: Path) -> set[str]:
    return {p.code for p in verify(path).problems}


def _rehash(obj: dict) -> str:
    """The chain hash a forger recomputes for an edited record (everything but hash and sig)."""
    return fingerprint({k: v for k, v in obj.items() if k not in ("hash", "sig")})


def test_chain_and_head(tmp_path: Path) -> None:
    path = _make(tmp_path)
    records = read_records(tmp_path)
    assert [r.seq for r in records] == [0, 1, 2, 3]
    assert records[0].prev == GENESIS
    assert all(b.prev == a.hash for a, b in zip(records, records[1:], strict=False))
    body = json.loads(_lines(path)[2])
    del body["hash"], body["sig"]
    assert fingerprint(body) == records[2].hash
    head = json.loads(head_path(path).read_text())
    assert (head["seq"], head["hash"]) == (3, records[3].hash)
    report = verify(path)
    assert report.ok and report.records == 4 and not report.warnings
    assert records[1].data == {"i": 1, "summary_zh": "第1步"}
    assert list(report.signers.values()) == [4] and "SHA256:" in next(iter(report.signers))


def test_edited_record_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    lines = _lines(path)
    lines[1] = lines[1].replace('"i": 1', '"i": 9')
    path.write_text("".join(lines), encoding="utf-8")
    problems = verify(path).problems
    assert [(p.line, p.code) for p in problems] == [(2, "hash")]


def test_edited_record_with_recomputed_hash_breaks_chain(tmp_path: Path) -> None:
    path = _make(tmp_path)
    lines = _lines(path)
    obj = json.loads(lines[1])
    obj["data"]["i"] = 9
    obj["hash"] = _rehash(obj)  # the old signature stays: the forger has no key
    lines[1] = json.dumps(obj) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    assert [(p.line, p.code) for p in verify(path).problems] == [(2, "signature-valid"), (3, "chain")]


def test_edited_last_record_with_recomputed_hash_fails_head(tmp_path: Path) -> None:
    path = _make(tmp_path)
    lines = _lines(path)
    obj = json.loads(lines[-1])
    obj["data"]["i"] = 99
    obj["hash"] = _rehash(obj)
    lines[-1] = json.dumps(obj) + "\n"
    path.write_text("".join(lines), encoding="utf-8")
    assert _codes(path) == {"head", "signature-valid"}


def test_reordered_records_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    lines = _lines(path)
    lines[1], lines[2] = lines[2], lines[1]
    path.write_text("".join(lines), encoding="utf-8")
    problems = verify(path).problems
    assert [(p.line, p.code) for p in problems] == [(2, "sequence"), (3, "sequence"), (4, "chain")]


def test_deleted_middle_record_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    lines = _lines(path)
    del lines[1]
    path.write_text("".join(lines), encoding="utf-8")
    assert [(p.line, p.code) for p in verify(path).problems] == [(2, "sequence"), (3, "sequence")]


def test_deleted_first_record_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    path.write_text("".join(_lines(path)[1:]), encoding="utf-8")
    assert "sequence" in _codes(path)


def test_deleted_last_record_detected_by_head(tmp_path: Path) -> None:
    path = _make(tmp_path)
    path.write_text("".join(_lines(path)[:-1]), encoding="utf-8")
    problems = verify(path).problems
    assert [p.code for p in problems] == ["head"]
    assert "seq 3" in problems[0].message and "seq 2" in problems[0].message


def test_truncated_file_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw[:-20])
    codes = _codes(path)
    assert "truncated" in codes and "head" in codes


def test_all_records_deleted_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    path.write_text("", encoding="utf-8")
    assert _codes(path) == {"head"}


def test_missing_or_malformed_head_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    head_path(path).write_text("{}", encoding="utf-8")
    assert _codes(path) == {"head"}
    head_path(path).unlink()
    assert _codes(path) == {"head"}


def test_duplicate_key_edit_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    lines = _lines(path)
    original = json.loads(lines[1])["data"]
    forged = json.dumps({"i": 99})
    lines[1] = lines[1].replace('"data": ', f'"data": {forged}, "data": ', 1)  # shows 99, parses to the original
    assert json.loads(lines[1])["data"] == original
    path.write_text("".join(lines), encoding="utf-8")
    assert [(p.line, p.code) for p in verify(path).problems][0] == (2, "not_json")


def test_inserted_foreign_line_detected(tmp_path: Path) -> None:
    path = _make(tmp_path)
    lines = _lines(path)
    lines.insert(2, '{"not": "a record"}\n')
    path.write_text("".join(lines), encoding="utf-8")
    codes = _codes(path)
    assert "bad_record" in codes and "sequence" in codes


def test_read_records_and_append_refuse_tampered(tmp_path: Path) -> None:
    path = _make(tmp_path)
    path.write_text("".join(_lines(path)[:-1]), encoding="utf-8")
    with pytest.raises(IntegrityError, match="failed verification"):
        read_records(path)
    with pytest.raises(IntegrityError, match="refusing to append"):
        Ledger(path).append("event", {"i": 5})


def test_head_one_behind_is_a_warning_and_reanchored(tmp_path: Path) -> None:
    path = _make(tmp_path, 2)
    old_head = head_path(path).read_text(encoding="utf-8")
    Ledger(path).append("event", {"i": 2})
    head_path(path).write_text(old_head, encoding="utf-8")  # crash after the write, before the head update
    report = verify(path)
    assert report.ok and len(report.warnings) == 1
    Ledger(path).append("event", {"i": 3})
    report = verify(path)
    assert report.ok and not report.warnings and report.records == 4


def test_torn_unanchored_tail_is_moved_aside(tmp_path: Path) -> None:
    path = _make(tmp_path, 2)
    with open(path, "ab") as fh:
        fh.write(b'{"seq": 2, "prev": "ab')
    assert "truncated" in _codes(path)
    record = Ledger(path).append("event", {"i": 2})
    assert record.seq == 2
    assert record.data["_recovered_torn_tail"]["bytes"] == 22
    side = tmp_path / record.data["_recovered_torn_tail"]["file"]
    assert side.read_bytes() == b'{"seq": 2, "prev": "ab'
    assert verify(path).ok


def _next_line(path: Path, i: int) -> bytes:
    """The exact bytes the next append would write (its hash depends on time: only its shape matters here)."""
    last = read_records(path)[-1]
    body = {"seq": last.seq + 1, "prev": last.hash, "ts_ns": 1, "kind": "event", "data": {"i": i, "summary_zh": "第四步"}}
    return (json.dumps({**body, "hash": "0" * 64}, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


@pytest.mark.parametrize("cut", [1, 7, 20, 31, 64, -40, -2])
def test_torn_record_prefix_is_cut_off_on_resume(tmp_path: Path, cut: int) -> None:
    """What a power loss or a full disk leaves in the middle of an append: any prefix of the record's line."""
    path = _make(tmp_path, 3)
    before = path.read_bytes()
    torn = _next_line(path, 3)[:cut]  # also cuts through the multi-byte characters of the Chinese summary
    with open(path, "ab") as fh:
        fh.write(torn)
    with pytest.raises(IntegrityError, match="final line is not terminated"):
        read_records(path)
    recovered = recover_torn_tail(tmp_path)
    assert recovered is not None and recovered["bytes"] == len(torn)
    assert path.read_bytes() == before and (tmp_path / recovered["file"]).read_bytes() == torn
    report = verify(path)
    assert report.ok and report.warnings == [f"torn final record of an interrupted append kept in {recovered['file']} (cut off on resume)"]
    assert recover_torn_tail(tmp_path) is None  # nothing left to recover
    assert Ledger(path).append("event", {"i": 3}).seq == 3


def test_torn_record_after_an_unanchored_one_is_recovered(tmp_path: Path) -> None:
    """Two crashes in a row: a record whose head update was lost, then a torn one after it."""
    path = _make(tmp_path, 3)
    records = read_records(path)
    # the head as the append of record 1 left it (signed; the update after record 2 was lost)
    anchor = head_body(1, records[1].hash, len("".join(_lines(path)[:2]).encode("utf-8")))
    head_path(path).write_text(json.dumps({**anchor, "sig": signer().sign(HEAD_PURPOSE, canonical_json(anchor))}), encoding="utf-8")
    with open(path, "ab") as fh:
        fh.write(_next_line(path, 3)[:30])
    assert recover_torn_tail(tmp_path) is not None
    assert len(read_records(path)) == 3


@pytest.mark.parametrize("tail", [b"garbage", b"\xff\xfe{", b'{"data": 1}} trailing', b'["not", "an object"'])
def test_tail_that_cannot_be_a_record_still_refuses(tmp_path: Path, tail: bytes) -> None:
    path = _make(tmp_path, 2)
    with open(path, "ab") as fh:
        fh.write(tail)
    assert recover_torn_tail(tmp_path) is None
    with pytest.raises(IntegrityError, match="final line is not terminated"):
        read_records(path)
    assert not list(tmp_path.glob("*.torn-*"))


def test_json_object_prefix() -> None:
    record = json.dumps({"data": {"a": [1, {"b": 'x"y\\'}], "z": "中文", "n": -1.5e3, "t": True, "f": None}, "seq": 3},
                        ensure_ascii=False).encode("utf-8")
    assert all(is_json_object_prefix(record[:i]) for i in range(1, len(record) + 1))
    for bad in (b"", b"}", b'{"a": 1}}', b'{"a": xyz', b'{"a": [1}', b'{"a": "\x01"'):
        assert not is_json_object_prefix(bad)


def test_torn_anchored_record_is_not_recovered(tmp_path: Path) -> None:
    path = _make(tmp_path, 2)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(IntegrityError):
        Ledger(path).append("event", {"i": 2})


def test_nan_refused_before_write(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    with pytest.raises(Exception, match="cannot be fingerprinted"):
        ledger.append("event", {"x": float("nan")})
    assert not ledger.path.exists()


def _append_many(folder: str, who: int) -> None:
    ledger = Ledger(folder)
    for i in range(15):
        ledger.append("event", {"who": who, "i": i})


def test_concurrent_appends_keep_one_chain(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), w)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    records = read_records(tmp_path)
    assert len(records) == 30
    assert sorted((r.data["who"], r.data["i"]) for r in records) == sorted((w, i) for w in range(2) for i in range(15))


def test_cli_verify_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _make(tmp_path, 2)
    assert run_cli(cli, "sk-analyze", ["ledger", "verify", str(tmp_path)]) == 0
    assert "2 record(s)" in capsys.readouterr().out
    assert run_cli(cli, "sk-analyze", ["ledger", "show", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "第0步" in out and "第1步" in out
    path.write_text(_lines(path)[0], encoding="utf-8")
    assert run_cli(cli, "sk-analyze", ["ledger", "verify", str(path)]) == 2
    captured = capsys.readouterr()
    assert "FAIL head" in captured.out and "verification failed" in captured.err
    assert run_cli(cli, "sk-analyze", ["ledger", "show", str(path)]) == 2


def test_show_a_summary_this_version_cannot_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A record whose summary code no catalog holds (written by a newer sk-tune) is shown as its data, not a traceback."""
    Ledger(tmp_path).append("future_kind", {"summary": {"code": "summary.from_the_future", "params": {"n": 1}}})
    Ledger(tmp_path).append("gate_result", {"summary": {"code": "summary.matrix_frozen", "params": {"n": 3}}})  # lacks fp
    assert run_cli(cli, "sk-analyze", ["ledger", "show", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert '"code": "summary.from_the_future"' in out and '"code": "summary.matrix_frozen"' in out


def _head(path: Path) -> dict:
    return json.loads(head_path(path).read_text(encoding="utf-8"))


def test_head_anchors_the_byte_length(tmp_path: Path) -> None:
    path = _make(tmp_path, 3)
    assert _head(path)["bytes"] == path.stat().st_size


def test_append_checks_only_the_anchored_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An append with a truthful head never re-reads the whole chain (O(1) per append)."""
    path = _make(tmp_path, 3)

    def full_scan(_path: Path) -> None:
        raise AssertionError("append ran the full chain check")

    monkeypatch.setattr("sk_analytics.ledger.verify.scan", full_scan)
    record = Ledger(path).append("event", {"i": 3})
    assert record.seq == 3
    monkeypatch.undo()
    assert verify(path).ok and read_records(path)[-1].prev == read_records(path)[-2].hash


def test_same_length_edit_of_earlier_record_caught_at_verify_and_resume(tmp_path: Path) -> None:
    """The documented trade-off: the append does not see it, every full check still does."""
    path = _make(tmp_path, 3)
    lines = _lines(path)
    lines[0] = lines[0].replace('"i": 0', '"i": 7')
    path.write_text("".join(lines), encoding="utf-8")
    Ledger(path).append("event", {"i": 3})
    assert [(p.line, p.code) for p in verify(path).problems] == [(1, "hash")]
    with pytest.raises(IntegrityError, match="failed verification"):
        read_records(path)


@pytest.mark.parametrize("tamper", ["delete_middle", "append_two_foreign", "delete_file", "bad_bytes"])
def test_append_refuses_what_the_fast_path_cannot_confirm(tmp_path: Path, tamper: str) -> None:
    path = _make(tmp_path, 4)
    lines = _lines(path)
    if tamper == "delete_middle":
        del lines[1]
        path.write_text("".join(lines), encoding="utf-8")
    elif tamper == "append_two_foreign":
        path.write_text("".join(lines + lines[-2:]), encoding="utf-8")
    elif tamper == "delete_file":
        path.unlink()
    else:
        head_path(path).write_text(json.dumps({**_head(path), "bytes": "12"}), encoding="utf-8")
    with pytest.raises(IntegrityError, match="refusing to append"):
        Ledger(path).append("event", {"i": 4})


def test_append_after_interrupted_append_with_byte_anchor(tmp_path: Path) -> None:
    path = _make(tmp_path, 2)
    old_head = head_path(path).read_text(encoding="utf-8")
    Ledger(path).append("event", {"i": 2})
    head_path(path).write_text(old_head, encoding="utf-8")  # crash after the write, before the head update
    assert verify(path).ok and len(verify(path).warnings) == 1
    record = Ledger(path).append("event", {"i": 3})
    assert record.seq == 3 and record.prev == read_records(path)[2].hash
    assert verify(path).ok and not verify(path).warnings


def test_reserialized_ledger_warns_and_append_reanchors(tmp_path: Path) -> None:
    """Hashes cover content, not spelling: a re-serialized file keeps its chain, the head offset is re-anchored."""
    path = _make(tmp_path, 2)
    compact = [json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False) + "\n" for line in _lines(path)]
    path.write_text("".join(compact), encoding="utf-8")
    report = verify(path)
    assert report.ok and len(report.warnings) == 1 and "byte offset" in report.warnings[0]
    Ledger(path).append("event", {"i": 2})
    report = verify(path)
    assert report.ok and not report.warnings and _head(path)["bytes"] == path.stat().st_size


def test_forged_unsigned_head_is_refused(tmp_path: Path) -> None:
    """Records deleted at the end and the head rewritten to the new last record: the head's signature is missing."""
    path = _make(tmp_path, 3)
    records = read_records(path)
    path.write_text("".join(_lines(path)[:2]), encoding="utf-8")
    head_path(path).write_text(json.dumps({"schema_version": "sk-tune-ledger-head-v2", "seq": 1, "hash": records[1].hash,
                                           "bytes": path.stat().st_size}), encoding="utf-8")
    problems = verify(path).problems
    assert [(p.line, p.code) for p in problems] == [(None, "signed")] and "head" in problems[0].message
    with pytest.raises(IntegrityError, match="refusing to append"):
        Ledger(path).append("event", {"i": 3})


def test_unsigned_ledger_of_earlier_sk_tune_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A ledger written before signing (records without sig, head v1 without bytes) fails with rule signed."""
    path = _make(tmp_path, 2)
    lines = [json.dumps({k: v for k, v in json.loads(line).items() if k != "sig"}) + "\n" for line in _lines(path)]
    path.write_text("".join(lines), encoding="utf-8")
    head = {k: v for k, v in _head(path).items() if k not in ("sig", "bytes")}
    head_path(path).write_text(json.dumps({**head, "schema_version": "sk-tune-ledger-head-v1"}), encoding="utf-8")
    problems = verify(path).problems
    assert [(p.line, p.code) for p in problems] == [(1, "signed"), (None, "signed")]
    assert "1 later record(s)" in problems[0].message
    assert run_cli(cli, "sk-analyze", ["ledger", "verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ledger.jsonl:1" in err and "rule signed" in err
    with pytest.raises(IntegrityError, match="refusing to append"):
        Ledger(path).append("event", {"i": 2})


def test_ledger_that_is_a_folder_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ledger.jsonl").mkdir()
    assert run_cli(cli, "sk-analyze", ["ledger", "verify", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ledger.jsonl: cannot read ledger" in err


def test_show_survives_forged_timestamp_and_non_text_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bodies = [
        {"seq": 0, "prev": GENESIS, "ts_ns": 10**30, "kind": "event", "data": {"summary_zh": 5}},
    ]
    lines = [json.dumps({**b, "hash": fingerprint(b)}) + "\n" for b in bodies]
    (tmp_path / "ledger.jsonl").write_text("".join(lines), encoding="utf-8")
    assert run_cli(cli, "sk-analyze", ["ledger", "show", str(tmp_path)]) == 2  # no head: fails verification
    captured = capsys.readouterr()
    assert f"ts_ns={10**30}" in captured.out and '{"summary_zh": 5}' in captured.out
    assert "Traceback" not in captured.err
