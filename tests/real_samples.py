"""Where the real torch_npu exports are: ``shared/fixtures-real/`` beside the checkout, or beside
a folder above it (a git worktree under ``wt/`` of the same workplace); tests skip without them."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REAL = next((p / "shared" / "fixtures-real" for p in REPO.parents if (p / "shared" / "fixtures-real").is_dir()),
            REPO.parent / "shared" / "fixtures-real")
REAL_DB = REAL / "msinsight-db-level0-rank0" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
needs_real = pytest.mark.skipif(not REAL.is_dir(), reason=f"real samples absent ({REAL} not beside the checkout)")
