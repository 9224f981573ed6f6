"""Markdown report of a DCCI diff (Chinese by default, English with ``lang="en"``).

Renders only what the decision JSON holds (protocol §6 report content): both
collections' paths and fingerprints, the summary (a partial diagnosis said
first, the compared share next to the explained share), the coverage, the
cross-rank correspondence, the full per-SK statistics, the table of
significantly slower SKs, each slower SK's child timing table, the child-op
union with the symbol-to-pattern mapping, the exact option settings and
config diff, and the statement that correlation is not a root cause.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sk_analytics.dcci.coverage import percent as _pct
from sk_analytics.dcci.groups import format_range, group_sks, occurrence_ranges
from sk_analytics.dcci.repair import repair_reason
from sk_analytics.markdown import table
from sk_analytics.messages import Messages, ids, tables, text

TEXT: Final[dict[str, Messages]] = tables("dcci_report.")
"""The report's messages (``dcci_report.*`` of the catalogs) in each language."""


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _p(value: Any) -> str:
    return "—" if value is None else f"{value:.3g}"


def _stats(s: dict[str, Any]) -> str:
    return f"n={s['count']} P50={_num(s['p50_us'])} P90={_num(s['p90_us'])} MAD={_num(s['mad_us'])} [{_num(s['min_us'])}, {_num(s['max_us'])}]"


def _word(code: str, lang: str) -> str:
    """A class code (``significantly_slower``) in words (``dcci.class.*`` of the catalogs); the JSON keeps the code."""
    return text(f"dcci.class.{code}", lang)


def _class(row: dict[str, Any], lang: str) -> str:
    return _word(row["class"], lang)


def _blocker(blocker: str, lang: str) -> str:
    """A recorded ``<reason>:<side>`` blocker in words (``dcci.block.*``), the side in parentheses; a reason the
    catalogs do not know is shown as recorded."""
    code, _, side = blocker.partition(":")
    words = text(f"dcci.block.{code}", lang) if f"dcci.block.{code}" in ids(lang) else code
    return words + (text("format.paren", lang, text=side) if side else "")


def _sk_label(sk: dict[str, Any]) -> str:
    return f"#{sk['uid']} {sk['structure_hash']}/{sk['occurrence_index']}"


def _collections(result: dict[str, Any], t: Mapping[str, str]) -> list[str]:
    """The two diagnostic collections: path, fingerprints, processes, truncation and buffer-full cores."""
    rows = []
    for role in ("baseline", "candidate"):
        side = result[role]
        rows.append([
            side.get("role", role), side["path"], side.get("manifest_fingerprint", "—"),
            side.get("session_fingerprint", "—"), side.get("config_fingerprint", "—"),
            ", ".join(side["processes"]), ", ".join(side["truncated_sk_prof_processes"]) or t["none"],
            ", ".join(f"{b['process']}:{b['device']}/{b['core']}" for b in side["buffer_full"]) or t["none"],
        ])
    lines = [f"## {t['collections']}", ""]
    lines += table([t["role"], t["path"], t["manifest"], t["session"], t["config"], t["processes"], t["truncated"], t["buffer_full"]], rows)
    contract = result.get("contract") or {}
    lines += [f"- {t['set']}: `{contract.get('set_fingerprint', '—')}`", f"- {t['warmup']}: {result['warmup']}", ""]
    return lines


def _sk_rows(sks: Sequence[dict[str, Any]], lang: str) -> list[list[str]]:
    return [
        [
            _sk_label(sk), sk["scope_name"] or "—", " → ".join(sk["child_ops"] or []), _stats(sk["baseline"]),
            _stats(sk["candidate"]), _num(sk["noise_band_pct"], 2), _num(sk["delta_p50_us"]),
            _num(sk["delta_p50_pct"], 2), _class(sk, lang), sk["reason"] or "", _p(sk["mwu_p"]), _p(sk["mwu_q"]),
        ]
        for sk in sks
    ]


