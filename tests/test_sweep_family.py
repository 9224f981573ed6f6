"""The family policy in a sweep on the simulator (``policy.gate = "family"``, issue 43)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sweep_helpers import (
    FAST_POLICY,
    assert_settled_failed_on_the_added_run,
    failing_run,
    finished_sweep,
    killed_after_the_result,
    killed_after_the_seal,
    runs_per_round,
    settled_statuses,
    small_session,
)

from sk_analytics.errors import InputError
from sk_analytics.ledger.chain import read_records
from sk_analytics.option_trial.modes import family_incumbent_runs
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.phase import _policy

INCUMBENT = family_incumbent_runs(2)  # the design of a two-entry matrix
ENTRIES, POLICY = ["auto-op-parallel-1", "split-mode-3"], replace(FAST_POLICY, gate="family")
"""truth: auto-op-parallel-1 about -3.7 % step time (a gain), split-mode-3 neutral (+0.1 %)"""
SEED = 6
"""The shared sweep's simulator seed: its O1 is undecided for the sequential gate at three candidate runs and the
family policy makes a fourth, on which the sequential gate accepts (its column said "undecided (3 runs)")."""


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted family-gate sweep: the tests only read it (the first checks it, the resume test's reference is it)."""
    return finished_sweep(tmp_path_factory, "family", ENTRIES, POLICY, seed=SEED)


@pytest.mark.slow
def test_family_gate_extends_the_incumbent_and_records_the_protocol_verdict(finished: Path) -> None:
    root = finished
    gates = {r.data["round"]: r.data for r in read_records(root) if r.kind == "gate_result"}
    runs = runs_per_round(root)
    assert len(runs["O0-INCUMBENT"]) == INCUMBENT  # extended once, before the first look
    first = gates["O1"]["family"]
    assert first["incumbent_runs_added_by_gate"] == INCUMBENT - 5 and first["incumbent_runs"] == INCUMBENT
    design = first["design"]
    assert design["entries"] == 2 and design["entry_level_one_sided"] == pytest.approx(0.025)
    assert design["cap_runs_per_session"] == INCUMBENT + 2 * design["cap_runs_per_entry"]
    for name, gate in gates.items():
        fam = gate["family"]
        assert gate["gate_mode"] == "family" and gate["gate_is_protocol"] is False and gate["accepted"] is fam["accepted"]
        assert fam["state"] in ("accepted", "rejected") and 3 <= fam["runs_used"] <= design["cap_candidate_runs"]
        # the protocol's verdict is taken on the protocol's runs: five of the incumbent, three of the candidate
        verdict = gate["protocol_verdict"]
        assert (verdict["baseline_runs"], verdict["candidate_runs"]) == (5, 3)
        assert gate["protocol_accepted"] is verdict["accepted"]
        summary = json.loads((root / gate["summary_path"]).read_text(encoding="utf-8"))
        assert summary["candidates"][name]["family_policy_evaluation"]["state"] == fam["state"]
    statuses = settled_statuses(root)
    assert statuses["auto-op-parallel-1"] == "accepted" and statuses["split-mode-3"] == "rejected"
    # the winner became the incumbent with at least the design's incumbent runs
    assert len(runs["O1"]) >= INCUMBENT
    # the report lists every run a side's label counts: the incumbent's extended runs, not the five it was
    # checked for stability with ("基线逐次（15 次干净运行）" over five values before)
    import re

    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    listed = re.findall(r"^  - (?:基线逐次|实验逐次)（(\d+) 次(?:干净运行|门禁运行|补足后)?[^）]*）: (.*) ms$", report, re.M)
    assert listed and any(int(n) == INCUMBENT for n, _ in listed)
    for n, values in listed:
        assert len(values.split(", ")) == int(n), (n, values)
    _assert_the_report_agrees_with_its_verdicts(root, gates, runs["O0-INCUMBENT"])


