"""The harness against its peers: `sweep run` against Ray Tune and KerasTuner on the same grid.

    pip install -e '.[peers]'          # in a venv of its own: Ray Tune and KerasTuner
    python -m benchmarks.peers.peer_bench         # benchmarks/grid.yaml, best of 2 repeats
    python -m benchmarks.peers.peer_bench --grid benchmarks/quick.yaml --repeats 1 --out /tmp/peers

Each configuration trains every run of the grid (same model, data, seeds, epochs and data
order: benchmarks/peers/peer_trial.py) as ONE whole process, from an empty results folder, in
machine.py's clean environment with a warm dataset cache, timed from start to exit:

  sweep          `python -m sweep run GRID` with its default flags;
  sweep-w1       `python -m sweep run GRID --workers 1`;
  ray            Ray Tune, 2 trials at once, default settings (benchmarks/peers/peer_ray.py);
  ray-reuse      the same with `reuse_actors=True`;
  kerastuner     KerasTuner's GridSearch, one trial per run (benchmarks/peers/peer_kerastuner.py).

Threads are matched: each peer trial's process gets the threads a `sweep` worker gets when that
many train at once (sweep/train/devices.py `worker_environment`, the cores shared evenly as
sweep/run/coordinator.py `threads_per_worker` shares them); the harness sets its own workers'.
The configurations run in alternating order (all of them, then all again), `--repeats` times,
and each one's best counts. Peers run with this interpreter (sys.executable), so run this in the
venv that has them. Written for CPU machines.

Writes peers.csv (tidy: config, repeat, seconds) and peers.md (best seconds and each one's
ratio to the default `sweep run`) into --out, replacing them: each file is one measurement.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
import importlib.util
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version

from benchmarks.common import machine, training
from benchmarks.peers import peer_trial

HERE = Path(__file__).resolve().parents[1]  # benchmarks/, beside the grids the groups share
GRID = HERE / "grid.yaml"
RESULTS = machine.REPO / "results" / "bench"
AT_ONCE = 2  # Ray Tune's trials at once
DEFAULT, HEADLINE = "sweep", "ray-reuse"  # the headline: the default `sweep run` against Ray Tune reusing actors
LABELS = {
    "sweep": "`sweep run` (default flags)",
    "sweep-w1": "`sweep run --workers 1`",
    "ray": f"Ray Tune, {AT_ONCE} trials at once (default settings)",
    "ray-reuse": f"Ray Tune, {AT_ONCE} trials at once, `reuse_actors=True`",
    "kerastuner": "KerasTuner GridSearch (one trial at a time)",
}
PEER_PACKAGES = {"ray": "ray", "keras_tuner": "keras-tuner"}  # module -> distribution


@dataclass(frozen=True)
class Peer:
    """One configuration: the command that trains the grid, the folder it writes, its threads."""

    config: str
    command: tuple[str, ...]
    folder: Path  # emptied before each repeat
    at_once: int | None  # trials training at once; None: `sweep run` decides (its default workers)


@dataclass(frozen=True)
class Timing:
    """One timed repeat of a configuration."""

    config: str
    repeat: int
    seconds: float


@dataclass(frozen=True)
class Stamp:
    """What peers.md says besides the timings."""

    grid: str
    runs: int
    repeats: int
    date: str
    machine: str
    load: float  # the load average at the start: how busy the machine was
    commit: str
    versions: str  # "ray 2.60.0, keras-tuner 1.4.8"
    command: str
    threads: dict[str, str]  # config -> "2 x 1": trials at once x threads each


def schedule(configs: list[str], repeats: int) -> list[tuple[int, str]]:
    """(repeat, config) in alternating order: every configuration once, then all again, so a change
    in the machine's load touches all of them alike.
    """
    return [(repeat, config) for repeat in range(1, repeats + 1) for config in configs]


def threads_each(at_once: int) -> int:
    """A trial's threads when `at_once` train together: coordinator.threads_per_worker's fair share."""
    return max(1, machine.cores() // at_once)


def peers(grid: Path, folder: Path) -> list[Peer]:
    """The five configurations, each writing under its own folder in `folder`."""

    def where(config: str) -> Path:
        return folder / f"results_{config}"

    def sweep(config: str, *flags: str) -> Peer:
        command = machine.python_module("sweep", "run", str(grid), "--results", str(where(config)), *flags)
        return Peer(config, tuple(command), where(config), 1 if flags else None)

    def ray(config: str, *flags: str) -> Peer:
        command = machine.python_module(
            "benchmarks.peers.peer_ray",
            str(grid),
            "--storage",
            str(where(config)),
            "--concurrent",
            str(AT_ONCE),
            *flags,
        )
        return Peer(config, tuple(command), where(config), AT_ONCE)

    kerastuner = machine.python_module("benchmarks.peers.peer_kerastuner", str(grid), "--directory", str(where("kt")))
    return [
        sweep("sweep"),
        sweep("sweep-w1", "--workers", "1"),
        ray("ray"),
        ray("ray-reuse", "--reuse-actors"),
        Peer("kerastuner", tuple(kerastuner), where("kt"), 1),
    ]


def environment(peer: Peer, env: dict[str, str]) -> dict[str, str]:
    """The clean environment; for a peer, with a `sweep` worker's threads at its trials at once."""
    from sweep.train import devices

    return env if peer.config.startswith("sweep") else devices.worker_environment(env, threads_each(peer.at_once or 1))


