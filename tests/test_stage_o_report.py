"""Report rendering: Markdown subset to HTML, overview rows, grouped SKs and English text from hand-made views."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.report.render import (
    RoundInfo,
    SessionView,
    markdown_to_html,
    overview_rows,
    render_markdown,
    render_reports,
    run_columns,
)
from sk_analytics.stage_o.machine import O0, fold
from sk_runner.sweep.handoff import next_steps

CJK = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]")


def test_markdown_to_html_tables_lists_figures() -> None:
    md = "\n".join([
        "# 标题", "", "**粗体** 与 `代码`", "", "| a | b\\|c | n |", "|---|---|---:|", "| 1 | <x> | 3 |", "",
        "- 一", "- 二", "", "> 注意", "<!-- figure:run-metrics -->", "<!-- figure:none -->", "见 [d.md](x/d.md)",
    ])
    page = markdown_to_html(md, {"run-metrics": "<svg>fig</svg>"}, "t")
    flat = page.replace("\n", "")
    assert "<h1>标题</h1>" in page
    assert "<p><strong>粗体</strong> 与 <code>代码</code></p>" in page
    assert ("<table><thead><tr><th>a</th><th>b|c</th><th style=\"text-align:right\">n</th></tr></thead>"
            "<tbody><tr><td>1</td><td>&lt;x&gt;</td><td style=\"text-align:right\">3</td></tr></tbody></table>") in flat
    assert "<ul><li>一</li><li>二</li></ul>" in flat
    assert "<blockquote><p>注意</p></blockquote>" in flat and "<svg>fig</svg>" in page
    assert '<p>见 <a href="x/d.md">d.md</a></p>' in page
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1


def test_markdown_to_html_escapes_raw_html_and_keeps_figure_order() -> None:
    """A value a workload wrote never becomes markup; figures land where their markers are, in order."""
    md = "<script>alert(1)</script>\n\n<!-- figure:b -->\ntext\n<!-- figure:a -->"
    page = markdown_to_html(md, {"a": "<svg>A</svg>", "b": "<svg>B</svg>"}, "<t>")
    assert "<script>" not in page and "&lt;script&gt;" in page and "<title>&lt;t&gt;</title>" in page
    assert page.index("<svg>B</svg>") < page.index("<p>text</p>") < page.index("<svg>A</svg>")


def _view(tmp_path: Path, *, dcci_diff: dict[str, Any] | None = None) -> SessionView:
    common = {"original": None, "risk": "low"}
    matrix = {"entries": [{"id": "a", "category": "auto_op_parallel", "option": "auto_op_parallel", "value": 1,
                           "pointer": "/super_kernel_optimize_options/auto_op_parallel", **common},
                          {"id": "b", "category": "experimental", "option": "early_start", "value": 1,
                           "pointer": "/super_kernel_optimize_options/early_start", **common}],
              "options_root": "/super_kernel_optimize_options"}
    if dcci_diff is not None:  # a DCCI entry whose diagnosis produced this diff
        matrix["entries"].append({"id": "d", "category": "dcci", "option": "dcci_disable_on_kernel", "value": [".*"],
                                  "pointer": "/super_kernel_optimize_options/dcci_disable_on_kernel", **common})
    records = [
        ("trial_result", {"round": O0, "entry_id": None, "phase": "o0", "ok": True, "runs_added": 5, "runs_total": 5}),
        ("stability_result", {"round": O0, "entry_id": None, "stable": True, "spread_pct": 1.0, "mean_ms": 10.0,
                              "run_metrics": [9.9, 10.0, 10.1, 10.0, 10.0], "path": "o0/stability.json"}),
        ("trial_result", {"round": "O1", "entry_id": "a", "phase": "trial", "ok": True, "runs_added": 3, "runs_total": 3}),
        ("gate_result", {"round": "O1", "baseline_round": O0, "entry_id": "a", "accepted": False, "mean_improvement_pct": -2.0,
                         "baseline_mean_ms": 10.0, "candidate_mean_ms": 10.2, "baseline_run_metrics": [10.0] * 5,
                         "candidate_run_metrics": [10.1, 10.2, 10.3], "summary_path": "O1/summary.json",
                         "checks": {"mean_improvement": False, "p90_no_material_regression": True}}),
        ("entry_settled", {"entry_id": "a", "status": "rejected", "reason_zh": "未通过", "evidence": {"round": "O1"},
                           "incumbent_round": O0}),
        ("entry_settled", {"entry_id": "b", "status": "blocked", "reason_zh": "未授权", "evidence": {"risk": "high"},
                           "incumbent_round": O0}),
    ]
    rounds = {
        O0: RoundInfo(O0, None, "o0", [records[0][1]], stability=records[1][1]),
        "O1": RoundInfo("O1", "a", "trial", [records[2][1]], gate=records[3][1]),
    }
    return SessionView(tmp_path, matrix, records, fold(records), rounds, dcci_diff, None)


def test_overview_rows_hand_values(tmp_path: Path) -> None:
    rows = overview_rows(_view(tmp_path), "zh")
    # every ms figure with 4 decimals; the runs cell says which runs each side's figure is over; statuses in Chinese
    assert rows[0] == [O0, "最慢 rank 均值（预热后 decode）", "—", "10.0000", "—", "—", "5 次干净运行", "稳定（极差 1.00%）",
                       "o0/stability.json"]  # the spread the stability check recorded
    assert rows[1] == ["O1 a", "最慢 rank 均值，对比 O0-INCUMBENT", "10.0000", "10.2000", "0.2000", "-2.00%",
                       "5 次干净运行 对比 3 次门禁运行", "拒绝", "O1/summary.json"]
    assert rows[2] == ["— b", "—", "—", "—", "—", "—", "0", "被阻断", "risk=high"]
    en = overview_rows(_view(tmp_path), "en")
    assert en[0][7] == "stable (spread 1.00%)" and en[1][1] == "worst-rank mean vs O0-INCUMBENT"
    assert en[1][6:8] == ["5 clean runs vs 3 gate runs", "rejected"]


def test_first_table_has_the_protocol_columns_in_order(tmp_path: Path) -> None:
    md = render_markdown(_view(tmp_path), "zh")
    first = next(line for line in md.splitlines() if line.startswith("| "))
    assert first == "| 阶段/候选 | 测量口径 | 基线耗时 ms | 实验耗时 ms | 耗时差 ms | 改善率 | 运行数 | 门禁/状态 | 证据 |"


def test_run_columns_outcomes(tmp_path: Path) -> None:
    view = _view(tmp_path)
    cols = run_columns(view)
    assert [(c.round, c.outcome, c.values) for c in cols] == [
        (O0, "incumbent", (9.9, 10.0, 10.1, 10.0, 10.0)), ("O1", "rejected", (10.1, 10.2, 10.3))]
    crash = {"round": "O2", "entry_id": "b", "phase": "trial", "ok": False, "runs_total": 0, "failure": {"stage": "crash"}}
    view.rounds["O2"] = RoundInfo("O2", "b", "trial", [crash])
    view.rounds["O3"] = RoundInfo("O3", "c", "trial", [{"round": "O3", "phase": "trial"}], gate={"accepted": True},
                                  stability={"stable": True, "run_metrics": [9.0, 9.1, 9.0, 9.1, 9.0]})
    view.state.settled["c"] = {"status": "accepted", "incumbent_round": "O3"}
    view.rounds["O4"] = RoundInfo("O4", "e", "trial", [{"round": "O4", "phase": "trial"}], gate={"accepted": False},
                                  stability=None)
    view.rounds["O5"] = RoundInfo("O5", "e", "repair", [{"round": "O5", "phase": "repair"}], gate=None)
    outcomes = {c.round: (c.outcome, len(c.values)) for c in run_columns(view)}
    assert outcomes["O2"] == ("failed", 0) and outcomes["O3"] == ("accepted", 5)
    assert outcomes["O4"] == ("diagnosis", 0) and outcomes["O5"] == ("pending", 0)  # disable-all that opened a repair


def _sk(uid: int, structure: str, occ: int, cls: str, pct: float) -> dict[str, Any]:
    return {"uid": uid, "structure_key": structure, "structure_hash": f"h{structure}", "occurrence_index": occ, "class": cls,
            "scope_name": "moe", "child_ops": ["A", structure], "delta_p50_pct": pct, "delta_p50_us": pct / 10,
            "noise_band_pct": 3.0}


def test_slower_sks_grouped_by_structure(tmp_path: Path) -> None:
    sks = [_sk(0, "G", 0, "significantly_slower", 50.0), _sk(1, "E", 0, "significantly_slower", 30.0),
           _sk(2, "G", 1, "significantly_slower", 52.0), _sk(3, "E", 1, "significantly_slower", 31.0),
           _sk(4, "G", 2, "significantly_slower", 51.0), _sk(5, "N", 0, "neutral", -1.0)]
    md = render_markdown(_view(tmp_path, dcci_diff={"sks": sks, "repair": {}}), "zh")
    assert "| moe · A→G | 3 | 0–2 | +5.00 … +5.20 | +50.00 … +52.00 | G |" in md
    assert "| moe · A→E | 2 | 0–1 | +3.00 … +3.10 | +30.00 … +31.00 | E |" in md
    assert md.count("| moe · A→") == 2  # one row per slower structure, none for the neutral one
    html = render_reports(_view(tmp_path, dcci_diff={"sks": sks, "repair": {}}), "zh")[1]
    assert html.count("<svg") == 2 and html.count("<details>") == 2


def test_the_sk_figure_words_the_classes_from_the_catalog_in_both_languages(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The figure's legend, tooltips and table word each DCCI class from the catalogs (``dcci.class.*``), in zh and en:
    a catalog wording is what the reader sees, never the code (the English figure made it from the code,
    ``significantly_slower`` -> "significantly slower", beside the catalog)."""
    import sk_analytics.messages as messages

    real = messages.template

    def template(msg_id: str, lang: str) -> str:  # a catalog whose English wording is not the code with spaces
        return f"«{lang}-{msg_id.removeprefix('dcci.class.').replace('_', '+')}»" if msg_id.startswith("dcci.class.") else real(msg_id, lang)

    monkeypatch.setattr(messages, "template", template)
    sks = [_sk(0, "G", 0, "significantly_slower", 50.0), _sk(1, "N", 0, "neutral", -1.0)]
    for lang in ("zh", "en"):
        html = render_reports(_view(tmp_path, dcci_diff={"sks": sks, "repair": {}}), lang)[1]
        assert f"«{lang}-significantly+slower»" in html and f"«{lang}-neutral»" in html
        assert "significantly slower" not in html and "significantly_slower" not in html


