"""Modules imported on first attribute use instead of at import time, and lazy package faces.

For heavy dependencies that only some code paths reach: ``scipy.stats`` costs
about 50 MB resident and ~0.5 s to import, and ``sk-analyze option-trial``
needs it only for the statistics beside the gate, after every log has been
read and summarised; importing it lazily keeps it out of the memory peak of
reading the logs.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module whose code runs on its first attribute access
    (the module already imported if it is; an unknown name fails here)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def module_exists(name: str) -> bool:
    """Whether module ``name`` is installed, without importing it (its parent packages are imported)."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def lazy_face(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's PEP 562 ``__getattr__`` that imports ``package.<homes[name]>`` on first use of ``name``.

    A package face re-exports its modules' public names without importing them,
    so importing the package (or one of its light modules, a CLI for ``--help``)
    does not load Polars.
    """

    def __getattr__(name: str) -> Any:
        if name in homes:
            return getattr(importlib.import_module(f"{package}.{homes[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
