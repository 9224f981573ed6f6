"""The DCCI section of the session report (protocol §6 table, collections, slower SKs, repair)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sk_analytics.dcci.groups import format_range, group_sks, occurrence_ranges
from sk_analytics.explore.runsets import gate_sides
from sk_analytics.markdown import table
from sk_analytics.report.text import TEXT, code, num, paren, pct, runs_label, word
from sk_analytics.session_view import SessionView, settled_status, trial_round


def _dcci_row(label: str, side: Mapping[str, Any], t: Mapping[str, str], gate: str, change: str) -> list[Any]:
    """One §6 table row from a :func:`~sk_analytics.explore.gate_sides` row: the numbers the gate compared, and over which runs."""
    return [label, runs_label(t, side["run_set"], side["runs"], side["side_round"]), num(side["worst_rank_mean_ms"]),
            num(side["median_run_ms"]), num(side["decode_p50_ms"]), num(side["decode_p90_ms"]), num(side["decode_stddev_ms"]),
            pct(side["spread_pct"]), gate, change]


def _dcci_table(view: SessionView, entry: Mapping[str, Any], lang: str) -> list[list[Any]]:
    """Protocol §6 rows: O0 (the baseline side of the disable-all gate), disable-all and the repair, each over its gate's runs."""
    t = TEXT[lang]
    eid = entry["id"]
    settled = view.state.settled.get(eid, {})
    trial, repair = trial_round(view, eid, "trial"), trial_round(view, eid, "repair")
    sides = gate_sides(view)
    rows: list[list[Any]] = []
    if trial is not None:
        base = sides.filter(round=trial.name, side="baseline").to_dicts()
        rows += [_dcci_row(b["side_round"], b, t, "—", "—") for b in base]
    for info, label in ((trial, "disable-all"), (repair, "disable+before+after")):
        cand = sides.filter(round=info.name, side="candidate").to_dicts() if info is not None else []
        if info is None or not cand:
            continue
        accepted = bool(info.gate and info.gate.get("accepted"))
        changed = settled.get("status") == "accepted" and settled.get("incumbent_round") == info.name
        rows.append(_dcci_row(label + paren(info.name, lang), cand[0], t,
                              t["yes"] if accepted else t["no"], t["incumbent_changed"] if changed else t["incumbent_kept"]))
    return rows


def _occurrence_count(occurrences: Sequence[int], t: Mapping[str, str]) -> str:
    """``16 × 2 ranks`` when each occurrence was measured on several ranks (one SK slot per rank), else the count."""
    distinct = len(set(occurrences))
    per = len(occurrences) // distinct if distinct else 0
    return t["occ_times_ranks"].format(n=distinct, r=per) if distinct and per > 1 and per * distinct == len(occurrences) else str(len(occurrences))


def _slower_groups(diff: Mapping[str, Any], t: Mapping[str, str]) -> list[str]:
    """The significantly slower SKs, one row per structure (the per-occurrence rows are in the diff report)."""
    groups = [g for g in group_sks(diff.get("sks") or []) if g.cls == "significantly_slower"]
    if not groups:
        return []
    rows = [[g.short_name, _occurrence_count(g.occurrences, t), occurrence_ranges(g.occurrences),
             format_range(g.delta_p50_us), format_range(g.delta_p50_pct), g.structure] for g in groups]
    return [f"### {t['slower']}", "", *table(t["slower_cols"].split("|"), rows)]


def _repair_sections(rep: Mapping[str, Any], t: Mapping[str, str]) -> list[str]:
    """Child union with its symbol-to-regex mapping, then the exact option settings and config diff."""
    lines = [f"### {t['union']}", ""]
    def patterns(p: Mapping[str, Any]) -> str:  # a token may need one pattern per prefix family
        every = [part.get("pattern") for part in p.get("patterns") or []] or ([p["pattern"]] if p.get("pattern") else [])
        return ", ".join(f"`{x}`" for x in every) or "—"

    rows = [[p.get("token"), patterns(p), word(t, "status", p.get("status")),
             ", ".join(f"`{s}`" for s in p.get("matched_symbols") or []) or "—"] for p in rep.get("patterns") or []]
    lines += table(t["union_cols"].split("|"), rows) if rows else [t["none"], ""]
    if rep.get("proposed"):
        options = (rep.get("config") or {}).get("super_kernel_optimize_options") or {}
        lines += [f"### {t['repair_settings']}", ""]
        lines += [f"- `{name}`: {code(options.get(name))}"
                  for name in ("dcci_disable_on_kernel", "dcci_before_kernel_start", "dcci_after_kernel_end")]
        lines += [f"- {t['config_diff']} (RFC 6902): {code(rep.get('diff'))}", ""]
    return lines


def dcci_section(view: SessionView, lang: str) -> list[str]:
    t = TEXT[lang]
    entry = next((e for e in view.matrix["entries"] if e["category"] == "dcci"), None)
    lines = [f"## {t['dcci']}", ""]
    if entry is None:
        return lines + [t["no_dcci"], ""]
    eid = entry["id"]
    status, reason, _ = settled_status(view, entry, lang)
    status = word(t, "status", status)
    rows = _dcci_table(view, entry, lang)
    lines += table(t["dcci_cols"].split("|"), rows) if rows else []
    lines += [f"- {t['status']}: **{status}** — {reason}", ""]
    profiles = [d for k, d in view.records if k == "profile_result" and d.get("entry_id") == eid]
    if not profiles:
        lines += [t["no_diag"], ""]
    else:
        lines += [f"### {t['collections']}", ""]
        lines += table(t["coll_cols"].split("|"),
                       [[p["side"], p.get("role"), p.get("root") or (p.get("reason_zh") if lang == "zh" else p.get("reason")),
                         p.get("manifest_fingerprint") or "—"] for p in profiles])
    diff_rec = next((d for k, d in view.records if k == "dcci_diff_result" and d.get("entry_id") == eid), None)
    if diff_rec is not None:
        md = str(diff_rec.get("path") or "").removesuffix(".json") + ".md"
        lines += [f"- {t['diff_report']} [{md}]({md})" + paren(f"JSON: `{diff_rec.get('path')}`", lang), ""]
    if view.dcci_diff is not None:
        lines += _slower_groups(view.dcci_diff, t)
        lines += _repair_sections(view.dcci_diff.get("repair") or {}, t)
    return lines + [f"> {t['correlation']}", ""]
