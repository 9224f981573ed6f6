"""EXPERIMENT_REPORT.md (Chinese by default, ``lang="en"``) and its HTML twin with inline SVG plots.

Everything comes from the session's own evidence: the ledger (decisions), the
frozen matrix, the option-trial summaries and stability files each gate
wrote, the DCCI diff and the BASE identity. The Markdown is the single text
of the report; :func:`markdown_to_html` renders the same text as HTML and
puts the figures (:mod:`sk_analytics.report.figures`: run metrics per
round, ΔP50 per SK structure) where the Markdown has a figure marker. The
English report renders recorded Chinese reasons through
:mod:`sk_analytics.stage_o.reasons`. Presentation only: nothing here decides.

Pieces: :mod:`~sk_analytics.session_view` (reading the session),
:mod:`~sk_analytics.report.text` (words, formats),
:mod:`~sk_analytics.report.dcci` (§6 section),
:mod:`~sk_analytics.report.html` (HTML); this module assembles them
and re-exports their public names.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sk_analytics.dcci.classify import CLASS_WORDS
from sk_analytics.dcci.groups import group_sks
from sk_analytics.explore.runsets import ALL_CLEAN, GATE, gate_decisions, gate_sides, round_metric
from sk_analytics.explore.stage_o import (
    BASE_LABEL,
    METRIC_CHECKS,
    accepted_path,
    gate_checks,
    o0_runs,
    round_outcome,
    rounds,
)
from sk_analytics.markdown import table
from sk_analytics.option_trial.api import GATE_LABELS
from sk_analytics.option_trial.sequential import FIRST_LOOK as SEQUENTIAL_FIRST_LOOK
from sk_analytics.report.dcci import dcci_section
from sk_analytics.report.devices import devices_section
from sk_analytics.report.figures import RunColumn, svg_run_metrics, svg_sk_deltas
from sk_analytics.report.html import FIGURE, STYLE, markdown_to_html
from sk_analytics.report.text import TEXT, ci_text, code, num, paren, pct, runs_label, word
from sk_analytics.session_view import (
    RoundInfo,
    SessionView,
    load_environment_blockers,
    load_view,
    run_count,
    settled_status,
    trial_round,
)
from sk_analytics.stage_o.contradictions import contradictions, lines as contradiction_lines, redecide_argv
from sk_analytics.stage_o.layout import PROBES_DIR
from sk_analytics.stage_o.reasons import failure_text, stop_reason
from sk_analytics.stage_o.state import O0

__all__ = [
    "FIGURE", "STYLE", "TEXT", "RoundInfo", "SessionView", "load_environment_blockers", "load_view", "markdown_to_html",
    "overview_rows", "render_markdown", "render_reports", "report_figures", "round_outcome", "run_columns",
]


def _environment_blockers(view: SessionView, t: Mapping[str, str]) -> list[str]:
    if not view.environment_blockers:
        return []
    rows = [[b.get("round", "?"), b.get("stage", "?"), _utc(b.get("ts_ns")), b.get("message", "")]
            for b in view.environment_blockers]
    return [f"## {t['env_blockers']}", "", *table(t["env_blockers_cols"].split("|"), rows)]


def _utc(ts_ns: Any) -> str:
    if not isinstance(ts_ns, int):
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts_ns / 1e9))


def _row_for(view: SessionView, info: RoundInfo | None, label: str, status: str, evidence: str, t: Mapping[str, str]) -> list[str]:
    """One overview row of a gated round: the gate's numbers (:func:`~sk_analytics.explore.gate_sides`), and which runs."""
    sides = {r["side"]: r for r in gate_sides(view).filter(round=info.name).to_dicts()} if info and info.gate else {}
    if not sides or info is None:
        return [label, "—", "—", "—", "—", "—", str(run_count(info)) if info else "0", status, evidence]
    base, cand = sides["baseline"], sides["candidate"]
    decision = gate_decisions(view).filter(round=info.name).row(0, named=True)
    runs = f"{runs_label(t, ALL_CLEAN, base['runs'], base['side_round'])} {t['vs']} {runs_label(t, GATE, cand['runs'], info.name)}"
    topped = round_metric(view, info.name, ALL_CLEAN)
    if topped is not None:
        runs += t["sep"] + runs_label(t, ALL_CLEAN, topped["runs"], info.name)
    return [label, t["metric_vs"].format(base=decision["baseline_round"]), num(base["worst_rank_mean_ms"]),
            num(cand["worst_rank_mean_ms"]), num(decision["delta_ms"]), pct(decision["mean_improvement_pct"]), runs, status, evidence]


