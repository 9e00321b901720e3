"""What `benchmarks/tools/device_check.py` asks a machine first, run as `python -m benchmarks.tools.device_probe`
in the environment under test: the Keras backend, its version, its devices and whether TensorFlow is
installed, as one JSON line.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import importlib
import importlib.util
import json


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python -m benchmarks.tools.device_probe", description=__doc__).parse_args(argv)
    import keras

    backend = keras.backend.backend()
    if backend == "torch":  # keras.distribution has no devices to list on torch: torch's own
        import torch

        devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())] or ["cpu"]
    else:
        devices = [str(d) for d in keras.distribution.list_devices()]
    found = {
        "backend": backend,
        "keras": keras.__version__,
        "backend_version": getattr(importlib.import_module(backend), "__version__", "?"),
        "devices": devices,
        "tensorflow": importlib.util.find_spec("tensorflow") is not None,
    }
    print(json.dumps(found))


if __name__ == "__main__":
    main()
