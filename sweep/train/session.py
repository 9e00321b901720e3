"""A worker's session: what it keeps from one run to the next, handed to each `Trainer` it makes.

- The compiled model of its last run or pack (`compiled.Compiled`): tracing Keras's functions costs
  seconds per run, so the next run of the same graph takes it (`take`) and trains it with its own fresh
  weights. A trainer gives it back (`keep`) once its runs trained to their ends with none diverged; a
  model whose trainer failed, was stopped or diverged is never given back, so the next run builds its
  own (that model may be broken).
- The evaluation pipelines of its current trainer (`eval_batches`): a record evaluates the same arrays
  each time, so each set's pipeline is made once and read at every record; they are dropped when the
  next trainer starts (`begin`), as a pipeline holds a copy of its set.

The worker loop makes one per worker (sweep/run/worker.py); an in-process sweep keeps one across its
phases and looks (sweep/run/orchestrate.py); a `Trainer` made without one makes a fresh one. Two
sessions share nothing of their own. Keras's global state is the process's: a session clears it before
it builds a model of another graph, as a fresh process would have it.
"""

from __future__ import annotations

from typing import Any

from sweep.train import backends
from sweep.train import data as data_module
from sweep.train.compiled import Compiled


class Session:
    """One worker's compiled model and its current trainer's evaluation pipelines."""

    def __init__(self) -> None:
        self._compiled: Compiled | None = None
        self._eval_sets: list[tuple[tuple[Any, ...], tuple[Any, ...], int, Any]] = []  # (xs, ys, batch, pipeline)

    @property
    def compiled(self) -> Compiled | None:
        """The compiled model kept for the next run of its graph; None while a trainer holds it, and after
        a trainer that did not give it back.
        """
        return self._compiled

    def take(self, key: tuple) -> Compiled | None:
        """The kept compiled model if its graph is `key`, now the caller's to train and give back (`keep`).
        None otherwise: whatever was kept is dropped, and Keras's global state cleared for a fresh model.
        """
        kept, self._compiled = self._compiled, None
        if kept is not None and kept.key == key:
            return kept
        import keras

        keras.backend.clear_session()
        return None

    def keep(self, compiled: Compiled) -> None:
        """Keep a compiled model whose runs ended well, for the next run of its graph."""
        self._compiled = compiled

    def begin(self) -> None:
        """A new trainer starts: the last one's evaluation pipelines are dropped."""
        self._eval_sets = []

    def eval_batches(self, x: Any, y: Any, batch_size: int) -> Any:
        """`data.batches` of an evaluation set (x, y, or y None, as there), made once per trainer and read
        at every record.

        A new `tf.data` pipeline copies its arrays and starts afresh at every call (docs/levers.md,
        "Records and the defaults"); Keras iterates a kept one anew at each call, the same batches in the
        same order. A pipeline is found by the arrays it was made of (`is`), which are kept with it. On
        another backend a generator is read once: made anew each time.
        """
        if not backends.is_tensorflow():
            return data_module.batches(x, y, batch_size)
        xs, ys = _arrays(x), _arrays(y)
        for kept_xs, kept_ys, kept_batch, pipeline in self._eval_sets:
            if kept_batch == batch_size and _same(kept_xs, xs) and _same(kept_ys, ys):
                return pipeline
        pipeline = data_module.batches(x, y, batch_size)
        self._eval_sets.append((xs, ys, batch_size, pipeline))
        return pipeline


def _arrays(elements: Any) -> tuple[Any, ...]:
    """An evaluation set's arrays: a pack's tuple of them, one array, or none (y None)."""
    if elements is None:
        return ()
    return tuple(elements) if isinstance(elements, tuple) else (elements,)


def _same(kept: tuple[Any, ...], asked: tuple[Any, ...]) -> bool:
    return len(kept) == len(asked) and all(a is b for a, b in zip(kept, asked, strict=True))
