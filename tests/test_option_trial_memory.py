"""The option-trial memory path (issue 18, memory): logs parsed in batches,
compact columns, Int64 units where exact, one side's samples alive at a
time in the CLI, heavy imports kept out of the log-reading phase. Every
change must leave the numbers bit-identical."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

import polars as pl
import pytest
from ot_logs import uniform_runs, write_candidate

import sk_analytics.ingest.timings as timings
from sk_analytics.cli import main
from sk_analytics.errors import InputError, UsageError
from sk_analytics.option_trial import evaluate_option_trial
from sk_analytics.option_trial.api import summarize_side
from sk_analytics.option_trial.stats import collect_stats, narrow_units, split_samples, stats_query

RUNS = [
    {0: ["9", "9", "10.5", "11", "10.25"], 1: ["9", "9", "10", "12.125", "9.5"]},
    {0: ["9", "9", "10", "10", "10.75"], 1: ["9", "9", "11.5", "10", "10"]},
    {0: ["9", "9", "10.5", "10", "10"], 1: ["9", "9", "10", "10.5", "10.5"]},
]


def test_batches_share_small_logs_and_cut_large_ones_at_line_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sk_analytics.ingest.text_stream as stream

    folder = write_candidate(tmp_path / "c", RUNS)
    logs = [timings._rank_log(p, None) for p in sorted(folder.glob("run-*/log_*.log"))]
    assert [[p.file_id for p in batch] for batch in timings._batches(logs)] == [list(range(len(logs)))]
    monkeypatch.setattr(timings, "BATCH_BYTES", 1)
    monkeypatch.setattr(stream, "READ_BYTES", 50)
    batches = list(timings._batches(logs))
    assert all(len(batch) == 1 and batch[0].text.endswith("\n") for batch in batches)
    first = [batch[0] for batch in batches if batch[0].file_id == 0]
    assert len(first) > 1 and "".join(p.text for p in first) == logs[0].path.read_text()
    assert [p.first_line for p in first] == [1 + "".join(q.text for q in first[:i]).count("\n") for i in range(len(first))]


def test_batched_parse_equals_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows, their order, ranks, runs, source files and sample indices do not depend on batching."""
    folder = write_candidate(tmp_path / "c", RUNS, prefill=["50", "51.5"])
    one_pass = timings.read_candidate(folder, expected_ranks=2, warmup=2, root=folder)
    monkeypatch.setattr(timings, "BATCH_BYTES", 1)
    monkeypatch.setattr("sk_analytics.ingest.text_stream.READ_BYTES", 40)  # logs cut inside: sample_index counts on
    batched = timings.read_candidate(folder, expected_ranks=2, warmup=2, root=folder)
    assert batched.equals(one_pass)
    last = batched.filter(pl.col("run") == "run-3", pl.col("rank") == 1, pl.col("phase") == "decode")
    assert last["source_file"].to_list() == ["run-3/log_1.log"] * 5
    assert last["sample_index"].to_list() == [0, 1, 2, 3, 4]


def test_malformed_value_in_a_later_batch_names_its_own_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = [dict(r) for r in RUNS]
    runs[2] = {0: RUNS[2][0], 1: ["9", "9", "1.2.3", "10", "10"]}
    folder = write_candidate(tmp_path / "c", runs)
    monkeypatch.setattr(timings, "BATCH_BYTES", 1)
    with pytest.raises(InputError, match=r"run-3/log_1.log:6: timing value '1.2.3'"):
        timings.read_candidate(folder, expected_ranks=2, warmup=2)


def test_repeated_strings_are_categorical_in_memory_and_strings_in_tables(tmp_path: Path) -> None:
    folder = write_candidate(tmp_path / "c", RUNS)
    frame = timings.read_candidate(folder, expected_ranks=2, warmup=2)
    assert {frame.schema[c] for c in ("phase", "source_file", "run")} == {pl.Categorical()}
    parsed = timings.parse_rank_logs(sorted(folder.glob("run-1/log_*.log")), root=folder)
    assert {parsed[0].frame.schema[c] for c in ("phase", "source_file")} == {pl.String()}


