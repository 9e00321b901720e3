"""What the hardware could do, and what a training step asks of it: matmul peaks and FLOP counts.

A configuration's achieved FLOP/s (samples/s x FLOPs per sample) is read as a share
of a float32 matrix-multiply peak measured in the same benchmark run, at the thread
count of the process that trained (numpy/OpenBLAS on a CPU, TensorFlow on a GPU).
"""

from __future__ import annotations

import math
import time
from typing import Any

from benchmarks.common import machine

MATMUL_N = 1024


def matmul_peak(threads: int, n: int = MATMUL_N, budget: float = 2.0) -> float:
    """float32 n x n matrix multiply with `threads` BLAS threads, GFLOP/s, best over `budget` seconds."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    best, spent = math.inf, 0.0
    with threadpool_limits(limits=threads):
        a @ b  # the first call starts BLAS's thread pool
        while spent < budget:
            started = time.perf_counter()
            a @ b
            took = time.perf_counter() - started
            best, spent = min(best, took), spent + took
    return 2 * n**3 / best / 1e9


def gpu_matmul_peak(env: dict[str, str], gpu: str) -> float:
    """float32 4096 x 4096 matrix multiply on one GPU, GFLOP/s, in a fresh process that sees only that GPU."""
    _, result = machine.probe("gpu-matmul", [], {**env, "CUDA_VISIBLE_DEVICES": gpu})
    return float(result["gflops"])


def measure_peaks(gpus: list[str], env: dict[str, str]) -> dict[Any, float]:
    """GPU 0's peak under the key "gpu" when there are GPUs (every configuration trains there), else
    the CPU's at 1 thread and at every core; printed as measured.
    """
    if gpus:
        measured: dict[Any, float] = {"gpu": gpu_matmul_peak(env, gpus[0])}
        print(f"matmul on GPU {gpus[0]}: {measured['gpu']:.1f} GFLOP/s", flush=True)
        return measured
    measured = {}
    for threads in sorted({1, machine.cores()}):
        measured[threads] = matmul_peak(threads)
        print(f"matmul at {threads} thread(s): {measured[threads]:.1f} GFLOP/s", flush=True)
    return measured


def effective_peaks(measured: dict[Any, float]) -> dict[Any, float]:
    """The peak available to a process with t threads: the best measured at t or fewer (on a busy
    machine more threads can measure slower than one; a process with t threads can do at least as well).
    A non-integer key (the GPU's) is kept as measured.
    """
    threads = {t: v for t, v in measured.items() if isinstance(t, int)}
    return {t: max(v for k, v in threads.items() if k <= t) if t in threads else value for t, value in measured.items()}


def train_flops_per_sample(image_size: int, num_classes: int, width: float = 1.0) -> float:
    """FLOPs of one training step per image: 3 x the forward pass's convolutions and dense layer
    (2 per multiply-add; BatchNorm, ReLU and pooling are left out, they are not matrix work).
    The model of sweep/train/model.py: 3x3 'same' convolutions, each followed by 2x2 'same' pooling.
    """
    from sweep.train.model import channels

    flops, size, c_in = 0.0, image_size, 1
    for c_out in channels(width):
        flops += 2 * size * size * 9 * c_in * c_out
        size, c_in = math.ceil(size / 2), c_out
    flops += 2 * c_in * num_classes
    return 3 * flops