def _evidence_of(info: RoundInfo | None, evidence: Mapping[str, Any], t: Mapping[str, str]) -> str:
    if evidence.get("scene"):
        return str(evidence["scene"])
    if info is not None and info.gate is not None:
        return str(info.gate.get("summary_path"))
    if "probe_evidence" in evidence:
        return t["probe"]
    return "; ".join(f"{k}={v}" for k, v in evidence.items() if isinstance(v, (str, int, float, bool)))[:80] or "—"


def overview_rows(view: SessionView, lang: str) -> list[list[str]]:
    """The first table: O0, every matrix entry (plus the DCCI repair), BASE."""
    t = TEXT[lang]
    rows: list[list[str]] = []
    o0 = view.rounds.get(O0)
    o0_clean = round_metric(view, O0, ALL_CLEAN)
    if o0 is not None:
        st = o0.stability or {}
        spread = (o0_clean or {}).get("spread_pct")
        status = (t["stable"] if st.get("stable") else t["unstable"]) + paren(t["spread"].format(pct=num(spread, 2)), lang) if st else "—"
        runs = runs_label(t, ALL_CLEAN, o0_clean["runs"], O0) if o0_clean else str(run_count(o0))
        failure = next((tr["failure"] for tr in o0.trials if tr.get("failure")), None)
        if failure is not None:  # the stopped session's O0 failure: its status word and its scene, as the hand-off has them
            status, where = word(t, "status", "failed"), str(failure.get("scene") or "—")
        else:
            where = str(st.get("path", "—"))
        rows.append([O0, t["metric"], "—", num((o0_clean or {}).get("mean_ms")), "—", "—", runs, status, where])
    for entry in view.matrix["entries"]:
        eid = entry["id"]
        status, _, evidence = settled_status(view, entry, lang)
        status = word(t, "status", status)
        trial = trial_round(view, eid, "trial")
        repair = trial_round(view, eid, "repair")
        label = f"{trial.name} {eid}" if trial else f"— {eid}"
        trial_status = t["to_diagnosis"] if repair is not None else status
        rows.append(_row_for(view, trial, label, trial_status, _evidence_of(trial, evidence, t), t))
        if repair is not None:
            rows.append(_row_for(view, repair, f"{repair.name} {eid}" + paren(t["joint_repair"], lang), status,
                                 _evidence_of(repair, evidence, t), t))
    base_clean = round_metric(view, view.base["round"], ALL_CLEAN) if view.base is not None else None
    if view.base is not None and o0_clean is not None and base_clean is not None:
        o0_mean, base_mean = o0_clean["mean_ms"], base_clean["mean_ms"]
        path = accepted_path(view).filter(label=BASE_LABEL)
        imp, delta = (path["total_improvement_pct"][0], path["total_delta_ms"][0]) if path.height else (None, None)
        runs = f"{runs_label(t, ALL_CLEAN, o0_clean['runs'], O0)} {t['vs']} {runs_label(t, ALL_CLEAN, base_clean['runs'], base_clean['round'])}"
        rows.append([t["base"] + paren(view.base["round"], lang), t["metric_vs"].format(base=O0), num(o0_mean), num(base_mean),
                     num(delta), pct(imp), runs, t["base"], "BASE/sbest-base.json"])
    return rows


def _o0_runs(view: SessionView, t: Mapping[str, str]) -> list[str]:
    runs = o0_runs(view)
    if not runs.height:
        return [t["none"], ""]
    rows = [[r["run"], r["worst_rank"], num(r["worst_rank_mean_ms"], 4), pct(r["deviation_pct"])] for r in runs.iter_rows(named=True)]
    if runs["protocol"].all():
        return table(t["o0_cols"].split("|"), rows)
    # a gate extended the incumbent: every run the decisions used, and which of them the protocol's verdict read
    marks = [t["yes"] if used else t["no"] for used in runs["protocol"]]
    return table([*t["o0_cols"].split("|"), t["o0_protocol_col"]], [[*row, mark] for row, mark in zip(rows, marks, strict=True)])


def _gate_rows(view: SessionView, round_name: str, t: Mapping[str, str]) -> list[list[str]]:
    """The round's recorded checks in protocol order; the value of the four metric checks in %."""
    checks = gate_checks(view).filter(round=round_name)
    return [[r["check"], pct(r["value"]) if r["check"] in METRIC_CHECKS else "—", t["yes"] if r["passed"] else t["no"]]
            for r in checks.iter_rows(named=True)]


