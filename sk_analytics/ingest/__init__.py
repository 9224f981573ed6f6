"""Ingestion of SK artifacts into typed Parquet tables.

One parser module per artifact kind (``timings``, ``kernel_details``,
``profiler_db`` (the same ``kernels`` table from the DB export), ``sk_prof``, ``fused_nodes``, ``super_kernel_log``, ``graph_dump``), each
``parse_*(path, *, root=None) -> ParseResult``; :mod:`.discover` finds the
artifacts of a folder and :mod:`.collect` writes their tables::

    from sk_analytics.ingest import ingest_path, ingest_run_dir
    report = ingest_path("profile-dir", "out/data")          # derived round/role/run
    ingest_run_dir(run_dir, session / "data", "O1", "trial", "run-3")

The entry points are loaded on first use so that importing one parser does
not import the Parquet writer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_analytics.ingest.collect import FileRead, IngestReport, ingest_path, ingest_run_dir

__all__ = ["FileRead", "IngestReport", "ingest_path", "ingest_run_dir"]
_HOMES = dict.fromkeys(__all__, "collect")
__getattr__ = lazy_face(__name__, _HOMES)
