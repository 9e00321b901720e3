"""The export targets, one entry each: its flag, the flag's help, the module that writes it and the optional
extra it needs. `sweep export`'s flags, help and messages are derived from these entries (sweep/cli/cli_export.py),
so a new target is its module and one entry in `TARGETS`. Plain data, no pandas: the command line reads it as
it starts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One export target."""

    name: str  # the flag (--NAME), and the extra that installs what it needs (batchsweep[NAME])
    module: str  # the module whose write(results, where) -> str writes it and says what it wrote, in one line
    metavar: str  # what the flag takes: where to write
    help: str  # the flag's help
    tool: str  # the tool's name, in the command's one-line help
    writes: str  # what it writes, a line of the command's description
    needs: tuple[str, ...]  # the packages its extra installs, imported before anything is written to check them
    examples: tuple[str, ...] = ()  # the command's examples: the export, then how to read what it wrote


TARGETS: dict[str, Target] = {
    target.name: target
    for target in (
        Target(
            name="tensorboard",
            module="sweep.export.to_tensorboard",
            metavar="OUT",
            help="folder for the event files (tensorboard --logdir OUT)",
            tool="TensorBoard",
            writes="TensorBoard event files: one run per run id, a scalar per metric per epoch, the HParams view's "
            "data",
            needs=("tensorboard",),
            examples=("sweep export results/article --tensorboard runs/article", "tensorboard --logdir runs/article"),
        ),
        Target(
            name="mlflow",
            module="sweep.export.to_mlflow",
            metavar="URI",
            help="MLflow tracking URI: sqlite:///mlflow.db (a local file) or a server's URL",
            tool="MLflow",
            writes="MLflow runs: params, per-epoch metrics, report.md and report.html as artifacts, in an experiment "
            "named after the sweep",
            needs=("mlflow",),
            examples=(
                "sweep export results/article --mlflow sqlite:///mlflow.db",
                "mlflow ui --backend-store-uri sqlite:///mlflow.db",
            ),
        ),
    )
}
