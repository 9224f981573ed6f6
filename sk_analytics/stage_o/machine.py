"""The Stage O state machine: a pure function from (frozen matrix, ledger) to the next action.

The sweep executor has no memory of its own. It asks :func:`next_action`,
performs that one action (run a trial, gate it, collect a profile, …), appends
the outcome to the ledger as one record and asks again. Resuming after a crash
is therefore nothing but re-reading the ledger: an action whose outcome record
is missing is simply asked for again (the runner's trials continue partial
rounds without repeating finished runs).

Protocol mapping (``stage-o-protocol.md``):

* §4 O0-INCUMBENT: correctness + 5 clean runs, spread ≤ 5 %, else :class:`Stop`.
* §3/§5 each entry in frozen order: pre-run blockers settle ``blocked`` with a
  Chinese reason and evidence; otherwise trial (≥ 3 runs) → gate against the
  current five-run incumbent → on acceptance top-up to 5 and stability
  re-check (failing it withdraws the acceptance: ``failed``); rejection or
  failure keeps the incumbent (rollback = the next trial's base is unchanged).
* §6 DCCI: disable-all first; gain → accept; noise level → reject the family;
  failure → ``failed`` (scene sealed by the runner), family rejected;
  *repeatable regression* → paired diagnostic collections → ``dcci-diff`` →
  probe of the exact lists → one joint-repair trial compared with O0 (the
  incumbent when the family started, not disable-all) → accepted only as the
  indivisible three-option combination.

"Repeatable regression" (operational definition, see :func:`classify_disable_all`):
the disable-all gate is not passed, its mean improvement is negative, and
either the option-trial statistics call it a ``loss`` (the 95 % interval of
the improvement excludes zero on the losing side) or every candidate run is
slower than the slowest incumbent run (the regression repeats in each process,
outside the incumbent's run-to-run band). Anything else that fails the gate is
"no gain within the noise band".

Ledger record kinds written by the executor (``data`` fields the machine reads):

``matrix_frozen`` {fingerprint} · ``trial_result`` {round, entry_id, phase, ok,
runs_added, runs_total, clean_dir, config_path, failure{stage, reason_zh,
scene}} · ``gate_result`` {round, baseline_round, entry_id, accepted,
mean_improvement_pct, verdict, baseline_run_metrics, candidate_run_metrics,
summary_path} · ``stability_result`` {round, entry_id, stable, spread_pct, max_spread_pct} ·
``profile_result`` {entry_id, side, attempt, ok, root, manifest, reason_zh, iterations} ·
``dcci_diff_result`` {entry_id, ok, path, patterns, reason_zh} ·
``probe_result`` {entry_id, purpose, ready, values, evidence} ·
``entry_settled`` (the :class:`Settle` action) · ``session_stopped``
(:class:`Stop`) · ``base_frozen`` (:class:`FreezeBase`) · ``handoff_written``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from sk_analytics.errors import IntegrityError
from sk_analytics.stage_o.matrix import check_frozen
from sk_analytics.stage_o.options import option_pointer

O0 = "O0-INCUMBENT"
RISK_ORDER = {"low": 0, "medium": 1, "high": 2}

Status = Literal["accepted", "rejected", "failed", "blocked", "skipped"]
Phase = Literal["o0", "trial", "top_up", "repair"]
DcciOutcome = Literal["gain", "noise", "regression"]


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Policy:
    """What the user allowed and the fixed numbers of the protocol.

    Stored with the session and recorded in the ledger at start, so that a
    resumed sweep decides with exactly the same policy.
    """

    authorisations: frozenset[str] = frozenset()
    operator_adaptation: bool = False
    max_risk: str = "high"
    budget_runs: int | None = None
    min_trial_runs: int = 3
    incumbent_runs: int = 5
    timeout_s: float = 600.0
    risky_timeout_s: float = 300.0
    max_collect_attempts: int = 2

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["authorisations"] = sorted(self.authorisations)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policy:
        values = dict(data)
        values["authorisations"] = frozenset(values.get("authorisations", ()))
        return cls(**values)


@dataclass(frozen=True)
class Record:
    """The part of a ledger record the machine reads."""

    kind: str
    data: Mapping[str, Any]


def as_records(records: Iterable[Any]) -> list[Record]:
    """Accept ledger records (objects with ``kind``/``data``) or ``(kind, data)`` pairs."""
    out: list[Record] = []
    for r in records:
        if isinstance(r, tuple):
            out.append(Record(r[0], r[1]))
        else:
            out.append(Record(r.kind, r.data))
    return out


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Change:
    """One RFC 6901 pointer set to an exact JSON value."""

    pointer: str
    value: Any


@dataclass(frozen=True)
class Action:
    """Base of every action; ``kind`` names it in logs and ledger records."""

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_json(self) -> dict[str, Any]:
        return {"action": self.kind, **asdict(self)}


@dataclass(frozen=True)
class FreezeMatrix(Action):
    """The matrix must be frozen (and recorded) before anything runs."""


@dataclass(frozen=True)
class RunTrial(Action):
    """Run (or continue) a round until it has ``runs`` clean processes.

    ``base_round`` None means the SEED config. ``correctness`` asks for the
    full correctness run first (new rounds); top-ups skip it.
    """

    round: str
    phase: Phase
    entry_id: str | None
    base_round: str | None
    changes: tuple[Change, ...]
    runs: int
    correctness: bool
    timeout_s: float
    isolated: bool = False
    joint_dcci: bool = False


@dataclass(frozen=True)
class Gate(Action):
    """Compare ``round`` with the five-run ``baseline_round`` (option-trial gate)."""

    round: str
    baseline_round: str
    entry_id: str | None


@dataclass(frozen=True)
class CheckStability(Action):
    """Five-run stability check (spread ≤ max) of ``round``."""

    round: str
    entry_id: str | None


@dataclass(frozen=True)
class CollectProfile(Action):
    """One diagnostic profile under the artifact contract (a new empty root per attempt)."""

    entry_id: str
    side: Literal["o0", "disable_all"]
    role: Literal["baseline_profile", "candidate_profile"]
    config_round: str
    attempt: int
    iterations: int | None = None
    """Window to collect with: the other side's final window (None: the default first window)."""


