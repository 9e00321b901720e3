"""Does the sweep run on this machine's devices? A few real sweeps, each a check with an outcome.

    KERAS_BACKEND=jax python -m benchmarks.tools.device_check OUT       # a few minutes on a CPU

Run it from a checkout: the harness need not be installed, and TensorFlow need not be there (a JAX
or PyTorch machine with Keras, Optuna, pandas, matplotlib and scikit-learn is enough). The backend
is the process's (`KERAS_BACKEND`). Each check is `python -m sweep ...` in a fresh process:

- devices: the backend, its version, the devices Keras sees, whether TensorFlow is installed;
- smoke: experiments/smoke.yaml trains, and `sweep report` writes its report;
- replicas: a `train.gpus: [1, 2]` grid (on logical CPU devices when there are fewer than 2);
- trials per GPU: the smoke grid with `--trials-per-gpu 2` (skipped without a GPU: it shares GPUs);
- pack: the same 4 runs with `--pack 1` and `--pack 2`, wall time each, records compared;
- records: where a run's time goes in the post's setting (benchmarks/costs/record_cost.py on `article.yaml` at
  one epoch and one seed): the share its records (evaluation, BatchNorm recalibration) take.

Outcomes: passed, refused (the harness refused in one line, exit 2: the backend cannot do it yet),
skipped (with why) or failed (exit code and the end of stderr). OUT gets device_check.md and
device_check.csv, and each check's results folder. Exit 0 unless a check failed (1); bad input 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
import json
import re
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass

import yaml

from benchmarks.common import machine

PASSED, REFUSED, SKIPPED, FAILED = "passed", "refused", "skipped", "failed"
SMOKE = machine.REPO / "experiments" / "smoke.yaml"
REPLICAS_GRID = """name: replicas
seeds: [0]
base:
  data: {classes: 8, samples_per_class: 20, image_size: 16}
  train: {epochs: 1, batch_size: 16}
grid:
  train.gpus: [1, 2]
