"""Which devices a worker uses, set before TensorFlow starts.

TensorFlow reads `CUDA_VISIBLE_DEVICES` and its thread-pool sizes once, when
it initialises, so `worker_environment` is applied to a worker subprocess's
environment before it imports TensorFlow. Logical devices likewise can only be
configured before the runtime starts: `configure_replicas` is the first
TensorFlow call a worker makes.

`gpus: G` means G data-parallel replicas under `tf.distribute.MirroredStrategy`.
When the machine has fewer than G GPUs, the CPU is split into G logical devices
(`virtual_devices=True` in the run's record), so the GPU-count axis runs and is
tested on any machine; the arithmetic of the split batch is then real, the speed
is not.

On JAX, `gpus: G` means G replicas under `keras.distribution.DataParallel`; short of
GPUs, JAX's CPU is split into G host devices (`--xla_force_host_platform_device_count`
in XLA_FLAGS), which JAX, like TensorFlow, fixes when its backend starts.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from typing import Any

from sweep.train import backends
from sweep.train.datafiles import DataError


def worker_environment(
    base: dict[str, str], threads: int | None = None, visible: str | None = None, towers: bool = False
) -> dict[str, str]:
    """The environment for a worker subprocess; `towers`: it trains packs (`towers_side_by_side`)."""
    env = dict(base)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ info lines are noise to users
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
        # TensorFlow maps nearly all of a GPU's memory in its first process, so a second worker
        # packed on that GPU (--trials-per-gpu) would fail: take memory as needed instead.
        env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    if threads:
        side_by_side = towers and towers_side_by_side(threads)
        for name in ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS"):
            env[name] = "1" if side_by_side else str(threads)
        env["TF_NUM_INTEROP_THREADS"] = str(threads) if side_by_side else "1" if threads == 1 else "2"
        # XLA's CPU client (JAX) reads none of those, nor XLA_FLAGS' intra_op_parallelism_threads:
        # its Eigen pool has $PJRT_NPROC threads (at least one per host device).
        env[PJRT_NPROC] = str(threads)
    return env


def towers_side_by_side(threads: int) -> bool:
    """Whether a packing worker with `threads` cores runs one intra-op thread and `threads` inter-op
    threads: on TensorFlow, a pack's towers are independent ops, so its executor then runs them side
    by side, a core each, where with every thread inside each op a small model's ops leave the cores
    idle (results/bench/pack.md: a pack's steps 2.6x a run alone at batch 8). The records are then those of
    the runs alone at one thread (runs.csv `threads`). JAX and torch step one op after another.
    """
    return threads > 1 and backends.is_tensorflow()


PJRT_NPROC = "PJRT_NPROC"
DEVICE_COUNT_FLAG = "--xla_force_host_platform_device_count"


def with_host_devices(xla_flags: str, count: int) -> str:
    """XLA_FLAGS giving JAX at least `count` CPU devices; the user's other flags, and a larger
    count of theirs, kept.
    """
    flags = xla_flags.split()
    named = [f for f in flags if f.startswith(DEVICE_COUNT_FLAG + "=")]
    if named and int(named[-1].split("=", 1)[1]) >= count:
        return xla_flags
    return " ".join([*(f for f in flags if f not in named), f"{DEVICE_COUNT_FLAG}={count}"])


@dataclass(frozen=True)
class Replicas:
    """The devices one run trains on."""

    devices: tuple[str, ...]
    virtual: bool  # logical devices carved out of the CPU, not real GPUs


# Whether this process has set up TensorFlow's logical devices. Process state, and rightly: TensorFlow
# fixes them when its runtime starts, once per process, whatever worker session or trainer asks later
# (not functools.cache: the first call's count holds, and a later call with another count does nothing).
_tensorflow_configured = False


def configure_replicas(max_replicas: int) -> None:
    """Split the CPU into `max_replicas` logical devices if GPUs are short. Call once, first: later
    calls change nothing on TensorFlow. On JAX: ask for that many host devices, in effect if JAX has not
    started its backend yet. Nothing to do on another backend: it trains one replica
    (sweep/train/backends.py refuses more).
    """
    global _tensorflow_configured
    if backends.current() == backends.JAX and max_replicas > 1:
        os.environ["XLA_FLAGS"] = with_host_devices(os.environ.get("XLA_FLAGS", ""), max_replicas)
    if _tensorflow_configured or not backends.is_tensorflow():
        return
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    cpus = tf.config.list_physical_devices("CPU")
    if len(gpus) < max_replicas and max_replicas > 1:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(max_replicas)]
        )
    _tensorflow_configured = True


def replicas_for(count: int) -> Replicas:
    """The first `count` GPUs, or `count` logical CPU devices when GPUs are short."""
    if backends.current() == backends.JAX:
        return _jax_replicas(count)
    if not backends.is_tensorflow():
        return _one_device(count)
    import tensorflow as tf

    configure_replicas(count)
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) >= count:
        return Replicas(tuple(d.name for d in gpus[:count]), virtual=False)
    cpus = tf.config.list_logical_devices("CPU")
    if len(cpus) < count:
        raise RuntimeError(
            f"this worker has {len(cpus)} logical CPU device(s) but the run needs {count}; "
            f"logical devices are fixed when TensorFlow starts, so start a new worker"
        )
    return Replicas(tuple(d.name for d in cpus[:count]), virtual=count > 1)


def _jax_replicas(count: int) -> Replicas:
    """The first `count` GPUs (or TPUs), or `count` host CPU devices when they are short."""
    import keras

    configure_replicas(count)
    found = keras.distribution.list_devices()  # the accelerators, else the CPU's devices
    if len(found) < count:
        found = keras.distribution.list_devices("cpu")
    if len(found) < count:
        raise RuntimeError(
            f"this process started JAX with {len(found)} CPU device(s) but the run needs {count}; "
            f"JAX fixes its devices when it starts, so start a new worker, or set "
            f"XLA_FLAGS={DEVICE_COUNT_FLAG}={count} before JAX starts"
        )
    return Replicas(tuple(found[:count]), virtual=count > 1 and found[0].startswith("cpu"))


def check_even_split(replicas: Replicas, rows: int, batch: int) -> None:
    """On JAX every training batch is cut into equal shares, one per replica (TensorFlow cuts a
    short last batch unevenly): refuse a training set whose short last batch cannot be cut so.
    """
    count, short = len(replicas.devices), rows % batch
    if count > 1 and short % count and backends.current() == backends.JAX:
        raise DataError(
            f"{rows} training images in batches of {batch} end with a batch of {short}, which the jax backend "
            f"cannot split across {count} replicas; use a batch size that leaves a multiple of {count}, "
            f"or KERAS_BACKEND=tensorflow"
        )


def _one_device(count: int) -> Replicas:
    """The device Keras trains on outside TensorFlow (its first: a GPU if there is one, else the CPU)."""
    import keras

    if (
        count > 1
    ):  # sweep/train/backends.py refuses such a grid before anything trains; a worker started by hand lands here
        raise RuntimeError(f"train.gpus: {count} is not supported on the {keras.backend.backend()} backend")
    if keras.backend.backend() == backends.TORCH:  # no keras.distribution there: where Keras puts its tensors
        return Replicas((str(keras.ops.zeros(()).device),), virtual=False)
    return Replicas((keras.distribution.list_devices()[0],), virtual=False)


class _NoStrategy:
    """What `strategy_for` gives outside TensorFlow: a `scope()` that changes nothing."""

    def scope(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class _DataParallel:
    """What `strategy_for` gives on JAX over several devices: `scope()` makes Keras's DataParallel
    distribution over them current, and the one before it current again on leaving.
    """

    def __init__(self, devices: tuple[str, ...]) -> None:
        import keras

        self.distribution = keras.distribution.DataParallel(devices=list(devices))

    def scope(self) -> contextlib.AbstractContextManager[None]:
        return self.distribution.scope()


def strategy_for(replicas: Replicas) -> Any:
    """MirroredStrategy over several devices; the default strategy on one; on JAX, DataParallel over
    several devices; no strategy otherwise.
    """
    if backends.current() == backends.JAX and len(replicas.devices) > 1:
        return _DataParallel(replicas.devices)
    if not backends.is_tensorflow():
        return _NoStrategy()
    import tensorflow as tf

    if len(replicas.devices) == 1:
        # The default strategy, not OneDeviceStrategy: the latter measured about
        # 2x slower per step for this small model on CPU.
        return tf.distribute.get_strategy()
    return tf.distribute.MirroredStrategy(list(replicas.devices))


def training_scope(strategy: Any) -> contextlib.AbstractContextManager[Any]:
    """Where a model made under `strategy` trains. TensorFlow's model keeps its strategy; Keras on JAX
    reads the distribution at each fit, so its scope is entered again. Evaluation stays outside: on
    JAX an evaluation batch of any size then runs whole on the replicated weights.
    """
    return contextlib.nullcontext() if backends.is_tensorflow() else strategy.scope()


def device_pool(requested: str | None) -> list[str]:
    """The GPU ids a sweep may use: --devices, else CUDA_VISIBLE_DEVICES, else every GPU
    nvidia-smi lists, else none (train on the CPU). Found without importing TensorFlow.
    """
    text = requested if requested is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return _nvidia_smi_gpus()
    return [d.strip() for d in text.split(",") if d.strip() and d.strip() != "-1"]


def _nvidia_smi_gpus() -> list[str]:
    import shutil
    import subprocess

    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def worker_slots(pool: list[str], replicas: int, trials_per_gpu: int = 1) -> list[str]:
    """CUDA_VISIBLE_DEVICES for each worker process: disjoint groups of `replicas` devices,
    each group shared by `trials_per_gpu` workers. Two workers never share a device unless
    trials_per_gpu > 1. A run needing more replicas than there are devices gets them all
    (and splits them into logical devices).
    """
    size = max(1, min(replicas, len(pool)))
    groups = [",".join(pool[i : i + size]) for i in range(0, len(pool) - size + 1, size)]
    return [group for _ in range(trials_per_gpu) for group in groups]


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def intra_op_threads() -> int:
    """TensorFlow's intra-op thread count in this process: set in code, by
    $TF_NUM_INTRAOP_THREADS (`worker_environment`), or else one per core. On JAX: the size of XLA's
    CPU thread pool, $PJRT_NPROC (`worker_environment`), $NPROC, or else one per core. On torch: its
    intra-op thread count, which it takes from $OMP_NUM_THREADS (`worker_environment`).
    """
    if backends.current() == backends.TORCH:
        import torch

        return int(torch.get_num_threads())
    if not backends.is_tensorflow():
        return int(os.environ.get(PJRT_NPROC) or os.environ.get("NPROC") or 0) or cpu_count()
    import tensorflow as tf

    configured = tf.config.threading.get_intra_op_parallelism_threads()
    return configured or int(os.environ.get("TF_NUM_INTRAOP_THREADS") or 0) or cpu_count()


@functools.cache  # read once per process, not once per run
def cpu_model() -> str:
    """The processor's name: float results can differ in the last bits between CPU models."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()
