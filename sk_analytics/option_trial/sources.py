"""Where option-trial timings come from: a raw candidate folder or a selection
of a session's ``timings`` Parquet.

Source syntax (``--baseline`` value, or the PATH of ``--candidate NAME=PATH``):

* ``DIR``: a folder of ``run-*/log_<rank>.log`` (the legacy layout);
* ``parquet:DATA_DIR#round=R,role=X``: the timings of round ``R`` (and role
  ``X``, optional) under a session's Parquet data folder (``<session>/data``
  or the session folder itself); runs are the ``run=`` hive partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError, UsageError
from sk_analytics.ingest.timings import RankCountError, read_candidate_counts
from sk_analytics.schema import TIMINGS

PARQUET_PREFIX = "parquet:"
SELECTION_KEYS = ("round", "role")


@dataclass(frozen=True)
class ParquetSelection:
    """A ``parquet:DATA_DIR#round=R,role=X`` source."""

    data_dir: Path
    filters: dict[str, str]


def parse_parquet_spec(spec: str) -> ParquetSelection:
    """Parse ``parquet:DATA_DIR#key=value,...``; malformed -> :class:`UsageError`."""
    body = spec[len(PARQUET_PREFIX):]
    location, _, query = body.partition("#")
    if not location or not query:
        raise UsageError(f"bad Parquet source {spec!r} (expected parquet:DATA_DIR#round=R[,role=X])")
    filters: dict[str, str] = {}
    for item in query.split(","):
        key, eq, value = item.partition("=")
        if not eq or key not in SELECTION_KEYS or not value or key in filters:
            raise UsageError(f"bad Parquet selection {item!r} in {spec!r} (expected round=R[,role=X])")
        filters[key] = value
    if "round" not in filters:
        raise UsageError(f"Parquet source {spec!r} needs round=R")
    data_dir = Path(location)
    if (data_dir / "data" / TIMINGS.name).is_dir():
        data_dir = data_dir / "data"
    return ParquetSelection(data_dir, filters)


def read_parquet_selection(selection: ParquetSelection, *, label: str) -> pl.DataFrame:
    """The selected timings rows with the ``run`` partition as the run column."""
    from sk_analytics.tables import scan_table  # pyarrow behind it: only a Parquet source pays for it (~60 MB resident)

    if not (selection.data_dir / TIMINGS.name).is_dir():
        raise InputError(selection.data_dir, "no timings table here", expected="a session data folder with timings/")
    predicate = pl.lit(True)
    for key, value in selection.filters.items():
        predicate = predicate & (pl.col(key) == value)
    frame = scan_table(selection.data_dir, TIMINGS).filter(predicate).collect()
    if frame.is_empty():
        raise InputError(label, "the selection holds no timing samples", expected="an ingested round/role")
    return frame


def load_source(spec: str, *, expected_ranks: int, warmup: int) -> pl.DataFrame:
    """Timings frame (with ``run``) of a source spec, validated for the gate: a folder's logs counted per
    distinct value (:func:`~sk_analytics.ingest.timings.read_candidate_counts`: bounded memory), a Parquet
    selection one row a sample; :func:`~sk_analytics.option_trial.stats.split_samples` takes either."""
    if spec.startswith(PARQUET_PREFIX):
        frame = read_parquet_selection(parse_parquet_spec(spec), label=spec)
        check_candidate(frame, label=spec, expected_ranks=expected_ranks, warmup=warmup)
        return frame
    return read_candidate_counts(Path(spec), expected_ranks=expected_ranks, warmup=warmup)


def parse_candidate_arg(value: str) -> tuple[str, str]:
    """``NAME=PATH`` -> (name, path); anything else is a usage error."""
    name, eq, path = value.partition("=")
    if not eq or not name.strip() or not path.strip():
        raise UsageError(f"--candidate {value!r} is malformed (expected NAME=PATH)")
    return name.strip(), path.strip()


def check_candidate(frame: pl.DataFrame, *, label: str, expected_ranks: int, warmup: int) -> None:
    """Validate a timings frame with a ``run`` column for the option-trial gate.

    For frames without files behind them (Parquet selections, API callers);
    :func:`~sk_analytics.ingest.timings.read_candidate` applies the same rules to the files themselves.
    """
    if warmup < 0:
        raise InputError(label, f"warm-up {warmup} is negative", expected="--warmup >= 0")
    if frame.is_empty():
        raise InputError(label, "no timing samples", expected="run-*/log_<rank>.log with timing lines")
    per_run = (frame.group_by("run")
               .agg(pl.col("rank").n_unique().alias("ranks"), pl.col("rank").min().alias("low"), pl.col("rank").max().alias("high"))
               .sort("run"))
    wrong = per_run.filter(pl.col("ranks") != expected_ranks)
    if wrong.height:
        row = wrong.row(0, named=True)
        raise RankCountError(f"{label}/{row['run']}", f"found {row['ranks']} ranks", expected=str(expected_ranks))
    # as many ranks as expected, yet not 0 … R-1 (0 and 2 of two): one left out, one beyond the run's
    elsewhere = per_run.filter((pl.col("low") != 0) | (pl.col("high") != expected_ranks - 1))
    if elsewhere.height:
        run = elsewhere.row(0, named=True)["run"]
        ranks = frame.filter(pl.col("run") == run).get_column("rank").unique().sort().to_list()
        raise InputError(f"{label}/{run}", f"ranks {', '.join(map(str, ranks))}",
                         expected=f"ranks 0 … {expected_ranks - 1}, one log each")
    weight = pl.col("weight") if "weight" in frame.columns else pl.lit(1)  # a counted frame (read_candidate_counts)
    starved = (
        frame.group_by("run", "rank")
        .agg(
            weight.filter(pl.col("phase") == "decode").sum().alias("n"),
            pl.col("source_file").first(),
        )
        .filter(pl.col("n") <= warmup)
        .sort("run", "rank")
    )
    if starved.height:
        row = starved.row(0, named=True)
        raise InputError(
            row["source_file"],
            f"no decode samples remain after warmup={warmup} ({row['n']} decode samples)",
            expected=f"more than {warmup} decode samples per rank",
        )
