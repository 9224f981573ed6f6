"""Writers of tiny rank-log folders for the option-trial tests (hand-checkable)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def write_rank_log(path: Path, decode: Sequence[str], prefill: Sequence[str] = (), noise: bool = True) -> Path:
    """One ``log_<rank>.log``: optional prefill lines, then decode lines, with
    non-matching chatter in between so the parser must ignore it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["[INFO] model loaded"] if noise else []
    lines += [f"Inference time (prefill): {v} ms" for v in prefill]
    for value in decode:
        lines.append(f"[rank] step Inference time (decode): {value} ms")
        if noise:
            lines.append("[INFO] decode step done (other output, not a timing line)")
    path.write_text("\n".join(lines) + "\n")
    return path


def write_candidate(
    folder: Path,
    runs: Sequence[Mapping[int, Sequence[str]]],
    *,
    prefill: Sequence[str] = (),
) -> Path:
    """``folder/run-<k>/log_<rank>.log`` for each run (a mapping rank -> decode values)."""
    for k, ranks in enumerate(runs, start=1):
        for rank, decode in ranks.items():
            write_rank_log(folder / f"run-{k}" / f"log_{rank}.log", decode, prefill)
    return folder


def uniform_runs(run_values: Sequence[str], *, ranks: int = 2, warmup: int = 2, samples: int = 2) -> list[dict[int, list[str]]]:
    """Runs whose every rank logs ``warmup`` slow warm-up samples then
    ``samples`` copies of the run's value: the run metric is that value."""
    return [{r: ["999"] * warmup + [value] * samples for r in range(ranks)} for value in run_values]


NOT_REGULAR = ("folder", "loop", "dangling", "fifo")
"""Kinds of a rank-log path that is not a readable regular file (:func:`make_not_regular`)."""


def make_not_regular(path: Path, kind: str) -> Path:
    """Put a folder, a symlink loop, a dangling link or a FIFO where a rank log is expected."""
    import os

    if kind == "folder":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dangling":
        path.symlink_to("absent.log")
    else:
        os.mkfifo(path)
    return path
