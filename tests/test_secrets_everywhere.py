"""No planted password anywhere the harness writes: a real PostgreSQL whose users have passwords, every
form a user could give a secret in, every command, then everything printed and written searched.

Each form plants its own password (`Pw7-NN...`). The success paths train (with --keep-models),
report and export against the server; the refused forms (a closed port, a driver that is not
installed, a libpq key=value string, an MLflow server that is not there) exit 2. Afterwards
stdout, stderr, every file under the test's folder (zip members too: .keras models, .npz
checkpoints) and every row of the databases the test used are searched for every planted password,
its percent-encoded forms and every piece of it between the characters a URL parser cuts at.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, quote_plus

import psutil
import pytest
import services
from conftest import FIXTURE_SWEEPS, TINY_GRID, cli_env, write_grid

pytestmark = pytest.mark.system

# Every planted password starts with Pw7-NN, NN the form's number; each piece between the
# characters a URL cuts at (@ : / , ; ) and the like) is 5 characters or more and says its number.
PASSWORDS = {
    1: "Pw7-01-Zq",  # postgresql://USER:PASSWORD@host
    2: "Pw7-02@Zq-02:Xk-02/Wy-02",  # the same, percent-encoded: @ : / inside it
    3: "Pw7-03-Zq",  # ?password=
    4: "Pw7-04-Zq",  # ?sslpassword= (the key's passphrase; the user logs in without one)
    5: "Pw7-05,Zq-05;Xk-05)Wy-05",  # ?password= holding , ; )
    6: "Pw7-06-Zq",  # --storage @FILE
    7: "Pw7-07-Zq",  # $BATCHSWEEP_STORAGE
    8: "Pw7-08-Zq",  # the store's URL, in a failing callback's message
    9: "Pw7-09-Zq",  # $PGPASSWORD, echoed by the same callback (PGPASSWORD=...)
    10: "Pw7-10-Zq",  # sqlite:///FILE?password= (the store takes it and SQLite ignores it)
    11: "Pw7-11-Zq",  # mysql:// (no driver installed: refused)
    12: "Pw7-12-Zq",  # sqlite+pysqlcipher://:PASSWORD@/FILE (no driver: refused)
    13: "Pw7-13-Zq",  # a libpq key=value string with password= (refused)
    14: "Pw7-14-Zq",  # export --mlflow http://USER:PASSWORD@host (no server there)
    15: "Pw7-15-Zq",  # export --mlflow https://host/?password= (no server there)
    16: "Pw7-16-Zq",  # postgresql:// on a closed port
    17: "Pw7-17@Zq-17",  # an @ not percent-encoded: the driver's error echoes 'Zq-17@127.0.0.1'
    18: "Pw7-18-Zq",  # the wrong password for a real user: authentication fails
    19: "Pw7-19 Zq-19",  # ?password='...' quoted, holding a blank
    20: "Pw7-20 Zq-20",  # postgresql://USER:PASSWORD@host, a blank in it, unescaped (SQLAlchemy takes it)
    21: "Pw7-21 Zq-21@Xk-21",  # a blank and an @, unescaped: the driver's error echoes 'Xk-21@127.0.0.1'
}
CUTS = r"[^A-Za-z0-9-]+"  # a piece of a password: what lies between characters a URL or a driver cuts at


def _needles() -> dict[bytes, int]:
    """Every text that would show a planted password: raw, percent-encoded, each piece."""
    found: dict[bytes, int] = {}
    for number, password in PASSWORDS.items():
        pieces = [p for p in re.split(CUTS, password) if len(p) >= 5]
        for text in (password, quote(password), quote(password, safe=""), quote_plus(password), *pieces):
            found[text.encode()] = number
    return found


NEEDLES = _needles()
assert all(len(n) >= 5 for n in NEEDLES)  # distinctive enough to search binary files for


@dataclass(frozen=True)
class Server:
    """A PostgreSQL server on 127.0.0.1:`port`; user uNN (password PASSWORDS[NN]) owns database dbNN."""

    port: int
    socket: Path
    closed: int  # a loopback port nothing listens on

    def url(self, number: int, userinfo: str | None = None, query: str = "") -> str:
        user = f"u{number:02d}"
        userinfo = user if userinfo is None else userinfo
        return f"postgresql://{userinfo}@127.0.0.1:{self.port}/db{number:02d}" + (f"?{query}" if query else "")

    def rows(self, number: int) -> str:
        """Every row of every table of database dbNN, as text: what the harness stored there."""
        import psycopg

        with psycopg.connect(
            host=str(self.socket), port=self.port, user="postgres", dbname=f"db{number:02d}", autocommit=True
        ) as db:
            tables = db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
            assert tables, f"db{number:02d} holds no table: nothing was stored"
            return "\n".join(
                row[0] for (table,) in tables for row in db.execute(f'SELECT t::text FROM "{table}" t').fetchall()
            )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SERVER_USERS = (1, 2, 3, 4, 5, 6, 7, 8, 20)  # each logs in with its own password; u04 without one


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """PostgreSQL on a loopback port with password (SCRAM) logins, as the postgres user when we are
    root; its Unix socket (trust) only for this fixture's set-up and the final reading of the tables.
    Stopped by pg_ctl, else by the pid in postmaster.pid.
    """
    services.require("postgres")
    bin_ = services.postgres_bin()
    assert bin_ is not None
    folder = Path(tempfile.mkdtemp(prefix="batchsweep-pgpw-"))  # in /tmp: the postgres user can enter it
    data, port = folder / "data", _free_port()
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_pg:
        shutil.chown(folder, "postgres")

    def run(*cmd: object, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([*as_pg, *map(str, cmd)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 or not check, f"{cmd[0]}: {done.stdout}{done.stderr}"
        return done

    try:
        run(bin_ / "initdb", "-D", data, "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256")
        hba = data / "pg_hba.conf"  # u04 gives an sslpassword only: it logs in without a password
        hba.write_text("host all u04 127.0.0.1/32 trust\n" + hba.read_text())
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
        run(bin_ / "pg_ctl", "-D", data, "-l", folder / "log", "-w", "start", "-o", options)
        import psycopg
        from psycopg import sql

        with psycopg.connect(host=str(folder), port=port, user="postgres", dbname="postgres", autocommit=True) as db:
            for number in SERVER_USERS:
                user, password = f"u{number:02d}", PASSWORDS[number]
                db.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(user), password))
                db.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(f"db{number:02d}"), user))
        yield Server(port=port, socket=folder, closed=_free_port())
    finally:
        pid_file = data / "postmaster.pid"
        if pid_file.exists():  # started, even if it never became ready
            stopped = run(bin_ / "pg_ctl", "-D", data, "-m", "immediate", "stop", check=False)
            if stopped.returncode != 0 and pid_file.exists():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Harness:
    """The CLI as a user runs it, in `folder`: every command's output kept for the search."""

    folder: Path
    said: list[tuple[str, str]] = field(default_factory=list)  # (the command, what it printed)
    inputs: set[Path] = field(default_factory=set)  # files the test wrote (a storage @file): not searched

    def __call__(self, *args: str, code: int, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
        """`python -m sweep ARGS` with `env` added; its exit code must be `code`."""
        environment = cli_env(
            drop=("BATCHSWEEP_STORAGE", "PGPASSWORD"),
            BATCHSWEEP_THREADS="1",
            MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",  # an MLflow server that is not there: one try, not minutes of them
            MLFLOW_HTTP_REQUEST_TIMEOUT="10",
            **env,
        )
        done = _to_the_end([sys.executable, "-m", "sweep", *args], self.folder, environment, timeout)
        self.said.append((f"sweep {' '.join(args[:2])}", done.stdout + done.stderr))  # the typed command: not searched
        assert done.returncode == code, f"{self.said[-1][0]}: exit {done.returncode}, not {code}\n{self.said[-1][1]}"
        return done

    def write(self, name: str, text: str, mode: int = 0o600) -> Path:
        path = self.folder / name
        path.write_text(text)
        path.chmod(mode)
        self.inputs.add(path)
        return path

    def assert_nothing_shows_a_password(self, stored: str = "") -> list[str]:
        """No planted password in anything printed, any file written under the folder, or `stored`;
        the files searched, relative to the folder.
        """
        texts = [(f"the output of `{command} ...`", output.encode()) for command, output in self.said]
        texts += [("the database's rows", stored.encode())] if stored else []
        written = sorted(p for p in self.folder.rglob("*") if p.is_file() and p not in self.inputs)
        for path in written:
            texts += _contents(path, str(path.relative_to(self.folder)))
        shown = [
            f"{where}: form {number}'s password ({needle.decode()!r}): ...{_around(text, needle)}..."
            for where, text in texts
            for needle, number in NEEDLES.items()
            if needle in text
        ]
        assert not shown, "\n".join(shown)
        return [str(p.relative_to(self.folder)) for p in written]


def _to_the_end(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """`command` run to its end; past `timeout`, it and every process it started are killed by pid."""
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _contents(path: Path, where: str) -> list[tuple[str, bytes]]:
    """A file's bytes, and each member of it when it is a zip archive (.keras, .npz): compressed there."""
    data = path.read_bytes()
    found = [(where, data)]
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            found += [(f"{where}!{name}", archive.read(name)) for name in archive.namelist()]
    return found


def _around(text: bytes, needle: bytes) -> str:
    at = text.find(needle)
    return text[max(0, at - 80) : at + len(needle) + 40].decode(errors="replace")


@pytest.fixture
def sweep(tmp_path: Path) -> Harness:
    return Harness(tmp_path, inputs={write_grid(tmp_path, TINY_GRID)})


# What a finished sweep writes into its results folder: every kind is searched
WRITTEN = (
    "runs.csv",
    "epochs.csv",
    "report.md",
    "report.html",
    "logs/*.log",
    "tables/*.csv",
    "figures/*.png",
    "models/*.keras",
    "checkpoints/*",
)


def _assert_every_kind_was_searched(searched: list[str], kinds: tuple[str, ...] = WRITTEN) -> None:
    missing = [kind for kind in kinds if not fnmatch.filter(searched, f"results/tiny/{kind}")]
    assert not missing, f"not written, so not searched: {missing}"


def _reports_and_exports(sweep: Harness, results: str = "results/tiny") -> None:
    """The commands that read a results folder, not the store: report, TensorBoard, MLflow (a local file)."""
    sweep("report", results, code=0)
    sweep("export", results, "--tensorboard", "tb", "--mlflow", "sqlite:///mlflow.db", code=0)
    assert list((sweep.folder / "tb").rglob("events.out.tfevents.*"))


CONNECTING = {
    1: lambda s: s.url(1, userinfo=f"u01:{PASSWORDS[1]}"),
    2: lambda s: s.url(2, userinfo=f"u02:{quote(PASSWORDS[2], safe='')}"),
    3: lambda s: s.url(3, query=f"password={PASSWORDS[3]}"),
    4: lambda s: s.url(4, query=f"sslmode=disable&sslpassword={PASSWORDS[4]}"),
    5: lambda s: s.url(5, query=f"password={PASSWORDS[5]}"),
    20: lambda s: s.url(20, userinfo=f"u20:{PASSWORDS[20]}"),  # found by the store's own parse of the URL
}


@pytest.mark.parametrize("number", sorted(CONNECTING))
def test_a_store_url_with_a_password_trains_reports_and_exports_without_showing_it(
    server: Server, sweep: Harness, number: int
) -> None:
    url = CONNECTING[number](server)
    done = sweep("run", "grid.yaml", "--storage", url, "--keep-models", code=0)
    assert "trained 2 run(s)" in done.stdout
    assert ": 2 done," in sweep("status", "grid.yaml", "--storage", url, code=0).stdout
    sweep("export", "grid.yaml", "--storage", url, code=0)
    script = sweep("slurm", "grid.yaml", "--array", "2", "--storage", url, "--dry-run", code=0).stdout
    assert "$BATCHSWEEP_STORAGE" in script and "--storage" not in script  # the worker reads it from its environment
    if number == 1:
        _reports_and_exports(sweep)
    searched = sweep.assert_nothing_shows_a_password(server.rows(number))
    _assert_every_kind_was_searched(searched)
    assert len(fnmatch.filter(searched, "results/tiny/models/*.keras")) == 2


def test_a_store_url_in_a_file_given_as_at_file(server: Server, sweep: Harness) -> None:
    sweep.write("store.url", server.url(6, userinfo=f"u06:{PASSWORDS[6]}") + "\n", mode=0o644)
    refused = sweep("status", "grid.yaml", "--storage", "@store.url", code=2)
    assert "chmod 600" in refused.stderr
    (sweep.folder / "store.url").chmod(0o600)
    sweep("run", "grid.yaml", "--storage", "@store.url", "--keep-models", code=0)
    assert ": 2 done," in sweep("status", "grid.yaml", "--storage", "@store.url", code=0).stdout
    sweep("export", "grid.yaml", "--storage", "@store.url", code=0)
    script = sweep("slurm", "grid.yaml", "--array", "2", "--storage", "@store.url", "--dry-run", code=0).stdout
    assert f"--storage @{sweep.folder / 'store.url'}" in script
    _assert_every_kind_was_searched(sweep.assert_nothing_shows_a_password(server.rows(6)))


FAKE_SBATCH = """\
#!/bin/sh
# sbatch's stand-in: what it was given, and a job id (--parsable)
echo "$@" >> "$(dirname "$0")/sbatch.args"
echo 41
"""


def test_a_store_url_in_the_environment_through_slurm_and_a_standalone_worker(server: Server, sweep: Harness) -> None:
    """`sweep slurm` writes and submits the array's script (sbatch is a stand-in); its task runs here as Slurm
    would run it, its output in the task's .out file; then a `sweep worker` of our own finds nothing left.
    """
    env = {"BATCHSWEEP_STORAGE": server.url(7, userinfo=f"u07:{PASSWORDS[7]}")}
    bin_ = sweep.folder / "bin"
    bin_.mkdir()
    (bin_ / "sbatch").write_text(FAKE_SBATCH)
    (bin_ / "sbatch").chmod(stat.S_IRWXU)
    sweep.inputs.add(bin_ / "sbatch")
    path = f"{bin_}:{os.environ['PATH']}"
    done = sweep("slurm", "grid.yaml", "--array", "1", code=0, PATH=path, **env)
    script = sweep.folder / "results" / "tiny" / "slurm" / "worker.sbatch"
    assert "submitted job array 41" in done.stdout and script.is_file()
    assert (bin_ / "sbatch.args").read_text().split() == ["--parsable", str(script)]

    out = script.parent / "worker-41_0.out"  # the script's --output, as Slurm names it
    environment = cli_env(drop=("PGPASSWORD",), SLURM_ARRAY_JOB_ID="41", SLURM_ARRAY_TASK_ID="0", **env)
    task = _to_the_end(["bash", str(script)], sweep.folder, environment, 300)
    out.write_text(task.stdout + task.stderr)  # what Slurm would write there
    assert task.returncode == 0, out.read_text()
    sweep("worker", "--study", "tiny", code=0, **env)
    assert ": 2 done," in sweep("status", "grid.yaml", code=0, **env).stdout
    sweep("export", "grid.yaml", code=0, **env)
    searched = sweep.assert_nothing_shows_a_password(server.rows(7))
    slurm = {"results/tiny/slurm/worker.sbatch", "results/tiny/slurm/worker-41_0.out", "bin/sbatch.args"}
    assert slurm <= set(searched)
    # a worker keeps no models, nor the checkpoints of finished runs, unless asked; its log is the .out file
    _assert_every_kind_was_searched(
        searched, tuple(k for k in WRITTEN if k.split("/")[0] not in ("models", "checkpoints", "logs"))
    )


LEAK = """\
import os

import keras


class Leak(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise ValueError(
            "cannot reach " + os.environ["BATCHSWEEP_STORAGE"] + " with PGPASSWORD=" + os.environ["PGPASSWORD"]
        )


def make():
    return Leak()
"""


def test_a_failing_callback_that_echoes_the_store_and_pgpassword(server: Server, sweep: Harness) -> None:
    """The callback raises with the store's URL and $PGPASSWORD in its message: through `run`'s own worker,
    and through a standalone `sweep worker` (whose stdout would be a Slurm task's .out file).
    """
    url = server.url(8, userinfo=f"u08:{PASSWORDS[8]}")
    leaky = TINY_GRID.replace("train: {", 'train: {callbacks: ["leak.py:make"], ')
    for name in ("leak", "leakw"):
        sweep.inputs.add(write_grid(sweep.folder, leaky.replace("name: tiny", f"name: {name}"), f"{name}.yaml"))
    sweep.write("leak.py", LEAK)
    pg = {"PGPASSWORD": PASSWORDS[9]}
    failed = sweep("run", "leak.yaml", "--storage", url, "--retries", "0", "--keep-models", code=1, **pg)
    assert "FAILED: ValueError: cannot reach postgresql://u08:***@" in failed.stdout, failed.stdout
    sweep("run", "leakw.yaml", "--storage", url, "--no-train", code=0, **pg)
    alone = sweep("worker", "--study", "leakw", "--retries", "0", code=0, BATCHSWEEP_STORAGE=url, **pg)
    assert "cannot reach postgresql://u08:***@" in alone.stdout + alone.stderr
    for grid in ("leak.yaml", "leakw.yaml"):
        assert " 2 failed," in sweep("status", grid, "--storage", url, code=0).stdout
        sweep("export", grid, "--storage", url, code=0)
    searched = sweep.assert_nothing_shows_a_password(server.rows(8))
    assert fnmatch.filter(searched, "results/leak/logs/*.log") and fnmatch.filter(searched, "results/leakw/*.csv")


def test_a_sqlite_url_with_a_password_query_is_a_store_that_never_shows_it(sweep: Harness) -> None:
    url = f"sqlite:///store.db?password={PASSWORDS[10]}"
    sweep("run", "grid.yaml", "--storage", url, "--keep-models", code=0)
    assert ": 2 done," in sweep("status", "grid.yaml", "--storage", url, code=0).stdout
    sweep("export", "grid.yaml", "--storage", url, code=0)
    searched = sweep.assert_nothing_shows_a_password()
    _assert_every_kind_was_searched(searched)
    assert "store.db" in searched


REFUSED = {
    11: lambda s: f"mysql://u11:{PASSWORDS[11]}@127.0.0.1:{s.closed}/db",
    12: lambda s: f"sqlite+pysqlcipher://:{PASSWORDS[12]}@/store.db",
    13: lambda s: f"host=127.0.0.1 port={s.closed} user=u13 password={PASSWORDS[13]} dbname=db",
    16: lambda s: f"postgresql://u16:{PASSWORDS[16]}@127.0.0.1:{s.closed}/db",
    17: lambda s: f"postgresql://u17:{PASSWORDS[17]}@127.0.0.1:{s.closed}/db",
    18: lambda s: s.url(1, userinfo=f"u01:{PASSWORDS[18]}"),
    19: lambda s: f"postgresql://u19@127.0.0.1:{s.closed}/db?password='{PASSWORDS[19]}'",
    21: lambda s: f"postgresql://u21:{PASSWORDS[21]}@127.0.0.1:{s.port}/db",
}


@pytest.mark.parametrize("number", sorted(REFUSED))
def test_a_store_that_cannot_be_used_exits_2_without_echoing_its_password(
    server: Server, sweep: Harness, number: int
) -> None:
    storage = REFUSED[number](server)
    sweep.write("store.url", storage + "\n")
    for command in (
        ["run", "grid.yaml", "--storage", storage],
        ["run", "grid.yaml", "--no-train", "--storage", storage],
    ):
        done = sweep(*command, code=2)
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    sweep("status", "grid.yaml", "--storage", "@store.url", code=2)
    sweep("status", "grid.yaml", code=2, BATCHSWEEP_STORAGE=storage)
    sweep("export", "grid.yaml", "--storage", storage, code=2)
    sweep("worker", "--study", "tiny", "--storage", storage, code=2)
    dry_run = 2 if number == 13 else 0  # the script of a password-bearing URL names $BATCHSWEEP_STORAGE
    sweep("slurm", "grid.yaml", "--array", "2", "--storage", storage, "--dry-run", code=dry_run)
    assert sweep.assert_nothing_shows_a_password() == []  # and nothing written


@pytest.mark.parametrize(
    "number, uri",
    [(14, "http://u14:{}@127.0.0.1:{}"), (15, "https://127.0.0.1:{1}/mlflow?password={0}")],
)
def test_an_mlflow_uri_with_a_password_that_cannot_be_reached_exits_2_without_echoing_it(
    server: Server, sweep: Harness, number: int, uri: str
) -> None:
    shutil.copytree(FIXTURE_SWEEPS[0], sweep.folder / "results" / "fx")
    sweep.inputs.update(p for p in (sweep.folder / "results" / "fx").rglob("*") if p.is_file())
    done = sweep("export", "results/fx", "--mlflow", uri.format(PASSWORDS[number], server.closed), code=2)
    assert done.stderr.startswith("error: --mlflow ") and done.stderr.count("\n") == 1, done.stderr
    assert sweep.assert_nothing_shows_a_password() == []  # and nothing written
