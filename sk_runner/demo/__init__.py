"""``sk-run demo`` (:mod:`.cli`: a whole sweep on the simulated device, or the small ingest-only
sample session) and :mod:`.samples`, the synthetic profiler files and rank logs it and the tests write."""
