"""The Stage O report: EXPERIMENT_REPORT.md and report.html of a session (presentation only, nothing here decides).

:mod:`.render` assembles the report from the session view and the explore
frames; :mod:`.text` (words, number formats), :mod:`.dcci` (the §6 section),
:mod:`.html` (Markdown to HTML) and :mod:`.figures` (inline SVG) are its
pieces. It stands above :mod:`sk_analytics.explore`, which stands above
:mod:`sk_analytics.session_view` and the decisions of :mod:`sk_analytics.stage_o`.
"""