def _assert_the_report_agrees_with_its_verdicts(root: Path, gates: dict[str, Any], incumbent_runs: list[str]) -> None:
    """The family sweep's report, both languages: each check table is the protocol's checks on the protocol's runs (the
    verdict line beside it), the family policy's own line has its runs and interval, and the O0 table lists every
    incumbent run a gate compared, marking the five the protocol read. The tables used to show the protocol's rules
    over all the family's runs (baseline_min_runs: no) beside "protocol gate: passed", and only five O0 runs."""
    import re

    from sk_analytics.handoff.crosscheck import first_disagreement
    from sk_analytics.report.render import load_view, render_markdown
    from sk_analytics.report.text import TEXT

    assert first_disagreement(root) is None  # the report on disk is the one rendered here from the ledger
    view = load_view(root)
    for lang in ("zh", "en"):
        t = TEXT[lang]
        text = render_markdown(view, lang)
        for name, gate in gates.items():
            section = text[text.index(f"### {name} ·"):]
            section = section[:section.index(f"- {t['evidence']}: ")]
            table = dict(re.findall(r"^\| ([a-z0-9_]+) \| [^|]+ \| (\S+) \|$", section, re.M))
            verdict = gate["protocol_verdict"]
            assert set(table) == set(verdict["checks"]) and table["baseline_min_runs"] == t["yes"]
            assert sorted(k for k, v in table.items() if v == t["no"]) == sorted(verdict["failed_checks"])
            said = t["passed"] if verdict["accepted"] else t["not_passed"]
            assert f"{t['protocol_gate']}: {said}" in section  # the line beside the table: the same verdict
            fam = gate["family"]
            assert t["protocol_view_runs"].format(base=5, cand=3) in section
            estimate = fam["estimate"]
            assert estimate["ci_low_pct"] <= estimate["improvement_pct"] <= estimate["ci_high_pct"]
            assert t["family_figures"].format(
                decision=t["accept"] if fam["accepted"] else t["reject"], base=fam["incumbent_runs"], cand=fam["runs_used"],
                pct=f"{estimate['improvement_pct']:+.2f}%",
                ci=f"[{estimate['ci_low_pct']:+.2f}%, {estimate['ci_high_pct']:+.2f}%]") in section
        o0 = text[text.index(f"## {t['o0_runs']}"):text.index(f"## {t['trials']}")]
        rows = re.findall(r"^\| (run-\d+) \|.*\| (\S+) \|$", o0, re.M)
        assert [run for run, _ in rows] == sorted(incumbent_runs, key=lambda r: int(r.split("-")[1]))
        assert [run for run, used in rows if used == t["yes"]] == [f"run-{k}" for k in range(1, 6)]


def _protocol_runs_evaluation(root: Path, gate: dict[str, Any], candidate_runs: int = 3) -> dict[str, Any]:
    """The option trial of a gate's rounds on the protocol's runs (the baseline's first five, the candidate's first
    three; or its first ``candidate_runs``), evaluated through the public API as the session's protocol gate would (its
    allowances, its sequential cap)."""
    import polars as pl

    from sk_analytics.ingest.timings import read_candidate
    from sk_analytics.option_trial.api import evaluate_option_trial
    from sk_analytics.option_trial.gate import Allowances
    from sk_runner.sweep.session import load_session
    from sk_runner.trial import round_dir_of

    session = load_session(root)
    control, policy = session.control, session.policy

    def first(round_name: str, runs: int) -> pl.DataFrame:
        frame = read_candidate(round_dir_of(root, round_name) / "CLEAN", expected_ranks=control.ranks, warmup=control.warmup, root=root)
        names = sorted(set(frame["run"].to_list()), key=lambda name: int(name.rsplit("-", 1)[1]))[:runs]
        return frame.filter(pl.col("run").is_in(names))

    name = gate["round"]
    summary = evaluate_option_trial(first(gate["baseline_round"], 5), {name: first(name, candidate_runs)}, warmup=control.warmup,
                                    expected_ranks=None,
                                    allowances=Allowances(policy.allow_p90_regression_pct, policy.allow_stddev_regression_pct),
                                    sequential_cap=policy.incumbent_runs)
    found: dict[str, Any] = summary["candidates"][name]
    return found