def test_english_report_has_no_chinese_text(tmp_path: Path) -> None:
    view = _view(tmp_path)
    view.next_steps = next_steps(view, "en")
    md, page = render_reports(view, "en")
    marked = "(recorded reason, in Chinese) 未授权"
    assert CJK.findall(md.replace(marked, "")) == []  # Chinese only where marked as the untranslated record
    assert "auto_op_parallel=1 did not pass the gate (mean improvement -2.000%; failed checks: mean); incumbent restored" in md
    assert f"- Status: **blocked** — {marked}" in md  # no structured facts (an unknown blocker): the record, marked
    assert "## Next steps" in md and "First run `sk-analyze ledger verify" in md
    assert 'lang="en"' in page and "Worst-rank mean of every clean run per round (ms)" in page
    zh = render_markdown(_view(tmp_path), "zh")
    assert "- 状态: **拒绝** — 未通过" in zh and "- 状态: **被阻断** — 未授权" in zh


def test_next_steps_of_a_stopped_session_in_both_languages(tmp_path: Path) -> None:
    view = _view(tmp_path)
    stop = ("session_stopped", {"reason_zh": "O0-INCUMBENT 五次干净运行不稳定",
                                "evidence": {"round": O0, "stability": {"stable": False, "spread_pct": 8.0, "max_spread_pct": 5.0}}})
    view.state = fold([*view.records, stop])
    zh, en = next_steps(view, "zh"), next_steps(view, "en")
    assert zh[1] == "Stage O 已停止：O0-INCUMBENT 五次干净运行不稳定" and len(zh) == len(en) == 3
    assert en[1] == ("Stage O stopped: the five clean O0-INCUMBENT runs are unstable (spread 8.000% > 5.0%); "
                     "investigate environment noise before starting Stage O")
    assert en[0] == ("First run `sk-analyze ledger verify .` inside this session folder to confirm the ledger (ledger.jsonl) "
                     "and every evidence file it vouches for are complete and unaltered.")
    assert str(tmp_path) not in "".join(zh + en)  # the path as typed never reaches a report
    md = render_markdown(view, "en")
    assert "**Outcome: session stopped**" in md and "- Stop reason: the five clean O0-INCUMBENT runs are unstable" in md


