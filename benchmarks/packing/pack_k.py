"""Training throughput of a pack (sweep/train/pack.py, trained by `sweep.train.trainer.Trainer`) per batch size
and towers K: the table behind `sweep.train.pack.PACK_SIZES`. Run by benchmarks/packing/pack_bench.py, one fresh
process per repeat:

    python -m benchmarks.packing.pack_k --batch-sizes 8 64 --ks 1 2 4 [--reverse]

For each batch size and K, in this process: K runs of the default model (120 classes, 32x32 images,
samples_per_class 50 as in experiments/batch_sizes.yaml, Adam lr 0.001, seeds 0..K-1) built as one trainer (K
= 1: a run alone, in its own model); a short first epoch traces the training function (TRACE_BATCHES x
steps_per_execution batches of each tower's epoch order), then a second `fit` epoch of TIMED_IMAGES images
(the first third of each tower's 4,800-image epoch: whole batches at every batch size, so no shape is new) is
timed, `model.fit` alone: no evaluation, no records inside the epoch. A third of the epoch, not all of it, so
that the whole table fits the benchmark's half hour. Model-images per second = K x images / seconds.
`--reverse` runs the Ks in the reverse order, so that a change in the machine's load does not favour one end
of the table.

Prints one JSON object per measurement, the last line a JSON list of all of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import json
import os
import textwrap
from typing import Any

BATCH_SIZES = (8, 16, 32, 64, 128, 256)
KS = (1, 2, 3, 4, 6, 8)
SAMPLES_PER_CLASS = 50  # experiments/batch_sizes.yaml
TRACE_BATCHES = 2  # x steps_per_execution: the first (tracing) epoch's length
TIMED_IMAGES = 1536  # per tower: 6 batches of 256, 192 of 8


def grid_text(batch_size: int, k: int, data: dict[str, int]) -> str:
    """A grid of K runs that pack: seeds 0..K-1, everything else the default model and data."""
    settings = ", ".join(f"{key}: {value}" for key, value in sorted(data.items()))
    return textwrap.dedent(f"""\
        name: pack-k
        seeds: {list(range(k))}
        base:
          data: {{{settings}}}
          train: {{epochs: 2, batch_size: {batch_size}, optimizer: adam, lr: 0.001}}
        """)


def specs_for(batch_size: int, k: int, data: dict[str, int], folder: Path) -> list[Any]:
    """The K run specs of one pack, planned from a grid file as `sweep run` plans them."""
    from sweep.config import load_grid
    from sweep.config.plan import plan

    path = folder / f"pack-k-b{batch_size}-k{k}.yaml"
    path.write_text(grid_text(batch_size, k, data))
    return plan(load_grid(path))


def time_pack(specs: list[Any]) -> dict[str, Any]:
    """One pack (sweep/train/trainer.py `Trainer` of K runs): a tracing epoch, then one timed training
    epoch (fit only).
    """
    from sweep.train import data as data_module
    from sweep.train.trainer import Trainer

    packed = Trainer(specs)
    batch = specs[0].point.train.batch_size
    spe = int(packed.model.steps_per_execution)
    orders = [data_module.epoch_order(t.split.y_train, t.spec.point.data.shuffle, t.spec.seed, 1) for t in packed.runs]
    xs = [t.split.x_train[o] for t, o in zip(packed.runs, orders, strict=True)]
    ys = [t.split.y_train[o] for t, o in zip(packed.runs, orders, strict=True)]
    images = min(TIMED_IMAGES, len(ys[0]) // batch * batch)  # whole batches only
    traced = min(TRACE_BATCHES * spe * batch, images)
    packed.engine.fit([x[:traced] for x in xs], [y[:traced] for y in ys], 1)
    _, seconds = packed.engine.fit([x[:images] for x in xs], [y[:images] for y in ys], 2)
    k = len(specs)
    return {
        "batch_size": batch,
        "k": k,
        "images": images,
        "seconds": seconds,
        "model_images_per_second": k * images / seconds,
        "steps_per_execution": spe,
        "threads": packed.info.threads,
    }


def measure(batch_sizes: list[int], ks: list[int], reverse: bool, data: dict[str, int], folder: Path) -> list[dict]:
    """Every (batch size, K), Ks in the given order or reversed, each pack in a fresh model (its trainer's
    own session); printed as measured.
    """
    found = []
    for batch_size in batch_sizes:
        for k in reversed(ks) if reverse else ks:
            result = time_pack(specs_for(batch_size, k, data, folder))
            print(json.dumps(result), flush=True)
            found.append(result)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=list(BATCH_SIZES))
    parser.add_argument("--ks", type=int, nargs="+", default=list(KS))
    parser.add_argument("--reverse", action="store_true", help="the Ks in reverse order")
    parser.add_argument("--folder", type=Path, required=True, help="where to write the packs' grid files")
    parser.add_argument("--samples-per-class", type=int, default=SAMPLES_PER_CLASS)
    parser.add_argument("--classes", type=int, default=None, help="default: the dataset's (120)")
    parser.add_argument("--image-size", type=int, default=None, help="default: the dataset's (32)")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    data = {"samples_per_class": args.samples_per_class}
    data |= {"classes": args.classes} if args.classes else {}
    data |= {"image_size": args.image_size} if args.image_size else {}
    args.folder.mkdir(parents=True, exist_ok=True)
    found = measure(args.batch_sizes, args.ks, args.reverse, data, args.folder)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