@pytest.mark.slow
def test_the_protocols_view_of_a_family_session_reads_the_protocols_runs(finished: Path) -> None:
    """Under the family gate every figure of the protocol's view (the statistics policy's column, the advice and the
    statistics line beside the protocol's decision) is the one the first five / three runs give, as the check table's:
    they were computed over all the family policy's runs (13 incumbent runs, up to 30 of the candidate's) and shown
    unlabelled beside the checks on five and three. The family policy's own figures, the console line and the
    settlement reasons say which runs they are on. (The sequential policy's column: the next test.)"""
    import re

    from sk_analytics.explore import gate_decisions
    from sk_analytics.messages import render
    from sk_analytics.report.render import load_view, render_markdown
    from sk_analytics.report.text import TEXT, ci_text

    root = finished
    gates = {r.data["round"]: r.data for r in read_records(root) if r.kind == "gate_result"}
    view = load_view(root)
    decisions = {row["round"]: row for row in gate_decisions(view).iter_rows(named=True)}
    differs = []
    for name, gate in gates.items():
        expected = _protocol_runs_evaluation(root, gate)
        verdict, stats = gate["protocol_verdict"], expected["statistics"]
        assert gate["advice"] == expected["advice"] and gate["advice"]["protocol_accepted"] is verdict["accepted"]
        assert (verdict["verdict"], verdict["ci_pct"]) == (stats["verdict"], stats["ci_pct"])
        assert gate["stats_accepted"] is expected["stats_policy_evaluation"]["accepted"]
        row = decisions[name]
        assert (row["verdict"], [row["ci_low_pct"], row["ci_high_pct"]], row["advice"]) == (stats["verdict"], stats["ci_pct"], gate["advice"]["kind"])
        assert (row["protocol_baseline_runs"], row["protocol_candidate_runs"]) == (5, 3)
        # the gate's own statistics stay on every run it compared (the family policy's runs, which decided)
        everything = json.loads((root / gate["summary_path"]).read_text(encoding="utf-8"))["candidates"][name]
        assert gate["ci_pct"] == everything["statistics"]["ci_pct"] and len(gate["baseline_run_metrics"]) == INCUMBENT
        differs.append(everything["statistics"]["ci_pct"] != stats["ci_pct"])
        nb, nc = len(gate["baseline_run_metrics"]), len(gate["candidate_run_metrics"])
        line = render(gate["summary"], "en")  # the console's line: each side names its runs
        assert f"passed on {nb} incumbent and {nc} candidate runs" in line or f"not passed on {nb} incumbent and {nc} candidate runs" in line
        assert f"on the incumbent's first 5 and the candidate's first 3 runs (mean improvement {verdict['mean_improvement_pct']:+.3f}%" in line
        for lang in ("zh", "en"):
            t = TEXT[lang]
            text = render_markdown(view, lang)
            section = text[text.index(f"### {name} ·"):]
            section = section[:section.index(f"- {t['evidence']}: ")]
            tag = t["on_protocol_runs"].format(base=5, cand=3)
            advice = expected["advice"]["text_zh" if lang == "zh" else "text"]
            assert re.search(rf"^- {re.escape(t['advice'])}\W+{re.escape(tag)}\W+ {re.escape(advice)}$", section, re.M), section
            said = re.search(rf"^- {re.escape(t['stats'])}\W+{re.escape(tag)}\W+ .*$", section, re.M)
            assert said and ci_text(stats["ci_pct"]) in said.group(0), section
            truth = text[text.index(f"## {t['truth']}"):]  # its note names the runs: the next test
            cells = next(line.split(" | ") for line in truth.splitlines() if line.startswith(f"| {name} |"))
            fam = gate["family"]
            runs = t["truth_family"].format(label="", mark="\0", base=fam["incumbent_runs"], cand=fam["runs_used"]).split("\0")[1]
            assert cells[5].endswith(runs) and fam["incumbent_runs"] == INCUMBENT, cells  # the family's decision on its runs
    # the protocol's runs give other figures than all the runs, the case this test is about: every interval
    assert differs and all(differs)
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    for entry in handoff["entries"]:  # the hand-off's reasons quote the family's mean with its runs
        gate = next(g for g in gates.values() if g["entry_id"] == entry["id"])
        assert entry["reason"]["code"] in ("reason.accepted_family_runs", "reason.family_rejected", "reason.family_rejected_why")
        nb, nc = len(gate["baseline_run_metrics"]), len(gate["candidate_run_metrics"])
        assert f"{nb} incumbent and {nc} candidate runs" in render(entry["reason"], "en")


SEQUENTIAL_RECORD = ("accepted", "state", "reason", "runs_used", "candidate_runs_available", "cap", "runs_added_by_gate")
"""A sequential session's ``gate_result.sequential`` (tests/test_sweep_sequential.py reads these)."""


@pytest.mark.slow
def test_a_family_sessions_sequential_column_replays_the_sequential_gate(finished: Path) -> None:
    """Under the family gate the sequential policy's record (the gate's ``sequential``, ``protocol_verdict.sequential``,
    the report's column) is what the sequential gate would have decided on the runs the family gate made in the same
    order: the incumbent's first five, the candidate's 3rd, 4th, 5th run while undecided, at most the runs the family
    policy made. It read exactly three candidate runs, so it said "undecided (3 runs)" where the sequential gate would
    have added a run and decided (this sweep's O1: accepted on its fourth)."""
    from sk_analytics.report.render import load_view, render_markdown
    from sk_analytics.report.text import TEXT

    root = finished
    gates = {r.data["round"]: r.data for r in read_records(root) if r.kind == "gate_result"}
    view = load_view(root)
    texts = {lang: render_markdown(view, lang) for lang in ("zh", "en")}
    changed = []
    for name, gate in gates.items():
        seq, made = gate["sequential"], gate["family"]["candidate_runs_available"]  # the candidate runs the family gate made
        runs = min(POLICY.incumbent_runs, made)
        expected = _protocol_runs_evaluation(root, gate, runs)["sequential_policy_evaluation"]
        assert {k: seq[k] for k in ("state", "accepted", "reason", "runs_used", "cap")} == {
            k: expected[k] for k in ("state", "accepted", "reason", "runs_used", "cap")}
        # recorded as a sequential session records it: decided at a look, it had made the runs up to that look, the
        # runs past the candidate's first three being the ones it would have added
        assert set(seq) == set(SEQUENTIAL_RECORD) and seq["cap"] == POLICY.incumbent_runs == 5 and 3 <= seq["runs_used"] <= runs
        assert seq["candidate_runs_available"] == (runs if seq["state"] == "undecided" else seq["runs_used"])
        assert seq["runs_added_by_gate"] == seq["candidate_runs_available"] - 3
        verdict = gate["protocol_verdict"]
        assert verdict["sequential"] == seq and verdict["sequential_baseline_runs"] == 5
        assert (verdict["baseline_runs"], verdict["candidate_runs"]) == (5, 3)  # the protocol's own runs are still five / three
        candidate = json.loads((root / gate["summary_path"]).read_text(encoding="utf-8"))["candidates"][name]
        replay = candidate["sequential_replay"]  # the evidence: the replay's looks, as a sequential gate writes them
        assert replay["looks"] == expected["looks"] and {k: replay[k] for k in SEQUENTIAL_RECORD} == seq
        three = _protocol_runs_evaluation(root, gate, 3)["sequential_policy_evaluation"]
        changed.append((name, (three["state"], three["runs_used"]) != (seq["state"], seq["runs_used"]),
                        candidate["sequential_policy_evaluation"]["state"] != seq["state"]))
        for lang, text in texts.items():
            t = TEXT[lang]
            truth = text[text.index(f"## {t['truth']}"):]
            assert t["truth_note_family_replay"].format(base=5, cand=3, seq_base=5, first=3, cap=5) in truth
            cells = next(line.split(" | ") for line in truth.splitlines() if line.startswith(f"| {name} |"))
            state = t["undecided"] if seq["state"] == "undecided" else (t["accept"] if seq["accepted"] else t["reject"])
            assert cells[4].startswith(state) and cells[4].endswith(t["seq_runs"].format(n=seq["runs_used"])), cells
    # the case this test is about: a round where three runs left the sequential gate undecided and the replay decided
    # (and the record is not the evaluation over all the family's runs either: there the preconditions fail)
    assert ("O1", True, True) in changed, changed
    assert gates["O1"]["sequential"]["state"] == "accepted" and gates["O1"]["sequential"]["runs_used"] == 4
    # a record from before the replay (no sequential_baseline_runs: its sequential on the first five / three) keeps
    # the note that says so
    for info in view.rounds.values():
        if info.gate is not None:
            verdict = {k: v for k, v in info.gate["protocol_verdict"].items() if k != "sequential_baseline_runs"}
            info.gate = {**info.gate, "protocol_verdict": verdict}
    for lang in ("zh", "en"):
        t, text = TEXT[lang], render_markdown(view, lang)
        assert t["truth_note_family"].format(base=5, cand=3) in text
        assert t["truth_note_family_replay"].format(base=5, cand=3, seq_base=5, first=3, cap=5) not in text


