"""Carry out one state-machine action and return the ledger record of its outcome.

Each action is delegated to the engine that owns it: trials to
:func:`sk_runner.trial.run_trial`, gates and stability to
:mod:`sk_analytics.option_trial`, diagnostic collections to
:func:`sk_runner.profile.collect_profile`, attribution to
:mod:`sk_analytics.dcci`, probes to :mod:`sk_runner.probe`. The executor
translates between the action, the engine and the ledger record, and makes
one decision of its own: under ``--gate sequential`` / ``family`` it adds clean runs to a
candidate round while the policy is undecided (``_extension_runs``; the family policy also extends
the incumbent first, ``_extend_incumbent``, and records a failed run of that extension as a failed
``incumbent_extension`` trial of the incumbent, on which the state machine stops the session; a failed run added
to the candidate is a failed ``gate_extension`` trial of its round, on which the entry settles ``failed``).
Paths in records are relative to the session folder.

Derived files (summaries, stability, BASE identity) are written once: an
interrupted action that is asked for again reuses a file already written,
so evidence is never rewritten.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.messages import coded, resolve_lang, text
from sk_analytics.option_trial.executable import NO_SESSION_NOISE, SessionNoise
from sk_analytics.option_trial.inference import VERDICTS
from sk_analytics.option_trial.modes import GATE_MODES
from sk_analytics.stage_o import machine as m
from sk_analytics.stage_o.steps import GATE_EXTENSION, INCUMBENT_EXTENSION, failure_message
from sk_runner.backends.base import Backend, Control
from sk_runner.config import PointerChange, derive_config
from sk_runner.devices.lease import HeldLease, LazyLease, lease_environ
from sk_runner.hosts.base import Hosts, run_lease_record
from sk_runner.sweep.base import freeze_base
from sk_runner.sweep.probes import probe_control
from sk_runner.sweep.redecide import adopt_round
from sk_runner.sweep.session import SweepSession, fresh_session_argv, session_relative
from sk_runner.trial import Progress, TrialResult, TrialSpec, complete_runs, round_dir_of, run_trial

Record = tuple[str, dict[str, Any]]
Say = Callable[[str], None]
DCCI_DIR = "DCCI"
GATE_DISCARDS_KEY = "gate_foreign_processes"
"""Key of an option-trial summary the sweep writes: the clean runs its gate added and the lease's proof discarded."""


