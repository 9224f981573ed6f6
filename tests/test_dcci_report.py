"""The DCCI Markdown report: protocol §6 sections in Chinese (default) and English."""

from __future__ import annotations

import json

import test_dcci_analysis as scenario

from sk_analytics.dcci.groups import format_range, group_sks, occurrence_ranges, short_name
from sk_analytics.dcci.report import render


def test_chinese_report_has_every_protocol_section() -> None:
    result = scenario.run()
    text = render(result)
    for heading in ("## 诊断采集", "## 全部 SK 对比统计", "## 显著变慢 SK", "## 显著变慢 SK 的子核时间分解",
                    "## 子核算子并集与符号→模式映射", "## 选项设置与配置差异（RFC 6902）"):
        assert heading in text, heading
    assert text.count("相关不等于根因") == 2  # at the top and at the end
    slower_section = text.split("## 显著变慢 SK\n")[1].split("## ")[0]
    assert slower_section.count("显著变慢") == 1 and "RmsNorm → MatMul → Add" in slower_section
    assert "| MatMul | static_kernel_MatMul_.* | verified | static_kernel_MatMul_" in text
    assert "| 1 [2] | MatMul |" in text  # position among kernels, task-list index after the event member
    assert "- 分类计数: 显著变慢=1, 显著变快=0, 无显著差异=2, 证据不足=0" in text
    diff = json.loads(text.split("```json\n")[2].split("```")[0])
    assert [op["path"] for op in diff] == ["/super_kernel_optimize_options/dcci_before_kernel_start",
                                           "/super_kernel_optimize_options/dcci_after_kernel_end"]
    # every SK of the JSON has one row in the full table
    full = text.split("## 全部 SK 对比统计")[1].split("## ")[0]
    assert sum(line.startswith("| #") for line in full.splitlines()) == len(result["sks"]) == 3


def test_english_report_and_blocked_attribution() -> None:
    markers = scenario._markers([dict(kind="buffer_full", device=0, core=1, process="200")])
    result = scenario.run(cand_kw={"markers": markers})
    en = render(result, "en")
    assert "Correlation is not a root cause" in en and "No repair is proposed." in en
    # the blocker and the classes in words; the decision JSON keeps the codes
    assert "child attribution blocked: super_kernel.log has a buffer is full line (child events missing) (candidate)" in en
    assert "buffer_full:" not in en and "significantly_slower" not in en and "insufficient_evidence" not in en, en
    assert "- class counts: significantly slower=1, significantly faster=0, neutral=2, insufficient evidence=0" in en
    assert result["children"][0]["blockers"] == ["buffer_full:candidate"]
    assert ("- repair decision: child attribution of at least one significantly slower SK is blocked (buffer full / truncated / "
            "missing core); re-collect with a shorter window; no repair is proposed.") in en
    zh = render(result)
    assert "子核归因被阻断：super_kernel.log 含 buffer is full 行" in zh and "不提出修复。" in zh
    assert "200:0/1" in zh  # buffer-full core listed with its process


def test_report_without_any_sk_rows_still_renders() -> None:
    result = scenario.run(n=3, warmup=1)
    text = render(result)
    assert "不提出修复" in text
    full = text.split("## 全部 SK 对比统计")[1].split("## ")[0]
    rows = [line for line in full.splitlines() if line.startswith("| #")]
    assert len(rows) == 3 and all("证据不足 | fewer_than_3_occurrences_baseline" in r for r in rows)
    assert text.split("## 显著变慢 SK\n")[1].startswith("\n无")


def test_structure_summary_groups_repeated_structures() -> None:
    result = scenario.run()
    zh = render(result)
    summary = zh.split("## 按 SK 结构汇总")[1].split("## ")[0]
    rows = [line for line in summary.splitlines() if line.startswith("| ") and "SK 结构" not in line]
    assert len(rows) == len(group_sks(result["sks"])) == 3  # the scenario has three distinct structures
    slower = next(sk for sk in result["sks"] if sk["class"] == "significantly_slower")
    pct = f"{slower['delta_p50_pct']:+.2f}"
    occ = slower["occurrence_index"]
    assert rows[0] == f"| {short_name(slower)} | 显著变慢 | 1 ({occ}) | {pct} |"  # largest slowdown first
    en = render(result, "en")
    assert f"| significantly slower | 1 ({occ}) | {pct} |" in en
    assert "- repair decision: joint repair proposed: disable-all plus before/after with one narrow pattern list." in en


def _sk(structure: str, occ: int, cls: str, pct: float, ops: list[str]) -> dict[str, object]:
    return {"structure_key": structure, "occurrence_index": occ, "class": cls, "scope_name": "moe", "child_ops": ops,
            "delta_p50_pct": pct, "delta_p50_us": pct / 2, "noise_band_pct": 3.0}


def test_group_sks_per_structure_and_class() -> None:
    sks = [_sk("g", 2, "significantly_slower", 60.0, ["A", "B", "C", "D"]), _sk("g", 0, "significantly_slower", 58.0, ["A", "B", "C", "D"]),
           _sk("g", 1, "neutral", 1.0, ["A", "B", "C", "D"]), _sk("e", 0, "significantly_faster", -5.0, ["X"]),
           {**_sk("u", 0, "insufficient_evidence", 0.0, ["Y"]), "delta_p50_pct": None}]
    groups = group_sks(sks)
    assert [(g.structure, g.cls, g.occurrences, g.delta_p50_pct, g.median_pct) for g in groups] == [
        ("g", "significantly_slower", (0, 2), (58.0, 60.0), 59.0),
        ("g", "neutral", (1,), (1.0,), 1.0),
        ("e", "significantly_faster", (0,), (-5.0,), -5.0),
    ]  # sorted by median ΔP50 %, an SK without a ΔP50 left out
    assert groups[0].short_name == "moe · A→…→D (4 ops)" and groups[2].short_name == "moe · X"
    assert short_name({"child_ops": ["A", "B", "C"], "scope_name": None}) == "A→B→C"
    assert short_name({"child_ops": [], "structure_hash": "abc"}) == "abc"
    assert occurrence_ranges([7, 0, 1, 2, 5, 6]) == "0–2, 5–7" and occurrence_ranges([]) == "—"
    # one occurrence measured on several ranks: each index once, never "0, 0–1, 1"
    assert occurrence_ranges([0, 0, 1, 1]) == "0–1" and occurrence_ranges([3, 3, 3]) == "3"
    assert occurrence_ranges([0, 0, 2, 2, 3]) == "0, 2–3"
    assert format_range([1.004, 0.996]) == "+1.00" and format_range([-1.0, 2.5], ".1f") == "-1.0 … 2.5" and format_range([]) == "—"


def test_english_repair_decision_names_unverified_tokens() -> None:
    result = scenario.run()
    result["repair"] = {**result["repair"], "proposed": False, "reason": "pattern_not_verified", "failed_tokens": ["MatMul", "Add"]}
    assert "- repair decision: no narrow pattern matching only its own symbols exists for: MatMul, Add; no repair is proposed." in render(
        result, "en")
    result["repair"]["reason"] = "some_new_code"
    assert "- repair decision: some_new_code" in render(result, "en")  # an unknown code is shown as recorded
