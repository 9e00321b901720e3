"""What BatchNorm recalibration costs at a record: `recal.Twin`'s statistics pass (a training-mode
forward pass over the train_eval subset and the pooled float64 sums of every BatchNorm layer's input),
with this checkout's code and, with `--against`, another checkout's, alternating.

    python -m benchmarks.costs.recal_speed --against /tmp/old-checkout  # about a minute; results/bench/recal_speed.*

Each timing is a fresh process in the environment of `sweep run --workers 1`'s worker (every core):
the default model (120 classes, 32x32), the batch_sizes grid's data (its train_eval subset of 1,200
images), the same weights (seed 0), one traced pass, then the median of CALLS passes. The statistics each
checkout sets are compared too (a digest of every moving mean and variance): a faster pass must set
the same bits. experiments/batch_sizes.yaml recalibrates at every record, 24 times per run at batch 8.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
import json
import shutil
import statistics
import subprocess
import tempfile
import time

from benchmarks.common import machine
from sweep.train import backends

THIS = machine.THIS
CALLS = 10
PASS = Path(__file__).with_name("recal_pass.py")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    return machine.checkout_arguments(parser, "processes").parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    checkouts = machine.checkouts(args, "sweep/train/recal.py")
    if checkouts is None:
        return 2
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{machine.describe()}; load average {machine.load_average():.2f} at start", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="recal-speed-") as tmp:
        env = _worker_env(Path(tmp) / "cache")
        # The pass runs by its path from a folder of its own, so `sweep` comes from the checkout timed
        # (PYTHONPATH), never from a folder beside the script.
        script = Path(shutil.copy(PASS, Path(tmp) / PASS.name))
        for repeat in range(args.repeats):
            for name, root in list(checkouts.items())[:: 1 if repeat % 2 == 0 else -1]:
                found = _timed(script, root, env)
                rows.append({"code": name, "repeat": repeat, **found})
                print(f"repeat {repeat}: {name}: {found['seconds']:.3f} s per pass", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "recal_speed.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["code", "repeat", "seconds", "digest"])
        writer.writeheader()
        writer.writerows(rows)
    text = markdown(rows, checkouts, started)
    (args.out / "recal_speed.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


def _worker_env(cache: Path) -> dict[str, str]:
    from sweep.train import devices

    return devices.worker_environment(machine.clean_env(cache), threads=machine.cores())


def _timed(script: Path, root: Path, env: dict[str, str]) -> dict[str, object]:
    """One process with `root`'s code: the median seconds of a pass and the statistics' digest."""
    done = subprocess.run(
        [sys.executable, str(script), str(CALLS)],
        cwd=root,
        env={**env, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the pass with {root}'s code exited {done.returncode}:\n{done.stderr[-3000:]}")
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"seconds": round(float(str(found["seconds"])), 4), "digest": found["digest"]}


def markdown(rows: list[dict[str, object]], checkouts: dict[str, Path], started: str) -> str:
    """The median per checkout, the ratio, and whether the statistics' bits agree."""
    median = {
        name: statistics.median(float(str(r["seconds"])) for r in rows if r["code"] == name) for name in checkouts
    }
    digests = {str(r["digest"]) for r in rows}
    lines = [
        "# BatchNorm recalibration: one statistics pass",
        "",
        f"Machine: {machine.describe()}; Keras backend {backends.current()}. Run {started}; "
        f"{len({r['repeat'] for r in rows})} repeat(s), each a fresh "
        f"process in a `--workers 1` worker's environment, checkouts in alternating order; the median of {CALLS} "
        "passes per process, then the median of the processes.",
        "",
        "| code | seconds per pass |",
        "|---|---|",
        *(f"| {name} | {seconds:.3f} |" for name, seconds in median.items()),
        "",
    ]
    if "against" in checkouts:
        lines.append(f"Speed-up: {median['against'] / median[THIS]:.2f}x.")
    lines.append(
        "The statistics set (every moving mean and variance): "
        + ("the same bits in every process." if len(digests) == 1 else f"{len(digests)} different digests.")
    )
    lines += ["", *(f"`{name}`: {root} at commit {machine.commit(root)}." for name, root in checkouts.items())]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