@dataclass
class Executor:
    """Executes actions for one session (``say`` prints progress lines)."""

    session: SweepSession
    backend: Backend
    say: Say = lambda text: None
    devices: LazyLease | None = None
    """The session's device lease, taken at the first device command and held to the hand-off."""
    hosts: Hosts | None = None
    """The hosts of a session whose ranks span hosts (each host's lease held by its agent), held to the hand-off."""
    lang: str | None = None
    """The language of the sweep's words written into its trials (failure scenes); None: SK_LANG, else the locale."""
    gate_discards: list[dict[str, Any]] = field(default_factory=list)
    """Clean runs the current gate added and the lease's proof discarded (they have no trial_result of their own):
    its record carries them, with their round."""

    # -- helpers ---------------------------------------------------------------------
    @property
    def words(self) -> str:
        """The language of the progress lines (:attr:`lang`, else ``SK_LANG``, else the locale)."""
        return resolve_lang(self.lang)

    @property
    def root(self) -> Path:
        return self.session.root

    def rel(self, path: Path | str | None) -> str | None:
        return session_relative(self.root, path)

    def round_dir(self, round_name: str) -> Path:
        return round_dir_of(self.root, round_name)

    def config_of(self, round_name: str | None) -> Path:
        """Execution config of a round (None: the frozen SEED)."""
        return self.session.seed_config_path if round_name is None else self.round_dir(round_name) / "config.json"

    def clean_dir(self, round_name: str) -> Path:
        return self.round_dir(round_name) / "CLEAN"

    def lease(self) -> HeldLease | None:
        """The held lease (taken now if this is the session's first device command); None: unleased."""
        return None if self.devices is None else self.devices.held()

    # -- dispatch --------------------------------------------------------------------
    def execute(self, action: m.Action) -> Record:
        handler: Callable[[m.Action], Record] | None = getattr(self, f"do_{action.kind}", None)
        if handler is None:
            raise InputError(None, f"the sweep cannot execute action {action.kind}")
        return handler(action)

    # -- trials ----------------------------------------------------------------------
    def _trial_spec(self, round_name: str, base_round: str | None, changes: tuple[PointerChange, ...], *, joint_dcci: bool,
                    incumbent: bool, runs: int, top_up_to: int | None, timeout_s: float) -> TrialSpec:
        """The spec of every trial the sweep makes (O0, candidates, DCCI repairs, top-ups, the gate's added runs): each
        settles a failure an earlier life sealed and was killed before recording (``settle_sealed_run``), so a resumed
        sweep records what the uninterrupted one records instead of retrying a run that failed."""
        control = Control(self.session.control.ranks, self.session.control.iterations, self.session.control.warmup, timeout_s)
        return TrialSpec(
            session=self.root,
            round=round_name,
            base_config=self.config_of(base_round),
            backend=self.backend,
            changes=changes,
            joint_dcci=joint_dcci,
            incumbent=incumbent,
            runs=runs,
            top_up_to=top_up_to,
            control=control,
            seed=self.session.seed,
            cwd=self.session.backend.workdir,
            sources=self.session.backend.sources,
            rerun_command=("sk-run", "sweep", "--resume", str(self.root)),
            same_identity_as=None if base_round is None else self.round_dir(base_round),
            lease=self.lease(),
            hosts=self.hosts,
            settle_sealed_run=True,  # a run that failed before a kill is recorded as it failed, never retried into a pass
            lang=self.lang,
        )

    def do_RunTrial(self, a: m.RunTrial) -> Record:
        spec = self._trial_spec(
            a.round, a.base_round, tuple(PointerChange(c.pointer, c.value) for c in a.changes), joint_dcci=a.joint_dcci,
            incumbent=a.phase == "o0", runs=a.runs if a.phase != "top_up" else self.session.policy.min_trial_runs,
            top_up_to=a.runs if a.phase == "top_up" else None, timeout_s=a.timeout_s,
        )

        def progress(event: Progress) -> None:
            if event.stage in ("clean", "correctness", "probe"):
                step = text(f"progress.trial_{event.stage}", self.words, k=event.k, n=event.n)
                self.say(f"    {a.round} {step} ({event.elapsed_s:.1f} s)")

        adopted = adopt_round(self.session, a.round, self.config_of(a.base_round),
                              [{"pointer": c.pointer, "value": c.value} for c in a.changes], a.joint_dcci)
        if adopted:
            self.say("    " + text("progress.adopted", self.words, round=a.round, n=adopted))
        held = self._runs_held(a.round, adopted)
        result = run_trial(spec, progress)
        failure = None if result.status == "ok" else self._failure_of(result)
        return "trial_result", {
            "round": a.round, "entry_id": a.entry_id, "phase": a.phase, "ok": result.status == "ok",
            "runs_added": len(result.runs_completed) - held, "runs_total": len(result.runs_completed),
            "clean_dir": self.rel(self.clean_dir(a.round)), "config_path": self.rel(result.config_path),
            "config_sha256": result.config_sha256, "trial_fingerprint": result.trial_fingerprint,
            "base_round": a.base_round, "changes": [{"pointer": c.pointer, "value": c.value} for c in a.changes],
            "timeout_s": a.timeout_s, "isolated_risky": a.isolated, "joint_dcci": a.joint_dcci,
            "failure": failure, "lease": result.lease, "foreign_processes": result.foreign,
            **({"adopted_runs": adopted} if adopted else {}),
            "summary": coded("summary.trial_done", round=a.round, phase=coded(f"summary.phase_{a.phase}"), runs=len(result.runs_completed))
            if failure is None else coded("summary.trial_failed", round=a.round, phase=coded(f"summary.phase_{a.phase}"),
                                          runs=len(result.runs_completed), failure=failure_message(failure)),
        }

    def _runs_held(self, round_name: str, adopted: int) -> int:
        """The clean runs ``round_name`` held before this trial action, as the ledger says: the runs of its newest
        ``trial_result``, or of a gate that compared it since (a ``sequential``/``family`` gate adds runs it records
        only in the gate); else the runs ``adopted`` from a predecessor (0: a new round). A resumed action thus counts
        the runs it added as the uninterrupted one does, whatever a killed life made of them before."""
        from sk_analytics.ledger.chain import read_records

        for r in reversed(read_records(self.root)):
            if r.data.get("round") == round_name and r.kind == "trial_result":
                return int(r.data["runs_total"])
            if r.data.get("round") == round_name and r.kind == "gate_result" and "candidate_run_metrics" in r.data:
                return len(r.data["candidate_run_metrics"])
        return adopted

    def _failure_of(self, result: TrialResult) -> dict[str, Any]:
        """The ``failure`` of a failed trial's record: its kind, the runner's words and the sealed scene."""
        return {"stage": result.outcome, "message": result.message, "scene": self.rel(result.scene_dir),
                **({"words": result.words} if result.words is not None else {})}

    def _frame(self, round_name: str) -> Any:
        """The round's complete clean runs: a half-made run folder (a SIGKILL inside a run the gate added) is
        set aside first, as a resumed trial does, never read as a run."""
        from sk_analytics.ingest.timings import read_candidate
        from sk_runner.trial.spec import set_aside_incomplete_runs

        set_aside_incomplete_runs(self.round_dir(round_name))
        c = self.session.control
        return read_candidate(self.clean_dir(round_name), expected_ranks=c.ranks, warmup=c.warmup, root=self.root)

    def check_same_identity(self, round_name: str, baseline_round: str) -> None:
        """Protocol §5.1: refuse to compare rounds whose source, workload, run
        controls or environment differ (only the declared option may change)."""
        from sk_analytics.stage_o.identity import identity_differences

        def recorded(name: str) -> dict[str, Any]:
            fingerprints: dict[str, Any] = load_json_file(self.round_dir(name) / "trial.json")["fingerprints"]
            return fingerprints

        differences = identity_differences(recorded(baseline_round), recorded(round_name))
        if differences:
            raise IntegrityError(
                f"{round_name} differs from {baseline_round} beyond its declared option change "
                f"({', '.join(differences)}); protocol §5.1 forbids comparing them: restore the "
                f"recorded source/workload/environment and resume, or start a new session"
            )

    def do_Gate(self, a: m.Gate) -> Record:
        from sk_analytics.option_trial.api import evaluate_option_trial
        from sk_analytics.option_trial.gate import Allowances

        policy = self.session.policy
        self.check_same_identity(a.round, a.baseline_round)
        path = self.round_dir(a.round) / "option-trial-summary.json"
        incumbent_added = 0
        self.gate_discards = []
        if path.is_file():
            summary = load_json_file(path)
            self.gate_discards = list(summary.get(GATE_DISCARDS_KEY) or [])  # a resumed gate: the runs its first life discarded
        else:
            design = self._family_design() if policy.gate == "family" else None
            noise = self._session_noise(a.round)
            if design is not None:
                extension = self._extend_incumbent(a, design.incumbent_runs)
                if extension is not None and extension.status != "ok":
                    return self._extension_failed(a, a.baseline_round, INCUMBENT_EXTENSION, extension,
                                                  self._runs_before_gate(a.baseline_round), gate_round=a.round,
                                                  runs_planned=design.incumbent_runs)
                incumbent_added = 0 if extension is None else len(extension.new_runs)

            def evaluate() -> dict[str, Any]:
                return evaluate_option_trial(
                    self._frame(a.baseline_round), {a.round: self._frame(a.round)}, warmup=self.session.control.warmup,
                    baseline_path=self.rel(self.clean_dir(a.baseline_round)) or "",
                    candidate_paths={a.round: self.rel(self.clean_dir(a.round)) or ""}, expected_ranks=None,
                    gate=policy.gate,  # type: ignore[arg-type]  # a str; evaluate_option_trial refuses one not in GATE_MODES
                    allowances=Allowances(policy.allow_p90_regression_pct, policy.allow_stddev_regression_pct),
                    sequential_cap=policy.incumbent_runs, family=design, session_noise=noise,
                )

            summary = evaluate()
            cap = policy.incumbent_runs if design is None else design.cap
            if policy.gate == "sequential" or design is not None:
                key = "sequential_policy_evaluation" if design is None else "family_policy_evaluation"
                summary, failed = self._extension_runs(a, summary, evaluate, key, cap)
                if failed is not None:
                    made = self._round_trial(a.round)
                    return self._extension_failed(a, a.round, GATE_EXTENSION, failed, self._runs_before_gate(a.round),
                                                  base_round=made.get("base_round"),
                                                  changes=made.get("changes"), gate_mode=policy.gate, runs_cap=cap,
                                                  failed_run=len(failed.runs_completed) + 1)
            if design is not None:
                summary["candidates"][a.round]["family_policy_evaluation"]["incumbent_runs_added_by_gate"] = incumbent_added
                summary["candidates"][a.round].update(self._protocol_view(a, noise))  # read from the first runs, in run order
            summary[GATE_DISCARDS_KEY] = self.gate_discards  # a gate resumed from this file records them too
            write_json(path, summary)
        cand = summary["candidates"][a.round]
        ev = cand["option_trial_evaluation"]
        stats = cand.get("statistics") or {}
        decided = cand.get("gate") or {"mode": "protocol", "accepted": ev["accepted"]}
        protocol = cand.get("protocol_verdict") or _protocol_verdict_of(cand, summary)
        data = {
            "round": a.round, "baseline_round": a.baseline_round, "entry_id": a.entry_id,
            "accepted": bool(decided["accepted"]), "protocol_accepted": bool(protocol["accepted"]), "gate_mode": decided["mode"],
            "gate_is_protocol": bool(decided.get("is_protocol", decided["mode"] == "protocol")),
            "gate_label": decided.get("label", "Stage O protocol gate"),
            "protocol_verdict": protocol,
            # the statistics policy's preconditions are the protocol's runs: its answer on them (older summaries: on the gate's)
            "stats_accepted": protocol["stats_accepted"] if "stats_accepted" in protocol
            else (cand.get("stats_policy_evaluation") or {}).get("accepted"),
            # the sequential policy beside the protocol's verdict (under the family gate: the sequential gate replayed on
            # the incumbent's first five runs and the candidate's runs in order, up to five)
            "sequential": protocol["sequential"] if "sequential" in protocol else _sequential_record(cand.get("sequential_policy_evaluation")),
            **({"family": _family_record(cand["family_policy_evaluation"])} if cand.get("family_policy_evaluation") else {}),
            "allow_p90_regression_pct": ev.get("allow_p90_regression_pct", 0.0),
            "allow_stddev_regression_pct": ev.get("allow_stddev_regression_pct", 0.0),
            "checks": ev["checks"],
            "mean_improvement_pct": ev.get("mean_improvement_pct"),
            "median_run_improvement_pct": ev.get("median_run_improvement_pct"),
            "p90_regression_pct": ev.get("p90_regression_pct"), "stddev_regression_pct": ev.get("stddev_regression_pct"),
            "verdict": stats.get("verdict"), "ci_pct": stats.get("ci_pct"),
            "advice": cand.get("protocol_advice") or cand.get("advice"),  # beside the protocol's decision, on its runs
            "baseline_mean_ms": summary["baseline"]["worst_rank_mean_ms"], "candidate_mean_ms": cand["worst_rank_mean_ms"],
            "baseline_median_run_ms": summary["baseline"]["median_run_worst_rank_mean_ms"],
            "candidate_median_run_ms": cand["median_run_worst_rank_mean_ms"],
            "foreign_processes": self.gate_discards,
            "baseline_run_metrics": summary["baseline"]["run_worst_rank_means_ms"],
            "candidate_run_metrics": cand["run_worst_rank_means_ms"],
            "summary_path": self.rel(path),
        }
        data["summary"] = _gate_summary(data)
        return "gate_result", data

    def _family_design(self) -> Any:
        """The family policy's design of this session: its frozen matrix is the family."""
        from sk_analytics.option_trial.family import FamilyDesign
        from sk_analytics.option_trial.modes import FAMILY_MIN_EFFECT_PCT
        from sk_analytics.stage_o.matrix import load_matrix
        from sk_runner.sweep.matrix_cli import MATRIX_NAME

        entries = len(load_matrix(self.root / MATRIX_NAME)["entries"])
        effect = self.session.policy.min_effect_pct
        return FamilyDesign(entries, min_effect_pct=FAMILY_MIN_EFFECT_PCT if effect is None else effect)

    def _session_noise(self, round_name: str) -> SessionNoise:
        """The run-to-run noise of the candidate trials this session's gates decided before ``round_name`` (their
        recorded run metrics, the last gate of each round): what a runs-needed figure learns the candidate's noise
        from. Only recorded facts: a resumed or re-verified gate reads the same trials."""
        from sk_analytics.ledger.chain import read_records

        runs: dict[str, list[float]] = {}
        for record in read_records(self.root):
            if record.kind == "gate_result" and record.data.get("round") != round_name:
                runs[record.data["round"]] = record.data.get("candidate_run_metrics") or []
        return SessionNoise.of_trials(runs.values())

    def _protocol_view(self, a: m.Gate, noise: SessionNoise) -> dict[str, Any]:
        """The Stage O protocol's view of a family gate on the runs the protocol reads (the incumbent's first five runs
        and the candidate's first three, whatever the family policy added), as the candidate keys of the summary:
        ``protocol_verdict`` (with the statistics policy's answer on those runs) and ``protocol_advice`` (the advice
        beside that verdict, its runs-needed figures learning the noise from ``noise``); and the sequential policy's
        record as the sequential gate would have made it from the runs the family gate made (:meth:`_sequential_replay`), in
        ``protocol_verdict`` (``sequential``; ``sequential_baseline_runs``: the incumbent runs it read) and in full as
        ``sequential_replay``."""
        frames = self._gate_frames(a)  # read once: every evaluation below selects its first runs from them
        found = self._first_runs_trial(a, frames, self.session.policy.min_trial_runs, noise)
        verdict = _protocol_verdict_of(found["candidates"][a.round], found)
        replay = self._sequential_replay(a, frames)
        verdict.update(sequential=_sequential_record(replay), sequential_baseline_runs=self.session.policy.incumbent_runs)
        return {"protocol_verdict": verdict, "protocol_advice": found["candidates"][a.round].get("advice"), "sequential_replay": replay}

    def _sequential_replay(self, a: m.Gate, frames: tuple[Any, Any] | None = None) -> dict[str, Any]:
        """The ``sequential_policy_evaluation`` the sequential gate (``"gate": "sequential"``) would have recorded on a
        family gate's runs, which it would have made in the same order: its looks at the candidate's 3rd, 4th, ... run
        against the incumbent's first five, stopping at the first that decides or at its cap (the incumbent's runs), on
        at most the runs the family policy made. Evaluated on the runs up to the look that decided, as the sequential gate
        stops there (``candidate_runs_available``), and ``runs_added_by_gate`` counts the runs it would have added to the
        candidate's first three (the family gate made them). ``frames``: the gate's timings (:meth:`_gate_frames`)
        when the caller has read them."""
        policy = self.session.policy
        read = frames or self._gate_frames(a)

        def evaluate(runs: int) -> dict[str, Any]:
            found: dict[str, Any] = self._first_runs_trial(a, read, runs)["candidates"][a.round]["sequential_policy_evaluation"]
            return found

        replay = evaluate(policy.incumbent_runs)
        if replay["runs_used"] < replay["candidate_runs_available"]:  # an earlier look decided: the sequential gate stops there
            replay = evaluate(replay["runs_used"])
        replay["runs_added_by_gate"] = max(0, replay["candidate_runs_available"] - policy.min_trial_runs)
        return replay

    def _gate_frames(self, a: m.Gate) -> tuple[Any, Any]:
        """The timings of a gate's incumbent and candidate rounds (their complete clean runs)."""
        return self._frame(a.baseline_round), self._frame(a.round)

    def _first_runs_trial(self, a: m.Gate, frames: tuple[Any, Any], candidate_runs: int, noise: SessionNoise = NO_SESSION_NOISE) -> dict[str, Any]:
        """The option trial of a gate (``frames``: :meth:`_gate_frames`) on the incumbent's first five runs (the policy's
        incumbent runs) and the candidate's first ``candidate_runs``, evaluated as this session's protocol gate would (its
        allowances, the sequential policy's cap at the incumbent's runs)."""
        from sk_analytics.option_trial.api import evaluate_option_trial
        from sk_analytics.option_trial.gate import Allowances

        policy = self.session.policy
        base = _first_runs(frames[0], policy.incumbent_runs)
        cand = _first_runs(frames[1], candidate_runs)
        return evaluate_option_trial(base, {a.round: cand}, warmup=self.session.control.warmup, expected_ranks=None,
                                     baseline_path=self.rel(self.clean_dir(a.baseline_round)) or "",
                                     candidate_paths={a.round: self.rel(self.clean_dir(a.round)) or ""},
                                     allowances=Allowances(policy.allow_p90_regression_pct, policy.allow_stddev_regression_pct),
                                     sequential_cap=policy.incumbent_runs, session_noise=noise)

    def _round_trial(self, round_name: str, phases: tuple[str, ...] | None = ("trial", "repair")) -> dict[str, Any]:
        """The last ``trial_result`` record of ``round_name`` in one of ``phases`` (None: any): by default the one that
        made the round (its identity: base round, changes, controls)."""
        from sk_analytics.ledger.chain import read_records

        trial = next((r.data for r in reversed(read_records(self.root)) if r.kind == "trial_result" and r.data.get("round") == round_name
                      and (phases is None or r.data.get("phase") in phases)), None)
        if trial is None:
            raise IntegrityError(f"{round_name}: the gate found no trial_result record of the round to repeat")
        return trial

    def _runs_before_gate(self, round_name: str) -> int:
        """The clean runs ``round_name`` had before a gate extended it: those its newest ``trial_result`` made (a gate's
        extension is recorded only when it failed, and then no gate extends the round again). Read from the ledger,
        not the round folder, so that a gate resumed after a kill in the middle of its extension counts as the
        uninterrupted one does."""
        return int(self._round_trial(round_name, None)["runs_total"])

    def _repeat_spec(self, round_name: str, top_up_to: int) -> TrialSpec:
        """The spec that adds clean runs to ``round_name`` (its recorded identity) up to ``top_up_to``."""
        policy = self.session.policy
        if round_name == m.O0:
            return self._trial_spec(m.O0, None, (), joint_dcci=False, incumbent=True, runs=policy.min_trial_runs,
                                    top_up_to=top_up_to, timeout_s=policy.timeout_s)
        trial = self._round_trial(round_name)
        changes = tuple(PointerChange(c["pointer"], c["value"]) for c in trial.get("changes") or [])
        return self._trial_spec(round_name, trial.get("base_round"), changes, joint_dcci=bool(trial.get("joint_dcci")),
                                incumbent=False, runs=policy.min_trial_runs, top_up_to=top_up_to,
                                timeout_s=float(trial.get("timeout_s") or policy.timeout_s))

    def _extend_incumbent(self, a: m.Gate, runs: int) -> TrialResult | None:
        """``"gate": "family"``: the incumbent's clean runs extended to ``runs`` before the first look (each of its
        runs serves every later entry); the trial that added them (None when it has them). A failed run ends the
        extension: the caller records it (:meth:`_extension_failed`), never decides on fewer runs."""
        have = len(complete_runs(self.round_dir(a.baseline_round)))
        if have >= runs:
            return None
        self.say("    " + text("progress.family_extends", self.words, round=a.baseline_round, have=have, runs=runs))
        return self._gate_trial(self._repeat_spec(a.baseline_round, runs))

    def _extension_failed(self, a: m.Gate, round_name: str, phase: str, result: TrialResult, had: int, **facts: Any) -> Record:
        """The record of a gate's extension whose run failed (crash, timeout, wrong output): a failed ``trial_result``
        of ``round_name`` in ``phase``, with the runs it had before (``had``) and made, the failure with its sealed scene
        and ``facts``. The gate decides nothing on fewer runs. ``incumbent_extension`` (the family policy extending the
        incumbent, ``gate_round``, ``runs_planned``): an incumbent that fails a clean run is no baseline (protocol §4: a
        failed O0 stops the session), and the state machine stops the session on it. ``gate_extension`` (a run added to
        the candidate while the policy was undecided, ``gate_mode``, ``runs_cap``, ``failed_run``): a candidate that
        fails a clean run is a failed trial (protocol §5.6), and the state machine settles the entry ``failed`` on it."""
        made, failure = len(result.runs_completed), self._failure_of(result)
        return "trial_result", {
            "round": round_name, "entry_id": a.entry_id, "phase": phase, "ok": False, **facts,
            "runs_before": had, "runs_added": made - had, "runs_total": made,
            "clean_dir": self.rel(self.clean_dir(round_name)), "config_path": self.rel(result.config_path),
            "config_sha256": result.config_sha256, "trial_fingerprint": result.trial_fingerprint,
            "failure": failure, "lease": result.lease, "foreign_processes": self.gate_discards,
            "summary": coded("summary.trial_failed", round=round_name, phase=coded(f"summary.phase_{phase}"),
                             runs=made, failure=failure_message(failure)),
        }

    def _gate_trial(self, spec: TrialSpec) -> TrialResult:
        """Clean runs the gate adds to ``spec.round``; the ones the lease's proof discarded go into the gate's record."""
        result = run_trial(spec)
        self.gate_discards += [dict(entry, round=spec.round) for entry in result.foreign]
        return result

    def _extension_runs(self, a: m.Gate, summary: dict[str, Any], evaluate: Callable[[], dict[str, Any]], key: str,
                        cap: int) -> tuple[dict[str, Any], TrialResult | None]:
        """``--gate sequential`` / ``family`` in the sweep: while the policy (``key`` of the candidate) is undecided,
        add one clean run to the candidate round and decide again, up to ``cap`` candidate runs. The looks are
        replayed from the runs on disk, so a resumed gate continues where it stopped. The summary and, when an added
        run failed (crash, timeout, wrong output), its trial: that ends the extension and the gate decides nothing
        (the caller records a failed ``gate_extension`` trial, :meth:`_extension_failed`)."""
        added = 0
        while True:
            found = summary["candidates"][a.round][key]
            runs = int(found["candidate_runs_available"])
            if found["state"] != "undecided" or runs >= cap:
                break
            self.say("    " + text("progress.undecided", self.words, round=a.round, policy=coded(f"decider.{found['policy']}"), runs=runs,
                                 next=runs + 1))
            result = self._gate_trial(self._repeat_spec(a.round, runs + 1))
            if result.status != "ok":
                return summary, result
            added += len(result.new_runs)
            summary = evaluate()
        summary["candidates"][a.round][key]["runs_added_by_gate"] = added
        return summary, None

    def do_CheckStability(self, a: m.CheckStability) -> Record:
        from sk_analytics.option_trial.api import stability

        path = self.round_dir(a.round) / "stability.json"
        if path.is_file():
            result = load_json_file(path)
        else:
            result = stability(self._frame(a.round), self.session.control.warmup, path=self.rel(self.clean_dir(a.round)) or "",
                               expected_ranks=None)
            write_json(path, result)
        st = result["baseline_stability"]
        return "stability_result", {
            "round": a.round, "entry_id": a.entry_id, "stable": bool(st["stable"]), "spread_pct": st.get("spread_pct"),
            "max_spread_pct": st.get("max_spread_pct"),
            "run_metrics": st.get("run_worst_rank_means_ms"), "mean_ms": st.get("mean_ms"), "path": self.rel(path),
            "summary": coded("summary.stability", round=a.round, spread_pct=st.get("spread_pct"),
                             stable=coded("summary.stable" if st["stable"] else "summary.unstable")),
        }

    # -- DCCI diagnosis -----------------------------------------------------------------
    def do_CollectProfile(self, a: m.CollectProfile) -> Record:
        from sk_runner.profile import ProfileSpec, collect_profile

        c = self.session.control
        spec = ProfileSpec(
            session=self.root, round=DCCI_DIR, role=a.role, config=self.config_of(a.config_round), backend=self.backend,
            control=Control(c.ranks, a.iterations or self.session.policy.profile_iterations, c.warmup, self.session.policy.timeout_s),
            seed=self.session.seed, cwd=self.session.backend.workdir,
            lease=self.lease(),  # held by the sweep: both sides of the pair inside one lease
            hosts=self.hosts,  # every host's ranks under one manifest, each host's lease held for the whole session
            lang=self.words,
        )
        result = collect_profile(spec, lambda text: self.say(f"    {DCCI_DIR}/{a.role}: {text}"))
        return "profile_result", {
            "entry_id": a.entry_id, "side": a.side, "attempt": a.attempt, "role": a.role, "config_round": a.config_round,
            "ok": result.ok, "root": self.rel(result.root) if result.root else None,
            "requested_iterations": a.iterations, "iterations": result.iterations,
            "manifest_fingerprint": result.manifest_fingerprint, "reason_zh": result.reason_zh, "reason": result.reason,
            "attempts": [self.rel(r.root) for r in result.attempts],
            "lease": run_lease_record(self.hosts, None if self.devices is None else self.devices.lease),
            "summary": coded("summary.collect_done", side=a.side, role=a.role) if result.ok
            else coded("summary.collect_blocked", side=a.side, role=a.role, reason={"zh": result.reason_zh, "en": result.reason}),
        }

    def do_DcciDiff(self, a: m.DcciDiff) -> Record:
        from sk_runner.sweep.dcci import run_dcci_diff

        out = self.root / "experiments" / "Sbest" / DCCI_DIR / "dcci-diff.json"
        result = run_dcci_diff(self.root / a.baseline_root, self.root / a.candidate_root, out,
                               warmup=self.session.control.warmup,
                               disable_all_config=load_json_file(self.config_of(a.disable_all_round)), session=self.root)
        return "dcci_diff_result", {
            "entry_id": a.entry_id, "ok": result.ok, "path": self.rel(out), "patterns": result.patterns,
            "slower_sks": result.slower, "reason": result.reason,
            "diagnosis": result.diagnosis, "compared_time_share": result.compared_time_share,
            "partial_note": result.partial_note,
            "summary": coded("summary.dcci_diff", n=len(result.slower), patterns=result.patterns or coded("word.none"),
                             partial=coded("summary.partial_prefix", note=result.partial_note) if result.partial_note else "")
            if result.ok else coded("summary.dcci_diff_refused", reason=result.reason),
        }

    def do_ProbeRepair(self, a: m.ProbeRepair) -> Record:
        from sk_runner.probe import runtime_check

        options = {c.pointer.rsplit("/", 1)[1]: c.value for c in a.values}
        verdicts = {name: self.backend.wrapper_check(name, value) for name, value in options.items()}
        ready = all(v.accepted for v in verdicts.values())
        runtime: dict[str, Any] | None = None
        if ready:
            base = load_json_file(self.config_of(a.disable_all_round))
            changes = [PointerChange(c.pointer, c.value) for c in a.values]
            config = derive_config(base, changes, joint_dcci=True).config
            check = runtime_check(options, self.backend, out_dir=self.root / "experiments" / "Sbest" / DCCI_DIR / "PROBE",
                                  config=config, seed=self.session.seed, control=probe_control(self.session),
                                  cwd=self.session.backend.workdir, env=lease_environ(self.lease(), os.environ), hosts=self.hosts)
            runtime = check.to_json()
            ready = check.status == "accepted"
        return "probe_result", {
            "entry_id": a.entry_id, "purpose": "dcci_repair", "ready": ready, "values": options,
            "evidence": {"wrapper": {k: v.to_json() for k, v in verdicts.items()}, "runtime": runtime},
            "summary": coded("summary.probe_repair", ready=str(ready).lower()),
        }

    # -- ledger-only and sealing actions ---------------------------------------------------
    def do_Settle(self, a: m.Settle) -> Record:
        return "entry_settled", m.settle_record(a)

    def do_Stop(self, a: m.Stop) -> Record:
        return "session_stopped", {"reason": dict(a.reason), "evidence": dict(a.evidence), "summary": dict(a.reason)}

    def do_FreezeBase(self, a: m.FreezeBase) -> Record:
        path, identity = freeze_base(self.session, a)
        return "base_frozen", {
            "round": a.round, "path": self.rel(path), "base_fingerprint": identity["base_fingerprint"],
            "accepted_entries": list(a.accepted_entries),
            "option_changes": [{"pointer": c.pointer, "value": c.value} for c in a.option_changes],
            "summary": coded("summary.base_frozen", round=a.round, n=len(a.accepted_entries)),
        }

    def do_WriteHandoff(self, a: m.WriteHandoff) -> Record:
        from sk_analytics.handoff.outputs import REPORTS_KEY
        from sk_runner.sweep.handoff import write_outputs

        fresh = None if a.outcome == "base" else fresh_session_argv(self.session)  # a stopped session stays stopped
        paths, reports = write_outputs(self.root, outcome=a.outcome, fresh_session=fresh)
        return "handoff_written", {
            "outcome": a.outcome, **{k: self.rel(v) for k, v in paths.items()}, REPORTS_KEY: reports,
            "handoff_fingerprint": fingerprint(load_json_file(paths["handoff"])),
            "summary": coded("summary.handoff", path=self.rel(paths["handoff"])),
        }


