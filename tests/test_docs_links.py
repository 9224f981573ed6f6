"""README.md and docs/*.md: relative links resolve, the index reaches every page, the README's Polars example runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sk_analytics.ingest import ingest_run_dir
from sk_runner.demo.samples import write_rank_logs

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    """Relative links of ``page`` whose file or heading anchor does not exist."""
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.is_file() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_link_checker_finds_missing_files_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# Title\n\n## Session layout\n\n```\n## not a heading\n```\n", encoding="utf-8")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#session-layout) [x](b.md#not-a-heading) [y](c.md) [z](#title) [w](https://x.org/q)\n"
                    "# Title\n", encoding="utf-8")
    assert broken_links(page) == ["b.md#not-a-heading", "c.md"]


def test_index_links_every_page_and_readme_links_the_index() -> None:
    index = (REPO / "docs" / "index.md").read_text(encoding="utf-8")
    linked = {t.partition("#")[0] for t in LINK.findall(index)}
    pages = {p.name for p in (REPO / "docs").glob("*.md")} - {"index.md"}
    assert pages <= linked, sorted(pages - linked)
    assert "](docs/index.md)" in (REPO / "README.md").read_text(encoding="utf-8")


def _readme_python() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Open the data in Polars", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_polars_example_computes_the_worst_rank_means(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Two ranks; 8 warm-up samples of 20 ms are dropped. O0: rank means 11 and 12 -> 12.
    O1: rank means 9 and 10.5 -> 10.5. Rounds sort by their number (O0 before O1 before O10)."""
    data = tmp_path / "demo-session" / "data"
    warm = ["20.000"] * 8
    rounds = {"O0-INCUMBENT": (5, [warm + ["10.0", "12.0"], warm + ["12.0", "12.0"]]),
              "O1": (3, [warm + ["9.0", "9.0"], warm + ["10.0", "11.0"]]),
              "O10": (3, [warm + ["8.0", "8.0"], warm + ["8.5", "8.5"]])}
    for name, (runs, ranks) in rounds.items():
        for k in range(1, runs + 1):
            run_dir = tmp_path / "src" / name / f"run-{k}"
            write_rank_logs(run_dir, 2, ranks, prefill_ms="50.0")
            ingest_run_dir(run_dir, data, name, "trial", run_dir.name)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(_readme_python(), "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    rows = namespace["summary"].collect().rows()  # type: ignore[attr-defined]
    assert rows == [("O0-INCUMBENT", 5, 12.0), ("O1", 3, 10.5), ("O10", 3, 8.5)]
    assert "O0-INCUMBENT" in capsys.readouterr().out
