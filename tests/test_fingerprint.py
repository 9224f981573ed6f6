"""The canonical-JSON fingerprint is stable, order-independent and refuses NaN."""

from __future__ import annotations

import hashlib

import pytest

from sk_analytics.errors import InputError
from sk_analytics.fingerprint import canonical_json, fingerprint, sha256_file


def test_canonical_json_sorted_compact_ascii() -> None:
    assert canonical_json({"b": 1, "a": ["中", 2.5]}) == '{"a":["\\u4e2d",2.5],"b":1}'


def test_fingerprint_is_sha256_of_canonical_text() -> None:
    expected = hashlib.sha256(b'{"a":1,"b":[1,2]}').hexdigest()
    assert fingerprint({"b": [1, 2], "a": 1}) == expected
    assert fingerprint({"a": 1, "b": [1, 2]}) == expected
    assert fingerprint({"a": 1, "b": [2, 1]}) != expected


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {"x": object()}])
def test_unfingerprintable_values_are_input_errors(bad: object) -> None:
    with pytest.raises(InputError, match="cannot be fingerprinted"):
        fingerprint(bad)


def test_sha256_file(tmp_path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    assert sha256_file(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
