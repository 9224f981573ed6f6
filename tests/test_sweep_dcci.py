"""Every DCCI path of protocol §6 end to end on the simulator, checked against its ground truth."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from sweep_helpers import SHORT_PROFILE_POLICY, settled_statuses, small_session

from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import read_records, verify
from sk_analytics.messages import render
from sk_runner.backends.base import RunRequest
from sk_runner.sim.network import load_network
from sk_runner.sim.truth import ground_truth
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import BackendSpec, load_session

pytestmark = pytest.mark.slow
ROOT = "/super_kernel_optimize_options"


@pytest.fixture(autouse=True)
def _stable_source_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collections record the git state of this checkout; other work editing it during
    the test would make the two sides' source revisions differ (a real contract violation
    that a user's frozen build never has). Pin it for the test."""
    import sk_runner.profile.engine as profile

    monkeypatch.setattr(profile, "source_revision", lambda path, files=(): {"revision": "pinned-for-test"})


def _kinds(root: Path) -> list[str]:
    return [r.kind for r in read_records(root)]


def _settled(root: Path) -> dict:
    return next(r.data for r in read_records(root) if r.kind == "entry_settled")


def test_regression_then_repair_accepted_as_combination(tmp_path: Path) -> None:
    truth = ground_truth(load_network("moe-decode"))["dcci"]
    assert truth["disable_all"]["class"] == "regression" and truth["repair"]["beats_o0"]
    root = tmp_path / "s"
    run_sweep(small_session(root, ["dcci-disable-all"], network="moe-decode", policy=SHORT_PROFILE_POLICY), say=lambda _: None)
    assert settled_statuses(root) == {"dcci-disable-all": "accepted"}
    diff = next(r.data for r in read_records(root) if r.kind == "dcci_diff_result")
    assert diff["patterns"] == truth["repair"]["patterns"]  # exactly the regressed children's ops
    settled = _settled(root)
    assert [c["pointer"] for c in settled["accepted_changes"]] == [
        f"{ROOT}/dcci_disable_on_kernel", f"{ROOT}/dcci_before_kernel_start", f"{ROOT}/dcci_after_kernel_end"]
    gates = [r.data for r in read_records(root) if r.kind == "gate_result"]
    assert [(g["round"], g["baseline_round"], g["accepted"]) for g in gates] == [("O1", "O0-INCUMBENT", False), ("O2", "O0-INCUMBENT", True)]
    diff_json = load_json_file(root / "experiments/Sbest/O2/config.diff.json")
    assert sorted(op["path"] for op in diff_json) == [f"{ROOT}/dcci_after_kernel_end", f"{ROOT}/dcci_before_kernel_start"]
    base = load_json_file(root / "BASE/sbest-base.json")
    assert base["options"] == {"dcci_disable_on_kernel": [".*"], "dcci_before_kernel_start": truth["repair"]["patterns"],
                               "dcci_after_kernel_end": truth["repair"]["patterns"]}
    profiles = [r.data for r in read_records(root) if r.kind == "profile_result"]
    assert [(p["side"], p["role"], p["ok"]) for p in profiles] == [("o0", "baseline_profile", True), ("disable_all", "candidate_profile", True)]
    for p in profiles:
        assert (root / p["root"] / "collection-manifest.json").is_file() or any((root / p["root"]).iterdir())
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert "disable+before+after（O2）" in report and "相关不等于根因" in report
    assert (root / "report.html").read_text(encoding="utf-8").count("<svg") == 2
    assert verify(root).ok


def test_repair_not_better_than_o0_rejects_family(tmp_path: Path) -> None:
    truth = ground_truth(load_network("dcci-unrepairable"))["dcci"]
    assert truth["disable_all"]["class"] == "regression" and not truth["repair"]["beats_o0"]
    root = tmp_path / "s"
    run_sweep(small_session(root, ["dcci-disable-all", "split-mode-3"], network="dcci-unrepairable", policy=SHORT_PROFILE_POLICY),
              say=lambda _: None)
    assert settled_statuses(root)["dcci-disable-all"] == "rejected"
    settled = _settled(root)
    assert settled["family_rejected"] and "相对 disable-all 的恢复不构成接受" in render(settled["reason"], "zh")
    # the next entry's trial starts again from O0
    trials = [r.data for r in read_records(root) if r.kind == "trial_result" and r.data["entry_id"] == "split-mode-3"]
    assert trials[0]["base_round"] == "O0-INCUMBENT"


def test_gain_accepted_without_diagnosis(tmp_path: Path) -> None:
    assert ground_truth(load_network("dcci-gain"))["dcci"]["disable_all"]["class"] == "gain"
    root = tmp_path / "s"
    run_sweep(small_session(root, ["dcci-disable-all"], network="dcci-gain"), say=lambda _: None)
    assert settled_statuses(root) == {"dcci-disable-all": "accepted"}
    kinds = _kinds(root)
    assert "profile_result" not in kinds and "dcci_diff_result" not in kinds
    assert load_json_file(root / "BASE/sbest-base.json")["options"] == {"dcci_disable_on_kernel": [".*"]}


