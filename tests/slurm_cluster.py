"""A real one-node Slurm cluster for tests: munged, slurmctld and slurmd started from a fresh
configuration in a temporary folder, on their own ports and munge socket, stopped by their pids.

Needs the Debian packages slurmctld, slurmd, slurm-client and munge (.ci/run installs them) and
root (slurmd starts jobs as their user). Slurm's commands find this cluster through $SLURM_CONF.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scontrol", "scancel")
START_SECONDS = 60
PORT_TRIES = 5  # Slurm cannot pick its own ports: ports another process took first are replaced this often


def missing() -> str | None:
    """Why this machine cannot run the cluster, or None."""
    if os.geteuid() != 0:
        return "needs root (slurmd runs jobs as their user)"
    absent = [name for name in DAEMONS + CLIENTS if shutil.which(name, path="/usr/sbin:/usr/bin") is None]
    return (
        f"not installed: {', '.join(absent)} (apt-get install slurmctld slurmd slurm-client munge)" if absent else None
    )


@dataclass(frozen=True)
class Cluster:
    """A running cluster: its folder, $SLURM_CONF, and the environment Slurm's commands need."""

    folder: Path
    conf: Path

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        return {**(os.environ if base is None else base), "SLURM_CONF": str(self.conf)}

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), env=self.env(), capture_output=True, text=True, timeout=60, check=check)

    def jobs(self, job_id: str) -> list[str]:
        """The states of the job's array tasks still known to squeue (pending, running, ...)."""
        done = self.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False)
        return done.stdout.split() if done.returncode == 0 else []

    def wait_gone(self, job_id: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.jobs(job_id):
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} still queued after {timeout:.0f} s: {self.jobs(job_id)}")
            time.sleep(1)


def _free_ports() -> tuple[int, int]:
    """Two consecutive free loopback ports (slurmctld, slurmd), away from Slurm's 6817/6818."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        with socket.socket() as other, contextlib.suppress(OSError):
            other.bind(("127.0.0.1", port + 1))
            return port, port + 1
    raise RuntimeError("no two consecutive free ports")


def _node_line() -> str:
    """This machine's CPUs and memory as slurmd sees them (`slurmd -C`), as the only node."""
    first = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    fields = dict(item.split("=", 1) for item in first.split())
    memory = int(fields["RealMemory"]) * 9 // 10  # a little under what it sees: slurmd drains a node short of it
    return f"NodeName={socket.gethostname()} NodeAddr=127.0.0.1 CPUs={fields['CPUs']} RealMemory={memory} State=UNKNOWN"


def _config(folder: Path, ports: tuple[int, int], munge_socket: Path) -> str:
    return f"""\
ClusterName=batchsweeptest
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire=10
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=0
MinJobAge=30
KillWait=20
SchedulerType=sched/backfill
{_node_line()}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _start_munged(folder: Path) -> tuple[subprocess.Popen, Path]:
    """munged as the munge user with a key of its own, on a socket of its own."""
    munge = folder / "munge"
    munge.mkdir(mode=0o700)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    user = pwd.getpwnam("munge")
    for path in (munge, key):
        os.chown(path, user.pw_uid, user.pw_gid)
    sock = munge / "munge.socket"
    proc = subprocess.Popen(
        ["runuser", "-u", "munge", "--", "munged", "-F", "--force", f"--key-file={key}", f"--socket={sock}"]
        + [f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait(lambda: sock.exists(), "munged's socket", proc)
    return proc, sock


def _wait(ready, what: str, *procs: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not ready():
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: {proc.args[0]} exited with code {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {START_SECONDS} s")
        time.sleep(0.3)


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL, to this pid and its children (runuser's munged)."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        for child in psutil.Process(proc.pid).children(recursive=True):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def cluster() -> Iterator[Cluster]:
    """Start munged, slurmctld and slurmd; yield once the node is idle; cancel every job and stop
    each daemon by its pid.
    """
    folder = Path(tempfile.mkdtemp(prefix="batchsweep-slurm-"))
    folder.chmod(0o755)  # the munge user walks through it to its own folder
    procs: list[subprocess.Popen] = []
    found: Cluster | None = None
    try:
        for sub in ("state", "spool"):
            (folder / sub).mkdir()
        munged, sock = _start_munged(folder)
        procs.append(munged)
        found = Cluster(folder, folder / "slurm.conf")
        _start_slurm(found, sock, procs)
        yield found
    finally:
        if found is not None:
            _cancel_all(found)
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


def _start_slurm(found: Cluster, munge_socket: Path, procs: list[subprocess.Popen]) -> None:
    """slurmctld and slurmd (added to `procs`, to be stopped) until the node is idle; on new ports when a
    daemon could not bind its own: another process took it after _free_ports found it free.
    """
    logs = [found.folder / "slurmctld.log", found.folder / "slurmd.log"]
    for attempt in range(1, PORT_TRIES + 1):
        for log in logs:
            log.unlink(missing_ok=True)
        found.conf.write_text(_config(found.folder, _free_ports(), munge_socket))
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": found.env()}
        daemons = [
            subprocess.Popen(["slurmctld", "-D", "-i", "-f", str(found.conf)], **quiet),  # -i: no old state
            subprocess.Popen(["slurmd", "-D", "-f", str(found.conf)], **quiet),
        ]
        procs.extend(daemons)
        try:
            _wait(lambda: _idle(found), "the Slurm node (sinfo idle)", *daemons)
            return
        except RuntimeError as err:
            said = "".join(log.read_text(errors="replace") for log in logs if log.exists())
            if "Address already in use" not in said or attempt == PORT_TRIES:
                raise RuntimeError(f"{err}; the daemons' logs end:\n{said[-3000:]}") from None
        for proc in daemons:
            _stop(proc)
            procs.remove(proc)


def _idle(found: Cluster) -> bool:
    done = found.run("sinfo", "-h", "-o", "%T", check=False)
    return done.returncode == 0 and done.stdout.strip() == "idle"


def _cancel_all(found: Cluster) -> None:
    """Every job of this cluster cancelled, and gone, before its daemons stop (no orphaned job steps)."""
    found.run("scancel", "--full", "-u", "root", check=False)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and found.run("squeue", "-h", check=False).stdout.strip():
        time.sleep(1)
