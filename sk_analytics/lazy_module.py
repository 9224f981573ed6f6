"""Modules imported on first attribute use instead of at import time.

For heavy dependencies that only some code paths reach: ``scipy.stats`` costs
about 50 MB resident and ~0.5 s to import, and ``sk-analyze option-trial``
needs it only for the statistics beside the gate, after every log has been
read and summarised; importing it lazily keeps it out of the memory peak of
reading the logs.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


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
