"""The steps of one prepared trial round: exact-value probe -> correctness -> clean runs (protocol §5)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.fingerprint import sha256_file
from sk_analytics.messages import coded, is_coded, render, resolve_lang
from sk_runner.config import DerivedConfig, options_pointer_of, resolve
from sk_runner.devices.lease import lease_environ
from sk_runner.fingerprint import env_hash
from sk_runner.probe import ProbeEvidenceMissing, runtime_check
from sk_runner.process import ProcessResult
from sk_runner.trial.scene import SceneRecord, seal_scene, sealed_scene
from sk_runner.trial.spec import TrialResult, complete_runs, derive_seed, newest_set_aside
from sk_runner.trial.state import TrialState

PROBE_OUTCOMES = {"invalid_default": "invalid_value", "value_differs": "value_differs"}
"""The trial failure kind of a probe verdict on the value (a probe process that failed: ``crash`` or ``timeout``):
the runtime judged the value invalid and used its default, or it logged another value than the one set."""


def relocated(message: str, old: Path, new: Path | None) -> str:
    """``message`` naming the files of folder ``old`` where they are now, in ``new`` (the folder was moved aside)."""
    return message if new is None else message.replace(f"{old}{os.sep}", f"{new}{os.sep}")


class Round:
    """One prepared trial round: the steps probe -> correctness -> clean runs."""

    def __init__(self, trial: TrialState, derived: DerivedConfig, seed: int) -> None:
        """Prepare (or verify, on resume) the round; call while holding its lock."""
        spec = trial.spec
        self.trial, self.spec = trial, spec
        self.derived, self.seed = derived, seed
        self.record, self.config_path = trial.prepare_round(derived, seed)
        self.config_sha = sha256_file(self.config_path)
        self.trial_fp: str = self.record["fingerprints"]["trial_fingerprint"]
        self.target = spec.target_runs
        done = complete_runs(trial.dir)
        if spec.top_up_to is not None and len(done) > spec.top_up_to:
            raise UsageError(f"round {spec.round} already has {len(done)} clean runs, more than --top-up-to {spec.top_up_to}")
        self.new: list[int] = []

    def result(self, status: str, outcome: str, message: str, correctness: str, scene: Path | None = None,
               words: dict[str, Any] | None = None) -> TrialResult:
        """The round's result as it stands now (its complete runs, lease, discarded runs); ``words``: a failure's
        message as a recorded message, where the runner has one."""
        return TrialResult(self.spec.round, self.trial.dir, status, outcome, message, complete_runs(self.trial.dir), self.target,
                           self.new, correctness, self.config_path, self.config_sha, self.trial_fp, scene, self.trial.lease_record(),
                           [] if self.trial.proof is None else list(self.trial.proof.discarded), words)

    def gate_progress(self, correctness: str, last: str) -> dict[str, Any]:
        probe = "ready" if self.spec.incumbent or (self.trial.dir / "probe.json").is_file() else "not_ready"
        return {"correctness": correctness, "clean_runs_completed": complete_runs(self.trial.dir),
                "clean_runs_target": self.target, "probe": probe, "last_gate_passed": last}

    def seal(self, stage: str, run_name: str, outcome: str, message: str, argv: list[str], contract_env: Mapping[str, str],
             proc: ProcessResult | None, raw: Path, config: Path, correctness: str, last: str,
             words: dict[str, Any] | None = None) -> Path:
        """Seal the failure scene of a started command (before any rollback)."""
        spec = self.spec
        rec = SceneRecord(
            session=spec.session, round=spec.round, stage=stage, run=run_name, outcome=outcome, message=message,
            argv=argv, cwd=self.trial.workload_cwd, contract_env=contract_env,
            env_hash=env_hash(self.trial.child_env(contract_env)), config_path=config,
            config_sha256=sha256_file(config), config_diff=self.derived.patch, timeout_s=spec.control.timeout_s,
            backend=spec.backend.name, process=proc, raw_dir=raw, stdout_path=raw / "stdout.txt", stderr_path=raw / "stderr.txt",
            fingerprints=self.record["fingerprints"], gate_progress=self.gate_progress(correctness, last),
            incumbent_config=spec.base_config.resolve(), incumbent_sha256=sha256_file(spec.base_config),
            rerun_command=list(spec.rerun_command), words=words, lang=resolve_lang(spec.lang),
        )
        return seal_scene(self.trial.dir, rec)

    def probe(self) -> TrialResult | None:
        """Exact-value probe of the changed option(s); None when ready."""
        spec, trial = self.spec, self.trial
        if spec.incumbent or (trial.dir / "probe.json").is_file():
            return None
        options = {}
        for change in spec.changes:
            where = options_pointer_of(change)
            assert where is not None  # derive() refused pointers outside an option map
            options[where[1]] = resolve(self.derived.config, where[0])
        verdicts = {name: spec.backend.wrapper_check(name, value) for name, value in options.items()}
        rejected = [v.reason for v in verdicts.values() if not v.accepted]
        if rejected:  # nothing started: an environment blocker, not a scene
            raise trial.blocker("probe", EnvironmentBlocker(f"wrapper rejects the exact value: {'; '.join(rejected)}"))
        sealed = self.sealed_failure("probe", "PROBE")
        if sealed is not None:
            return sealed
        trial.tell("probe", 1, 1, "exact-value probe")
        try:  # in the workload's own cwd, like every process of the trial
            check = runtime_check(options, spec.backend, out_dir=trial.dir / "PROBE", config=self.derived.config,
                                  env=lease_environ(trial.lease, trial.env),  # on the leased devices too
                                  seed=derive_seed(self.seed, spec.round, "probe"), control=spec.control, cwd=trial.workload_cwd,
                                  hosts=spec.hosts)
        except ProbeEvidenceMissing as exc:  # the workload wrote no probe evidence: the environment, not the value
            raise trial.blocker("probe", exc) from None
        if check.status != "accepted":
            proc = check.process
            outcome = PROBE_OUTCOMES.get(check.status) or ("timeout" if proc is not None and proc.timed_out else "crash")
            scene = self.seal("probe", "PROBE", outcome, check.reason, check.argv, check.contract_env, proc,
                              check.attempt_dir, check.config_path, "not_run", "none")
            return self.result("failed", outcome, check.reason, "not_run", scene)
        write_json(trial.dir / "probe.json", {"ready": True, "options": options,
                                              "wrapper": {k: v.to_json() for k, v in verdicts.items()}, "runtime": check.to_json()})
        return None

    def correctness(self) -> TrialResult | None:
        """Full inference + correctness (once); None when passed."""
        trial = self.trial
        corr_dir = trial.dir / "CORRECTNESS"
        if (corr_dir / "meta.json").is_file():
            return None
        trial.move_aside(corr_dir)
        sealed = self.sealed_failure("correctness", "CORRECTNESS")
        if sealed is not None:
            return sealed
        corr_dir.mkdir(parents=True)
        trial.tell("correctness", 1, 1, "full inference + correctness")
        seed = derive_seed(self.seed, self.spec.round, "correctness")
        request, argv, proc = trial.execute("correctness", corr_dir, self.config_path, seed)
        outcome = trial.classify(proc, corr_dir, need_correctness=True)
        if outcome.status != "ok":
            scene = self.seal("correctness", "CORRECTNESS", outcome.status, outcome.message, argv, request.contract_env(),
                              proc, corr_dir, self.config_path, "failed", "none" if self.spec.incumbent else "probe", outcome.words)
            return self.failed_step("CORRECTNESS", outcome.status, outcome.message, outcome.words, scene, trial.move_aside(corr_dir))
        meta = trial.meta("correctness", "CORRECTNESS", request, argv, proc, outcome, self.config_sha, self.trial_fp)
        write_json(corr_dir / "meta.json", meta)
        return None

    def failed_step(self, run_name: str, outcome: str, message: str, words: dict[str, Any] | None, scene: Path,
                    moved: Path | None) -> TrialResult:
        """The result of the correctness run (``CORRECTNESS``) or clean run ``run_name`` that failed (``outcome``, the
        runner's ``message`` and ``words``) with its sealed ``scene``, its folder ``moved`` aside: the message names the
        files where they are now (then the words, which name the old place, are dropped)."""
        clean = run_name != "CORRECTNESS"
        folder = self.trial.dir / "CLEAN" / run_name if clean else self.trial.dir / run_name
        relocated_message = relocated(message, folder, moved)
        kept = words if words and relocated_message == message else None
        if not clean:
            return self.result("failed", outcome, relocated_message, "failed", scene, kept)
        in_run = None if kept is None else coded("runner.in_run", run=run_name, message=kept)
        return self.result("failed", outcome, f"{run_name}: {relocated_message}", "passed", scene, in_run)

    def sealed_failure(self, stage: str, run_name: str) -> TrialResult | None:
        """With ``settle_sealed_run``, the failure of step ``run_name`` (``PROBE``, ``CORRECTNESS``, ``run-<k>``) at
        ``stage`` as an earlier invocation of this trial sealed it and would have returned it, had it not been killed
        before its caller recorded it; None when no scene of the step was sealed with this trial's fingerprint (or the
        flag is off). A failed run's folder was set aside by then (the failed invocation, or this one's ``move_aside``)."""
        found = sealed_scene(self.trial.dir, stage, run_name, self.trial_fp) if self.spec.settle_sealed_run else None
        if found is None:
            return None
        scene, doc = found
        failure = doc["observable_failure"]
        words = dict(failure["words"]) if is_coded(failure.get("words")) else None  # a scene sealed before scenes kept them: none
        message = str(failure["message"]) if words is None else render(words, "en")  # the runner's message is their English
        if stage == "probe":  # its attempt folder stays in PROBE/; its reason names no file of it
            return self.result("failed", str(failure["outcome"]), message, "not_run", scene)
        return self.failed_step(run_name, str(failure["outcome"]), message, words, scene, newest_set_aside(self.trial.dir, run_name))

    def clean_runs(self) -> TrialResult:
        """Clean runs 1..target, one fresh process each; complete ones are kept."""
        trial, target = self.trial, self.target
        done = complete_runs(trial.dir)
        for k in (k for k in range(1, target + 1) if k not in done):
            run_name = f"run-{k}"
            run_dir = trial.dir / "CLEAN" / run_name
            trial.move_aside(run_dir)
            sealed = self.sealed_failure("clean", run_name)
            if sealed is not None:
                return sealed
            run_dir.mkdir(parents=True)
            trial.tell("clean", k, target, f"clean run {k} of {target}")
            started = time.monotonic()
            request, argv, proc, proof = trial.execute_clean(run_dir, run_name, self.config_path,
                                                             derive_seed(self.seed, self.spec.round, run_name))
            outcome = trial.classify(proc, run_dir, need_correctness=False)
            meta = trial.meta("clean", run_name, request, argv, proc, outcome, self.config_sha, self.trial_fp, proof)
            if outcome.status != "ok":
                trial.ingest(run_dir, run_name, k, meta, outcome)
                scene = self.seal("clean", run_name, outcome.status, outcome.message, argv, request.contract_env(), proc,
                                  run_dir, self.config_path, "passed", "correctness", outcome.words)
                return self.failed_step(run_name, outcome.status, outcome.message, outcome.words, scene, trial.move_aside(run_dir))
            trial.ingest(run_dir, run_name, k, meta, outcome)
            write_json(run_dir / "meta.json", meta)  # last: the run is complete
            trial.durations.append(time.monotonic() - started)
            self.new.append(k)
        trial.tell("done", target, target, f"{target} clean runs complete")
        return self.result("ok", "ok", f"{len(complete_runs(trial.dir))} clean runs complete", "passed")

