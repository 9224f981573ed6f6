"""``communication.json`` and ``communication_matrix.json`` of one profiled rank (torch_npu Level1).

torch_npu writes them to ``ASCEND_PROFILER_OUTPUT/`` (msprof's own analysis to
``PROF_*/analyze/``): per step ``"step<N>": {"p2p": {}, "collective": {...}}``,
one collective entry ``"<opName>@<groupName>"`` per hcom op with its
``Communication Time Info`` and a ``Communication Bandwidth Info`` per
transport. The simulator models an hcom op as one span and no link traffic,
so what it writes is what it knows: the start, the elapse time, no transit,
wait or synchronization time (the whole elapse is idle), zero bytes on every
transport, and an empty link matrix. The group name is the same on every rank
of one launch (a hash of the network build and the rank count), as one
tensor-parallel group is on hardware.

Built as text with Polars expressions, one entry per hcom row (no Python loop over rows).
"""

from __future__ import annotations

import hashlib

import polars as pl

TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
_NO_TRAFFIC = ", ".join(
    f'"{t}": {{"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0, "Size Distribution": {{}}}}'
    for t in TRANSPORTS
)
_NO_TRAFFIC_TOTAL = ", ".join(f'"{t}": {{"Transit Time(ms)": 0, "Transit Size(MB)": 0, "Size Distribution": {{}}}}' for t in TRANSPORTS)
"""The ``Total Op Info`` entry of a step sums its ops and has no bandwidth or packet ratio keys."""


def group_name(build_id: str, ranks: int) -> str:
    """The communication group of all tensor-parallel ranks of one launch, as a decimal hash like HCCL's."""
    return str(int.from_bytes(hashlib.blake2b(f"{build_id}/tp{ranks}".encode(), digest_size=8).digest(), "big"))


def _num(expr: pl.Expr, decimals: int) -> pl.Expr:
    return expr.round(decimals).cast(pl.Utf8)


def communication_text(rows: pl.DataFrame, group: str) -> str:
    """``communication.json`` of the hcom rows of :func:`~sk_runner.sim.profiler.kernel_rows` (``core == COMMUNICATION``)."""
    comm = rows.filter(pl.col("core") == "COMMUNICATION")
    steps = rows.get_column("step").unique().sort()
    if comm.height == 0:
        return "{" + ", ".join(f'"step{s}": {{"p2p": {{}}, "collective": {{}}}}' for s in steps.to_list()) + "}\n"
    elapse_ms = pl.col("dur_ns") / 1e6
    entry = pl.concat_str(
        [
            pl.lit('"'), pl.col("name"), pl.lit(f'@{group}": {{"Communication Time Info": {{"Start Timestamp(us)": '),
            _num(pl.col("start_ns") / 1000.0, 3), pl.lit(', "Elapse Time(ms)": '), _num(elapse_ms, 6),
            pl.lit(', "Transit Time(ms)": 0, "Wait Time(ms)": 0, "Synchronization Time(ms)": 0, "Idle Time(ms)": '), _num(elapse_ms, 6),
            pl.lit(f', "Wait Time Ratio": 0, "Synchronization Time Ratio": 0}}, "Communication Bandwidth Info": {{{_NO_TRAFFIC}}}}}'),
        ]
    )  # fmt: skip
    total_ms = _num(pl.col("dur_ns").sum() / 1e6, 6)
    total = pl.concat_str(
        [
            pl.lit(', "Total Op Info": {"Communication Time Info": {"Elapse Time(ms)": '), total_ms,
            pl.lit(', "Transit Time(ms)": 0, "Wait Time(ms)": 0, "Synchronization Time(ms)": 0, "Idle Time(ms)": '), total_ms,
            pl.lit(f', "Wait Time Ratio": 0, "Synchronization Time Ratio": 0}}, "Communication Bandwidth Info": {{{_NO_TRAFFIC_TOTAL}}}}}'),
        ]
    )  # fmt: skip
    per_step = (
        comm.sort("start_ns")
        .group_by("step", maintain_order=True)
        .agg(pl.concat_str([entry.str.join(", "), total]).alias("entries"))
    )
    by_step = dict(zip(per_step["step"].to_list(), per_step["entries"].to_list(), strict=True))
    parts = [f'"step{s}": {{"p2p": {{}}, "collective": {{{by_step.get(s, "")}}}}}' for s in steps.to_list()]
    return "{" + ", ".join(parts) + "}\n"


def communication_matrix_text(rows: pl.DataFrame) -> str:
    """``communication_matrix.json``: every step, no link entries (the simulator models no link traffic)."""
    steps = rows.get_column("step").unique().sort().to_list()
    return "{" + ", ".join(f'"step{s}": {{"p2p": {{}}, "collective": {{}}}}' for s in steps) + "}\n"
