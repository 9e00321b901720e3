"""Where a report was made: the git commit of the code, package versions and the machine.

Versions come from package metadata, so nothing heavy (TensorFlow) is imported.
An installed copy outside a git checkout records the commit as "unknown".
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

VERSIONED = (
    "batchsweep",
    "tensorflow-cpu",
    "tensorflow",
    "jax",
    "jaxlib",
    "torch",
    "keras",
    "optuna",
    "numpy",
    "pandas",
    "scipy",
    "matplotlib",
)


def rows() -> list[tuple[str, str]]:
    """The report header's provenance rows."""
    return [("git commit", git_commit()), ("package versions", versions()), ("report written on", machine())]


def git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


def versions() -> str:
    found = []
    for name in VERSIONED:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join([f"python {platform.python_version()}", *found])


def machine() -> str:
    return f"{platform.platform()}, {platform.machine()}, {os.cpu_count()} CPU cores"