def test_int64_units_only_where_every_sum_of_squares_fits() -> None:
    assert narrow_units(800_000, 30.0, 3)
    assert not narrow_units(800_000, 30.0, 9)  # 3e10 units: squares of a group pass 2**62
    assert not narrow_units(10, 1e12, 3)  # beyond the float-exact units bound
    assert narrow_units(0, None, 0)


@pytest.mark.parametrize(("text", "dtype"), [("12.345", pl.Int64), ("123456.789012", pl.Int128)])
def test_narrow_and_wide_units_give_identical_statistics(text: str, dtype: pl.DataType) -> None:
    """The same exact sums whatever the units' integer width (checked against the limb path)."""
    values = [text, "0.001", text, "7.5", "7.5", text]
    frame = pl.DataFrame({
        "run": ["run-1"] * 6, "rank": [0] * 6, "phase": ["decode"] * 6, "sample_index": list(range(6)),
        "value_text": values, "value_ms": [float(v) for v in values],
    })
    samples = split_samples(frame, 0)
    (narrow,) = collect_stats([stats_query(samples.decode, ["rank"], samples.scale)])
    (wide,) = collect_stats([stats_query(samples.decode, ["rank"], samples.scale, wide=True)], scale=samples.scale)
    assert samples.decode.collect_schema()["units"] == dtype
    columns = ["count", "sum_units", "mean_ms", "stddev_ms", "p50_ms", "p90_ms", "min_ms", "max_ms"]
    assert narrow.select(columns).rows() == wide.select(columns).rows()


def test_summaries_made_ahead_give_the_same_decision(tmp_path: Path) -> None:
    base = timings.read_candidate(write_candidate(tmp_path / "b", uniform_runs(["100", "102.5", "97.5", "100", "100"])),
                                  expected_ranks=2, warmup=2)
    cand = timings.read_candidate(write_candidate(tmp_path / "c", uniform_runs(["99", "98", "99.5"])), expected_ranks=2, warmup=2)
    from_frames = evaluate_option_trial(base, {"O1": cand}, warmup=2, baseline_path="b", candidate_paths={"O1": "c"}, expected_ranks=2)
    ahead = evaluate_option_trial(
        summarize_side(split_samples(base, 2), label="b", warmup=2),
        {"O1": summarize_side(split_samples(cand, 2), label="c", warmup=2)},
        warmup=2, baseline_path="b", candidate_paths={"O1": "c"}, expected_ranks=2,
    )
    assert json.dumps(ahead, sort_keys=True) == json.dumps(from_frames, sort_keys=True)
    with pytest.raises(UsageError, match="warm-up 2.*given for 'b' \\(warm-up 3\\)"):
        evaluate_option_trial(summarize_side(split_samples(base, 2), label="b", warmup=2), {"O1": cand}, warmup=3, baseline_path="b",
                              expected_ranks=2)
    with pytest.raises(UsageError, match="summary of 'c'.*given for 'b'"):
        evaluate_option_trial(summarize_side(split_samples(cand, 2), label="c", warmup=2), {"O1": cand}, warmup=2, baseline_path="b",
                              expected_ranks=2)


def test_cli_releases_each_side_before_reading_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """The memory peak is one side's frame: a source's timings frame is gone (only its compact
    samples were kept, and only until summarised) when the next source is read."""
    import sk_analytics.option_trial.sources as sources  # the CLI imports load_source from here when it runs

    base = write_candidate(tmp_path / "b", uniform_runs(["100", "102.5", "97.5", "100", "100"]))
    cand = write_candidate(tmp_path / "c", uniform_runs(["99", "98", "99.5"]))
    alive: list[weakref.ref[pl.DataFrame]] = []
    real = sources.load_source

    def tracked(*args, **kwargs) -> pl.DataFrame:
        gc.collect()
        assert [ref for ref in alive if ref() is not None] == []
        frame = real(*args, **kwargs)
        alive.append(weakref.ref(frame))
        return frame

    monkeypatch.setattr(sources, "load_source", tracked)
    with pytest.raises(SystemExit) as info:
        main(["option-trial", "--baseline", str(base), "--candidate", f"O1={cand}", "--warmup", "2", "--expected-ranks", "2"])
    assert info.value.code == 0 and len(alive) == 2
    capsys.readouterr()