def _decision_line(gate: Mapping[str, Any], lang: str) -> list[str]:
    """Who decided the round (a non-protocol policy says so) and what the protocol and the statistics policy answered;
    under the family policy, the runs the protocol's checks read and the family policy's own runs and interval."""
    t = TEXT[lang]
    mode = str(gate.get("gate_mode") or "protocol")
    en, zh = GATE_LABELS.get(mode, GATE_LABELS["protocol"])
    parts = [f"{t['decided_by']}: **{zh if lang == 'zh' else en}**",
             f"{t['protocol_gate']}: {t['passed'] if gate.get('protocol_accepted', gate.get('accepted')) else t['not_passed']}"]
    if gate.get("stats_accepted") is not None:
        parts.append(f"{t['stats_policy']}: {t['passed'] if gate['stats_accepted'] else t['not_passed']}")
    lines = ["- " + t["sep"].join(parts)]
    verdict, family = gate.get("protocol_verdict") or {}, gate.get("family")
    if family and "baseline_runs" in verdict:  # the protocol's view is on fewer runs than the family policy's
        # a record with the statistics on the protocol's runs: all of the protocol's view (older ones: its checks)
        said = t["protocol_view_runs" if "verdict" in verdict else "protocol_runs"]
        lines.append("  - " + said.format(base=verdict["baseline_runs"], cand=verdict["candidate_runs"]))
    if family:
        estimate = family.get("estimate") or {}
        interval = None if estimate.get("ci_low_pct") is None else [estimate["ci_low_pct"], estimate["ci_high_pct"]]
        lines.append("  - " + t["family_figures"].format(
            decision=t["accept"] if family.get("accepted") else t["reject"], base=family.get("incumbent_runs"),
            cand=family.get("runs_used"), pct=pct(estimate.get("improvement_pct")), ci=ci_text(interval)))
    return lines


def _protocol_runs_tag(gate: Mapping[str, Any], lang: str) -> str:
    """`` (the protocol's runs: …)`` after a figure of the protocol's view where the gate compared more runs (the
    family gate's record with its statistics on the protocol's runs); empty where the gate's runs are the protocol's."""
    verdict = gate.get("protocol_verdict") or {}
    if not gate.get("family") or "verdict" not in verdict:
        return ""
    return paren(TEXT[lang]["on_protocol_runs"].format(base=verdict["baseline_runs"], cand=verdict["candidate_runs"]), lang)


_TRUTH_CLASSES = ("gain", "neutral", "loss")


def _truth_section(view: SessionView, lang: str) -> list[str]:
    """Per gated round: the protocol's decision, the statistics policy's, and the simulator's truth (sessions on the simulator)."""
    if not view.truth:
        return []
    t = TEXT[lang]
    classes = dict(zip(_TRUTH_CLASSES, t["truth_class"].split("|"), strict=True))
    rows, right_protocol, right_stats, right_seq, right_family, band = [], 0, 0, 0, 0, 0.0
    protocol_runs: dict[str, Any] = {}  # under the family gate: the runs the protocol's view read
    replayed: dict[str, Any] = {}  # and the sequential gate's replay: the incumbent runs it read, its first look and cap
    for info in view.rounds.values():
        gate, truth = info.gate, view.truth.get(info.name)
        if gate is None or truth is None:
            continue
        band = truth["neutral_band_pct"]
        should = truth["class"] == "gain"
        protocol = bool(gate.get("protocol_accepted", gate.get("accepted")))
        stats = gate.get("stats_accepted")
        right_protocol += protocol == should
        right_stats += stats is not None and bool(stats) == should
        seq = gate.get("sequential") or {}
        right_seq += seq.get("state") in ("accepted", "rejected") and bool(seq.get("accepted")) == should

        def mark(accepted: bool | None, should: bool = should) -> str:  # bound: a closure would see the loop's last value
            if accepted is None:
                return "—"
            return f"{t['accept'] if accepted else t['reject']} {'✓' if accepted == should else '✗'}"

        en, zh = GATE_LABELS.get(str(gate.get("gate_mode") or "protocol"), GATE_LABELS["protocol"])
        decider = zh if lang == "zh" else en
        family, verdict = gate.get("family"), gate.get("protocol_verdict") or {}
        if family:  # the family policy's own decision beside the truth, on every run it compared
            right_family += bool(family.get("accepted")) == should
            decider = t["truth_family"].format(label=decider, mark=mark(bool(family.get("accepted"))), base=family.get("incumbent_runs"),
                                               cand=family.get("runs_used"))
            if "verdict" in verdict:
                protocol_runs = {"base": verdict["baseline_runs"], "cand": verdict["candidate_runs"]}
            if "sequential_baseline_runs" in verdict and seq:  # the sequential gate replayed on its own runs
                replayed = {"seq_base": verdict["sequential_baseline_runs"], "first": SEQUENTIAL_FIRST_LOOK, "cap": seq.get("cap")}
        advice = word(t, "advice", (gate.get("advice") or {}).get("kind", "—"))
        sequential = "—" if not seq else (t["undecided"] if seq.get("state") == "undecided" else mark(bool(seq.get("accepted"))))
        sequential += "" if not seq else " " + t["seq_runs"].format(n=seq.get("runs_used"))
        rows.append([info.name, str(info.entry_id), mark(protocol), mark(stats), sequential, decider,
                     pct(truth["improvement_pct"]), classes[truth["class"]], advice])
    if not rows:
        return []
    space = "" if lang == "zh" else " "  # between two sentences
    family_note = t["truth_note_family_replay"] if replayed else t["truth_note_family"]
    note = t["truth_note"].format(band=band) + (space + family_note.format(**protocol_runs, **replayed) if protocol_runs else "")
    agree = t["truth_agree"].format(p=right_protocol, s=right_stats, q=right_seq, n=len(rows))
    if any(info.gate and info.gate.get("family") for info in view.rounds.values()):
        agree += space + t["truth_agree_family"].format(f=right_family, n=len(rows))
    return [f"## {t['truth']}", "", note, "", *table(t["truth_cols"].split("|"), rows), agree, ""]