def _gate_summary(data: dict[str, Any]) -> dict[str, Any]:
    """The gate record's one-line summary (a message). Under the family gate each side of it names its runs: the
    family policy's decision and figures over every run it compared, the protocol's over the first five and three."""
    mode = data["gate_mode"] if data["gate_mode"] in GATE_MODES else "protocol"

    def verdict(found: Any) -> Any:
        return coded(f"verdict.{found}") if found in VERDICTS else found

    def passed(accepted: Any) -> dict[str, Any]:
        return coded("summary.passed" if accepted else "summary.not_passed")

    protocol = data["protocol_verdict"]
    if data.get("family") and "verdict" in protocol:
        return coded("summary.gate_family", round=data["round"], baseline=data["baseline_round"], decider=coded(f"decider.{mode}"),
                     passed=passed(data["accepted"]), base=len(data["baseline_run_metrics"]), cand=len(data["candidate_run_metrics"]),
                     mean_pct=data["mean_improvement_pct"], verdict=verdict(data["verdict"]), protocol=passed(data["protocol_accepted"]),
                     pbase=protocol["baseline_runs"], pcand=protocol["candidate_runs"], pmean_pct=protocol["mean_improvement_pct"],
                     pverdict=verdict(protocol["verdict"]))
    return coded("summary.gate", round=data["round"], baseline=data["baseline_round"], mean_pct=data["mean_improvement_pct"],
                 decider=coded(f"decider.{mode}"), passed=passed(data["accepted"]), verdict=verdict(data["verdict"]),
                 protocol="" if data["gate_is_protocol"] else coded("summary.protocol_gate", passed=passed(data["protocol_accepted"])))


