"""Re-verification of the incumbent on resume: its five clean runs are still what was measured."""

from __future__ import annotations

from pathlib import Path

from sk_analytics.errors import IntegrityError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint, sha256_file
from sk_runner.trial import complete_runs, round_dir_of


def verify_incumbent(session: Path, round_name: str, runs: int, *, at_least: bool = False) -> list[str]:
    """Check every clean run of ``round_name``: meta.json fingerprint and the sha256 of each rank log.

    ``runs`` is the count the incumbent must have (at least that many with ``at_least``: the family policy
    extends its incumbents).

    Returns the verified run names; raises :class:`IntegrityError` naming the
    first run or log that changed since it was recorded.
    """
    round_dir = round_dir_of(session, round_name)
    done = complete_runs(round_dir)
    if len(done) < runs or (len(done) != runs and not at_least):
        expected = f"at least {runs}" if at_least else str(runs)
        raise IntegrityError(f"{round_dir / 'CLEAN'}: incumbent {round_name} has {len(done)} complete clean runs, expected {expected}")
    names = []
    for k in done:
        run_dir = round_dir / "CLEAN" / f"run-{k}"
        meta = load_json_file(run_dir / "meta.json")
        body = {key: value for key, value in meta.items() if key != "fingerprint"}
        if meta.get("fingerprint") != fingerprint(body):
            raise IntegrityError(f"{run_dir / 'meta.json'}: run record edited (fingerprint mismatch)")
        for log in meta.get("rank_logs") or []:
            path = run_dir / log["file"]
            if not path.is_file() or sha256_file(path) != log["sha256"]:
                raise IntegrityError(f"{path}: rank log changed or missing since the run was recorded")
        names.append(run_dir.name)
    return names