def _side(means: list[float], mean: float, median: float, p50: float, p90: float, sd: float) -> dict[str, Any]:
    return {"run_worst_rank_means_ms": means, "worst_rank_mean_ms": mean, "median_run_worst_rank_mean_ms": median,
            "decode": {"p50_ms": p50, "p90_ms": p90, "stddev_ms": sd}}


def test_dcci_protocol_table_rows(tmp_path: Path) -> None:
    view = _view(tmp_path, dcci_diff={"sks": [], "repair": {}})
    o0 = _side([10.0, 10.1, 9.9, 10.0, 10.0], 10.0, 10.0, 9.95, 10.1, 0.05)
    trial = {"round": "O2", "entry_id": "d", "phase": "trial", "ok": True, "runs_total": 3}
    repair = {"round": "O3", "entry_id": "d", "phase": "repair", "ok": True, "runs_total": 5}
    view.rounds["O2"] = RoundInfo("O2", "d", "trial", [trial], gate={"accepted": False, "baseline_round": O0},
                                  summary={"baseline": o0, "candidates": {"O2": _side([11.0, 11.2, 11.1], 11.1, 11.1, 11.0, 11.3, 0.06)}})
    view.rounds["O3"] = RoundInfo("O3", "d", "repair", [repair], gate={"accepted": True, "baseline_round": O0},
                                  summary={"baseline": o0, "candidates": {"O3": _side([9.8, 9.9, 9.7], 9.8, 9.8, 9.75, 9.9, 0.04)}})
    view.state.settled["d"] = {"status": "accepted", "reason_zh": "组合通过", "evidence": {}, "incumbent_round": "O3"}
    md = render_markdown(view, "zh")
    section = md.split("## DCCI（数据缓存控制）家族")[1].split("\n## ")[0]
    assert "| 配置 | 统计所用运行 | 最慢 rank 均值 ms | 中位运行 ms | P50 ms | P90 ms | 标准差 ms | 极差 | 门禁 | 基线变化 |" in section
    assert "|---|---|---:|---:|---:|---:|---:|---:|---|---|" in section  # numbers right-aligned
    # spread = (max - min) / mean of the per-run worst-rank means: 0.2/10.0, 0.2/11.1, 0.2/9.8
    assert "| O0-INCUMBENT | 5 次干净运行 | 10.0000 | 10.0000 | 9.9500 | 10.1000 | 0.0500 | +2.00% | — | — |" in section
    assert "| disable-all（O2） | 3 次门禁运行 | 11.1000 | 11.1000 | 11.0000 | 11.3000 | 0.0600 | +1.80% | 否 | 保留原基线 |" in section
    # the repair was topped up to five runs, but its figures are the gate's three: the label says so (issue 27)
    assert "| disable+before+after（O3） | 3 次门禁运行 | 9.8000 | 9.8000 | 9.7500 | 9.9000 | 0.0400 | +2.04% | 是 | 成为新基线 |" in section
    assert section.rstrip().endswith("> 相关不等于根因：只有完整修复相对 O0 的干净 A/B 对比才能决定是否接受。")
    en = render_markdown(view, "en")
    assert "| disable+before+after (O3) | 3 gate runs | 9.8000 | 9.8000 | 9.7500 | 9.9000 | 0.0400 | +2.04% | yes | new incumbent |" in en


