"""Network specs of the simulated device: built-ins, inheritance, expansion, bad specs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sk_analytics.errors import InputError
from sk_runner.sim.model import compile_model
from sk_runner.sim.network import builtin_names, expand, load_network
from sk_runner.sim.options import resolve


def test_builtin_scenarios() -> None:
    assert builtin_names() == ["dcci-gain", "dcci-neutral", "dcci-unrepairable", "moe-decode", "moe-decode-2host"]
    assert load_network(None).name == "moe-decode"


def test_default_network_shape() -> None:
    graph = expand(load_network("moe-decode"))
    assert graph.n_launches == 164 and int(graph.launch_is_sk.sum()) == 129
    # identical structures repeat over the 16 layers, so graph occurrence matters
    scopes = [s for s, sk in zip(graph.launch_scope, graph.launch_is_sk, strict=True) if sk]
    assert scopes.count("moe_gate") == 16 and scopes.count("attn_core") == 32  # split in two by the unpaired wait
    assert set(graph.launch_stream.tolist()) == {0, 1}
    kernel_types = {t for t, k in zip(graph.member_kernel_type, graph.member_is_kernel, strict=True) if k}
    assert {"AIC_ONLY", "AIV_ONLY", "MIX_1_2", "COMMUNICATION", "AI_VECTOR_CORE"} <= kernel_types
    events = [op for op, k in zip(graph.member_op, graph.member_is_kernel, strict=True) if not k]
    assert set(events) == {"EventWait", "EventNotify"}


def test_child_index_counts_event_members() -> None:
    graph = expand(load_network("moe-decode"))
    launch = graph.launch_scope.index("shared_expert")
    first, count = graph.launch_first[launch], graph.launch_count[launch]
    assert graph.member_child[first : first + count].tolist() == list(range(6))
    assert graph.member_op[first] == "EventWait" and not graph.member_is_kernel[first]


def test_bypass_bits_fuse_split_scopes() -> None:
    net = load_network("moe-decode")
    counts = {bits: int(expand(net, bits).launch_is_sk.sum()) for bits in (0, 1, 2, 3)}
    assert counts == {0: 129, 1: 113, 2: 113, 3: 97}


def test_inheritance_from_a_file_and_adapted_early_start(tmp_path: Path) -> None:
    spec = tmp_path / "adapted.yaml"
    spec.write_text("name: adapted\nbase: moe-decode\nearly_start_adapted: true\nops:\n  RmsNorm: {base_us: 19.0}\n")
    net = load_network(str(spec))
    assert net.name == "adapted" and net.early_start_adapted and net.layers == 16
    assert net.ops["RmsNorm"].base_us == 19.0 and net.ops["RmsNorm"].blocks == 16  # merged field by field
    assert net.symbol("RmsNorm", "") == load_network("moe-decode").symbol("RmsNorm", "")  # same build id
    assert compile_model(net, resolve({"early_start": 1}, {})).outcome.kind == "ok"
    assert compile_model(net, resolve({}, {})).step_us > compile_model(load_network("moe-decode"), resolve({}, {})).step_us


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"ops": {"A": {"kernel_type": "AIV_ONLY", "base_us": 1}}, "layer": [{"scope": "s", "members": ["B"]}]}, "not in the ops catalogue"),
        ({"ops": {"A": {"kernel_type": "GPU", "base_us": 1}}, "layer": [{"op": "A"}]}, "kernel_type 'GPU'"),
        ({"ops": {"A": {"kernel_type": "COMMUNICATION", "base_us": 1}}, "layer": [{"scope": "s", "members": ["A"]}]}, "cannot be fused"),
        ({"ops": {"A": {"kernel_type": "AIV_ONLY", "base_us": 1}}, "layer": [{"scope": "s", "members": [{"event": "EventWait"}]}]}, "no kernel member"),
        ({"ops": {"A": {"kernel_type": "AIV_ONLY", "base_us": 1}}, "layer": [{"scope": "s", "members": ["A", {"event": "Barrier"}]}]}, "event 'Barrier'"),
        ({"ops": {"A": {"kernel_type": "AIV_ONLY"}}, "layer": [{"op": "A"}]}, "base_us"),
        ({"ops": {}, "layers": 0, "layer": []}, "no items"),
    ],
)
def test_bad_specs_name_file_and_problem(tmp_path: Path, spec: dict, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", **spec}))
    with pytest.raises(InputError, match=message) as info:
        load_network(str(path))
    assert "bad.json" in str(info.value)


def test_base_cycle_is_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(f"base: {b}\n")
    b.write_text(f"base: {a}\n")
    with pytest.raises(InputError, match="inherits from itself"):
        load_network(str(a))


def test_symbols_differ_by_variant_and_build() -> None:
    net = load_network("moe-decode")
    graph = expand(net)
    matmuls = {s for s, op in zip(graph.member_symbol, graph.member_op, strict=True) if op == "MatMulV3"}
    assert len(matmuls) == 8  # q_a, q_b, kv_a, o_proj, gate, shared_up, shared_down, lm_head
    assert np.all([s.startswith("static_kernel_MatMulV3_") for s in matmuls])
    other = load_network("moe-decode")
    object.__setattr__(other, "build_id", "another-build")
    assert other.symbol("MatMulV3", "q_a") != net.symbol("MatMulV3", "q_a")


def test_log_prefix_stamp_never_rounds_into_the_next_second() -> None:
    """A float of nanoseconds / 1e9 rounds 23:59:59.999999999 up to the next second while the
    milliseconds still say 999; the stamp must keep the second the nanoseconds are in."""
    import time

    from sk_runner.sim.superlog import log_prefix

    ns = 1_700_000_000 * 1_000_000_000 - 1  # one nanosecond before a whole second
    second = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_000 - 1))
    assert log_prefix(1, 2, "f.cpp:1", "fn", when_ns=ns).startswith(f"{second}.999 [1:2]")


def test_a_clean_run_of_the_simulator_does_not_import_polars() -> None:
    """Every trial run starts the simulator once per process: Polars' import (~0.5 s of CPU)
    is paid only by a profiled run, which writes the profiler tables with it."""
    import subprocess
    import sys

    code = "import sys, sk_runner.sim.cli, sk_runner.sim.runner; print(sorted(m for m in ('polars', 'pyarrow', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "[]"