def _child_section(result: dict[str, Any], t: Mapping[str, str], lang: str) -> list[str]:
    """Each significantly slower SK's child timings, or why its attribution is blocked."""
    lines = [f"## {t['children']}", ""]
    by_uid = {sk["uid"]: sk for sk in result["sks"]}
    if not result["children"]:
        return lines + [t["none"], ""]
    for entry in result["children"]:
        lines += [f"### {_sk_label(by_uid[entry['uid']])} {by_uid[entry['uid']]['scope_name']}", ""]
        if entry["attribution"] == "blocked":
            lines += [t["blocked"] + "; ".join(_blocker(b, lang) for b in entry["blockers"]), ""]
            continue
        rows = []
        for r in entry["rows"]:
            w, e = r["wall"], r["max_lane"]
            rows.append([
                f"{r['position']} [{r['child_index']}]", r["canonical_op"] or "—",
                _stats(w["baseline"]), _stats(w["candidate"]), _num(w["delta_p50_us"]), _class(w, lang),
                _stats(e["baseline"]), _stats(e["candidate"]), _num(e["delta_p50_us"]), _class(e, lang),
                "✔" if r["significant"] else "",
            ])
        lines += table(
            [t["pos"], t["op"], f"{t['wall']} {t['base']}", f"{t['wall']} {t['cand']}", t["delta"], t["cls"],
             f"{t['exec']} {t['base']}", f"{t['exec']} {t['cand']}", t["delta"], t["cls"], t["sig"]],
            rows,
        )
    return lines


def _structure_summary(result: dict[str, Any], t: Mapping[str, str], lang: str) -> list[str]:
    """One row per (SK structure, class): a decode graph repeats each structure once per layer."""
    rows = [[g.short_name, _word(g.cls, lang), f"{len(g.occurrences)} ({occurrence_ranges(g.occurrences)})",
             format_range(g.delta_p50_pct)] for g in group_sks(result["sks"])]
    if not rows:
        return []
    return [f"## {t['by_structure']}", "", *table([t["structure"], t["cls"], t["occurrences"], t["range_pct"]], rows)]


def _explained(explained: dict[str, Any] | None, t: Mapping[str, str], lang: str) -> list[str]:
    """How many slower SKs and how much of the slowdown per step the repair's children account for."""
    if not explained or not explained["slower_sks"]:
        return []
    line = t["explained_line"].format(k=explained["explained_sks"], n=explained["slower_sks"],
                                      x=explained["explained_us_per_step"], y=explained["slowdown_us_per_step"],
                                      p=_pct(explained["us_fraction"]), c=_pct(explained.get("compared_time_share")))
    lines = [f"- {t['explained']}: {line}"]
    if explained["warning"]:
        lines.append(f"- **{t['warning']}**: {explained['warning_zh'] if lang == 'zh' else explained['warning_en']}")
    return lines


def _ranks_section(result: dict[str, Any], t: Mapping[str, str], lang: str) -> list[str]:
    """Several ranks only: every SK flagged on some rank, with each rank's ΔP50 and the deciding rank."""
    ranks = result.get("ranks") or {}
    if len(ranks.get("ranks") or []) < 2:
        return []
    rows = []
    for entry in ranks["sks"]:
        if all(r["class"] in ("neutral", "insufficient_evidence") for r in entry["per_rank"]):
            continue
        per_rank = "; ".join(f"{r['rank']}: {_num(r['delta_p50_us'])} ({_word(r['class'], lang)})"
                             for r in entry["per_rank"])
        rows.append([f"{entry['structure_hash']}/{entry['occurrence_index']}", str(entry["deciding_rank"]),
                     _word(entry["class"], lang), per_rank])
    lines = [f"## {t['ranks_title']}", "", t["ranks_rule"], "", f"- {t['reference']}: {ranks.get('reference_rank')}", ""]
    lines += table(["SK", t["deciding"], t["cls"], t["per_rank"]], rows) if rows else [t["none"], ""]
    odd = [[f"{e['structure_hash']}/{e['occurrence_index']}", e.get("correspondence", ""),
            ", ".join(map(str, e.get("ranks_present", []))), ", ".join(map(str, e.get("missing_ranks", []))) or "—",
            ", ".join(map(str, e.get("ambiguous_ranks", []))) or "—", _word(e["class"], lang)]
           for e in ranks["sks"] if e.get("correspondence", "all_ranks") != "all_ranks"]
    if odd:
        lines += [f"### {t['not_all_ranks']}", ""]
        lines += table(["SK", t["correspondence"], t["present"], t["missing"], t["ambiguous_ranks"], t["cls"]], odd)
    return lines


