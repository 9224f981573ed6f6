"""The ``sk-run`` commands by name, click-free: the first paragraph of each one's help.

The root CLI (:mod:`sk_runner.cli`, which says where each command lives) lists
them without importing them, and a phase manifest checks that a runtime tool is
an ``sk-run`` command (:mod:`sk_runner.sweep.phase`) without importing the CLI:
this table names no module, so the runner's ground floor points at no room above it.
"""

SUMMARIES = {
    "campaign": "Many Stage O sessions on a fleet, each pinned to one server (see docs/campaign.md).",
    "demo": "Run a complete Stage O sweep on the simulated device (default network) and print where the report is; "
            "--samples: the small ingest-only sample session.",
    "matrix": "Build (init) and seal (freeze) the winner option matrix of a session.",
    "options": "List every SK option: its type and range, its default and the candidate values the option matrix tries "
               "(the valid option/value pairs of a task's accepted_option_values).",
    "probe": "Probe exact option values: ready only when the wrapper accepts the value and super_kernel.log does not report "
             "it as invalid-and-defaulted. Exit 0 when every value is ready, 1 when one is not, 3 for the environment.",
    "profile": "Collect a diagnostic profile into a new, contract-sealed root (protocol §6).",
    "sim": "Run the simulated SK device as one workload process (see docs/simulator.md).",
    "task": "Write a dispatched Stage O task (see docs/sweep.md).",
    "sweep": "Run Stage O from a frozen Sbest-SEED to a sealed Sbest-BASE (see docs/sweep.md).",
    "trial": "Run one clean, fingerprinted trial: probe the changed value, run correctness, then N fresh processes; resume "
             "or top up a trial by running the same command again. Workload args after '--' may use {config}, {run_dir}, {seed}.",
}  # fmt: skip
"""First help paragraph of each command: ``sk-run --help`` lists them without importing them
(tests/test_cli_help_speed.py keeps them equal to the commands' help)."""
