"""The runtime kernel-name pattern syntax (formats.md §5) translated to exact regexes."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, strategies as st

from sk_analytics.dcci.pattern import matches, matches_expr, pattern_problem, to_regex
from sk_analytics.errors import InputError


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        (".*", "anything_at_all", True),
        (".*", "", True),
        ("static_kernel_RmsNorm_.*", "static_kernel_RmsNorm_5f3c_9_d0", True),
        ("static_kernel_RmsNorm_.*", "static_kernel_RmsNormQuant_5f3c", False),  # '_' is literal
        ("static_kernel_RmsNorm_.*", "xstatic_kernel_RmsNorm_1", False),  # whole-name match, not search
        ("RmsNorm", "RmsNorm_1", False),
        ("Add.", "AddX", True),  # '.' is any char
        ("Add.", "Add", False),
        ("ab*c", "ac", True),  # '*' applies to the previous atom only
        ("ab*c", "abbbc", True),
        ("ab*c", "abab", False),
        ("a-b", "a-b", True),
        ("a-b", "a_b", False),
        ("x.y", "x\ny", True),  # any char includes newline
    ],
)
def test_whole_name_semantics(pattern: str, name: str, expected: bool) -> None:
    assert matches(pattern, name) is expected


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [("", "empty"), ("*abc", "starts with '*'"), ("a**", "not another '*'"), ("a[0-9]", "outside"), ("a b", "outside")],
)
def test_invalid_patterns_are_input_errors(pattern: str, reason: str) -> None:
    assert reason in (pattern_problem(pattern) or "")
    with pytest.raises(InputError, match="invalid SK kernel pattern"):
        to_regex(pattern)


def test_vectorized_matcher_agrees_with_python() -> None:
    names = ["static_kernel_MatMul_0a_1_d0", "static_kernel_MatMulV2_0a", "MatMul", "hcom_allReduce_"]
    frame = pl.DataFrame({"n": names})
    for pattern in ("static_kernel_MatMul_.*", "MatMul.*", ".*MatMul.*", "hcom_allReduce_", "static_kernel_MatMul.."):
        got = frame.select(matches_expr(pattern, pl.col("n"))).to_series().to_list()
        assert got == [matches(pattern, n) for n in names], pattern


@given(st.text(alphabet="ABab019_-", min_size=1, max_size=12))
def test_pattern_without_metachars_matches_only_itself(literal: str) -> None:
    assert matches(literal, literal)
    assert not matches(literal, literal + "x")
    assert not matches(literal, "x" + literal)


def _reference(pattern: str, name: str) -> bool:
    """Direct backtracking reading of the runtime syntax (no regex): atoms with optional '*'."""
    atoms: list[tuple[str, bool]] = []
    for c in pattern:
        if c == "*":
            atoms[-1] = (atoms[-1][0], True)
        else:
            atoms.append((c, False))

    def match(i: int, j: int) -> bool:
        if i == len(atoms):
            return j == len(name)
        atom, star = atoms[i]
        fits = lambda k: k < len(name) and (atom == "." or name[k] == atom)  # noqa: E731
        if star:
            k = j
            while True:
                if match(i + 1, k):
                    return True
                if not fits(k):
                    return False
                k += 1
        return fits(j) and match(i + 1, j + 1)

    return match(0, 0)


@given(
    st.text(alphabet="ab.*_-", min_size=1, max_size=8).filter(lambda p: pattern_problem(p) is None),
    st.text(alphabet="ab_-.x", max_size=10),
)
def test_translation_agrees_with_a_direct_reading_of_the_syntax(pattern: str, name: str) -> None:
    assert matches(pattern, name) is _reference(pattern, name)
