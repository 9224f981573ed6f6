"""Inline SVG figures: legend, axis titles, ticks, sorting, noise band, page width and the table twin."""

from __future__ import annotations

import re

from sk_analytics.dcci.groups import SkGroup
from sk_analytics.report.figures import PAGE_W, RunColumn, nice_ticks, svg_run_metrics, svg_sk_deltas
from sk_analytics.report.render import TEXT

T = TEXT["en"]
CLASSES = {"significantly_slower": "slower", "significantly_faster": "faster", "neutral": "neutral"}


def test_nice_ticks() -> None:
    assert nice_ticks(11.32, 13.25) == [11.0, 11.5, 12.0, 12.5, 13.0, 13.5]
    assert nice_ticks(-6.8, 59.7, 8) == [-10.0, 0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0]
    assert nice_ticks(5.0, 5.0) == [4.0, 4.5, 5.0, 5.5, 6.0]  # a flat series still gets an axis


def test_run_metrics_legend_axes_and_table() -> None:
    cols = [RunColumn("O0-INCUMBENT", None, "incumbent", (10.0, 10.0, 10.0, 10.0, 10.0)),
            RunColumn("O1", "a", "rejected", (10.2, 10.3, 10.4)), RunColumn("O2", "b", "failed", ())]
    svg = svg_run_metrics(cols, T, reference=10.0)
    assert svg.count("<circle cx=") == 8  # every run is a dot (legend markers have no cx)
    # equal values are spread sideways, never drawn on top of each other
    o0_x = [m for m in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)][:5]
    assert len({x for x, _ in o0_x}) == 5 and len({y for _, y in o0_x}) == 1
    for label in ("O0 incumbent", "rejected", "round mean", "O0 mean", "failed, no clean run", "worst-rank mean (ms)", "round"):
        assert f">{label}</text>" in svg, label
    assert "accepted (new incumbent)" not in svg  # the legend lists only outcomes that are drawn
    assert "✕" in svg and 'role="img"' in svg and "<figcaption>Worst-rank mean of every clean run per round (ms)</figcaption>" in svg
    assert "<td>O1</td><td>a</td><td>rejected</td><td>3</td><td>10.2000, 10.3000, 10.4000</td><td>10.3000</td>" in svg
    assert "<td>O2</td><td>b</td><td>failed</td><td>0</td><td>—</td><td>—</td>" in svg
    assert svg_run_metrics([RunColumn("O1", "a", "failed", ())], T) == ""


def test_run_metrics_mean_is_the_recorded_one_not_a_float_sum() -> None:
    """The figure's mean tick and its table twin show the round's recorded mean (the report's number): the float
    mean of these three run metrics is 11.244349999999999 and printed 11.2443 beside the report's 11.2444."""
    values = (10.38196, 10.86127, 12.48982)
    assert f"{sum(values) / 3:.4f}" == "11.2443"
    svg = svg_run_metrics([RunColumn("O1", "a", "rejected", values, mean_ms=11.24435)], T)
    assert "<td>10.3820, 10.8613, 12.4898</td><td>11.2444</td>" in svg
    assert "mean: 11.2444 ms</title>" in svg
    assert "<td>11.2443</td>" not in svg


def _group(name: str, cls: str, pcts: tuple[float, ...]) -> SkGroup:
    return SkGroup(f"key-{name}", name, cls, tuple(range(len(pcts))), pcts, tuple(p / 10 for p in pcts), 3.0)


def test_sk_deltas_rows_colours_band_and_width() -> None:
    groups = [_group("gate", "significantly_slower", (59.5, 59.7)), _group("head", "neutral", (-2.0,)),
              _group("qkv", "significantly_faster", (-6.8, -6.9, -6.8))]
    svg = svg_sk_deltas(groups, T, CLASSES)
    width = int(re.search(r'<svg[^>]* width="(\d+)"', svg).group(1))
    assert width <= PAGE_W and "max-width:100%" in svg
    labels = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    assert labels == ["gate ×2", "head #0", "qkv ×3"]  # in the given (sorted) order, occurrence count or index
    bars = re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="[\d.]+" height="14" fill="(#[0-9a-f]+)"', svg)
    assert bars == ["#c62828", "#9e9e9e", "#2e7d32"]  # slower red, neutral grey, faster green
    assert ">noise band ±3%</text>" in svg and ">+59.6%</text>" in svg and ">-6.8%</text>" in svg
    assert "<td>qkv</td><td>faster</td><td>3 (0–2)</td><td>-6.80</td><td>-6.90 … -6.80</td><td>-0.690 … -0.680</td><td>key-qkv</td>" in svg
    assert svg_sk_deltas([], T, CLASSES) == ""
