"""Command line: `python -m sweep {plan,run,status,worker,slurm,time,report,study,advise,export}`. It parses arguments,
calls `sweep.run.orchestrate` (run, status, worker), `sweep.report` or `sweep.export`, prints, and maps errors to exit
codes. `entry` holds `main` (the parser of every command, errors and signals mapped to exit codes); `plan`, `run`,
`status`, `worker`, `time` and `report` are in `cli_sweep`, `run --no-train` and `slurm` in `cli_cluster`, `export`
in `cli_export`, `study` and `advise` (a batch-size study of the user's model) in `cli_study`, the `--storage` flag's
reading and checks in `cli_storage`, the flags several commands share and the `Options` read from them in
`arguments`. This module only re-exports `main` and the names its users import from here.

Exit codes: 0 success; 1 some runs failed; 2 bad input (one line on stderr,
nothing written); 130 interrupted (the next `run` picks up where it stopped).
"""

from __future__ import annotations

from sweep.cli.cli_storage import storage_arg
from sweep.cli.cli_sweep import cmd_plan, cmd_report, cmd_run, cmd_status, cmd_time, cmd_worker
from sweep.cli.entry import STOPPED, Stopped, main

__all__ = [
    "STOPPED",
    "Stopped",
    "cmd_plan",
    "cmd_report",
    "cmd_run",
    "cmd_status",
    "cmd_time",
    "cmd_worker",
    "main",
    "storage_arg",
]