def test_reading_logs_imports_neither_scipy_nor_pyarrow() -> None:
    """scipy.stats (~50 MB resident) loads only when the statistics run; pyarrow only for Parquet sources."""
    code = (
        "import sys\n"
        "import sk_analytics.cli.option_trial\n"
        "from sk_analytics.option_trial.inference import sps\n"
        "print(type(sys.modules['scipy.stats']).__name__, 'pyarrow' in sys.modules)\n"
        "sps.t.ppf(0.975, 4)\n"
        "print(type(sys.modules['scipy.stats']).__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["_LazyModule", "False", "module"]


def test_counted_logs_give_bit_identical_decisions_and_statistics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: the CLI reads a folder counted per distinct value (bounded memory); every number of the
    summary equals the one-row-a-sample path, also with logs cut across batches and warm-up values repeated."""
    import random

    rng = random.Random(7)
    values = [f"{rng.choice([9, 10, 11])}.{rng.randrange(1000):03d}" for _ in range(200)] + ["10.5", "10.50", "10.500"] * 3
    runs = [{r: [rng.choice(values) for _ in range(60)] for r in range(2)} for _ in range(5)]
    base = write_candidate(tmp_path / "b", runs, prefill=["50.25", "50.25", "49"])
    cand = write_candidate(tmp_path / "c", [{r: [rng.choice(values) for _ in range(40)] for r in range(2)} for _ in range(3)])
    monkeypatch.setattr(timings, "BATCH_BYTES", 700)
    monkeypatch.setattr("sk_analytics.ingest.text_stream.READ_BYTES", 300)
    monkeypatch.setattr(timings, "COUNT_ROWS", 50)  # counted several times while reading
    counted = {name: timings.read_candidate_counts(path, expected_ranks=2, warmup=8) for name, path in (("b", base), ("c", cand))}
    plain = {name: timings.read_candidate(path, expected_ranks=2, warmup=8) for name, path in (("b", base), ("c", cand))}
    assert counted["b"].height < plain["b"].height and "weight" in counted["b"].columns
    assert counted["b"]["weight"].sum() == plain["b"].height
    results = [json.dumps(evaluate_option_trial(frames["b"], {"O1": frames["c"]}, warmup=8, baseline_path="b", candidate_paths={"O1": "c"},
                                                expected_ranks=2), sort_keys=True) for frames in (counted, plain)]
    assert results[0] == results[1]
    with pytest.raises(InputError, match=r"run-1/log_0.log: no decode samples remain after warmup=60 \(60 decode"):
        timings.read_candidate_counts(base, expected_ranks=2, warmup=60)
    from sk_analytics.option_trial.sources import check_candidate

    check_candidate(counted["b"], label="b", expected_ranks=2, warmup=59)  # counts samples, not rows
    with pytest.raises(InputError, match=r"no decode samples remain after warmup=60 \(60 decode"):
        check_candidate(counted["b"], label="b", expected_ranks=2, warmup=60)


def test_small_sources_are_not_counted(tmp_path: Path) -> None:
    """Under COUNT_ROWS samples the bounded reader returns read_candidate's own frame (counting would cost more)."""
    folder = write_candidate(tmp_path / "c", RUNS)
    assert timings.read_candidate_counts(folder, expected_ranks=2, warmup=2).equals(timings.read_candidate(folder, expected_ranks=2, warmup=2))


def test_counted_wide_values_give_the_same_exact_statistics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Float-repr values (the wide, limb-sum path) counted: the same numbers as one row a sample."""
    values = ["10.123456789012345", "9.87654321098765", "10.5", "10.123456789012345", "11.000000000000002"]
    runs = [{r: [values[(i * 7 + r + k) % len(values)] for i in range(30)] for r in range(2)} for k in range(5)]
    folder = write_candidate(tmp_path / "w", runs)
    monkeypatch.setattr(timings, "COUNT_ROWS", 40)
    counted = timings.read_candidate_counts(folder, expected_ranks=2, warmup=8)
    plain = timings.read_candidate(folder, expected_ranks=2, warmup=8)
    assert "weight" in counted.columns and split_samples(counted, 8).wide and split_samples(plain, 8).wide
    from sk_analytics.option_trial.api import stability

    same = [json.dumps(stability(f, 8, path="w", expected_ranks=2), sort_keys=True) for f in (counted, plain)]
    assert same[0] == same[1]


@pytest.mark.slow
def test_a_ten_million_line_rank_log_is_read_within_300_mb(tmp_path: Path) -> None:
    """Issue 29: memory follows the work, not the file: `stability` on a folder whose rank log has
    10 M decode lines (350 MB) peaks under 300 MB (it took 2.2 GB) and counts every sample."""
    import random

    rng = random.Random(29)
    block = "".join(f"Inference time (decode): {10 + rng.random() * 5:.3f} ms\n" for _ in range(10_000))
    for k in range(1, 6):
        (tmp_path / "c" / f"run-{k}").mkdir(parents=True)
        with open(tmp_path / "c" / f"run-{k}" / "log_0.log", "w", encoding="ascii") as fh:
            for _ in range(1000 if k == 1 else 1):
                fh.write(block)
    out, peak = tmp_path / "s.json", tmp_path / "peak"
    hwm = ("import atexit\n"  # the child's own high-water mark (VmHWM), not one inherited over fork from this test
           f"atexit.register(lambda: open({str(peak)!r}, 'w').write([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]))\n"
           "from sk_analytics.cli import main\nmain()\n")
    done = subprocess.run([sys.executable, "-c", hwm, "stability", str(tmp_path / "c"), "--expected-ranks", "1", "--warmup", "8",
                           "--json-out", str(out)], stdout=subprocess.DEVNULL, check=False)
    assert done.returncode in (0, 1)
    peak_mb = int(peak.read_text().split()[1]) / 1024
    assert peak_mb < 300, f"peak {peak_mb:.0f} MB"
    result = json.loads(out.read_text())
    assert result["baseline"]["runs"][0]["decode"]["count"] == 10_000_000 - 8
    assert result["baseline"]["runs"][1]["decode"]["count"] == 10_000 - 8


@pytest.mark.parametrize("count_rows", [50, 1_000_000])
def test_logs_without_a_timing_line_are_each_named_by_both_readers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   count_rows: int) -> None:
    """Counted (COUNT_ROWS 50) or not, every log without a timing line is named, as ingest names it."""
    monkeypatch.setattr(timings, "COUNT_ROWS", count_rows)
    folder = write_candidate(tmp_path / "c", [{0: ["10.5"] * 40, 1: []}, {0: ["10.5"] * 40, 1: ["10.5"] * 40}, {0: [], 1: ["10.5"] * 40}])
    for read in (timings.read_candidate, timings.read_candidate_counts):
        with pytest.raises(InputError) as refused:
            read(folder, expected_ranks=2, warmup=8)
        assert refused.value.path == str(folder / "run-1" / "log_1.log")
        assert refused.value.message.startswith("this and 1 more file(s) hold no row")
        assert [line.split(": ")[0] for line in refused.value.details] == [str(folder / "run-1" / "log_1.log"),
                                                                           str(folder / "run-3" / "log_0.log")]
        assert all(": no timing line: the log holds no sample of its rank;" in line for line in refused.value.details)
