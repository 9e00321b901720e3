"""Before anything is queued: each distinct model builder, loader and callback a grid names is tried
once, so a broken reference stops `run` with one line naming its key (sweep/train/usercode.py words it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from sweep.config.keys import LOADER, PointConfig
from sweep.train import usercode


def uses_code(point: PointConfig) -> bool:
    return bool(point.model.builder or point.data.dataset == LOADER or point.train.callbacks)


def check(points: Iterable[PointConfig]) -> None:
    """Build each distinct model, load each distinct dataset and make each callback once; raise on
    the first that fails. Imports TensorFlow only when a point uses the user's code.
    """
    points = [p for p in points if uses_code(p)]
    if not points:
        return
    with _quiet_stderr():  # TensorFlow's start-up lines (C++ logging, before Python can silence it)
        _try_each(points)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """This process's stderr (file descriptor 2, where TensorFlow's C++ writes) set aside while the block
    runs; a problem is raised as a one-line UserCodeError and said after the block, on the terminal.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


def _try_each(points: list[PointConfig]) -> None:
    from sweep.train import data  # numpy and the dataset code: only when a point uses the user's code

    splits: dict[Any, Any] = {}
    for point in points:
        if point.data not in splits:
            try:
                splits[point.data] = data.load_split(point.data)
            except data.DataError as err:
                raise usercode.UserCodeError(str(err)) from None
        split = splits[point.data]
        try:
            data.check_batch(point.train.batch_size, len(split.y_train))
        except data.DataError as err:
            raise usercode.UserCodeError(str(err)) from None
        if point.model.builder:
            shape = (point.data.image_size, point.data.image_size, point.data.channels)
            usercode.build_model(point.model.builder, point.model.options, shape, split.num_classes)
        usercode.callbacks(point.train.callbacks)