def _trial_section(view: SessionView, entry: Mapping[str, Any], lang: str) -> list[str]:
    t = TEXT[lang]
    sep = t["sep"]
    eid = entry["id"]
    status, reason, evidence = settled_status(view, entry, lang)
    status = word(t, "status", status)
    trial = trial_round(view, eid, "trial")
    lines = [f"### {trial.name if trial else '—'} · {eid}", ""]
    lines += [
        f"- {t['option']}: `{entry['option']}`{sep}{t['value']}: {code(entry['value'])}{sep}{t['original']}: {code(entry['original'])}",
        f"- {t['pointer']}: `{entry['pointer']}`{sep}{t['risk']}: {word(t, 'risk', entry['risk'])}",
        f"- {t['status']}: **{status}** — {reason}",
    ]
    for info in (trial, trial_round(view, eid, "repair")):
        if info is None:
            continue
        last = info.trials[-1]
        lines.append(f"- {info.name}{paren(word(t, 'phase', info.phase), lang)}{' ' if lang == 'en' else ''}{t['base_round']}: "
                     f"{last.get('base_round') or 'SEED'}{sep}{t['config_label']}: `{last.get('config_path')}`")
        if info.gate:
            g = info.gate
            lines += ["", *table(t["gate_cols"].split("|"), _gate_rows(view, info.name, t))]
            lines += _decision_line(g, lang)
            on_protocol_runs = _protocol_runs_tag(g, lang)  # advice and statistics: the protocol's view, on its runs
            if g.get("advice"):
                lines.append(f"- {t['advice']}{on_protocol_runs}: {g['advice']['text_zh'] if lang == 'zh' else g['advice']['text']}")
            decision = gate_decisions(view).filter(round=info.name).row(0, named=True)
            lines.append(f"- {t['stats']}{on_protocol_runs}: {t['verdict']}={word(t, 'verdict', decision['verdict'])}{sep}"
                         f"{t['ci95']}={ci_text(None if decision['ci_low_pct'] is None else [decision['ci_low_pct'], decision['ci_high_pct']])}")
            for key, side in (("runs_base", "baseline"), ("runs_cand", "candidate")):
                row = gate_sides(view).filter(round=info.name, side=side).row(0, named=True)  # the runs the gate compared
                lines.append(f"  - {t[key]}{paren(runs_label(t, row['run_set'], row['runs'], row['side_round']), lang)}: ")
                lines[-1] += ", ".join(num(x) for x in row["run_metrics_ms"]) + " ms"
            lines.append(f"- {t['evidence']}: `{g.get('summary_path')}`")
        for tr in info.trials:
            if tr.get("failure"):
                lines.append(f"- {t['evidence']}{paren(t['failure_scene'], lang)}: `{tr['failure'].get('scene')}` — "
                             f"{failure_text(tr['failure'], lang)}")
    if isinstance(evidence.get("probe_evidence"), Mapping):
        lines += _probe_lines(evidence["probe_evidence"], lang)
    return lines + [""]


