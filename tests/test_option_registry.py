"""The option registry is the single source of every option list: the matrix, the schema's category enum,
the npu backend's release table, the simulator's options and truth probes, and the docs table.

The last test adds an integer option with three trial values to a temporary copy of the registry (one
entry, plus its simulator effect) and shows that everything else follows without another edit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from torch_npu_sources import VERSIONS

from sk_analytics.cli.doc_tables import release_ranges, render_option_table
from sk_analytics.errors import InputError
from sk_analytics.stage_o import options
from sk_analytics.stage_o.matrix import build_matrix, matrix_schema, protocol_candidates, validate_matrix
from sk_analytics.stage_o.options import (
    REGISTRY,
    TORCH_NPU_RELEASES,
    EveryOtherValue,
    OptionSpec,
    Trial,
    categories,
    registry_problems,
)
from sk_runner.backends.torch_npu_options import RELEASE_OPTIONS, release_problem
from sk_runner.sim import model
from sk_runner.sim.network import load_network
from sk_runner.sim.options import resolve
from sk_runner.sim.truth import effect_probes, ground_truth

SEED = {"super_kernel_optimize_options": {"split_mode": 4}}
NEW = OptionSpec("prefetch_depth", "uint", 0, 0, 3, category="memory", trials=EveryOtherValue("medium"), torch_npu=())
"""A new integer option: range 0-3, default 0, so three trial values (1, 2, 3), in a category of its own."""


@pytest.fixture
def registry_with_new_option(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[OptionSpec, ...]]:
    """The registry with :data:`NEW` appended (the one edit), and its simulator effect (one row)."""
    extended = (*REGISTRY, NEW)
    monkeypatch.setattr(options, "REGISTRY", extended)
    monkeypatch.setattr(options, "BY_NAME", {s.name: s for s in extended})
    monkeypatch.setattr(options, "BY_WRAPPER_NAME", {s.wrapper: s for s in extended})
    monkeypatch.setattr(model, "KERNEL_DELTA_US", {**model.KERNEL_DELTA_US, NEW.name: {1: -0.3, 2: -0.6, 3: 0.9}})
    yield extended


def _all_ready(registry: tuple[OptionSpec, ...] | None = None) -> list[dict[str, object]]:
    return [{"option": c.option, "value": c.value, "ready": True, "evidence": None} for c in protocol_candidates(registry)]


def test_the_registry_is_whole() -> None:
    """Every option is tried or excluded (debug options neither), every trial has a category, every release is checked."""
    assert registry_problems() == []
    tried = {c.option for c in protocol_candidates()}
    excluded = {s.name for s in REGISTRY if s.excluded is not None}
    debug = {s.name for s in REGISTRY if s.debug}
    assert tried | excluded | debug == {s.name for s in REGISTRY}
    assert not (tried & excluded) and not (tried & debug) and not (excluded & debug)


@pytest.mark.parametrize(
    ("planted", "problem"),
    [
        (OptionSpec("forgotten", "uint", 0, 0, 1), "forgotten: neither tried nor excluded"),
        (OptionSpec("both", "uint", 0, 0, 1, category="experimental", trials=(Trial(1, "low"),), excluded="x"), "both: both tried and excluded"),
        (OptionSpec("nocat", "uint", 0, 0, 1, trials=(Trial(1, "low"),)), "nocat: trials without a category"),
        (OptionSpec("debug_new", "uint", 0, 0, 1, debug=True, excluded="x"), "debug_new: a debug option is never tried"),
        (OptionSpec("future", "uint", 0, 0, 1, excluded="x", torch_npu=("9.9.9",)), "future: torch_npu releases not checked: 9.9.9"),
        (dataclasses.replace(REGISTRY[0]), "preload_code: registered twice"),
    ],
)
def test_an_option_neither_tried_nor_excluded_fails_instead_of_dropping_out(planted: OptionSpec, problem: str) -> None:
    """It used to be left out of the matrix without a word; now the matrix refuses to be built."""
    registry = (*REGISTRY, planted)
    assert any(p.startswith(problem) for p in registry_problems(registry)), registry_problems(registry)
    with pytest.raises(RuntimeError, match="option registry: .*" + problem.split(":")[0]):
        build_matrix(SEED, [], registry=registry)


def test_the_matrix_is_the_registry_in_trial_order() -> None:
    matrix = build_matrix(SEED, _all_ready())
    entries = [(e["id"], e["category"], e["option"]) for e in matrix["entries"]]
    expected = [(t.id, s.category, s.name) for s in options.trial_ordered() for t in s.trial_values() if not (s.name == "split_mode" and t.value == 4)]
    assert entries == expected and len(entries) == len(protocol_candidates())
    assert [x["option"] for x in matrix["excluded"]] == [s.name for s in REGISTRY if s.debug or s.excluded is not None]
    assert matrix_schema()["$defs"]["entry"]["properties"]["category"] == {"enum": categories()}
    assert categories() == ["dcci", "auto_op_parallel", "aggressive", "experimental"]


def test_an_unknown_category_is_refused_by_the_schema() -> None:
    matrix = build_matrix(SEED, _all_ready())
    matrix["entries"][0]["category"] = "memory"
    with pytest.raises(InputError, match="/entries/0/category"):
        validate_matrix(matrix)


def test_the_release_table_is_the_registry_and_claims_nothing_without_evidence() -> None:
    assert tuple(RELEASE_OPTIONS) == TORCH_NPU_RELEASES == VERSIONS
    for release, accepted in RELEASE_OPTIONS.items():
        assert accepted == {s.name for s in REGISTRY if release in s.torch_npu}
    assert release_ranges(("2.7.1.post11", "2.10.0.post7", "2.11.0.post3")) == "2.7.1.post11, 2.10.0.post7 – 2.11.0.post3"
    assert release_ranges(()) == "none"
    # an option whose releases nobody checked is accepted by none of them: the probe blocks it, naming why
    problem = release_problem("2.14.0", NEW)
    assert problem is not None and "has no optimize_options key 'prefetch_depth'" in problem


def test_the_simulator_knows_exactly_the_registered_options() -> None:
    effective = resolve({}, {})
    assert set(effective.values) == {s.name for s in REGISTRY}
    assert [(o, v) for o, v in effect_probes()][: len(protocol_candidates())] == [(c.option, c.value) for c in protocol_candidates()]


def test_adding_an_integer_option_is_one_registry_entry_and_its_simulator_effect(
    registry_with_new_option: tuple[OptionSpec, ...],
) -> None:
    before = build_matrix(SEED, _all_ready(REGISTRY), registry=REGISTRY)
    after = build_matrix(SEED, _all_ready())
    new_ids = [e["id"] for e in after["entries"] if e["option"] == NEW.name]
    assert new_ids == ["prefetch-depth-1", "prefetch-depth-2", "prefetch-depth-3"]
    assert after["entries"][: len(before["entries"])] == before["entries"]  # the existing entries do not move
    assert len(after["entries"]) == len(before["entries"]) + 3 == len(protocol_candidates())
    assert {e["category"] for e in after["entries"] if e["option"] == NEW.name} == {"memory"}
    assert matrix_schema()["$defs"]["entry"]["properties"]["category"]["enum"][-1] == "memory"  # the schema enum follows
    # the docs table follows
    row = next(line for line in render_option_table().splitlines() if line.startswith(f"| `{NEW.name}` |"))
    assert "`prefetch-depth-1` (medium), `prefetch-depth-2` (medium), `prefetch-depth-3` (medium)" in row and row.endswith("| none |")
    # the simulated runtime accepts it, refuses a value out of its range, and the truth reports its effect
    assert resolve({NEW.name: 2}, {}).get(NEW.name) == 2
    assert not resolve({NEW.name: 4}, {}).invalid[0].valid
    effects = {(e["option"], e["value"]): e for e in ground_truth(load_network(None))["option_effects"] if e["option"] == NEW.name}
    assert effects[(NEW.name, 2)]["delta_pct"] < effects[(NEW.name, 1)]["delta_pct"] < 0 < effects[(NEW.name, 3)]["delta_pct"]
