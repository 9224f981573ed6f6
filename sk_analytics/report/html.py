"""HTML of a report's Markdown (CommonMark with GFM tables, by markdown-it-py), with the SVG figures placed at their markers.

Raw HTML in the Markdown is escaped, not passed through: a report quotes option values, paths and log
lines that a workload wrote, and none of them may become markup. The figures are the only HTML we
insert, each at its own ``<!-- figure:<name> -->`` line.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

from markdown_it import MarkdownIt

FIGURE = re.compile(r"^<!-- figure:([a-z-]+) -->$", re.M)

STYLE = ("body{font-family:sans-serif;max-width:1140px;margin:2em auto;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;margin:0.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
         "th{background:#f3f3f3}code{background:#f6f6f6;padding:0 3px;word-break:break-all}"
         'td[style="text-align:right"],th[style="text-align:right"]{font-variant-numeric:tabular-nums;white-space:nowrap}'
         "blockquote{border-left:4px solid #c62828;margin:0;padding:0.3em 1em;background:#fff5f5}"
         "figure.chart{margin:1.5em 0;overflow-x:auto}figcaption{font-weight:bold;margin:0.3em 0}"
         "details summary{cursor:pointer;color:#1565c0;font-size:13px}td:last-child{overflow-wrap:anywhere}")

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable("table")


def markdown_to_html(markdown: str, figures: Mapping[str, str], title: str, lang: str = "zh") -> str:
    """The report page: ``markdown`` rendered, each figure marker replaced by its SVG (an unknown name by nothing)."""
    parts = FIGURE.split(markdown)  # text, name, text, name, …, text
    body = [_MARKDOWN.render(text) if i % 2 == 0 else figures.get(text, "") for i, text in enumerate(parts)]
    return (f'<!DOCTYPE html><html lang="{html.escape(lang)}"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>" + "\n".join(part for part in body if part) + "</body></html>\n")