def time_once(peer: Peer, repeat: int, env: dict[str, str]) -> tuple[Timing, str]:
    """Train the grid from an empty folder; the timing and the process's output."""
    shutil.rmtree(peer.folder, ignore_errors=True)
    finished = machine.timed(list(peer.command), environment(peer, env))
    return Timing(peer.config, repeat, finished.seconds), finished.stdout


def workers_started(stdout: str) -> int | None:
    """How many workers `sweep run` says it started."""
    found = re.search(r"starting (\d+) worker", stdout)
    return int(found.group(1)) if found else None


def best(timings: list[Timing]) -> dict[str, float]:
    """Each configuration's fastest repeat, in the order configurations first appear."""
    fastest: dict[str, float] = {}
    for t in timings:
        fastest[t.config] = min(fastest.get(t.config, t.seconds), t.seconds)
    return fastest


def ratio(seconds: float, default: float) -> str:
    """A configuration's time as a multiple of the default `sweep run`'s."""
    return f"{seconds / default:.2f}x"


def table(timings: list[Timing], stamp: Stamp) -> str:
    """peers.md: the headline, the table, and where and how it was measured."""
    fastest = best(timings)
    default = fastest[DEFAULT]
    lines = [
        "# The harness against its peers: `sweep run`, Ray Tune, KerasTuner",
        "",
        f"`{stamp.grid}`: {stamp.runs} runs, each configuration one whole process from an empty results folder, "
        f"same model, data, seeds and epochs; best of {stamp.repeats} repeat(s) in alternating order.",
        "",
    ]
    if HEADLINE in fastest:
        lines += [
            f"**The default `sweep run`: {default:.1f} s; Ray Tune with `reuse_actors=True`: "
            f"{fastest[HEADLINE]:.1f} s ({ratio(fastest[HEADLINE], default)} the harness's time).**",
            "",
        ]
    lines += [
        "| configuration | trials at once x threads | best (s) | repeats (s) | vs default `sweep run` |",
        "| --- | --- | ---: | --- | ---: |",
    ]
    for config, seconds in fastest.items():
        each = ", ".join(f"{t.seconds:.1f}" for t in timings if t.config == config)
        threads = stamp.threads.get(config, "")
        lines.append(
            f"| {LABELS.get(config, config)} | {threads} | {seconds:.1f} | {each} | {ratio(seconds, default)} |"
        )
    lines += [
        "",
        f"Machine: {stamp.machine}; load average {stamp.load:.2f} at the start. Date: {stamp.date}. "
        f"Commit: {stamp.commit}. Versions: {stamp.versions}.",
        "",
        f"Rerun (in a venv with `pip install -e '.[peers]'`): `{stamp.command}`",
        "",
    ]
    return "\n".join(lines)