"""
RECORDS_GRID = ("experiments/article.yaml", "train.epochs=1", "seeds=[0]")
PACK_GRID = yaml.safe_dump({**yaml.safe_load(SMOKE.read_text(encoding="utf-8")), "seeds": [0, 1]})  # 4 runs


@dataclass(frozen=True)
class Outcome:
    check: str
    outcome: str
    seconds: float
    detail: str


@dataclass(frozen=True)
class Ran:
    code: int
    seconds: float
    stdout: str
    stderr: str

    def last_line(self) -> str:
        lines = (self.stderr or self.stdout).strip().splitlines()
        return lines[-1] if lines else ""


class Checker:
    """Runs each check's commands in a fresh process from the repository's root, with OUT at hand."""

    def __init__(self, out: Path, cache: Path) -> None:
        self.out, self.env = out, machine.clean_env(cache)

    def run(self, *args: str) -> Ran:
        started = time.perf_counter()
        done = subprocess.run(args, cwd=machine.REPO, env=self.env, capture_output=True, text=True, check=False)
        return Ran(done.returncode, time.perf_counter() - started, done.stdout, done.stderr)

    def sweep(self, *args: str) -> Ran:
        return self.run(sys.executable, "-m", "sweep", *args)

    def grid(self, name: str, text: str) -> str:
        path = self.out / "grids" / f"{name}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return str(path)


def not_passed(check: str, ran: Ran, seconds: float) -> Outcome:
    """A command that exited non-zero: refused (exit 2, the harness's one-line refusal) or failed."""
    if ran.code == 2:
        return Outcome(check, REFUSED, seconds, ran.last_line())
    return Outcome(check, FAILED, seconds, f"exit {ran.code}: {ran.last_line()}")


def done_runs(results: Path) -> int:
    with (results / "runs.csv").open(encoding="utf-8") as f:
        return sum(row["status"] == "done" for row in csv.DictReader(f))


def check_devices(checker: Checker) -> tuple[Outcome, dict]:
    ran = checker.run(sys.executable, "-m", "benchmarks.tools.device_probe")  # from the checkout (Checker.run's cwd)
    if ran.code != 0:
        return not_passed("devices", ran, ran.seconds), {}
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    tensorflow = "installed" if found["tensorflow"] else "not installed"
    detail = (
        f"Keras {found['keras']} on {found['backend']} {found['backend_version']}: "
        f"{len(found['devices'])} device(s) ({', '.join(found['devices'])}); TensorFlow {tensorflow}"
    )
    return Outcome("devices", PASSED, ran.seconds, detail), found


def check_smoke(checker: Checker) -> Outcome:
    results = checker.out / "smoke"
    trained = checker.sweep("run", str(SMOKE), "--results", str(results))
    if trained.code != 0:
        return not_passed("smoke", trained, trained.seconds)
    reported = checker.sweep("report", str(results))
    seconds = trained.seconds + reported.seconds
    if reported.code != 0 or not (results / "report.md").is_file():
        return not_passed("smoke", reported, seconds)
    return Outcome("smoke", PASSED, seconds, f"{done_runs(results)} of 2 runs done, report.md written")


def check_replicas(checker: Checker, accelerators: int) -> Outcome:
    results = checker.out / "replicas"
    ran = checker.sweep("run", checker.grid("replicas", REPLICAS_GRID), "--results", str(results))
    if ran.code != 0:
        return not_passed("replicas", ran, ran.seconds)
    where = f"{accelerators} accelerators" if accelerators >= 2 else "logical CPU devices"
    return Outcome("replicas", PASSED, ran.seconds, f"{done_runs(results)} of 2 runs (gpus 1 and 2) done on {where}")


def check_trials_per_gpu(checker: Checker, accelerators: int) -> Outcome:
    if accelerators == 0:
        return Outcome("trials per GPU", SKIPPED, 0.0, "no GPU: --trials-per-gpu shares GPUs between runs")
    results = checker.out / "trials_per_gpu"
    ran = checker.sweep("run", str(SMOKE), "--trials-per-gpu", "2", "--results", str(results))
    if ran.code != 0:
        return not_passed("trials per GPU", ran, ran.seconds)
    return Outcome("trials per GPU", PASSED, ran.seconds, f"{done_runs(results)} of 2 runs done, 2 per GPU")


def check_pack(checker: Checker) -> Outcome:
    """Packed first: a backend that cannot pack refuses in a second, before the runs alone train."""
    grid = checker.grid("pack", PACK_GRID)
    packed = checker.sweep("run", grid, "--pack", "2", "--results", str(checker.out / "pack_2"))
    if packed.code != 0:
        return not_passed("pack", packed, packed.seconds)
    alone = checker.sweep("run", grid, "--pack", "1", "--results", str(checker.out / "pack_1"))
    seconds = alone.seconds + packed.seconds
    if alone.code != 0:
        return not_passed("pack", alone, seconds)
    differ = records_differ(checker.out / "pack_1", checker.out / "pack_2")
    detail = (
        f"4 runs: {alone.seconds:.1f} s alone, {packed.seconds:.1f} s in packs of 2 "
        f"({alone.seconds / packed.seconds:.2f}x); records {differ}"
    )
    return Outcome("pack", PASSED, seconds, detail)


def check_records(checker: Checker) -> Outcome:
    """benchmarks/costs/record_cost.py in a fresh process, its table in OUT/records.md; the share it printed."""
    out = checker.out / "records.md"
    ran = checker.run(sys.executable, "-m", "benchmarks.costs.record_cost", *RECORDS_GRID, "--out", str(out))
    if ran.code != 0:
        return not_passed("records", ran, ran.seconds)
    found = re.search(r"records took (\d+%) of (\d+) s", ran.stdout)
    if found is None:
        return Outcome("records", FAILED, ran.seconds, f"no share in its output: {ran.last_line()}")
    setting = " ".join(RECORDS_GRID[1:])
    return Outcome("records", PASSED, ran.seconds, f"article.yaml {setting}: records {found[1]} of {found[2]} s")


def records_differ(first: Path, second: Path) -> str:
    """'identical', or the largest difference between the two folders' train and validation accuracies."""

    def read(folder: Path) -> dict[tuple[str, str], tuple[float, float]]:
        with (folder / "epochs.csv").open(encoding="utf-8") as f:
            return {(r["run_id"], r["epoch"]): (float(r["train_acc"]), float(r["val_acc"])) for r in csv.DictReader(f)}

    a, b = read(first), read(second)
    if a.keys() != b.keys():
        return f"differ: {len(a)} against {len(b)} records"
    largest = max((abs(x - y) for key in a for x, y in zip(a[key], b[key], strict=True)), default=0.0)
    return "identical" if largest == 0 else f"differ by up to {largest:.2g} in accuracy"


def checks(checker: Checker) -> list[Outcome]:
    """Every check in order, each announced before it starts and its outcome printed when it ends."""
    rest = {
        "smoke": lambda accelerators: check_smoke(checker),
        "replicas": lambda accelerators: check_replicas(checker, accelerators),
        "trials per GPU": lambda accelerators: check_trials_per_gpu(checker, accelerators),
        "pack": lambda accelerators: check_pack(checker),
        "records": lambda accelerators: check_records(checker),
    }
    total = 1 + len(rest)
    print(f"[1/{total}] devices", flush=True)
    first, found = check_devices(checker)
    outcomes = [_said(first)]
    accelerators = sum(not d.lower().startswith("cpu") for d in found.get("devices", []))
    for number, (name, check) in enumerate(rest.items(), start=2):
        print(f"[{number}/{total}] {name}", flush=True)
        outcomes.append(_said(check(accelerators)))
    return outcomes


def _said(outcome: Outcome) -> Outcome:
    print(f"      {outcome.outcome} in {outcome.seconds:.1f} s: {outcome.detail}", flush=True)
    return outcome


def markdown(outcomes: list[Outcome], started: str) -> str:
    counts = ", ".join(
        f"{sum(o.outcome == kind for o in outcomes)} {kind}" for kind in (PASSED, REFUSED, SKIPPED, FAILED)
    )
    lines = [
        "# Device check",
        "",
        f"{started}; {machine.describe()}. {counts}.",
        "",
        "| check | outcome | seconds | detail |",
        "|---|---|---|---|",
        *(f"| {o.check} | {o.outcome} | {o.seconds:.1f} | {o.detail.replace('|', '/')} |" for o in outcomes),
    ]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.tools.device_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out", type=Path, help="a new or empty folder for the summary and each check's results")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    out = parse(argv).out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        print(f"error: {out}: exists and is not an empty folder; give a new or empty one", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory(prefix="device-check-") as cache:
        outcomes = checks(Checker(out, Path(cache)))
    with (out / "device_check.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(outcomes[0])))
        writer.writeheader()
        writer.writerows(asdict(o) for o in outcomes)
    text = markdown(outcomes, started)
    (out / "device_check.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 1 if any(o.outcome == FAILED for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