@dataclass(frozen=True)
class DcciDiff(Action):
    """Read-only per-SK/child attribution between the two collections."""

    entry_id: str
    baseline_root: str
    candidate_root: str
    o0_round: str
    disable_all_round: str


@dataclass(frozen=True)
class ProbeRepair(Action):
    """Exact-value probe of the final before/after lists on the disable-all config, same environment."""

    entry_id: str
    disable_all_round: str
    values: tuple[Change, ...]


@dataclass(frozen=True)
class Settle(Action):
    """Give a matrix entry its final status (recorded as ``entry_settled``)."""

    entry_id: str
    status: Status
    reason_zh: str
    evidence: Mapping[str, Any]
    incumbent_round: str
    accepted_changes: tuple[Change, ...] = ()
    family_rejected: bool = False


@dataclass(frozen=True)
class Stop(Action):
    """The session cannot continue (O0 failed or unstable)."""

    reason_zh: str
    evidence: Mapping[str, Any]


@dataclass(frozen=True)
class FreezeBase(Action):
    """All entries settled: freeze the incumbent as Sbest-BASE."""

    round: str
    accepted_entries: tuple[str, ...]
    option_changes: tuple[Change, ...]


@dataclass(frozen=True)
class WriteHandoff(Action):
    """Write handoff.json and the reports (after BASE or a stop)."""

    outcome: Literal["base", "stopped"]


@dataclass(frozen=True)
class Finished(Action):
    """Nothing left to do."""

    outcome: Literal["base", "stopped"]


# --------------------------------------------------------------------------- state


@dataclass
class SessionState:
    """Everything the ledger says so far, folded in order."""

    matrix_fingerprint: str | None = None
    incumbent: str = O0
    option_changes: list[Change] = field(default_factory=list)
    settled: dict[str, dict[str, Any]] = field(default_factory=dict)
    trial_rounds: list[str] = field(default_factory=list)
    runs_used: int = 0
    by_entry: dict[str | None, list[Record]] = field(default_factory=dict)
    stopped: dict[str, Any] | None = None
    base: dict[str, Any] | None = None
    handoff: dict[str, Any] | None = None

    def records(self, entry_id: str | None, kind: str, **match: Any) -> list[Mapping[str, Any]]:
        """Data of this entry's records of ``kind`` whose fields equal ``match``."""
        return [
            r.data
            for r in self.by_entry.get(entry_id, [])
            if r.kind == kind and all(r.data.get(k) == v for k, v in match.items())
        ]

    def last(self, entry_id: str | None, kind: str, **match: Any) -> Mapping[str, Any] | None:
        found = self.records(entry_id, kind, **match)
        return found[-1] if found else None

    @property
    def next_round(self) -> str:
        return f"O{len(self.trial_rounds) + 1}"