def write(timings: list[Timing], stamp: Stamp, out: Path) -> dict[str, Path]:
    """peers.csv and peers.md in `out`, each replaced whole."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "peers.csv", "md": out / "peers.md"}
    with paths["csv"].open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["config", "repeat", "seconds"])
        writer.writerows([t.config, t.repeat, f"{t.seconds:.3f}"] for t in timings)
    paths["md"].write_text(table(timings, stamp), encoding="utf-8")
    return paths


def missing_peers() -> list[str]:
    """The peer packages this interpreter cannot import."""
    return [dist for module, dist in PEER_PACKAGES.items() if importlib.util.find_spec(module) is None]


def peer_versions() -> str:
    def of(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"

    return ", ".join(f"{dist} {of(dist)}" for dist in PEER_PACKAGES.values())


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", type=Path, default=GRID, help="the grid to train (default benchmarks/grid.yaml)")
    parser.add_argument("--repeats", type=int, default=2, help="repeats of each configuration (default 2; best kept)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write (default results/bench)")
    return parser.parse_args(argv)


def rerun_command(args: argparse.Namespace) -> str:
    """The command that measures this again."""
    words = ["python -m benchmarks.peers.peer_bench", f"--repeats {args.repeats}"]
    if args.grid.resolve() != GRID:
        words.append(f"--grid {shown(args.grid)}")
    return " ".join(words)


def shown(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(machine.REPO) if path.is_relative_to(machine.REPO) else path)


def measure(grid: Path, repeats: int, folder: Path) -> tuple[list[Timing], dict[str, str]]:
    """Every configuration `repeats` times in alternating order; the timings and each one's
    "trials at once x threads".
    """
    env = machine.clean_env(folder / "cache")
    training.warm_cache(grid, folder / "cache")
    configured = {peer.config: peer for peer in peers(grid, folder)}
    timings: list[Timing] = []
    threads: dict[str, str] = {}
    for repeat, config in schedule(list(configured), repeats):
        peer = configured[config]
        timing, stdout = time_once(peer, repeat, env)
        at_once = peer.at_once or workers_started(stdout) or 1
        threads[config] = f"{at_once} x {threads_each(at_once)}"
        timings.append(timing)
        print(f"[{repeat}/{repeats}] {LABELS[config]}: {timing.seconds:.1f} s ({threads[config]})", flush=True)
    return timings, threads


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    missing = missing_peers()
    if missing:
        print(
            f"error: {', '.join(missing)} not importable by {sys.executable}; "
            f"install the peers first, in a venv of their own: pip install -e '.[peers]'",
            file=sys.stderr,
        )
        return 2
    if args.repeats < 1:
        print(f"error: --repeats must be at least 1, not {args.repeats}", file=sys.stderr)
        return 2
    grid = args.grid.resolve()
    runs = len(peer_trial.plan_runs(grid))  # a grid the peers cannot name run by run fails here, before any timing
    load = machine.load_average()
    print(f"{machine.describe()}; load average {load:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
        timings, threads = measure(grid, args.repeats, Path(tmp))
    stamp = Stamp(
        shown(grid),
        runs,
        args.repeats,
        datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        machine.describe(),
        load,
        machine.commit(machine.REPO),
        peer_versions(),
        rerun_command(args),
        threads,
    )
    paths = write(timings, stamp, args.out)
    print()
    print(paths["md"].read_text(encoding="utf-8"), end="")
    print(f"\nwritten: {', '.join(shown(p) for p in paths.values())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