def _probe_lines(probe: Mapping[str, Any], lang: str) -> list[str]:
    """Where a blocked entry's probe ran (its cause is the entry's status line), from the session's ``PROBES/`` folder on
    as the report's other evidence paths are: the record names it with the session's path as the sweep was given it,
    and a report never holds that path (a copied or moved session re-renders the same report, handoff.crosscheck);
    none when no probe process ran (the value not listed, refused by the wrapper). The record was quoted as JSON here,
    cut at 200 characters mid-field."""
    record = probe.get("evidence")
    runtime = record.get("runtime") if isinstance(record, Mapping) else None
    folder = runtime.get("attempt_dir") if isinstance(runtime, Mapping) else None
    if not isinstance(folder, str) or not folder:
        return []
    t = TEXT[lang]
    parts = Path(folder).parts
    shown = Path(*parts[len(parts) - 1 - parts[::-1].index(PROBES_DIR):]).as_posix() if PROBES_DIR in parts else folder
    return [f"- {t['evidence']}{paren(t['probe'], lang)}: `{shown}`"]


def render_markdown(view: SessionView, lang: str = "zh") -> str:
    """The full report text (Markdown)."""
    lang = "en" if lang == "en" else "zh"
    t = TEXT[lang]
    outcome = t["outcome_stopped"] if view.state.stopped else t["outcome_base"]
    lines = [f"# {t['title']}", "", f"**{outcome}**", ""]
    found = contradictions(view.records)
    if found:  # issue 43: in the headline, never below it
        said = contradiction_lines(found, redecide_argv(str(view.root.resolve())), lang)
        lines += [f"> **{said[0]}**", *[f"> - {line.strip()}" for line in said[1:]], ""]
    if view.state.stopped:
        lines += [f"- {t['stop_reason']}: {stop_reason(view.state.stopped, view.state, lang)}"]
        scene = (view.state.stopped.get("evidence") or {}).get("scene")
        lines += [f"- {t['failure_scene']}: `{scene}`", ""] if scene else [""]
    if view.base is not None:
        lines += [f"- {t['base']}: {view.base['round']}{t['sep']}base_fingerprint `{view.base['base_fingerprint']}`",
                  f"- {t['options_label']}: {code(view.base.get('options'))}", ""]
    lines += [f"## {t['overview']}", ""]
    lines += table(t["cols"].split("|"), overview_rows(view, lang))
    lines += [f"## {t['o0_runs']}", ""]
    lines += _o0_runs(view, t)
    lines += [f"## {t['trials']}", ""]
    for entry in view.matrix["entries"]:
        lines += _trial_section(view, entry, lang)
    lines += dcci_section(view, lang)
    lines += _truth_section(view, lang)
    lines += devices_section(view, lang)
    lines += _environment_blockers(view, t)
    lines += [f"## {t['figures']}", "", t["fig_md_note"], "", "<!-- figure:run-metrics -->", ""]
    if view.dcci_diff is not None:
        lines += ["<!-- figure:sk-deltas -->", ""]
    if view.next_steps:
        lines += [f"## {t['next']}", "", *[f"- {s}" for s in view.next_steps], ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- figure data


def run_columns(view: SessionView, lang: str = "zh") -> list[RunColumn]:
    """Every round in order with its widest set of clean runs' worst-rank means (:func:`sk_analytics.explore.rounds`),
    labelled with that set in ``lang``."""
    t = TEXT["en" if lang == "en" else "zh"]
    return [RunColumn(r["round"], r["entry_id"], r["outcome"], tuple(r["run_metrics_ms"]),
                      runs_label(t, r["run_set"], r["runs"], r["round"]) if r["runs"] else "", r["mean_ms"])
            for r in rounds(view).iter_rows(named=True)]


def report_figures(view: SessionView, lang: str) -> dict[str, str]:
    """The HTML figures keyed by their Markdown marker name."""
    t = TEXT[lang]
    reference = (round_metric(view, O0, ALL_CLEAN) or {}).get("mean_ms")  # O0's five-run mean, the dashed line
    groups = group_sks((view.dcci_diff or {}).get("sks") or [])
    return {"run-metrics": svg_run_metrics(run_columns(view, lang), t, reference),
            "sk-deltas": svg_sk_deltas(groups, t, CLASS_WORDS[lang])}



def render_reports(view: SessionView, lang: str = "zh") -> tuple[str, str]:
    """(Markdown, HTML) of the session report in ``lang``."""
    lang = "en" if lang == "en" else "zh"
    markdown = render_markdown(view, lang)
    return markdown, markdown_to_html(markdown, report_figures(view, lang), TEXT[lang]["title"], lang)
