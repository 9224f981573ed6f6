"""HTML of the report's Markdown subset, with the SVG figures placed at their markers."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping

FIGURE = re.compile(r"^<!-- figure:([a-z-]+) -->$")


def inline(text: str) -> str:
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


STYLE = ("body{font-family:sans-serif;max-width:1140px;margin:2em auto;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;margin:0.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
         "th{background:#f3f3f3}.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}code{background:#f6f6f6;padding:0 3px;word-break:break-all}"
         "blockquote{border-left:4px solid #c62828;margin:0;padding:0.3em 1em;background:#fff5f5}"
         "figure.chart{margin:1.5em 0;overflow-x:auto}figcaption{font-weight:bold;margin:0.3em 0}"
         "details summary{cursor:pointer;color:#1565c0;font-size:13px}td:last-child{overflow-wrap:anywhere}")


def markdown_to_html(markdown: str, figures: Mapping[str, str], title: str, lang: str = "zh") -> str:
    """HTML of the report's Markdown subset (headings, lists, tables, quotes, links, paragraphs) plus figures."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    in_list = False
    while i < len(lines):
        line = lines[i]
        if in_list and not line.startswith(("- ", "  - ")):
            out.append("</ul>")
            in_list = False
        fig = FIGURE.match(line)
        if fig:
            out.append(figures.get(fig.group(1), ""))
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{inline(line[level:].strip())}</h{level}>")
        elif line.startswith("| "):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", r.strip())[1:-1]] for r in rows]
            head, body = cells[0], cells[2:]
            num = [c.endswith(":") for c in cells[1]] if len(cells) > 1 else []  # `---:`: a right-aligned (numeric) column

            def td(tag: str, i: int, c: str) -> str:
                return f'<{tag} class="num">{inline(c)}</{tag}>' if i < len(num) and num[i] else f"<{tag}>{inline(c)}</{tag}>"

            out.append("<table><thead><tr>" + "".join(td("th", i, c) for i, c in enumerate(head)) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(td("td", i, c) for i, c in enumerate(r)) + "</tr>" for r in body)
                       + "</tbody></table>")
            continue
        elif line.startswith(("- ", "  - ")):
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{inline(line.lstrip()[2:])}</li>")
        elif line.startswith("> "):
            out.append(f"<blockquote>{inline(line[2:])}</blockquote>")
        elif line.strip():
            out.append(f"<p>{inline(line)}</p>")
        i += 1
    if in_list:
        out.append("</ul>")
    return (f'<!DOCTYPE html><html lang="{html.escape(lang)}"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>" + "\n".join(out) + "</body></html>\n")
