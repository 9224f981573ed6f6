"""Report rendering: Markdown subset to HTML, SVG figures, overview rows from hand-made views."""

from __future__ import annotations

from pathlib import Path

from sk_analytics.stage_o.machine import O0, fold
from sk_analytics.stage_o.report import RoundInfo, SessionView, markdown_to_html, overview_rows, svg_run_metrics, svg_sk_deltas


def test_markdown_to_html_tables_lists_figures() -> None:
    md = "\n".join([
        "# 标题", "", "**粗体** 与 `代码`", "", "| a | b\\|c |", "|---|---|", "| 1 | <x> |", "",
        "- 一", "- 二", "", "> 注意", "<!-- figure:run-metrics -->", "<!-- figure:none -->",
    ])
    page = markdown_to_html(md, {"run-metrics": "<svg>fig</svg>"}, "t")
    assert "<h1>标题</h1>" in page
    assert "<p><strong>粗体</strong> 与 <code>代码</code></p>" in page
    assert "<table><thead><tr><th>a</th><th>b|c</th></tr></thead><tbody><tr><td>1</td><td>&lt;x&gt;</td></tr></tbody></table>" in page
    assert "<ul>\n<li>一</li>\n<li>二</li>\n</ul>" in page
    assert "<blockquote>注意</blockquote>" in page and "<svg>fig</svg>" in page
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 1


def _view(tmp_path: Path) -> SessionView:
    matrix = {"entries": [{"id": "a", "category": "auto_op_parallel"}, {"id": "b", "category": "experimental"}],
              "options_root": "/super_kernel_optimize_options"}
    records = [
        ("trial_result", {"round": O0, "entry_id": None, "phase": "o0", "ok": True, "runs_added": 5, "runs_total": 5}),
        ("stability_result", {"round": O0, "entry_id": None, "stable": True, "spread_pct": 1.0, "mean_ms": 10.0,
                              "run_metrics": [9.9, 10.0, 10.1, 10.0, 10.0], "path": "o0/stability.json"}),
        ("trial_result", {"round": "O1", "entry_id": "a", "phase": "trial", "ok": True, "runs_added": 3, "runs_total": 3}),
        ("gate_result", {"round": "O1", "baseline_round": O0, "entry_id": "a", "accepted": False, "mean_improvement_pct": -2.0,
                         "baseline_mean_ms": 10.0, "candidate_mean_ms": 10.2, "baseline_run_metrics": [10.0] * 5,
                         "candidate_run_metrics": [10.1, 10.2, 10.3], "summary_path": "O1/summary.json"}),
        ("entry_settled", {"entry_id": "a", "status": "rejected", "reason_zh": "未通过", "evidence": {}, "incumbent_round": O0}),
        ("entry_settled", {"entry_id": "b", "status": "blocked", "reason_zh": "未授权", "evidence": {"risk": "high"},
                           "incumbent_round": O0}),
    ]
    rounds = {
        O0: RoundInfo(O0, None, "o0", [records[0][1]], stability=records[1][1]),
        "O1": RoundInfo("O1", "a", "trial", [records[2][1]], gate=records[3][1]),
    }
    return SessionView(tmp_path, matrix, records, fold(records), rounds, None, None)


def test_overview_rows_hand_values(tmp_path: Path) -> None:
    rows = overview_rows(_view(tmp_path), "zh")
    assert rows[0] == [O0, "worst-rank 均值（预热后 decode）", "—", "10.000", "—", "—", "5", "稳定（spread 1.00%）", "o0/stability.json"]
    assert rows[1] == ["O1 a", "worst-rank 均值，对比 O0-INCUMBENT", "10.000", "10.200", "0.2000", "-2.00%", "5 vs 3", "rejected",
                       "O1/summary.json"]
    assert rows[2] == ["— b", "—", "—", "—", "—", "—", "0", "blocked", "risk=high"]


def test_svg_figures(tmp_path: Path) -> None:
    svg = svg_run_metrics(_view(tmp_path), "runs")
    assert svg.count("<circle") == 8 and "#9e9e9e" in svg and "<figcaption>runs</figcaption>" in svg
    diff = {"sks": [{"uid": 1, "class": "significantly_slower", "delta_p50_pct": 10.0},
                    {"uid": 2, "class": "neutral", "delta_p50_pct": -5.0}, {"uid": 3, "delta_p50_pct": None}]}
    bars = svg_sk_deltas(diff, "sk")
    assert bars.count("<rect") == 2 and 'height="100.0"' in bars and 'height="50.0"' in bars
    assert svg_sk_deltas(None, "x") == "" and svg_sk_deltas({"sks": []}, "x") == ""
