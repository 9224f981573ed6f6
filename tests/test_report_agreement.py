"""One truth from report to notebook: every number of EXPERIMENT_REPORT.md (zh and en) and of report.html's
tables is a value of the explore API over the same session, shown to the precision printed (issue 27)."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from sweep_helpers import FAST_POLICY, settled_statuses, small_session

from sk_analytics import explore as ex
from sk_analytics.handoff.outputs import REPORT_HTML, REPORT_MD, report_texts
from sk_analytics.ledger.chain import read_records
from sk_analytics.session_view import SessionView
from sk_runner.sweep.driver import run_sweep

PROFILE_ITERATIONS = 14
DECIMAL = re.compile(r"(?<![\w.])[+\-]?\d+\.\d+(?![\w.])")
CODE = re.compile(r"`[^`]*`")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A simulator session with noisy runs, an accepted and a rejected option, and DCCI's regression ->
    diagnosis -> repair accepted and topped up to five runs (gate runs ≠ all clean runs)."""
    from sk_runner.profile import engine as profile

    root = tmp_path_factory.mktemp("agree") / "session"
    with pytest.MonkeyPatch.context() as patch:  # pin the collections' source revision (see test_sweep_dcci)
        patch.setattr(profile, "source_revision", lambda path, files=(): {"revision": "pinned-for-test"})
        policy = dataclasses.replace(FAST_POLICY, profile_iterations=PROFILE_ITERATIONS)  # as short as the demo's
        run_sweep(small_session(root, ["dcci-disable-all", "auto-op-parallel-1", "split-mode-3"], network="moe-decode", noise=0.5,
                                policy=policy), say=lambda _: None)
    assert settled_statuses(root) == {"dcci-disable-all": "accepted", "auto-op-parallel-1": "accepted", "split-mode-3": "rejected"}
    yield root


def explore_values(view: SessionView) -> list[float]:
    """Every number the explore API gives for the session (frames a notebook reads)."""
    diff = view.dcci_diff or {}
    frames = [ex.round_metrics(view), ex.gate_sides(view), ex.gate_decisions(view), ex.gate_checks(view), ex.o0_runs(view),
              ex.accepted_path(view), ex.simulator_truth(view), ex.dcci_structures(diff)]
    values: list[float] = []
    for frame in frames:
        for name, dtype in frame.schema.items():
            if dtype.is_float():
                values += [v for v in frame[name].to_list() if v is not None]
            elif dtype == pl.List(pl.Float64):
                values += [v for row in frame[name].to_list() for v in row]
    return values


def unexplained(text: str, values: list[float]) -> list[str]:
    """Decimal numbers of ``text`` (outside code spans) that no explore value rounds to at their printed precision."""
    missing = []
    for token in DECIMAL.findall(CODE.sub("", text)):
        decimals = len(token.split(".")[1])
        shown = float(token)
        if not any(abs(v - shown) <= 0.5 * 10 ** -decimals + 1e-9 for v in values):
            missing.append(token)
    return missing


def html_text(page: str) -> str:
    """report.html without its SVG drawings (axis ticks are not data) and without tags."""
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<svg.*?</svg>", " ", page, flags=re.S)))


def test_every_number_of_the_report_is_an_explore_value(session: Path) -> None:
    view = ex.load_session(session)
    values = explore_values(view)
    zh = (session / REPORT_MD).read_text(encoding="utf-8")
    en = report_texts(ex.load_session(session), "en")
    texts = {"zh md": zh, "zh html": html_text((session / REPORT_HTML).read_text(encoding="utf-8")),
             "en md": en[REPORT_MD], "en html": html_text(en[REPORT_HTML])}
    for name, text in texts.items():
        numbers = DECIMAL.findall(CODE.sub("", text))
        assert len(numbers) > 100, f"{name}: only {len(numbers)} numbers found"  # the walk reads the tables, not nothing
        assert unexplained(text, values) == [], f"{name}: numbers no explore frame gives"


def test_a_wrong_number_is_caught() -> None:
    """The walk fails on a figure off by one unit in its last printed digit, and ignores code spans."""
    assert unexplained("| O2 | 12.0075 | +2.36% |", [12.007515, 2.3553]) == []
    assert unexplained("| O2 | 12.0076 |", [12.007515]) == ["12.0076"]
    assert unexplained("`run 12.9`, O10, run-3", [1.0]) == []