def _changes(items: Sequence[Mapping[str, Any]] | None) -> list[Change]:
    return [Change(c["pointer"], c["value"]) for c in items or ()]


def fold(records: Iterable[Any], matrix: Mapping[str, Any] | None = None) -> SessionState:
    """Fold ledger records into a :class:`SessionState` (order matters)."""
    state = SessionState()
    entry_ids = {e["id"] for e in matrix["entries"]} if matrix is not None else None
    for rec in as_records(records):
        data = rec.data
        if state.handoff is not None:
            raise IntegrityError(f"ledger has a '{rec.kind}' record after the hand-off was written")
        entry_id = data.get("entry_id")
        if entry_ids is not None and entry_id is not None and entry_id not in entry_ids:
            raise IntegrityError(f"ledger record '{rec.kind}' names entry {entry_id!r} that is not in the frozen matrix")
        state.by_entry.setdefault(entry_id, []).append(rec)
        if rec.kind == "matrix_frozen":
            state.matrix_fingerprint = data["fingerprint"]
        elif rec.kind == "trial_result":
            state.runs_used += int(data.get("runs_added", 0))
            if data["phase"] in ("trial", "repair") and data["round"] not in state.trial_rounds:
                state.trial_rounds.append(data["round"])
        elif rec.kind == "entry_settled":
            if entry_id in state.settled:
                raise IntegrityError(f"ledger settles entry {entry_id!r} twice")
            state.settled[entry_id] = dict(data)
            if data["status"] == "accepted":
                state.incumbent = data["incumbent_round"]
                accepted = _changes(data.get("accepted_changes"))
                pointers = {c.pointer for c in accepted}
                state.option_changes = [c for c in state.option_changes if c.pointer not in pointers] + accepted
        elif rec.kind == "session_stopped":
            state.stopped = dict(data)
        elif rec.kind == "base_frozen":
            state.base = dict(data)
        elif rec.kind == "handoff_written":
            state.handoff = dict(data)
    return state


# --------------------------------------------------------------------------- decisions


def classify_disable_all(gate: Mapping[str, Any]) -> DcciOutcome:
    """gain / noise / regression of the disable-all trial (see module docstring)."""
    if gate["accepted"]:
        return "gain"
    base = list(gate.get("baseline_run_metrics") or [])
    cand = list(gate.get("candidate_run_metrics") or [])
    improvement = gate.get("mean_improvement_pct")
    if improvement is not None and improvement < 0:
        every_run_slower = bool(base and cand) and min(cand) > max(base)
        if gate.get("verdict") == "loss" or every_run_slower:
            return "regression"
    return "noise"


def _blocker(entry: Mapping[str, Any], state: SessionState, policy: Policy) -> tuple[str, dict[str, Any]] | None:
    """The first pre-run blocker of an entry (Chinese reason, evidence), or None."""
    probe = entry["probe_evidence"]
    label = f"{entry['option']}={_short(entry['value'])}"
    if not probe["probed"]:
        return f"{label} 的精确取值未经过探测（选项探测未执行），不得试验", {"probe_evidence": probe}
    if not probe["ready"]:
        return f"封装不接受精确取值 {label}（探测 ready=false）", {"probe_evidence": probe}
    if "operator_adaptation" in entry["prerequisites"] and not policy.operator_adaptation:
        return (
            f"{label} 需要算子侧适配，但任务未声明算子适配；封装接受不代表运行时语义正确",
            {"prerequisite": "operator_adaptation", "declared": False},
        )
    if entry["authorisation"] and entry["authorisation"] not in policy.authorisations:
        return (
            f"{label} 需要事件语义评审并由用户授权该风险（{entry['authorisation']}），当前未授权",
            {"authorisation": entry["authorisation"], "authorised": sorted(policy.authorisations)},
        )
    if RISK_ORDER[entry["risk"]] > RISK_ORDER.get(policy.max_risk, 2):
        return (
            f"{label} 的风险等级 {entry['risk']} 未获用户授权（允许的最高风险等级为 {policy.max_risk}）",
            {"risk": entry["risk"], "max_risk": policy.max_risk},
        )
    if policy.budget_runs is not None and policy.budget_runs - state.runs_used < policy.incumbent_runs:
        return (
            f"预算已明确耗尽：已用 {state.runs_used}/{policy.budget_runs} 次干净运行，不足一次完整试验所需的 {policy.incumbent_runs} 次",
            {"budget_runs": policy.budget_runs, "runs_used": state.runs_used},
        )
    return None


