"""The benchmarks across Keras backends: benchmarks/tools/device_check.py (the sweep's checks on a machine's
devices: on JAX in an environment without TensorFlow, a JAX machine with Keras and Optuna beside pandas,
matplotlib and scikit-learn; on torch here) and benchmarks/speed/backend_speed.py (one grid's wall time on
TensorFlow and JAX).
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import services
from conftest import REPO

from benchmarks.speed import backend_speed
from benchmarks.tools import device_check

CHECKS = ("devices", "smoke", "replicas", "trials per GPU", "pack", "records")

# What a JAX machine without TensorFlow brings, at this environment's versions (so pip takes them
# from its cache); Keras's and Optuna's own dependencies come with them.
WITHOUT_TENSORFLOW = (
    "jax",
    "jaxlib",
    "keras",
    "optuna",
    "numpy",
    "pandas",
    "scipy",
    "matplotlib",
    "scikit-learn",
    "pyyaml",
    "psutil",
)


@pytest.mark.unit
def test_a_folder_in_use_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("keep", encoding="utf-8")
    assert device_check.main([str(out)]) == 2
    assert capsys.readouterr().err == f"error: {out}: exists and is not an empty folder; give a new or empty one\n"
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def _epochs(folder: Path, rows: list[tuple[str, str, float, float]]) -> Path:
    folder.mkdir()
    with (folder / "epochs.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["run_id", "epoch", "train_acc", "val_acc"])
        writer.writerows(rows)
    return folder


@pytest.mark.unit
def test_packed_and_alone_records_are_compared_record_by_record(tmp_path: Path) -> None:
    alone = _epochs(tmp_path / "a", [("r1", "1", 0.5, 0.25), ("r1", "2", 0.75, 0.5)])
    same = _epochs(tmp_path / "b", [("r1", "2", 0.75, 0.5), ("r1", "1", 0.5, 0.25)])
    moved = _epochs(tmp_path / "c", [("r1", "1", 0.5, 0.25), ("r1", "2", 0.75, 0.625)])
    short = _epochs(tmp_path / "d", [("r1", "1", 0.5, 0.25)])
    assert device_check.records_differ(alone, same) == "identical"
    assert device_check.records_differ(alone, moved) == "differ by up to 0.12 in accuracy"
    assert device_check.records_differ(alone, short) == "differ: 2 against 1 records"


def _environment_without_tensorflow(where: Path) -> Path:
    services.require("registry")  # pip installs into the fresh environment from the package index
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    pinned = [f"{name}=={version(name)}" for name in WITHOUT_TENSORFLOW]
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pinned], check=True)
    return python


def _device_check(python: Path | str, out: Path, backend: str) -> dict[str, dict[str, str]]:
    """`python -m benchmarks.tools.device_check OUT` from the checkout, on `backend`: asserts exit 0; the CSV's
    rows by check. The caller's PYTHONPATH and venv stay out: the check must find the harness itself.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {"KERAS_BACKEND": backend}
    done = subprocess.run(
        [str(python), "-m", "benchmarks.tools.device_check", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with (out / "device_check.csv").open(encoding="utf-8") as f:
        return {row["check"]: row for row in csv.DictReader(f)}


@pytest.mark.system
def test_the_device_check_runs_on_jax_in_an_environment_without_tensorflow(tmp_path: Path) -> None:
    python = _environment_without_tensorflow(tmp_path / "venv")
    missing = subprocess.run([str(python), "-c", "import tensorflow"], capture_output=True, text=True)
    assert "No module named 'tensorflow'" in missing.stderr
    out = tmp_path / "check"
    rows = _device_check(python, out, "jax")
    assert tuple(rows) == CHECKS
    assert rows["devices"]["outcome"] == "passed"
    assert rows["devices"]["detail"].endswith("1 device(s) (cpu:0); TensorFlow not installed")
    assert rows["devices"]["detail"].startswith(f"Keras {version('keras')} on jax {version('jax')}")
    assert (rows["smoke"]["outcome"], rows["smoke"]["detail"]) == ("passed", "2 of 2 runs done, report.md written")
    assert (rows["replicas"]["outcome"], rows["replicas"]["detail"]) == (
        "passed",
        "2 of 2 runs (gpus 1 and 2) done on logical CPU devices",
    )
    assert rows["trials per GPU"]["outcome"] == "skipped"
    assert rows["pack"]["outcome"] == "passed" and rows["pack"]["detail"].endswith("records identical")
    assert rows["records"]["outcome"] == "passed"
    assert re.fullmatch(r"article\.yaml train\.epochs=1 seeds=\[0\]: records \d+% of \d+ s", rows["records"]["detail"])
    table = (out / "records.md").read_text(encoding="utf-8")
    assert "`experiments/article.yaml train.epochs=1 seeds=[0]` | 2 |" in table  # its 2 runs
    summary = (out / "device_check.md").read_text(encoding="utf-8")
    for check in CHECKS:
        assert f"| {check} | {rows[check]['outcome']} |" in summary
    assert (out / "smoke" / "report.md").is_file()


@pytest.mark.system
def test_the_device_check_on_torch_packs_and_refuses_replicas_in_one_line(tmp_path: Path) -> None:
    """torch in this environment: its devices found without keras.distribution (which has none to list on
    torch), packed runs as alone, and replicas refused by the harness's one line, not failed.
    """
    services.require("torch")
    found = _device_check(sys.executable, tmp_path / "check", "torch")
    rows = {check: (row["outcome"], row["detail"]) for check, row in found.items()}
    assert rows["devices"] == (
        "passed",
        f"Keras {version('keras')} on torch {version('torch')}: 1 device(s) (cpu); TensorFlow installed",
    )
    assert rows["smoke"] == ("passed", "2 of 2 runs done, report.md written")
    assert (
        rows["replicas"][0] == "refused"
        and "train.gpus: 2 is not supported on the torch backend" in rows["replicas"][1]
    )
    assert rows["trials per GPU"][0] == "skipped"
    assert rows["pack"][0] == "passed" and rows["pack"][1].endswith("records identical")
    assert rows["records"][0] == "passed" and rows["records"][1].startswith("article.yaml train.epochs=1 seeds=[0]: ")


@pytest.mark.unit
def test_the_backends_table_gives_medians_and_the_ratio() -> None:
    timings = [
        backend_speed.Timing(backend, repeat, 1.0, process * scale, run * scale, 6)
        for backend, scale in (("tensorflow", 1.0), ("jax", 1.5))
        for repeat, (process, run) in enumerate(((100.0, 80.0), (300.0, 240.0), (120.0, 96.0)))
    ]
    text = backend_speed.markdown(timings, backend_speed.ARTICLE, "now")
    assert "| process seconds | 120.0 | 180.0 | 1.50 |" in text  # medians of 100, 300, 120 and of 1.5x those
    assert "| run seconds | 96.0 | 144.0 | 1.50 |" in text
    assert "--grid experiments/article.yaml --repeats 3" in text and "6 runs per backend" in text


@pytest.mark.system
def test_the_backends_benchmark_times_a_grid_on_both_and_refuses_bad_input(tmp_path: Path) -> None:
    def bench(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "benchmarks.speed.backend_speed", "--out", str(tmp_path), *args]
        return subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)

    done = bench("--grid", str(REPO / "experiments" / "smoke.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    with (tmp_path / "backends.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["backend"], r["runs_done"]) for r in rows] == [("tensorflow", "2"), ("jax", "2")]
    assert all(float(r["process_seconds"]) > float(r["run_seconds"]) > 0 for r in rows)
    assert "| process seconds |" in (tmp_path / "backends.md").read_text(encoding="utf-8")
    for bad, words in ((("--repeats", "0"), "--repeats must be at least 1"), (("--grid", "/nowhere.yaml"), "/nowhere")):
        refused = bench(*bad)
        assert refused.returncode == 2 and words in refused.stderr and "Traceback" not in refused.stderr
