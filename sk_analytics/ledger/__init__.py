"""The ledger and the evidence it vouches for (floor 1): the session's only memory, and its proof.

:mod:`.chain` (the append-only, hash-chained ledger and its head anchor),
:mod:`.records` (the record and head formats, read line by line), :mod:`.verify`
(every line, the chain, the anchor, the signatures), :mod:`.signing` (Ed25519 keys
and signatures), :mod:`.witness` (the heads each ledger reached, kept outside the
session), :mod:`.evidence` and :mod:`.evidence_verify` (every file of a session bound
to the record that wrote it, and re-hashed by ``sk-analyze ledger verify``).

This face re-exports the notebook-facing reading API of :mod:`.chain`, loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_analytics.ledger.chain import (
        Ledger as Ledger,
        read_records as read_records,
    )
    from sk_analytics.ledger.records import (
        LedgerRecord as LedgerRecord,
    )

_HOMES = {"Ledger": "chain", "read_records": "chain", "LedgerRecord": "records"}
__all__ = sorted(_HOMES)
__getattr__ = lazy_face(__name__, _HOMES)