def _where(side: dict[str, Any] | None) -> str:
    return "—" if side is None else f"{side['model_dir']}:{side['graph_position']} [{side['sk_id']}]"


def _anchor(anchor: dict[str, Any] | None, start: str) -> str:
    return start if anchor is None else f"{anchor['baseline_position']}/{anchor['candidate_position']}"


def _alignment_section(result: dict[str, Any], t: Mapping[str, str], lang: str) -> list[str]:
    """The graph pairs with their alignment counts, and where every SK sits and how it was paired."""
    alignment = result.get("alignment")
    if not alignment:
        return []
    lines = [f"## {t['alignment']}", "", t["align_rule"], ""]
    rows = [[str(g["rank"]), _graph(g["baseline"], g.get("correspondence", "")),
             _graph(g["candidate"], g.get("correspondence", "")), str(g["shared_structures"]),
             str(g["anchors"]), str(g["paired_by_anchor"]), str(g["paired_in_runs"]), str(g["only_in_baseline"]),
             str(g["only_in_candidate"]), f"{g['ambiguous']['baseline']}/{g['ambiguous']['candidate']}",
             t["yes"] if g["ambiguous_pairing"] else ""] for g in alignment["graph_pairs"]]
    lines += table([t["rank"], t["graph_base"], t["graph_cand"], t["shared"], t["anchors"], t["by_anchor"], t["in_runs"],
                    t["only_base"], t["only_cand"], t["ambiguous"], t["pairing_ambiguous"]], rows)
    placement = []
    for sk in result["sks"]:
        a = sk.get("alignment") or {}
        run = "" if a.get("paired_by") == "anchor" else f"{_anchor(a.get('anchor_before'), '^')} → {_anchor(a.get('anchor_after'), '$')}"
        placement.append([_sk_label(sk), str(a.get("rank")), _where(a.get("baseline")), _where(a.get("candidate")),
                          a.get("paired_by") or sk["align_status"], run])
    lines += [f"### {t['placement']}", ""]
    lines += table(["SK", t["rank"], t["pos_base"], t["pos_cand"], t["paired_by"], t["between"]], placement)
    return lines


def _graph(graph: dict[str, Any] | None, correspondence: str = "one_to_one") -> str:
    if graph is None:
        return "—"
    several = len(graph.get("model_dirs") or []) > 1
    return f"{graph['process']}/{graph['model_dir']}" + (f" ({correspondence})" if several else "")


def _coverage_section(result: dict[str, Any], t: Mapping[str, str]) -> list[str]:
    """Compared shares per rank and overall, and the graph dumps that could not be paired."""
    cov = result.get("coverage")
    if not cov:
        return []
    def row(name: str, c: dict[str, Any]) -> list[str]:
        return [name, str(c["sks"]), str(c["sks_compared"]), _pct(c["sk_share"]), _num(c["time_us"]),
                _num(c["compared_time_us"]), _pct(c["time_share"])]

    lines = [f"## {t['coverage']}", "", f"- {t['diagnosis']}: {t[cov['diagnosis']]}", ""]
    lines += table([t["rank"], t["sks"], t["sks_compared"], t["sk_share"], t["time"], t["time_compared"], t["time_share"]],
                   [row(str(r["rank"]), r) for r in cov["per_rank"]] + [row(t["overall"], cov)])
    if cov["unpaired_graphs"]:
        lines += [f"### {t['unpaired']}", ""]
        lines += table([t["rank"], t["side"], t["graph"], t["sks"], t["time"], t["time_share"]],
                       [[str(g["rank"]), g["side"], f"{g['process']}/{g['model_dir']}", str(g["sks"]), _num(g["time_us"]),
                         _pct(g["time_share"])] for g in cov["unpaired_graphs"]])
    return lines


def _partial_first(result: dict[str, Any], lang: str) -> list[str]:
    """Under a partial diagnosis, the statement that comes before anything else in the summary."""
    repair = result["repair"]
    if not repair.get("partial"):
        return []
    return [f"- **⚠ {repair['partial_note_zh'] if lang == 'zh' else repair['partial_note_en']}**"]


