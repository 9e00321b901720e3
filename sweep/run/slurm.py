"""Slurm: the batch script of a job array whose every task is one `sweep worker` on the sweep's store,
and its submission with plain `sbatch`. No TensorFlow, no Slurm library: Slurm's own commands.

Why a script and `sbatch` rather than a Python submitter (submitit): the user gets a file they can
read, edit and submit again with `sbatch` alone, written in the terms of Slurm's own manual, and
nothing is installed. Each task is an ordinary worker: it claims queued runs until none are left, so
N tasks share any number of runs, a task that starts late finds less to do, and one that is
preempted puts its run back in the queue for the others (its SIGTERM handler, `sweep.run.worker`).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sweep.base import atomic
from sweep.exits import EXIT_NEEDS_MORE_DEVICES, EXIT_RECYCLE
from sweep.run.coordinator import MAX_WORKER_RESTARTS, policy_flags
from sweep.store.queue import DEFAULT_POLICY, RetryPolicy
from sweep.store.secrets import has_password

SCRIPT_NAME = "worker.sbatch"
LOG_PATTERN = "worker-%A_%a.out"  # %A the array's job id, %a the task index (Slurm's filename patterns)
SBATCH_SECONDS = 60  # sbatch only talks to slurmctld; longer means the controller is down
_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")  # Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S


class SlurmError(Exception):
    """A Slurm problem (no sbatch, a bad flag, sbatch refused the job). One line for stderr."""


@dataclass(frozen=True)
class ArrayJob:
    """What the batch script says. `storage` is what the worker is given as --storage (a journal's
    absolute path, a database URL without a password, or @FILE); None: the worker reads the store
    from $BATCHSWEEP_STORAGE, which sbatch exports from the submitting shell, so no password is
    written into the script.
    """

    study: str
    storage: str | None
    tasks: int
    folder: Path  # where the script and the tasks' logs go (absolute)
    workdir: Path  # the tasks' working directory (absolute): relative paths mean what they meant here
    python: str = sys.executable  # the same environment on every node (a shared file system)
    partition: str | None = None
    gpus_per_task: int | None = None
    time: str | None = None
    requeue: bool = False
    policy: RetryPolicy = DEFAULT_POLICY
    extra: tuple[str, ...] = ()  # more sbatch options, each one "#SBATCH" line

    def __post_init__(self) -> None:
        if self.tasks < 1:
            raise SlurmError(f"--array must be a positive number of tasks, got {self.tasks}")
        if self.time is not None and not _TIME.match(self.time):
            raise SlurmError(f"--time {self.time!r}: give minutes, H:M:S or D-H:M:S, as sbatch takes it")
        if self.storage is not None and has_password(self.storage):  # anyone who can read the folder reads it
            raise SlurmError(
                "a batch script never holds the store's password: give --storage @FILE (a file only you can "
                "read), or set $BATCHSWEEP_STORAGE before submitting"
            )
        for arg in self.extra:
            if not arg.startswith("-") or "\n" in arg:
                raise SlurmError(f"--sbatch-arg {arg!r}: give one sbatch option, e.g. --sbatch-arg=--mem=8G")

    @property
    def script_path(self) -> Path:
        return self.folder / SCRIPT_NAME


def parse_tasks(text: str) -> int:
    """--array N: a number of tasks (Slurm's 0-(N-1)); one line saying what to give otherwise."""
    if not text.strip().isdigit() or int(text) < 1:
        raise SlurmError(f"--array {text!r}: give the number of worker tasks, a positive integer (e.g. --array 8)")
    return int(text)


def script(job: ArrayJob) -> str:
    """The batch script: Slurm's directives, then one worker per array task."""
    directives = [
        f"--job-name=sweep-{job.study}",
        f"--array=0-{job.tasks - 1}",
        "--ntasks=1",
        f"--output={job.folder / LOG_PATTERN}",  # stderr too: TensorFlow's lines and tracebacks
        "--open-mode=append",  # a requeued task adds to its log: how the earlier attempt ended stays in it
        f"--chdir={job.workdir}",
        "--requeue" if job.requeue else "--no-requeue",
    ]
    directives += [f"--partition={job.partition}"] if job.partition else []
    directives += [f"--gpus-per-task={job.gpus_per_task}"] if job.gpus_per_task else []
    directives += [f"--time={job.time}"] if job.time else []
    directives += list(job.extra)
    command = [job.python, "-m", "sweep", "worker", "--study", job.study, *policy_flags(job.policy)]
    if job.storage is not None:
        command += ["--storage", job.storage]
    store_note = (
        "# The store: --storage below."
        if job.storage is not None
        else "# The store: $BATCHSWEEP_STORAGE, exported by sbatch from the shell that submitted (a password\n"
        "# is never written here); set it before submitting this script again."
    )
    return "\n".join(
        [
            "#!/bin/bash",
            f"# batchsweep: {job.tasks} worker(s) for the sweep {job.study!r}; written by `sweep slurm`.",
            "# Edit and submit again with: sbatch " + shlex.quote(str(job.script_path)),
            *(f"#SBATCH {d}" for d in directives),
            "",
            "# Each task trains queued runs until none are left, then exits. Slurm sets CUDA_VISIBLE_DEVICES",
            "# to this task's GPUs and the worker uses exactly those. SIGTERM (scancel, preemption,",
            "# scontrol requeue) puts its running run back in the queue for another task.",
            store_note,
            "# TensorFlow's and XLA's (JAX) threads: this task's CPUs ($BATCHSWEEP_THREADS overrides).",
            "threads=${BATCHSWEEP_THREADS:-${SLURM_CPUS_PER_TASK:-1}}",
            "export TF_NUM_INTRAOP_THREADS=$threads OMP_NUM_THREADS=$threads TF_NUM_INTEROP_THREADS=2"
            " PJRT_NPROC=$threads",
            "export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}",
            'echo "task ${SLURM_ARRAY_TASK_ID} of job ${SLURM_ARRAY_JOB_ID} on $(hostname);'
            ' CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-none}" >&2',
            *_worker_loop(shlex.join(command)),
            "",
        ]
    )


def _worker_loop(command: str) -> list[str]:
    """The worker, started again when it asks for a fresh process, as `sweep run`'s coordinator does.
    Not `exec`: Slurm signals every process of the task (scancel, preemption, --time), the worker too.
    """
    return [
        f"# A worker exits {EXIT_RECYCLE} for a fresh process to take over (its memory passed",
        "# $BATCHSWEEP_WORKER_MAX_MB, or a run needs another replica count) and "
        f"{EXIT_NEEDS_MORE_DEVICES} when a run needs",
        f"# more devices than it set up: start it again (the second at most {MAX_WORKER_RESTARTS} times).",
        "more_devices=0",
        "while true; do",
        f"  {command}",
        "  code=$?",
        f"  if [ $code -eq {EXIT_RECYCLE} ]; then continue; fi",
        f"  if [ $code -eq {EXIT_NEEDS_MORE_DEVICES} ] && [ $((more_devices += 1)) -le {MAX_WORKER_RESTARTS} ]; then",
        "    continue",
        "  fi",
        "  exit $code",
        "done",
    ]


def write_script(job: ArrayJob) -> Path:
    """The script in the results folder, where the user finds, edits and resubmits it."""
    job.folder.mkdir(parents=True, exist_ok=True)
    atomic.write_text(job.script_path, script(job))
    return job.script_path


def sbatch_path() -> str:
    """sbatch on PATH, or one line saying it is not (checked before anything is queued)."""
    found = shutil.which("sbatch")
    if found is None:
        raise SlurmError("sbatch not found on PATH: run `sweep slurm` on a Slurm login node (or see --dry-run)")
    return found


def submit(path: Path, env: dict[str, str]) -> str:
    """`sbatch --parsable SCRIPT`; the array's job id, or SlurmError with sbatch's own first line."""
    try:
        done = subprocess.run(
            [sbatch_path(), "--parsable", str(path)],
            capture_output=True,
            text=True,
            env=env,
            timeout=SBATCH_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(f"sbatch did not answer within {SBATCH_SECONDS} s (is slurmctld up? try sinfo)") from None
    said = (done.stderr.strip() or done.stdout.strip()).splitlines()
    if done.returncode != 0:
        raise SlurmError(f"sbatch failed (exit {done.returncode}): {said[-1] if said else 'no message'}")
    job_id = done.stdout.strip().split(";")[0]  # --parsable: "ID" or "ID;CLUSTER"
    if not job_id.isdigit():
        raise SlurmError(f"sbatch gave no job id: {done.stdout.strip()!r}")
    return job_id