def test_english_report_words_the_advice_kinds() -> None:
    """The truth table's Advice column says the advice's kind in words in English too (it printed the identifier)."""
    from sk_analytics.report.text import TEXT, word

    kinds = ("consistent", "could_be_noise", "gain_lost_to_variance_check", "gain_rejected_by_other_checks", "no_interval")
    assert [word(TEXT["en"], "advice", k) for k in kinds] == ["consistent", "could be noise", "gain lost to the variance check",
                                                               "gain rejected by other checks", "no interval"]
    assert all(word(TEXT["zh"], "advice", k) != k for k in kinds)


def test_a_blocked_entrys_probe_evidence_is_its_folder_never_quoted_json(tmp_path: Path) -> None:
    """A blocked entry's cause is its status line; the probe line names where the probe ran (it quoted the record as
    JSON cut at 200 characters, mid-field), and is left out where no probe process ran."""
    line = "OptionName: early_start, set value is invalid, value is 7, valid range is [0, 1], the process will use default value: 0"
    probe = {"probed": True, "ready": False, "evidence": {"task": None, "wrapper": {"accepted": True, "reason": "x" * 300},
                                                          "runtime": {"status": "invalid_default", "invalid_lines": [line],
                                                                      "attempt_dir": "PROBES/early_start-1/attempt-1"}}}

    def report(probe: dict[str, Any], lang: str) -> str:
        view = _view(tmp_path)
        settled = {"entry_id": "b", "status": "blocked", "reason_zh": "未就绪", "evidence": {"probe_evidence": probe},
                   "incumbent_round": O0}
        view.records[-1] = ("entry_settled", settled)
        view.state.settled["b"] = settled
        return render_markdown(view, lang)

    en = report(probe, "en")
    cause = f"early_start=1 is not ready (probe ready=false): the runtime reports the value invalid and uses the default: {line}"
    assert f"- Status: **blocked** — {cause}\n- Evidence (probe): `PROBES/early_start-1/attempt-1`\n" in en
    assert '{"' not in en and "xxxxx" not in en
    zh = report(probe, "zh")
    assert "- 状态: **被阻断** — 未就绪\n- 证据（探测）: `PROBES/early_start-1/attempt-1`\n" in zh and '{"' not in zh
    # as a sweep records it: the attempt's folder with the session's path (here absolute), which a report never holds
    # (a copied or moved session re-renders the same report): from PROBES/ on, as the other evidence paths are
    recorded = {**probe, "evidence": {**probe["evidence"], "runtime": {**probe["evidence"]["runtime"], "attempt_dir": str(
        tmp_path / "PROBES" / "early_start" / "value-0a1b2c3d" / "attempt-1")}}}
    said = report(recorded, "en")
    assert "- Evidence (probe): `PROBES/early_start/value-0a1b2c3d/attempt-1`\n" in said and str(tmp_path) not in said
    unlisted = report({"probed": True, "ready": False, "evidence": {"task": "not_listed"}}, "en")
    assert "- Status: **blocked** — early_start=1 is not ready" in unlisted and "(probe)" not in unlisted and '{"' not in unlisted
