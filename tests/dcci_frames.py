"""Builders of small schema-conformant frames for the dcci tests (sk_events, sk_structure, symbols)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from sk_analytics.schema import SK_EVENTS, SK_STRUCTURE, SYMBOLS


def sk_events(rows: Sequence[dict]) -> pl.DataFrame:
    """sk_events rows from compact dicts: process, model_id, sk_id, node_id (None = span),
    lane, core, ts_ns, dur_ns, block_idx, block_num; other columns get defaults."""
    full = []
    for i, r in enumerate(rows):
        node = r.get("node_id")
        func = r.get("func", "sk_x" if node is None else f"Op{node}")
        blk = f"[{r.get('block_idx', 0)}/{r.get('block_num', 1)}]"
        full.append(
            {
                "record": i,
                "device_id": r.get("device_id", 0),
                "lane": r.get("lane", "AIV"),
                "core": r.get("core", 0),
                "ts_ns": r["ts_ns"],
                "dur_ns": r["dur_ns"],
                "model_id": r.get("model_id", "1_0"),
                "sk_id": r.get("sk_id", 1),
                "node_id": node,
                "block_idx": r.get("block_idx", 0),
                "block_num": r.get("block_num", 1),
                "is_span": node is None,
                "name": blk + (" " if node is None else "") + func,
                "func_name": func,
                "canonical_op": None if node is None else func,
                "source_file": f"sk_meta/{r.get('process', '100')}/sk_prof_device_0.json",
            }
        )
    frame = SK_EVENTS.conform(pl.DataFrame(full, schema_overrides={"node_id": pl.Int64}))
    return frame.with_columns(pl.Series("process", [str(r.get("process", "100")) for r in rows], dtype=pl.Utf8))


def launch(*, t0: int, sk_dur: int, children: Sequence[tuple[int, int, int]], cores: Sequence[int] = (0, 1),
           model_id: str = "1_0", sk_id: int = 1, process: str = "100") -> list[dict]:
    """One SK launch on ``cores``: a span event per core [t0, t0+sk_dur] and, per core,
    child events (node_id, offset_ns, dur_ns) — the same on every core unless a tuple has 4 items."""
    rows: list[dict] = []
    n = len(cores)
    for b, core in enumerate(cores):
        common = dict(model_id=model_id, sk_id=sk_id, process=process, core=core, block_idx=b, block_num=n)
        rows.append(dict(common, node_id=None, ts_ns=t0, dur_ns=sk_dur))
        for node, off, dur in children:
            rows.append(dict(common, node_id=node, ts_ns=t0 + off, dur_ns=dur))
    return rows


def structure(members: Sequence[dict]) -> pl.DataFrame:
    """sk_structure rows: model_dir, sk_func_name, scope_id, scope_name, child_index, func_name, canonical_op, member_kind."""
    full = []
    for i, m in enumerate(members):
        full.append(
            {
                "model_dir": m.get("model_dir", "model_1_0"),
                "sk_func_name": m.get("sk_func_name", f"sk_{m['scope_id']}"),
                "scope_id": m["scope_id"],
                "scope_name": m.get("scope_name", "none"),
                "node_count": m.get("node_count", 1),
                "child_index": m["child_index"],
                "node_id": m.get("node_id", i),
                "stream_id": 0,
                "member_kind": m.get("member_kind", "kernel"),
                "member_detail": None,
                "func_name": m.get("func_name"),
                "canonical_op": m.get("canonical_op"),
                "kernel_type": "AIV_ONLY",
                "num_blocks": 2,
                "line": i + 1,
                "source_file": f"sk_meta/{m.get('process', '100')}/{m.get('model_dir', 'model_1_0')}/sk_fused_nodes.log",
            }
        )
    return SK_STRUCTURE.conform(pl.DataFrame(full))


def symbols(names_ops: Sequence[tuple[str, str]]) -> pl.DataFrame:
    """symbols rows (updated graph) from (func_name, canonical_op) pairs."""
    return SYMBOLS.conform(
        pl.DataFrame(
            {
                "graph": ["updated"] * len(names_ops),
                "model_dir": ["model_1_0"] * len(names_ops),
                "stream_idx": [0] * len(names_ops),
                "node_id": list(range(len(names_ops))),
                "node_type": ["Kernel"] * len(names_ops),
                "func_name": [n for n, _ in names_ops],
                "canonical_op": [o for _, o in names_ops],
                "kernel_type": ["AIV_ONLY"] * len(names_ops),
                "source_file": ["sk_meta/100/model_1_0/sk_graph_updated.json"] * len(names_ops),
            }
        )
    )


HASHES = ["5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e", "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"]


def symbol_of(op: str, variant: int = 0) -> str:
    """A realistic kernel symbol of ``op`` (hash tail differs per variant)."""
    return f"static_kernel_{op}_{HASHES[variant % len(HASHES)]}_{variant + 1}_d0"


def profile(
    *,
    process: str,
    model_id: str,
    sks: Sequence[tuple[int, str, Sequence[str]]],
    occurrences: int,
    child_ns: Callable[[int, int, int], int],
    cores: Sequence[int] = (0, 1),
    variant: int = 0,
) -> dict[str, pl.DataFrame]:
    """Events, structure and symbols of one process running ``sks`` (scope_id, scope_name, ops)
    ``occurrences`` times; ``child_ns(sk_index, position, occurrence)`` gives each child's duration
    (children run back to back on every core; an event member sits between positions 0 and 1)."""
    rows: list[dict] = []
    members: list[dict] = []
    t = 1_000_000
    for scope, name, ops in sks:
        idx = 0
        for pos, op in enumerate(ops):
            members.append(dict(process=process, model_dir=f"model_{model_id}", scope_id=scope, scope_name=name,
                                child_index=idx, func_name=symbol_of(op, variant), canonical_op=op))
            idx += 1
            if pos == 0:
                members.append(dict(process=process, model_dir=f"model_{model_id}", scope_id=scope, scope_name=name,
                                    child_index=idx, member_kind="event"))
                idx += 1
    node_of = {}
    for m in members:
        if m.get("member_kind", "kernel") == "kernel":
            node_of.setdefault(m["scope_id"], []).append(m["child_index"])
    for occ in range(occurrences):
        for k, (scope, _name, ops) in enumerate(sks):
            off = 100
            children = []
            for pos, _op in enumerate(ops):
                d = child_ns(k, pos, occ)
                children.append((node_of[scope][pos], off, d))
                off += d
            rows += launch(t0=t, sk_dur=off + 100, children=children, cores=cores, model_id=model_id, sk_id=scope,
                           process=process)
            t += off + 5_000
    inventory = sorted({(symbol_of(op, variant), op) for _s, _n, ops in sks for op in ops})
    return {
        "events": sk_events(rows),
        "structure": structure(members).with_columns(pl.lit(process).alias("process")),
        "symbols": symbols(inventory).with_columns(pl.lit(process).alias("process")),
    }