def _table(text: str, header_start: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def test_dcci_table_figures_and_their_runs_are_the_gates(session: Path) -> None:
    """The §6 table shows each row's gate numbers and says over which runs: the repair's three gate runs, not its
    five after top-up (the report said "5 runs" beside the 3-run mean)."""
    view = ex.load_session(session)
    zh = (session / REPORT_MD).read_text(encoding="utf-8")
    rows = {r[0]: r for r in _table(zh, "| 配置 |")}
    sides = ex.gate_sides(view)
    for label, round_, side in (("O0-INCUMBENT", "O1", "baseline"), ("disable-all（O1）", "O1", "candidate"),
                                ("disable+before+after（O2）", "O2", "candidate")):
        want = sides.filter(round=round_, side=side).row(0, named=True)
        runs = f"{want['runs']} 次门禁运行" if side == "candidate" else f"{want['runs']} 次干净运行"
        assert rows[label][1:4] == [runs, f"{want['worst_rank_mean_ms']:.4f}", f"{want['median_run_ms']:.4f}"], label
    topped = ex.round_metrics(view).filter(round="O2")
    assert topped["run_set"].to_list() == ["gate", "all_clean"] and topped["runs"].to_list() == [3, 5]
    assert topped["label"].to_list() == ["3 gate runs", "5 after top-up"]
    # the chart and explore.rounds show the widest set, labelled; the gate row keeps the gate's mean
    widest = ex.rounds(view).filter(round="O2").row(0, named=True)
    assert (widest["run_set"], widest["runs"], widest["mean_ms"]) == ("all_clean", 5, topped["mean_ms"][1])
    assert rows["disable+before+after（O2）"][2] == f"{topped['mean_ms'][0]:.4f}" != f"{topped['mean_ms'][1]:.4f}"


def test_overview_says_which_runs_and_uses_chinese_words(session: Path) -> None:
    zh = (session / REPORT_MD).read_text(encoding="utf-8")
    rows = {r[0]: r for r in _table(zh, "| 阶段/候选 |")}
    assert rows["O2 dcci-disable-all（联合修复）"][6:8] == ["5 次干净运行 对比 3 次门禁运行；补足后 5 次", "接受"]
    assert rows["O4 split-mode-3"][7] == "拒绝"
    assert "verified" not in zh and "verdict=" not in zh and "**accepted**" not in zh


def test_one_dtype_per_column_and_a_round_index_wherever_there_is_a_round(session: Path) -> None:
    """rank is Int32 in the Parquet, the explore frames and the DCCI frames (joins need no cast); every frame with
    `round` has a numeric `round_index` that sorts O10 after O2."""
    import sk_analytics as ska

    view = ex.load_session(session)
    tables = ska.open_session(session)
    diff = view.dcci_diff or {}
    means = ex.rank_means(tables["timings"])
    metrics = ex.run_metrics(tables["timings"])
    frames = {"rank_means": means, "run_metrics": metrics, "slowest_ranks": ex.slowest_ranks(metrics),
              "rounds": ex.rounds(view), "round_metrics": ex.round_metrics(view), "gate_sides": ex.gate_sides(view),
              "gate_decisions": ex.gate_decisions(view), "gate_checks": ex.gate_checks(view),
              "accepted_path": ex.accepted_path(view), "simulator_truth": ex.simulator_truth(view)}
    for name, frame in frames.items():
        assert frame.height > 0, name
        assert frame.schema["round_index"] == pl.Int32, name
        named = frame.filter(pl.col("round").str.starts_with("O")).select("round", "round_index").unique().sort("round_index")
        assert named["round"].to_list() == sorted(named["round"].to_list(), key=lambda r: int(r[1:].split("-")[0])), name
    parquet_rank = tables["timings"].collect_schema()["rank"]
    assert parquet_rank == pl.Int32
    assert means.schema["rank"] == metrics.schema["worst_rank"] == ex.o0_runs(view).schema["worst_rank"] == parquet_rank
    sks, children, alignment = ex.dcci_sks(diff), ex.dcci_children(diff), ex.dcci_alignment(diff)
    assert sks.schema["rank"] == sks.schema["deciding_rank"] == children.schema["rank"] == alignment.schema["rank"] == parquet_rank
    # a DCCI slot joins the Parquet rank without a cast, and children reach every rank's slot through cross_rank_sk
    assert sks.join(means.select("rank").unique(), on="rank").height == sks.height
    deciding = sks.filter("has_children")
    assert deciding.height == children["uid"].n_unique() and deciding["deciding"].all()
    slots = sks.join(children.select("cross_rank_sk").unique(), on="cross_rank_sk")
    assert slots.height > deciding.height and slots["rank"].n_unique() == sks["rank"].n_unique()


def test_the_policys_profile_window_sets_the_collections_and_the_demo_keeps_a_full_one(session: Path) -> None:
    """Policy.profile_iterations is the first window of both diagnostic collections (the demo's 14 steps);
    --full-profile leaves it unset (the profiler's 40); unset, session.json is as before the field existed."""
    from sk_analytics.stage_o.state import Policy
    from sk_runner.profile import DEFAULT_PROFILE_ITERATIONS
    from sk_runner.sweep.demo import DEMO_PROFILE_ITERATIONS, demo_session

    windows = [(r.data["side"], r.data["iterations"]) for r in read_records(session) if r.kind == "profile_result"]
    assert windows == [("o0", PROFILE_ITERATIONS), ("disable_all", PROFILE_ITERATIONS)]
    assert "profile_iterations" not in Policy().to_json() and Policy.from_json(Policy().to_json()) == Policy()
    assert Policy.from_json(Policy(profile_iterations=14).to_json()).profile_iterations == 14
    light = demo_session(session.parent / "demo-light")
    full = demo_session(session.parent / "demo-full", full_profile=True)
    assert (light.policy.profile_iterations, full.policy.profile_iterations) == (DEMO_PROFILE_ITERATIONS, None)
    assert DEMO_PROFILE_ITERATIONS < DEFAULT_PROFILE_ITERATIONS == 40


def test_the_html_figure_table_names_the_runs_of_each_round(session: Path) -> None:
    page = report_texts(ex.load_session(session), "en")[REPORT_HTML]
    table = page.split("<figcaption>Worst-rank mean of every clean run per round (ms)</figcaption>")[1].split("</table>")[0]
    assert "<td>5 clean runs</td>" in table and "<td>5 after top-up</td>" in table and "<td>3 gate runs</td>" in table