def test_noise_level_rejects_family_without_before_after(tmp_path: Path) -> None:
    assert ground_truth(load_network("dcci-neutral"))["dcci"]["disable_all"]["class"] == "neutral"
    root = tmp_path / "s"
    # realistic run-to-run noise: a -0.05 % effect is inside it (seeded, so the run is reproducible)
    run_sweep(small_session(root, ["dcci-disable-all"], network="dcci-neutral", noise=1.0), say=lambda _: None)
    settled = _settled(root)
    assert (settled["status"], settled["family_rejected"]) == ("rejected", True) and "噪声带" in render(settled["reason"], "zh")
    assert not any(k in _kinds(root) for k in ("profile_result", "dcci_diff_result", "probe_result"))
    assert len([k for k in _kinds(root) if k == "trial_result"]) == 2  # O0 and disable-all only


FAILING_WORKLOAD = '''
import json, os, subprocess, sys
config, run_dir, seed = sys.argv[1:4]
options = json.load(open(config)).get("super_kernel_optimize_options", {})
if options.get("dcci_disable_on_kernel") and os.environ.get("ASCEND_OP_COMPILE_SAVE_KERNEL_META") != "1":
    print("EZ9999: aicore exception after dcci_disable_on_kernel (injected by the test workload)", file=sys.stderr)
    sys.exit(1)
sys.exit(subprocess.call([sys.executable, "-m", "sk_runner.sim", "--config", config, "--run-dir", run_dir,
                          "--ranks", os.environ["SK_RUN_RANKS"], "--seed", seed, "--iterations", "30", "--noise", "0"]))
'''


def test_failure_seals_scene_and_rejects_family(tmp_path: Path) -> None:
    script = tmp_path / "workload.py"
    script.write_text(FAILING_WORKLOAD, encoding="utf-8")
    backend = BackendSpec("command", command=(sys.executable, str(script), "{config}", "{run_dir}", "{seed}"))
    root = tmp_path / "s"
    run_sweep(small_session(root, ["dcci-disable-all"], backend=backend), say=lambda _: None)
    settled = _settled(root)
    assert (settled["status"], settled["family_rejected"]) == ("failed", True)
    scene = root / settled["evidence"]["scene"]
    assert (scene / "scene.json").is_file() and "EZ9999" in (scene / "scene.md").read_text(encoding="utf-8") + str(
        load_json_file(scene / "scene.json"))
    assert "profile_result" not in _kinds(root)  # a failure is never a regression diagnosis entry


def test_buffer_full_on_one_side_recollects_the_other_at_the_same_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both collections ask for the same 1024 KB sk_prof buffer, but on the disable-all side the
    simulated device holds only 256 KB per core (as if disable-all produced four times the events):
    its 40-iteration window overflows (moe-decode: 14160 events on the busiest core, 8192 fit) and is
    re-collected at 20. O0 completed at 40, so the sweep re-collects O0 into a new root at 20 and the
    pair validates. The sweep is interrupted just before that re-collection and resumed from the ledger."""
    from sk_runner.backends.sim import SimBackend

    real_argv = SimBackend.argv

    def device_with_small_buffer_for_disable_all(self: SimBackend, request: RunRequest) -> list[str]:
        argv = real_argv(self, request)
        if "ASCEND_PROF_SK_ON" in request.extra_env and "candidate_profile" in request.run_dir.parts:
            return ["env", "ASCEND_PROF_SK_ON=256", *argv]
        return argv

    monkeypatch.setattr(SimBackend, "argv", device_with_small_buffer_for_disable_all)

    class Interrupted(Exception):
        pass

    def interrupt(action: object) -> None:
        if getattr(action, "side", None) == "o0" and getattr(action, "attempt", None) == 2:
            raise Interrupted

    root = tmp_path / "s"
    with pytest.raises(Interrupted):
        run_sweep(small_session(root, ["dcci-disable-all"], network="moe-decode"), say=lambda _: None, on_action=interrupt)
    run_sweep(load_session(root), say=lambda _: None)
    profiles = [r.data for r in read_records(root) if r.kind == "profile_result"]
    assert [(p["side"], p["attempt"], p["ok"], p["requested_iterations"], p["iterations"]) for p in profiles] == [
        ("o0", 1, True, None, 40), ("disable_all", 1, True, 40, 20), ("o0", 2, True, 20, 20)]
    assert len(profiles[1]["attempts"]) == 2  # disable-all: 40 overflowed, 20 complete
    roots = [a for p in profiles for a in p["attempts"]]
    assert len(set(roots)) == 4  # every collection in its own new root
    diff = next(r.data for r in read_records(root) if r.kind == "dcci_diff_result")
    assert diff["ok"] and diff["patterns"] == ground_truth(load_network("moe-decode"))["dcci"]["repair"]["patterns"]
    assert settled_statuses(root) == {"dcci-disable-all": "accepted"}
    assert verify(root).ok
