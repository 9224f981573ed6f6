"""The session's output files agree with its signed ledger (``sk-analyze ledger verify SESSION``).

The ledger is signed; the files a sweep derives from it are not. Someone who
cannot sign could still replace ``handoff.json`` (say ``stream-fusion-0``
accepted) or re-render a report from an edited copy of the evidence. Each file
is therefore re-derived from, or bound to, a ledger record:

* ``session.json`` — its fingerprint is the first record's ``session_fingerprint``;
* ``handoff.json`` — its fingerprint is the last ``handoff_written`` record's, and
  the ledger head it names is a record of this ledger;
* ``BASE/sbest-base.json`` — self-consistent and the ``base_fingerprint`` of the
  ``base_frozen`` record;
* ``matrix.settled.json`` — equal to the settled matrix re-derived from the ledger;
* ``EXPERIMENT_REPORT.md``, ``report.html`` — the bytes whose digests the last
  ``handoff_written`` record binds (either language; rendered by the sweep from the inputs that
  record vouches for), provided no record follows it; otherwise, or when they match neither
  (sessions older than the binding, a newer renderer), equal to the reports re-rendered from
  the ledger (either language; the reports never hold the session path, so a copied or
  moved session, or one given by another path or from another directory, agrees the same).

A file present without its record, or recorded but missing, disagrees too.
:func:`first_disagreement` names the first file that does not agree.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any

from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.handoff.outputs import REPORT_HTML, REPORT_LANGS, REPORT_MD, REPORTS_KEY, report_texts, settled_from, text_digest
from sk_analytics.ledger.chain import LedgerRecord, read_records
from sk_analytics.session_view import SessionView, load_view
from sk_analytics.stage_o.layout import HANDOFF_FILE
from sk_analytics.stage_o.matrix import load_matrix
from sk_analytics.stage_o.state import SessionState, fold

RULE = "ledger-agreement"
SESSION_FILE = "session.json"
BASE_FILE = "BASE/sbest-base.json"
SETTLED_FILE = "matrix.settled.json"
REPORT_LIMIT = 64 << 20
"""Bytes above which a report file is not read: no rendering comes near it (a small session's are 5-27 KB)."""


@dataclass(frozen=True)
class Disagreement:
    """A session file that does not agree with the ledger: which, and how."""

    file: str
    message: str


def _last(records: Sequence[LedgerRecord], kind: str) -> LedgerRecord | None:
    return next((r for r in reversed(records) if r.kind == kind), None)


def _unrecorded(root: Path, rel: str, what: str, running: bool) -> Disagreement | None:
    """A file ``rel`` that no record vouches for: a disagreement, unless a running sweep is writing it before its record
    (``running``), or it does not exist."""
    if running or not (root / rel).exists():
        return None
    return Disagreement(rel, f"{rel} exists but the ledger holds no record of {what}")


def _recorded(root: Path, rel: str, records: Sequence[LedgerRecord], kind: str, what: str, running: bool = False
              ) -> Disagreement | tuple[LedgerRecord, dict[str, Any]] | None:
    """The ledger's last ``kind`` record and the file ``rel`` it vouches for; a disagreement
    when only one of them exists, None when neither does (or only the file, while a sweep is ``running``)."""
    record, path = _last(records, kind), root / rel
    if record is None:
        return _unrecorded(root, rel, what, running)
    if not path.is_file():
        return Disagreement(rel, f"the ledger records {what} (seq {record.seq}) but {rel} is missing")
    return record, load_json_file(path)


class Derived:
    """What the checks derive from the session, each part loaded once and only when a check needs it:
    the frozen matrix and the folded ledger (the settled matrix), the full :class:`SessionView`
    (every file the ledger names: only when a report must be re-rendered)."""

    def __init__(self, root: Path, records: Sequence[LedgerRecord], hashed: Collection[str] = (), running: bool = False) -> None:
        self.root, self.records, self.hashed, self.running = root, records, hashed, running
        self._view: SessionView | None = None
        self._state: tuple[dict[str, Any], SessionState] | None = None

    def view(self) -> SessionView:
        if self._view is None:
            self._view = load_view(self.root, self.records)
        return self._view

    def matrix_state(self) -> tuple[dict[str, Any], SessionState]:
        if self._view is not None:
            return dict(self._view.matrix), self._view.state
        if self._state is None:
            # as load_view reads it; re-validated unless its bytes were just proven to be the bound ones
            matrix = load_matrix(self.root / "matrix.json", validate="matrix.json" not in self.hashed)
            self._state = matrix, fold([(r.kind, r.data) for r in self.records], matrix)
        return self._state


Check = Callable[[Path, Sequence[LedgerRecord], Derived], Disagreement | None]
FileCheck = Callable[[LedgerRecord, dict[str, Any], Sequence[LedgerRecord], Derived], Disagreement | None]


def _vouched(rel: str, kind: str, what: str) -> Callable[[FileCheck], Check]:
    """A check of the JSON file ``rel`` against the last ``kind`` record that vouches for it;
    the wrapped function sees both only when both exist (:func:`_recorded` reports the rest)."""

    def wrap(check: FileCheck) -> Check:
        @wraps(check)
        def run(root: Path, records: Sequence[LedgerRecord], view: Derived) -> Disagreement | None:
            found = _recorded(root, rel, records, kind, what, view.running)
            if not isinstance(found, tuple):
                return found
            record, data = found
            return check(record, data, records, view)

        return run

    return wrap


def _session(root: Path, records: Sequence[LedgerRecord], view: Derived) -> Disagreement | None:
    if not records or records[0].kind != "session_started":
        return Disagreement(SESSION_FILE, "the ledger does not start with session_started")
    return _session_identity(root, records[:1], view)


@_vouched(SESSION_FILE, "session_started", "a session start")
def _session_identity(record: LedgerRecord, data: dict[str, Any], *_: Any) -> Disagreement | None:
    if fingerprint(data) != record.data.get("session_fingerprint"):
        return Disagreement(SESSION_FILE, "session.json is not the identity the first ledger record fingerprinted")
    return None


@_vouched(HANDOFF_FILE, "handoff_written", "a hand-off")
def _handoff(record: LedgerRecord, data: dict[str, Any], records: Sequence[LedgerRecord], _: Derived) -> Disagreement | None:
    if fingerprint(data) != record.data.get("handoff_fingerprint"):
        return Disagreement(HANDOFF_FILE, f"handoff.json differs from the hand-off recorded at seq {record.seq} (fingerprint)")
    head = (data.get("ledger") or {}).get("head") or {}
    seq = head.get("seq")
    if not isinstance(seq, int) or not 0 <= seq < len(records) or records[seq].hash != head.get("hash"):
        return Disagreement(HANDOFF_FILE, f"handoff.json names ledger head seq {seq}, which is not a record of this ledger")
    return None


@_vouched(BASE_FILE, "base_frozen", "a frozen Sbest-BASE")
def _base(record: LedgerRecord, data: dict[str, Any], *_: Any) -> Disagreement | None:
    body = {k: v for k, v in data.items() if k != "base_fingerprint"}
    if data.get("base_fingerprint") != fingerprint(body):
        return Disagreement(BASE_FILE, "sbest-base.json was edited (base_fingerprint does not match its content)")
    if data["base_fingerprint"] != record.data.get("base_fingerprint"):
        return Disagreement(BASE_FILE, f"sbest-base.json is not the BASE frozen at seq {record.seq} (base_fingerprint differs)")
    return None


@_vouched(SETTLED_FILE, "handoff_written", "a hand-off")
def _settled(_: LedgerRecord, data: dict[str, Any], __: Sequence[LedgerRecord], derived: Derived) -> Disagreement | None:
    expected = settled_from(*derived.matrix_state(), validate=False)  # only compared with the file, never written
    if fingerprint(data) == fingerprint(expected):
        return None
    statuses = {e["id"]: e.get("status") for e in data.get("entries", [])}
    for entry in expected["entries"]:
        if statuses.get(entry["id"]) != entry["status"]:
            return Disagreement(
                SETTLED_FILE, f"entry {entry['id']} is {statuses.get(entry['id'])} in {SETTLED_FILE}, the ledger settled it {entry['status']}"
            )
    return Disagreement(SETTLED_FILE, f"{SETTLED_FILE} differs from the settled matrix derived from the ledger")


def _reports(root: Path, records: Sequence[LedgerRecord], derived: Derived) -> Disagreement | None:
    record = _last(records, "handoff_written")
    for name in (REPORT_MD, REPORT_HTML):
        path = root / name
        if record is None:
            found = _unrecorded(root, name, "a hand-off", derived.running)
            if found is not None:
                return found
            continue
        if not path.is_file():
            return Disagreement(name, f"the ledger records the reports (seq {record.seq}) but {name} is missing")
        if path.stat().st_size > REPORT_LIMIT:  # never read into memory: a planted sparse file of gigabytes
            return Disagreement(name, f"{name} is {path.stat().st_size} bytes, more than any report sk-tune renders ({REPORT_LIMIT})")
    if record is None:
        return None
    if _bound_reports_match(root, record, records):
        return None
    # bytes that are not UTF-8 cannot be sk-tune's rendering: compared as text with replacement, never a crash (exit 70)
    actual = {name: (root / name).read_bytes().decode("utf-8", errors="replace") for name in (REPORT_MD, REPORT_HTML)}
    v = derived.view()
    rendered: list[dict[str, str]] = []
    for lang in REPORT_LANGS:  # the text never holds the session path: one rendering per language
        rendered.append(report_texts(v, lang))
        if rendered[-1] == actual:
            return None
    differing = REPORT_HTML if any(r[REPORT_MD] == actual[REPORT_MD] for r in rendered) else REPORT_MD
    return Disagreement(differing, f"{differing} is not the report rendered from the ledger (in zh or en)")


def _bound_reports_match(root: Path, record: LedgerRecord, records: Sequence[LedgerRecord]) -> bool:
    """The reports are, byte for byte, one language of what ``record`` (the last ``handoff_written``) binds.

    Only when ``record`` is the last record: a later one could change what the reports say, so
    they are then re-rendered. The record is signed and its inputs are proven by the evidence
    rules before this check, so a match proves what a re-rendering would, without the renderer."""
    bound = record.data.get(REPORTS_KEY)
    if not isinstance(bound, dict) or record.seq != records[-1].seq:
        return False
    actual = {name: text_digest((root / name).read_bytes()) for name in (REPORT_MD, REPORT_HTML)}
    return any(bound.get(lang) == actual for lang in REPORT_LANGS)


CHECKS: tuple[Check, ...] = (
    _session, _handoff, _base, _settled, _reports,
)


def first_disagreement(root: Path, records: Sequence[LedgerRecord] | None = None, hashed: Collection[str] = (),
                       running: bool = False) -> Disagreement | None:
    """The first session file that does not agree with the (verified) ledger, or None.

    ``records``: the ledger's records, already verified by the caller (read here when None);
    ``hashed``: session files the caller just proved, by re-hashing, to be the bytes the ledger binds;
    ``running``: a sweep is writing the session now, so an output file without its record yet is its step in progress."""
    records = read_records(root) if records is None else list(records)
    derived = Derived(root, records, hashed, running)
    for check in CHECKS:
        found = check(root, records, derived)
        if found is not None:
            return found
    return None