def _sequential_record(seq: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sequential policy's answer in a gate record (state, candidate runs used, runs the gate added)."""
    if seq is None:
        return None
    keys = ("accepted", "state", "reason", "runs_used", "candidate_runs_available", "cap", "runs_added_by_gate")
    return {key: seq.get(key) for key in keys}


def _family_record(fam: dict[str, Any]) -> dict[str, Any]:
    """The family policy's answer in a gate record: its decision, the runs it used and added (candidate and
    incumbent) and the design stated up front (level spent, caps, minimum effect)."""
    keys = ("accepted", "state", "reason", "runs_used", "candidate_runs_available", "incumbent_runs", "runs_added_by_gate",
            "incumbent_runs_added_by_gate", "estimate", "design")
    return {key: fam.get(key) for key in keys}


def _protocol_verdict_of(cand: dict[str, Any], summary: dict[str, Any]) -> dict[str, Any]:
    """The protocol's verdict of one candidate of an option-trial summary, with the statistics beside it: its seven
    checks and their figures (the report's check table shows these), and on the same runs the statistics (verdict,
    95 % CI, the advice's kind), the statistics policy's answer and the sequential policy's record (a family gate's
    protocol view replaces this one by the sequential gate's replay, :meth:`Executor._sequential_replay`)."""
    ev, stats = cand["option_trial_evaluation"], cand.get("statistics") or {}
    return {
        "accepted": bool(ev["accepted"]), "failed_checks": list(ev["failed_checks"]), "checks": dict(ev["checks"]),
        "mean_improvement_pct": ev.get("mean_improvement_pct"),
        "median_run_improvement_pct": ev.get("median_run_improvement_pct"),
        "p90_regression_pct": ev.get("p90_regression_pct"), "stddev_regression_pct": ev.get("stddev_regression_pct"),
        "baseline_spread_pct": (summary.get("baseline_stability") or {}).get("spread_pct"),
        "baseline_runs": len(summary["baseline"]["run_worst_rank_means_ms"]), "candidate_runs": len(cand["run_worst_rank_means_ms"]),
        "ci_pct": stats.get("ci_pct"), "verdict": stats.get("verdict"), "advice": (cand.get("advice") or {}).get("kind"),
        "stats_accepted": (cand.get("stats_policy_evaluation") or {}).get("accepted"),
        "sequential": _sequential_record(cand.get("sequential_policy_evaluation")),
    }


def _first_runs(frame: Any, runs: int) -> Any:
    """The timings of the first ``runs`` clean runs of a frame (run folders ``run-<k>`` in k order)."""
    import polars as pl

    names = sorted(frame.get_column("run").unique().to_list(), key=lambda n: int(str(n).rsplit("-", 1)[-1]))
    return frame.filter(pl.col("run").is_in(names[:runs]))