def _pct(value: Any, *, sign: bool = True) -> str:
    """A percentage for a Chinese reason: 3 decimals (the ledger keeps the exact number)."""
    if value is None:
        return "—"
    return f"{float(value):+.3f}%" if sign else f"{float(value):.3f}%"


def _short(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _failure_reason(trial: Mapping[str, Any], prefix: str) -> tuple[str, dict[str, Any]]:
    failure = trial.get("failure") or {}
    reason = failure.get("reason_zh") or "试验失败"
    return f"{prefix}：{reason}", {"round": trial["round"], "scene": failure.get("scene"), "stage": failure.get("stage")}


def _accept_path(
    entry: Mapping[str, Any], state: SessionState, policy: Policy, trial: RunTrial, changes: tuple[Change, ...], label_zh: str, **settle: Any
) -> Action:
    """Top-up to five, stability re-check, then settle accepted (or failed).

    The top-up repeats the trial's exact identity (base round and changes) so
    that the runner continues the same round, keeping its earlier runs.
    """
    eid = entry["id"]
    round_ = trial.round
    top = state.last(eid, "trial_result", round=round_, phase="top_up")
    if top is None:
        return replace(trial, phase="top_up", runs=policy.incumbent_runs, correctness=False)
    if not top["ok"]:
        reason, ev = _failure_reason(top, f"{label_zh}通过门禁后补足至 {policy.incumbent_runs} 次时失败，撤回接受")
        return Settle(eid, "failed", reason, ev, state.incumbent, **settle)
    stab = state.last(eid, "stability_result", round=round_)
    if stab is None:
        return CheckStability(round_, eid)
    if not stab["stable"]:
        return Settle(
            eid,
            "failed",
            f"{label_zh}补足至 {policy.incumbent_runs} 次后稳定性复核未通过（spread {_pct(stab.get('spread_pct'), sign=False)} > {stab.get('max_spread_pct', 5.0)}%），撤回接受，恢复原基线",
            {"round": round_, "stability": dict(stab)},
            state.incumbent,
            **settle,
        )
    gate = state.last(eid, "gate_result", round=round_)
    return Settle(
        eid,
        "accepted",
        f"{label_zh}通过门禁（均值改善 {_pct(gate['mean_improvement_pct']) if gate else '?'}），补足 {policy.incumbent_runs} 次且稳定，成为新基线",
        {"round": round_, "gate": gate.get("summary_path") if gate else None, "stability": dict(stab)},
        round_,
        accepted_changes=changes,
    )


def _run(entry: Mapping[str, Any], policy: Policy, round_: str, phase: Phase, base_round: str, changes: tuple[Change, ...]) -> RunTrial:
    """The trial (or repair) of an entry: correctness + the minimum clean runs."""
    return RunTrial(
        round_, phase, entry["id"], base_round, changes, policy.min_trial_runs, True,
        _timeout(entry, policy), _isolated(entry), joint_dcci=phase == "repair",
    )


def _timeout(entry: Mapping[str, Any], policy: Policy) -> float:
    return policy.risky_timeout_s if entry["risk"] == "high" or entry["category"] == "aggressive" else policy.timeout_s


def _isolated(entry: Mapping[str, Any]) -> bool:
    return entry["category"] == "aggressive" or entry["risk"] == "high"


def _entry_action(entry: Mapping[str, Any], matrix: Mapping[str, Any], state: SessionState, policy: Policy) -> Action:
    eid = entry["id"]
    change = Change(entry["pointer"], entry["value"])
    label = f"{entry['option']}={_short(entry['value'])}"
    trial = state.last(eid, "trial_result", phase="trial")
    if trial is None:
        blocked = _blocker(entry, state, policy)
        if blocked is not None:
            return Settle(eid, "blocked", blocked[0], blocked[1], state.incumbent)
        return _run(entry, policy, state.next_round, "trial", state.incumbent, (change,))
    is_dcci = entry["category"] == "dcci"
    if not trial["ok"]:
        reason, ev = _failure_reason(trial, f"{label} 试验失败，恢复原基线" + ("，拒绝整个 DCCI 家族" if is_dcci else ""))
        return Settle(eid, "failed", reason, ev, state.incumbent, family_rejected=is_dcci)
    gate = state.last(eid, "gate_result", round=trial["round"])
    if gate is None:
        return Gate(trial["round"], state.incumbent, eid)
    if gate["accepted"]:
        run = _run(entry, policy, trial["round"], "trial", state.incumbent, (change,))
        return _accept_path(entry, state, policy, run, (change,), f"{label} ", family_rejected=is_dcci)
    evidence = {"round": trial["round"], "gate": gate.get("summary_path"), "verdict": gate.get("verdict")}
    if not is_dcci:
        return Settle(eid, "rejected", f"{label} 未通过门禁（均值改善 {_pct(gate['mean_improvement_pct'])}），恢复原基线", evidence, state.incumbent)
    if classify_disable_all(gate) == "noise":
        return Settle(
            eid, "rejected",
            f"DCCI disable-all 无收益且处于噪声带内（均值改善 {_pct(gate['mean_improvement_pct'])}），拒绝整个 DCCI 家族，保留 O0，不运行 before/after 试验",
            evidence, state.incumbent, family_rejected=True,
        )
    return _dcci_diagnosis(entry, matrix, state, policy, trial, gate)


def _dcci_diagnosis(
    entry: Mapping[str, Any], matrix: Mapping[str, Any], state: SessionState, policy: Policy,
    trial: Mapping[str, Any], gate: Mapping[str, Any],
) -> Action:
    """Repeatable regression of disable-all: collections, diff, probe, joint repair (protocol §6)."""
    eid = entry["id"]
    o0_round = state.incumbent
    regression = {"round": trial["round"], "gate": gate.get("summary_path"), "verdict": gate.get("verdict"),
                  "mean_improvement_pct": gate["mean_improvement_pct"]}
    sides = {"o0": ("baseline_profile", o0_round), "disable_all": ("candidate_profile", trial["round"])}
    last = {side: state.last(eid, "profile_result", side=side) for side in sides}
    for side, (role, cfg_round) in sides.items():
        prof, other = last[side], last["disable_all" if side == "o0" else "o0"]
        window = other.get("iterations") if other is not None and other["ok"] else None  # never longer than the other side
        if prof is None:
            return CollectProfile(eid, side, role, cfg_round, 1, window)  # type: ignore[arg-type]
        if not prof["ok"]:
            if prof["attempt"] < policy.max_collect_attempts:
                return CollectProfile(eid, side, role, cfg_round, prof["attempt"] + 1, window)  # type: ignore[arg-type]
            return Settle(
                eid, "rejected",
                f"disable-all 可重复回退，但 {side} 诊断采集 {prof['attempt']} 次均未通过工件契约校验（{prof.get('reason_zh') or '清单无效'}）；"
                "停止归因，不产生子节点正则，不运行修复，拒绝 DCCI 家族",
                {**regression, "profile": dict(prof)}, state.incumbent, family_rejected=True,
            )
    done = {side: prof for side, prof in last.items() if prof is not None}  # both sides ok here
    windows = {side: prof.get("iterations") for side, prof in done.items()}
    if None not in windows.values() and len(set(windows.values())) > 1:
        # a buffer-full re-collection shortened one side; validate_set needs one window for the pair
        longer = max(windows, key=lambda side: windows[side])
        if done[longer]["attempt"] < policy.max_collect_attempts:
            role, cfg_round = sides[longer]
            return CollectProfile(eid, longer, role, cfg_round, done[longer]["attempt"] + 1, min(windows.values()))  # type: ignore[arg-type]
        return Settle(
            eid, "rejected",
            f"disable-all 可重复回退，但 O0 与 disable-all 诊断采集的迭代窗口不同（{windows['o0']} 与 {windows['disable_all']} 次），"
            f"{done[longer]['attempt']} 次采集内未能对齐（sk_prof 缓冲区满后缩短了窗口）；停止归因，不产生子节点正则，不运行修复，拒绝 DCCI 家族",
            {**regression, "profiles": [dict(done["o0"]), dict(done["disable_all"])]}, state.incumbent, family_rejected=True,
        )
    diff = state.last(eid, "dcci_diff_result")
    if diff is None:
        return DcciDiff(eid, done["o0"]["root"], done["disable_all"]["root"], o0_round, trial["round"])
    if not diff["ok"] or not diff.get("patterns"):
        why = diff.get("reason_zh") or "没有显著变慢的子节点"
        return Settle(
            eid, "rejected",
            f"disable-all 可重复回退，但 dcci-diff 未提出修复（{why}），拒绝 DCCI 家族，保留 O0",
            {**regression, "dcci_diff": diff.get("path")}, state.incumbent, family_rejected=True,
        )
    root = matrix["options_root"]
    patterns = list(diff["patterns"])
    repair = (
        Change(option_pointer(root, "dcci_before_kernel_start"), patterns),
        Change(option_pointer(root, "dcci_after_kernel_end"), patterns),
    )
    probe = state.last(eid, "probe_result", purpose="dcci_repair")
    if probe is None:
        return ProbeRepair(eid, trial["round"], repair)
    if not probe["ready"]:
        return Settle(
            eid, "rejected",
            "联合修复的精确正则列表未通过同环境探测（ready=false），不运行修复，拒绝 DCCI 家族",
            {**regression, "dcci_diff": diff.get("path"), "probe": probe.get("evidence")}, state.incumbent, family_rejected=True,
        )
    rep = state.last(eid, "trial_result", phase="repair")
    if rep is None:
        return _run(entry, policy, state.next_round, "repair", trial["round"], repair)
    if not rep["ok"]:
        reason, ev = _failure_reason(rep, "DCCI 联合修复试验失败，恢复 O0，拒绝 DCCI 家族")
        return Settle(eid, "failed", reason, {**ev, **{"dcci_diff": diff.get("path")}}, state.incumbent, family_rejected=True)
    rgate = state.last(eid, "gate_result", round=rep["round"])
    if rgate is None:
        return Gate(rep["round"], o0_round, eid)
    combination = (Change(entry["pointer"], entry["value"]), *repair)
    if not rgate["accepted"]:
        return Settle(
            eid, "rejected",
            f"DCCI 联合修复未以完整门禁胜过 O0（均值改善 {_pct(rgate['mean_improvement_pct'])}）；相对 disable-all 的恢复不构成接受，拒绝 DCCI 家族，恢复 O0，不再扩充子节点列表",
            {**regression, "repair_round": rep["round"], "repair_gate": rgate.get("summary_path"), "dcci_diff": diff.get("path")},
            state.incumbent, family_rejected=True,
        )
    run = _run(entry, policy, rep["round"], "repair", trial["round"], repair)
    return _accept_path(entry, state, policy, run, combination, "DCCI disable+before+after 不可分割组合", family_rejected=True)


def next_action(matrix: Mapping[str, Any], ledger_records: Iterable[Any], policy: Policy) -> Action:
    """The one next step of the session (pure: same inputs, same action)."""
    state = fold(ledger_records, matrix)
    if state.matrix_fingerprint is None:
        return FreezeMatrix()
    check_frozen(matrix, expected=state.matrix_fingerprint)
    if state.handoff is not None:
        return Finished("stopped" if state.stopped else "base")
    if state.stopped is not None:
        return WriteHandoff("stopped")
    if state.base is not None:
        return WriteHandoff("base")
    o0 = state.last(None, "trial_result", round=O0)
    if o0 is None:
        return RunTrial(O0, "o0", None, None, (), policy.incumbent_runs, True, policy.timeout_s)
    if not o0["ok"]:
        reason, ev = _failure_reason(o0, "O0-INCUMBENT 失败，Stage O 无法开始")
        return Stop(reason, ev)
    o0_stab = state.last(None, "stability_result", round=O0)
    if o0_stab is None:
        return CheckStability(O0, None)
    if not o0_stab["stable"]:
        return Stop(
            f"O0-INCUMBENT 五次干净运行不稳定（spread {_pct(o0_stab.get('spread_pct'), sign=False)} > {o0_stab.get('max_spread_pct', 5.0)}%），先排查环境噪声再开始 Stage O",
            {"round": O0, "stability": dict(o0_stab)},
        )
    for entry in matrix["entries"]:
        if entry["id"] not in state.settled:
            return _entry_action(entry, matrix, state, policy)
    accepted = tuple(e["id"] for e in matrix["entries"] if state.settled[e["id"]]["status"] == "accepted")
    return FreezeBase(state.incumbent, accepted, tuple(state.option_changes))


def settle_record(action: Settle) -> dict[str, Any]:
    """The ``entry_settled`` ledger data of a :class:`Settle` action."""
    data = action.to_json()
    data.pop("action")
    data["summary_zh"] = f"{action.entry_id} → {action.status}：{action.reason_zh}"
    return data