def _compared(result: dict[str, Any], t: Mapping[str, str]) -> list[str]:
    """The summary line of the candidate's SK time and SKs compared (absent in results written before coverage)."""
    summary = result["summary"]
    if "compared_time_share" not in summary:
        return []
    return [f"- {t['compared_line'].format(t=_pct(summary['compared_time_share']), n=_pct(summary['compared_sk_share']))}"]


def summary_line(result: dict[str, Any]) -> str:
    """The one-line summary of ``sk-analyze dcci-diff``: a partial diagnosis is said first, the compared share
    next to the classes and the repair's explained share."""
    summary, repair = result["summary"], result["repair"]
    head = f"{repair['partial_note_en']}; " if repair.get("partial") else ""
    classes = ", ".join(f"{k}={v}" for k, v in summary["classes"].items())
    per_rank = (result.get("coverage") or {}).get("per_rank") or []
    ranks = ("; per rank " + ", ".join(f"{r['rank']}: {_pct(r['time_share'])}" for r in per_rank)) if len(per_rank) > 1 else ""
    compared = (f"; compared {_pct(summary.get('compared_time_share'))} of candidate SK time "
                f"({_pct(summary.get('compared_sk_share'))} of SKs{ranks})")
    if repair["proposed"]:
        explained = repair.get("explained") or {}
        decision = (f"proposed {repair['list']} (explains {_pct(explained.get('us_fraction'))} of the slowdown in the "
                    f"compared {_pct(explained.get('compared_time_share'))})")
    else:
        decision = f"none ({repair['reason']})"
    return f"dcci-diff: {head}{summary['sks']} SKs {classes}{compared}; repair: {decision}"


def render(result: dict[str, Any], lang: str = "zh") -> str:
    """The Markdown report of a :func:`~sk_analytics.dcci.analysis.analyze` result."""
    t = TEXT["en" if lang == "en" else "zh"]
    repair = result["repair"]
    summary = result["summary"]
    lines = [f"# {t['title']}", "", f"> {t['note']}", ""]
    lines += _collections(result, t)
    lines += [f"## {t['summary']}", ""]
    lines += _partial_first(result, lang) + _compared(result, t)
    lines += [f"- {t['classes']}: " + ", ".join(f"{_word(k, lang)}={v}" for k, v in summary["classes"].items())]
    lines += [f"- {t['efd']}: {_num(summary['expected_false_discoveries'])}"]
    lines += [f"- {t['decision']}: {repair['reason_zh'] if lang == 'zh' else repair_reason(repair, 'en')}"]
    lines += _explained(repair.get("explained"), t, lang) + [""]
    header = ["SK", t["scope"], t["ops"], t["base"], t["cand"], t["band"], t["delta"], t["delta_pct"], t["cls"], t["reason"], "MWU p", "BH q"]
    lines += _structure_summary(result, t, lang)
    lines += _ranks_section(result, t, lang)
    lines += _coverage_section(result, t)
    lines += _alignment_section(result, t, lang)
    lines += [f"## {t['all_sks']}", "", t["lane_note"], ""]
    lines += table(header, _sk_rows(result["sks"], lang))
    slower = [sk for sk in result["sks"] if sk["class"] == "significantly_slower"]
    lines += [f"## {t['slower']}", ""]
    lines += table(header, _sk_rows(slower, lang)) if slower else [t["none"], ""]
    lines += _child_section(result, t, lang)
    lines += [f"## {t['union']}", ""]
    rows = [
        [p["token"], part["pattern"], p["status"], "<br>".join(part["matched_symbols"]) or "—"]
        for p in repair["patterns"] for part in p.get("patterns") or []
    ] + [[p["token"], "—", p["status"], "—"] for p in repair["patterns"] if not p.get("patterns")]
    lines += table([t["token"], t["pattern"], t["status"], t["matched"]], rows) if rows else [t["none"], ""]
    lines += [f"## {t['options']}", ""]
    lines += _partial_first(result, lang) + ([""] if repair.get("partial") else [])
    if repair["proposed"]:
        lines += ["```json", json.dumps(repair["config"], ensure_ascii=False, indent=2), "```", ""]
        lines += ["```json", json.dumps(repair["diff"], ensure_ascii=False, indent=2), "```", ""]
    else:
        lines += [t["no_repair"], ""]
    lines += [f"> {t['note']}", ""]
    return "\n".join(lines)
