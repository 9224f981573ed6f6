"""The JSON Schemas shipped with the contract and the check that applies them.

Schemas live beside the code (``schemas/*.schema.json``) so that other tools
can validate our records too; :func:`check_schema` maps the first schema
error to a contract rule (``unknown-key`` for extra keys, ``schema`` else).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from os import PathLike
from typing import TYPE_CHECKING, Any

from sk_analytics.contract.rules import ContractInputError

if TYPE_CHECKING:  # jsonschema (~0.2 s) is imported on the first check: the CLIs' --help does not need it
    from jsonschema import Draft202012Validator

SCHEMA_NAMES = ("session", "marker", "manifest", "set")


@cache
def _validator(name: str) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    text = resources.files("sk_analytics.contract").joinpath(f"schemas/{name}.schema.json").read_text("utf-8")
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_document(name: str) -> dict[str, Any]:
    """The JSON Schema document ``name`` (one of :data:`SCHEMA_NAMES`)."""
    schema = _validator(name).schema
    assert isinstance(schema, Mapping), f"{name}.schema.json is a JSON object"
    return dict(schema)


def check_schema(name: str, data: Any, source: str | PathLike[str] | None) -> None:
    """Raise :class:`ContractInputError` naming the rule when ``data`` breaks schema ``name``."""
    errors = sorted(_validator(name).iter_errors(data), key=lambda e: (list(e.absolute_path), e.validator))
    if not errors:
        return
    err = errors[0]
    where = "/" + "/".join(str(p) for p in err.absolute_path)
    rule = "unknown-key" if err.validator == "additionalProperties" else "schema"
    raise ContractInputError(rule, source, f"{name} record at {where}: {err.message}", expected=f"the {name} schema")
