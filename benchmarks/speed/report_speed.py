"""`sweep report` on a 100-run sweep: into an empty folder (every figure drawn) and again into the same
folder with nothing changed, each command in a fresh process, in alternating order across repeats.

    python -m benchmarks.speed.report_speed                      # about 2 minutes; results/bench/report_speed.*
    python -m benchmarks.speed.report_speed --against /tmp/old-checkout --repeats 5

The sweep is benchmarks/synthetic.yaml's 100 runs with synthetic records (benchmarks/common/synthetic.py),
so nothing trains. With `--against`, the same commands also run with another checkout's code (say a
`git worktree` of an older commit), alternating with this checkout's, and the table gives the ratio:
before and after a change, in one run on one machine. The targets are issue 17's: under 3 s into an
empty folder, under 1.5 s with nothing changed.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
import statistics
import subprocess
import tempfile
import time

from benchmarks.common import machine
from benchmarks.common.synthetic import synthetic_sweep

COMMANDS = {"into an empty folder": 3.0, "again, nothing changed": 1.5}  # what is timed -> target seconds
THIS = machine.THIS


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    return machine.checkout_arguments(parser, "timings of each command").parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    checkouts = machine.checkouts(args, "sweep/__main__.py")
    if checkouts is None:
        return 2
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{machine.describe()}; load average {machine.load_average():.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="report-speed-") as tmp:
        results = synthetic_sweep(Path(tmp))
        rows = [row for repeat in range(args.repeats) for row in _repeat(results, Path(tmp), checkouts, repeat)]
    args.out.mkdir(parents=True, exist_ok=True)
    _write_csv(rows, args.out / "report_speed.csv")
    text = markdown(rows, checkouts, started, machine.describe())
    (args.out / "report_speed.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


def _repeat(results: Path, tmp: Path, checkouts: dict[str, Path], repeat: int) -> list[dict[str, object]]:
    """One timing of each command with each checkout; the checkouts' order alternates between repeats."""
    order = list(checkouts.items())[:: 1 if repeat % 2 == 0 else -1]
    rows: list[dict[str, object]] = []
    for name, root in order:
        out = tmp / f"report-{name.replace(' ', '_')}-{repeat}"
        for command in COMMANDS:  # the first into `out` finds it empty; the second finds the first's report
            seconds = _timed_report(root, results, out)
            rows.append({"code": name, "command": command, "repeat": repeat, "seconds": round(seconds, 3)})
            print(f"repeat {repeat}: {name}, {command}: {seconds:.2f} s", flush=True)
    return rows


def _timed_report(root: Path, results: Path, out: Path) -> float:
    """Wall seconds of `python -m sweep report RESULTS --out OUT` with `root`'s code (run from `root`)."""
    env = machine.clean_env(out.parent / "cache")
    env["PYTHONPATH"] = str(root)
    begun = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sweep", "report", str(results), "--out", str(out)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - begun
    if done.returncode != 0:
        raise RuntimeError(f"sweep report exited {done.returncode} with {root}'s code:\n{done.stderr[-3000:]}")
    return seconds


def _write_csv(rows: list[dict[str, object]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["code", "command", "repeat", "seconds"])
        writer.writeheader()
        writer.writerows(rows)


def markdown(rows: list[dict[str, object]], checkouts: dict[str, Path], started: str, machine_words: str) -> str:
    """The medians per checkout and command, the ratio against `--against`, and the targets."""
    seconds: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        seconds.setdefault((str(row["code"]), str(row["command"])), []).append(float(str(row["seconds"])))
    median = {key: statistics.median(values) for key, values in seconds.items()}
    against = "against" in checkouts
    columns = ["command", "this checkout (s)", *(["against (s)", "speed-up"] if against else []), "target", "met"]
    lines = [
        "# `sweep report` on 100 runs",
        "",
        f"Machine: {machine_words}. Run {started}; {len({r['repeat'] for r in rows})} repeat(s), each command "
        "a fresh process, checkouts in alternating order; medians.",
        "",
        "| " + " | ".join(columns) + " |",
        "|" + "---|" * len(columns),
    ]
    for command, target in COMMANDS.items():
        ours = median[(THIS, command)]
        cells = [command, f"{ours:.2f}"]
        if against:
            theirs = median[("against", command)]
            cells += [f"{theirs:.2f}", f"{theirs / ours:.2f}x"]
        cells += [f"under {target:g} s", "yes" if ours < target else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *(f"`{name}`: {root} at commit {machine.commit(root)}." for name, root in checkouts.items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