@pytest.mark.slow
def test_the_sequential_replay_stops_at_the_look_that_decided(finished: Path) -> None:
    """Replayed on more candidate runs than the sequential gate would have read (O1 now has the new incumbent's ten), the
    record is the gate's: the look that decided is the last run it reads and the runs it had, not the five it was shown."""
    from sk_analytics.stage_o.actions import Gate
    from sk_runner.sweep.executor import Executor
    from sk_runner.sweep.session import load_session

    root = finished
    gate = next(r.data for r in read_records(root) if r.kind == "gate_result" and r.data["round"] == "O1")
    assert len(runs_per_round(root)["O1"]) > 5 and gate["sequential"]["runs_used"] < 5
    on_five = _protocol_runs_evaluation(root, gate, 5)["sequential_policy_evaluation"]
    assert (on_five["runs_used"], on_five["candidate_runs_available"]) == (gate["sequential"]["runs_used"], 5)
    session = load_session(root)
    replay = Executor(session, session.backend.build())._sequential_replay(Gate("O1", gate["baseline_round"], gate["entry_id"]))
    assert {k: replay[k] for k in SEQUENTIAL_RECORD} == gate["sequential"]


def test_a_family_record_from_before_the_protocols_view_keeps_its_words() -> None:
    """A family gate record written before its protocol_verdict carried the statistics (no ``verdict``) has its advice,
    sequential record and statistics over all the family's runs: the report does not label them the protocol's, the
    line under the check table names the checks only, and its console line is the gate's as it was."""
    from sk_analytics.messages import render
    from sk_analytics.report.render import _decision_line, _protocol_runs_tag
    from sk_analytics.report.text import TEXT
    from sk_runner.sweep.executor import _gate_summary

    old = {"round": "O1", "baseline_round": "O0-INCUMBENT", "gate_mode": "family", "gate_is_protocol": False, "accepted": True,
           "protocol_accepted": True, "mean_improvement_pct": 3.0, "verdict": "win", "stats_accepted": True,
           "baseline_run_metrics": [1.0] * 13, "candidate_run_metrics": [0.97] * 6,
           "protocol_verdict": {"accepted": True, "baseline_runs": 5, "candidate_runs": 3, "mean_improvement_pct": 3.1, "ci_pct": [1.0, 5.0]},
           "family": {"accepted": True, "incumbent_runs": 13, "runs_used": 6, "estimate": {}}}
    new = {**old, "protocol_verdict": {**old["protocol_verdict"], "verdict": "win", "sequential": None}}
    for lang in ("zh", "en"):
        t = TEXT[lang]
        assert _protocol_runs_tag(old, lang) == "" and t["on_protocol_runs"].format(base=5, cand=3) in _protocol_runs_tag(new, lang)
        assert _decision_line(old, lang)[1] == "  - " + t["protocol_runs"].format(base=5, cand=3)
        assert _decision_line(new, lang)[1] == "  - " + t["protocol_view_runs"].format(base=5, cand=3)
    assert _gate_summary(old)["code"] == "summary.gate"
    said = render(_gate_summary(new), "en")
    assert said.startswith("O1 against O0-INCUMBENT: family policy (not the protocol) passed on 13 incumbent and 6 candidate runs")
    assert "protocol gate passed on the incumbent's first 5 and the candidate's first 3 runs (mean improvement +3.100%" in said
    assert _gate_summary({**new, "family": None, "gate_mode": "protocol", "gate_is_protocol": True})["code"] == "summary.gate"


