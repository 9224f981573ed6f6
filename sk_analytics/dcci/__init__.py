"""DCCI regression diagnosis (``sk-analyze dcci-diff``, protocol §6).

Modules: ``pattern`` (runtime kernel-name pattern syntax), ``occurrences``
(SK launches and child timings from sk_events), ``align`` (structural SK
identity across processes; ``pairing`` of ranks and graphs, ``seqalign`` anchored
LCS of each graph pair's structure sequences), ``classify`` (formats.md §7 robust statistics and
gate), ``children`` (child decomposition), ``repair`` (narrow verified
patterns, repair config and diff), ``report`` (Chinese/English Markdown) and
``pipeline`` (the end-to-end ``dcci_diff`` API).
"""