def test_family_gate_policy_fields(tmp_path: Path) -> None:
    from test_sweep_phase import _write

    from sk_runner.sweep.phase import validate_task

    task = tmp_path / "task.json"
    with pytest.raises(InputError, match="budget_runs cannot be combined with policy/gate family"):
        _policy({"gate": "family", "budget_runs": 40}, task)
    for bad in (-1, "1%", 101):  # the task's schema types and bounds the field
        with pytest.raises(InputError, match="min_effect_pct"):
            validate_task(_write(tmp_path, policy={"gate": "family", "min_effect_pct": bad}))
    policy = validate_task(_write(tmp_path, policy={"gate": "family", "min_effect_pct": 2})).policy
    assert policy.gate == "family" and policy.min_effect_pct == 2.0 and policy.to_json()["min_effect_pct"] == 2.0
    # a task that does not choose keeps the protocol and the session identity of sessions made before the field
    default = _policy(None, task)
    assert default.gate == "protocol" and "min_effect_pct" not in default.to_json()


def test_the_plan_states_the_family_caps_up_front(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_sweep_phase import _write

    from sk_analytics.cli._base import run_cli
    from sk_analytics.stage_o.matrix import protocol_candidates
    from sk_runner.cli import cli

    task = _write(tmp_path, policy={"risky_timeout_s": 5.0, "gate": "family", "min_effect_pct": 1.5})
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    out = capsys.readouterr().out
    plan = json.loads(out[out.index("{"):])["gate_policy"]
    entries = len(protocol_candidates())
    assert plan["policy"] == "family" and plan["entries"] == entries and plan["min_effect_pct"] == 1.5
    assert plan["cap_runs_per_session"] == plan["incumbent_runs"] + entries * plan["cap_runs_per_entry"]
    assert plan["entry_level_one_sided"] == pytest.approx(0.05 / entries)


@pytest.mark.slow
def test_family_gate_interrupted_after_extending_the_incumbent_resumes_to_the_same_result(
        tmp_path: Path, finished: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C right after the incumbent was extended (before any gate record): the resume accepts an incumbent
    with more than five runs, extends nothing again and ends as an uninterrupted sweep does."""
    from sweep_helpers import sweep_outcome

    import sk_runner.sweep.executor as executor
    from sk_analytics.handoff.crosscheck import first_disagreement
    from sk_runner.sweep.session import load_session

    entries, policy, reference = ENTRIES, POLICY, finished
    real = executor.run_trial

    def interrupted(spec, progress=None):  # type: ignore[no-untyped-def]
        result = real(spec, progress)
        if spec.round == "O0-INCUMBENT" and spec.top_up_to == INCUMBENT:
            raise KeyboardInterrupt
        return result

    root = tmp_path / "s"
    monkeypatch.setattr(executor, "run_trial", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(small_session(root, entries, noise=1.0, policy=policy, seed=SEED), say=lambda _: None)
    assert len(runs_per_round(root)["O0-INCUMBENT"]) == INCUMBENT
    assert not any(r.kind == "gate_result" for r in read_records(root))
    monkeypatch.setattr(executor, "run_trial", real)
    run_sweep(load_session(root), say=lambda _: None)
    assert sweep_outcome(root) == sweep_outcome(reference)
    assert len(runs_per_round(root)["O0-INCUMBENT"]) == INCUMBENT
    assert first_disagreement(root) is None


@pytest.mark.slow
def test_family_gate_killed_inside_an_incumbent_run_resumes_to_the_same_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL (or a power loss) while the gate extends the incumbent leaves a run folder without meta.json
    (its stdout and stderr only): the resumed gate reads the complete runs only, sets the half-made one aside
    as a resumed trial does, makes it again and ends as an uninterrupted sweep does (it stopped with exit 2,
    "found 0 rank logs", before)."""
    from sweep_helpers import sweep_outcome

    import sk_runner.sweep.executor as executor
    from sk_analytics.handoff.crosscheck import first_disagreement
    from sk_runner.sweep.session import load_session
    from sk_runner.trial import round_dir_of

    entries, policy = ["auto-op-parallel-1", "split-mode-3"], replace(FAST_POLICY, gate="family")
    reference = tmp_path / "reference"
    run_sweep(small_session(reference, entries, noise=1.0, policy=policy), say=lambda _: None)
    real = executor.run_trial

    def killed(spec, progress=None):  # type: ignore[no-untyped-def]
        if spec.round == "O0-INCUMBENT" and spec.top_up_to == INCUMBENT:  # all but the last run, then the kill
            real(replace(spec, top_up_to=INCUMBENT - 1), progress)
            half = round_dir_of(spec.session, spec.round) / "CLEAN" / f"run-{INCUMBENT}"
            half.mkdir()
            for name in ("stdout.txt", "stderr.txt"):
                (half / name).write_bytes(b"")
            raise KeyboardInterrupt  # stands for the SIGKILL: nothing of sk-run tidies up after it
        return real(spec, progress)

    root = tmp_path / "s"
    monkeypatch.setattr(executor, "run_trial", killed)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(small_session(root, entries, noise=1.0, policy=policy), say=lambda _: None)
    assert not any(r.kind == "gate_result" for r in read_records(root))
    monkeypatch.setattr(executor, "run_trial", real)
    run_sweep(load_session(root), say=lambda _: None)
    assert sweep_outcome(root) == sweep_outcome(reference)
    assert len(runs_per_round(root)["O0-INCUMBENT"]) == INCUMBENT
    aside = list((round_dir_of(root, "O0-INCUMBENT") / "INCOMPLETE").iterdir())
    assert [p.name.rsplit("-", 1)[0] for p in aside] == [f"run-{INCUMBENT}"]
    assert first_disagreement(root) is None


@pytest.mark.slow
def test_runs_the_gate_discards_for_a_foreign_process_reach_the_hand_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean run the family gate adds (the incumbent's extension) and the lease's proof discards has no trial_result
    of its own: the gate record carries it, so the hand-off's `devices.discarded_runs` and the report name it (they
    said none while the run lay in INCOMPLETE/ and foreign-processes.jsonl)."""
    seen = _discard_the_incumbents_last_extension_run(monkeypatch)
    root = tmp_path / "s"
    run_sweep(small_session(root, ["auto-op-parallel-1"], policy=replace(FAST_POLICY, gate="family")), say=lambda _: None)
    gate = next(r.data for r in read_records(root) if r.kind == "gate_result")
    assert gate["foreign_processes"] == [dict(seen, round="O0-INCUMBENT")]
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    assert handoff["devices"]["discarded_runs"] == [dict(seen, round="O0-INCUMBENT")]
    assert "intruder" in (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_failed_run_of_the_incumbents_extension_stops_the_session_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The family gate extends the incumbent to the runs its boundaries assume; a run of that extension that fails
    (here a rank of the last of the ten planned ends early: a crash) stops the session with a reason naming the round, the runs planned and
    made and the failure (an incumbent failing a clean run is no baseline, as a failed O0 is not). Before, the gate
    went on and decided on the nine runs there were, exit 0, saying nothing."""
    from sk_analytics.ledger.chain import verify
    from sk_analytics.messages import render
    from sk_runner.trial import round_dir_of
    from sk_runner.trial.state import TrialState

    planned, made = INCUMBENT, INCUMBENT - 1
    classify = TrialState.classify

    def failing(self, result, run_dir, *, need_correctness):  # type: ignore[no-untyped-def]
        if self.spec.round == "O0-INCUMBENT" and run_dir.name == f"run-{planned}":  # a rank of the last run ends early
            (run_dir / "log_1.log").write_text("", encoding="utf-8")
        return classify(self, result, run_dir, need_correctness=need_correctness)

    root, lines = tmp_path / "s", []
    monkeypatch.setattr(TrialState, "classify", failing)
    outcome = run_sweep(small_session(root, ENTRIES, policy=POLICY), say=lines.append, lang="en")
    assert outcome is not None and outcome.outcome == "stopped"
    records = read_records(root)
    assert not any(r.kind == "gate_result" for r in records)  # nothing was decided on fewer incumbent runs
    ext = next(r.data for r in records if r.kind == "trial_result" and r.data["phase"] == "incumbent_extension")
    assert (ext["round"], ext["entry_id"], ext["gate_round"], ext["ok"]) == ("O0-INCUMBENT", "auto-op-parallel-1", "O1", False)
    assert (ext["runs_planned"], ext["runs_before"], ext["runs_total"], ext["runs_added"]) == (planned, 5, made, made - 5)
    assert ext["failure"]["stage"] == "crash" and ext["failure"]["scene"]
    assert len(runs_per_round(root)["O0-INCUMBENT"]) == made and not (round_dir_of(root, "O1") / "option-trial-summary.json").exists()
    stopped = next(r.data for r in records if r.kind == "session_stopped")
    assert stopped["reason"]["code"] == "reason.incumbent_extension_failed"
    assert stopped["evidence"]["runs_planned"] == planned and stopped["evidence"]["runs_made"] == made
    assert stopped["evidence"]["scene"] == ext["failure"]["scene"]
    reason = render(stopped["reason"], "en")
    assert f"{made} of {planned} planned incumbent runs" in reason and "O0-INCUMBENT" in reason and "O1" in reason
    said = "\n".join(lines)
    assert "→ O0-INCUMBENT (incumbent extension) failed: 9 clean runs; process crash" in said
    assert f"[stop] {reason}" in said
    assert reason in (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    assert handoff["outcome"] == "stopped"
    assert verify(root).ok


@pytest.mark.slow
def test_a_gate_resumed_from_its_summary_records_the_runs_its_extension_discarded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the family gate wrote option-trial-summary.json and before its gate_result record: the resumed
    gate reads that summary, and its record carries the runs the lease's proof discarded while the gate extended the
    incumbent, as the uninterrupted gate's record does (it said none: they stayed only in foreign-processes.jsonl)."""
    import os

    from sk_analytics.files import io_seam
    from sk_runner.sweep.session import load_session

    seen = _discard_the_incumbents_last_extension_run(monkeypatch)

    def gate_of(root: Path) -> dict[str, Any]:
        return next(r.data for r in read_records(root) if r.kind == "gate_result")

    entries = ["auto-op-parallel-1"]
    reference = tmp_path / "reference"
    run_sweep(small_session(reference, entries, policy=POLICY), say=lambda _: None)
    due, written = io_seam._due, []

    def killed(site: str, path: Any) -> Any:
        if site == "atomic" and os.path.basename(path) == "option-trial-summary.json":
            written.append(path)
        elif written and site == "ledger":  # the gate's record, right after its summary
            raise KeyboardInterrupt
        return due(site, path)

    root = tmp_path / "s"
    monkeypatch.setattr(io_seam, "_due", killed)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(small_session(root, entries, policy=POLICY), say=lambda _: None)
    monkeypatch.setattr(io_seam, "_due", due)
    assert len(written) == 1 and not any(r.kind == "gate_result" for r in read_records(root))
    run_sweep(load_session(root), say=lambda _: None)
    assert gate_of(root)["foreign_processes"] == gate_of(reference)["foreign_processes"] == [dict(seen, round="O0-INCUMBENT")]
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    assert handoff["devices"]["discarded_runs"] == [dict(seen, round="O0-INCUMBENT")]


@pytest.mark.slow
def test_a_failed_run_the_gate_added_to_the_candidate_settles_the_entry_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The family policy, undecided at three runs of O1 (the shared sweep's seed), adds a fourth, which crashes: the
    candidate failed a clean run, a failed trial (protocol §5.6), so the entry settles failed naming the run, the runs
    made and the failure with its scene, and the next entry runs against the unchanged incumbent. Before, the gate
    stopped adding and decided on the three runs there were, exit 0, saying nothing of the crash."""
    root, lines = tmp_path / "s", []
    failing_run(monkeypatch, "O1", 4)
    outcome = run_sweep(small_session(root, ENTRIES, noise=1.0, policy=POLICY, seed=SEED), say=lines.append, lang="en")
    assert outcome is not None and outcome.outcome == "base"
    assert_settled_failed_on_the_added_run(root, lines, "family")


@pytest.mark.slow
def test_a_sweep_killed_after_the_failed_added_run_is_recorded_resumes_to_the_same_settlement(tmp_path: Path,
                                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed after the failed ``gate_extension`` record and before the entry settled: the resumed sweep settles the
    entry failed on that record (no gate decides the round) and goes on as the uninterrupted one."""
    from sk_analytics.files import io_seam
    from sk_runner.sweep.session import load_session

    failing_run(monkeypatch, "O1", 4)
    due, killed_at = io_seam._due, []

    def killed(site: str, path: Any) -> Any:
        if site == "ledger" and not killed_at and any(
                r.kind == "trial_result" and r.data["phase"] == "gate_extension" for r in read_records(root)):
            killed_at.append(path)  # the next record, the entry's settlement, is never written
            raise KeyboardInterrupt
        return due(site, path)

    root = tmp_path / "s"
    monkeypatch.setattr(io_seam, "_due", killed)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(small_session(root, ENTRIES, noise=1.0, policy=POLICY, seed=SEED), say=lambda _: None)
    monkeypatch.setattr(io_seam, "_due", due)
    assert killed_at and not any(r.kind == "entry_settled" for r in read_records(root))
    lines: list[str] = []
    outcome = run_sweep(load_session(root), say=lines.append, lang="en")
    assert outcome is not None and outcome.outcome == "base"
    assert sum(r.kind == "trial_result" and r.data["phase"] == "gate_extension" for r in read_records(root)) == 1
    lines.append("→ O1 (gate extension) failed: 3 clean runs; process crash")  # said by the first life, before the kill
    assert_settled_failed_on_the_added_run(root, lines, "family")


@pytest.mark.slow
@pytest.mark.parametrize(("gate", "kill"), [("sequential", "after_the_result"), ("family", "after_the_seal")])
def test_a_sweep_killed_between_the_failed_added_run_and_its_record_settles_it_without_retrying(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: str, kill: str) -> None:
    """Killed after the gate's added run 4 of O1 failed and its scene was sealed, before its ``gate_extension`` record
    (``after_the_result``: the trial returned the failure, its run folder set aside; ``after_the_seal``: right after the
    scene, the folder still in CLEAN/): the resumed gate finds the sealed scene and records the failure the first life
    would have recorded (kind, words, scene; the message names the set-aside folder), and the entry settles ``failed``.
    Before, it made run 4 again: here that run succeeds (the crash was the first life's), so the gate decided a round
    that had failed a clean run."""
    from sk_analytics.handoff.crosscheck import first_disagreement
    from sk_analytics.messages import coded, render
    from sk_runner.sweep.session import load_session
    from sk_runner.trial import round_dir_of

    failing_run(monkeypatch, "O1", 4)
    returned = killed_after_the_result(monkeypatch, "O1") if kill == "after_the_result" else []
    if kill == "after_the_seal":
        killed_after_the_seal(monkeypatch, "O1", "run-4")
    root, policy = tmp_path / "s", replace(FAST_POLICY, gate=gate)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(small_session(root, ENTRIES, noise=1.0, policy=policy, seed=SEED), say=lambda _: None)
    assert not any(r.kind == "trial_result" and r.data["phase"] == "gate_extension" for r in read_records(root))
    o1 = round_dir_of(root, "O1")
    assert (o1 / "CLEAN" / "run-4").is_dir() == (kill == "after_the_seal")  # the failed run, not yet set aside
    monkeypatch.undo()  # run 4 made again would succeed now
    lines: list[str] = []
    outcome = run_sweep(load_session(root), say=lines.append, lang="en")
    assert outcome is not None and outcome.outcome == "base"
    assert_settled_failed_on_the_added_run(root, lines, gate)
    records = read_records(root)
    failure = next(r.data for r in records if r.kind == "trial_result" and r.data["phase"] == "gate_extension")["failure"]
    [scene] = list((o1 / "FAILURE_SCENES").iterdir())  # run 4 was not made again: no second scene, no run-4 meta.json
    assert failure["scene"] == scene.relative_to(root).as_posix() and not (o1 / "CLEAN" / "run-4").exists()
    [aside] = list((o1 / "INCOMPLETE").iterdir())
    if returned:  # what the uninterrupted gate records of the trial the first life returned
        first = returned[0]
        assert failure == {"stage": first.outcome, "message": first.message, "words": first.words,
                           "scene": first.scene_dir.relative_to(root.resolve()).as_posix()}
    words = json.loads((scene / "scene.json").read_text(encoding="utf-8"))["observable_failure"]["words"]
    assert failure["words"] == coded("runner.in_run", run="run-4", message=words)
    assert failure["message"] == f"run-4: {render(words, 'en')}" and failure["stage"] == "crash" and aside.name.startswith("run-4-")
    assert first_disagreement(root) is None  # the report and the hand-off say what the ledger holds


@pytest.mark.slow
def test_a_sweep_killed_between_a_failed_incumbent_extension_run_and_its_record_stops_as_it_would_have(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The family gate's extension of the incumbent fails at run 8 (runs 6 and 7 made) and the sweep is killed before
    its ``incumbent_extension`` record: the resumed gate records the sealed failure with the runs the uninterrupted gate
    counts (5 before it, 7 made: it counted the runs on disk, 7, as the runs before), and the session stops on it."""
    from sk_runner.sweep.session import load_session

    failing_run(monkeypatch, "O0-INCUMBENT", 8)
    returned = killed_after_the_result(monkeypatch, "O0-INCUMBENT")
    root = tmp_path / "s"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(small_session(root, ENTRIES, policy=POLICY), say=lambda _: None)
    monkeypatch.undo()  # run 8 made again would succeed now
    outcome = run_sweep(load_session(root), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "stopped"
    records = read_records(root)
    ext = next(r.data for r in records if r.kind == "trial_result" and r.data["phase"] == "incumbent_extension")
    assert (ext["runs_planned"], ext["runs_before"], ext["runs_total"], ext["runs_added"]) == (INCUMBENT, 5, 7, 2)
    first = returned[0]
    assert ext["failure"] == {"stage": first.outcome, "message": first.message, "words": first.words,
                              "scene": first.scene_dir.relative_to(root.resolve()).as_posix()}
    assert len(runs_per_round(root)["O0-INCUMBENT"]) == 7 and not any(r.kind == "gate_result" for r in records)
    assert next(r.data for r in records if r.kind == "session_stopped")["reason"]["code"] == "reason.incumbent_extension_failed"


def _discard_the_incumbents_last_extension_run(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Make the lease's proof report the incumbent's extension run ``run-INCUMBENT`` discarded (a foreign process on
    NPU 1, as the simulated registry names one); the sighting it reports."""
    import sk_runner.sweep.executor as executor

    real = executor.run_trial
    seen = {"kind": "foreign_process_on_device", "action": "discarded", "run": f"run-{INCUMBENT}", "attempt": 1,
            "phase": "after", "devices": [0, 1], "processes": [{"device": 1, "pid": 4343, "command": "intruder",
                                                               "source": "sim-registry", "memory_mb": None}]}

    def discarding(spec, progress=None):  # type: ignore[no-untyped-def]
        result = real(spec, progress)
        if spec.round == "O0-INCUMBENT" and spec.top_up_to == INCUMBENT:  # what the proof reports of a discarded run
            result.foreign.append(dict(seen))
        return result

    monkeypatch.setattr(executor, "run_trial", discarding)
    return seen
