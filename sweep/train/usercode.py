"""The user's own code named in a grid: `model.builder`, `data.loader`, `train.callbacks`.

A reference is "package.module:name" (imported from `sys.path`: the folder `sweep run`
starts in, then installed packages) or "path/to/file.py:name" (made absolute, relative to
the grid file, by sweep/config/gridfile.py). Everything that can go wrong with it (the module will
not import, the name is missing, the call raises, it returns the wrong kind of thing) is a
`UserCodeError` naming the key, on one line. `preflight` calls each builder, loader and
callback factory a grid uses once, before anything is queued or trained, so a broken
reference stops `run` with exit code 2 instead of failing every run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from sweep.config.validators import did_you_mean


class UserCodeError(ValueError):
    """A model.builder, data.loader or train.callbacks reference that cannot be used."""


def load(reference: str, key: str) -> Callable[..., Any]:
    """The function `reference` names. A module is imported with the folder the command runs in on `sys.path`
    (the `sweep` script's own folder is first there, not the working folder, as `python -m sweep` has it); a
    file, with its own folder on `sys.path`, so that it imports the modules beside it.
    """
    module_name, _, name = reference.rpartition(":")
    _importable(os.path.dirname(module_name) if module_name.endswith(".py") else os.getcwd())
    try:
        module = _import_file(module_name) if module_name.endswith(".py") else importlib.import_module(module_name)
    except Exception as err:  # noqa: BLE001 - whatever the user's module raises while importing
        raise UserCodeError(f"{key} {reference}: cannot import {module_name}: {_one_line(err)}") from None
    function = getattr(module, name, None)
    if not callable(function):
        functions = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n, None))]
        hint = did_you_mean(name, functions)
        raise UserCodeError(f"{key} {reference}: {module_name} has no function {name}{hint}")
    return function


def _importable(folder: str) -> None:
    """`folder` on `sys.path` (appended: an installed package of the same name still wins), once."""
    if folder and folder not in sys.path:
        sys.path.append(folder)


def _import_file(path: str) -> Any:
    """A .py file as a module, imported once per process (so its classes stay the same objects)."""
    name = "batchsweep_user_" + hashlib.sha256(path.encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def call(reference: str, key: str, *args: Any, **kwargs: Any) -> Any:
    function = load(reference, key)
    try:
        return function(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - the user's function failed: say where, on one line, and how called
        made = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise UserCodeError(
            f"{key} {reference} raised {_one_line(err)}; the call was {reference.rpartition(':')[2]}({made})"
        ) from None


def build_model(reference: str, options: str | None, input_shape: tuple[int, ...], num_classes: int) -> Any:
    """The user's uncompiled keras.Model, checked to take `input_shape` and give `num_classes` outputs."""
    import keras

    model = call(reference, "model.builder", input_shape, num_classes, **json.loads(options or "{}"))
    if not isinstance(model, keras.Model):
        raise UserCodeError(f"model.builder {reference} returned {type(model).__name__}, not a keras.Model")
    shape = tuple(model.output_shape) if hasattr(model, "output_shape") else ()
    if not shape or shape[-1] != num_classes:
        raise UserCodeError(
            f"model.builder {reference} gives outputs of shape {shape}; the last axis must be the {num_classes} "
            f"class probabilities (a softmax layer)"
        )
    return model


@functools.lru_cache(maxsize=2)
def load_arrays(reference: str) -> tuple[Any, Any]:
    """The loader's (x, y), before the npz checks (sweep/train/datafiles.py). Called once per process: a worker
    trains many runs on the same data. Not cached on disk: the harness cannot tell when it changes.
    """
    got = call(reference, "data.loader")
    if not (isinstance(got, tuple) and len(got) == 2):
        raise UserCodeError(f"data.loader {reference} returned {type(got).__name__}; it must return a tuple (x, y)")
    return got


def callbacks(references: Iterable[str]) -> list[Any]:
    """A fresh callback from each factory, checked to be a keras Callback, scoped to the run."""
    import keras

    made = []
    for reference in references:
        callback = call(reference, "train.callbacks")
        if not isinstance(callback, keras.callbacks.Callback):
            raise UserCodeError(
                f"train.callbacks {reference} returned {type(callback).__name__}, not a keras.callbacks.Callback"
            )
        made.append(_run_scoped(callback))
    return made


EPOCH_AND_BATCH_HOOKS = tuple(
    f"on_{phase}_{event}"
    for phase, events in (
        ("epoch", ("begin", "end")),
        ("train_batch", ("begin", "end")),
        ("test", ("begin", "end")),
        ("test_batch", ("begin", "end")),
    )
    for event in events
)


def _run_scoped(inner: Any) -> Any:
    """The callback as one `fit` over the whole run would call it. The harness trains each epoch (each
    stretch between records) with a `fit` call of its own, and Keras calls `on_train_begin` at every one,
    which resets a callback's state (EarlyStopping's patience, for one): here it runs once per run, and
    `on_train_end` once, when the run ends (`end_run`).
    """
    import keras

    class RunScoped(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.inner, self.started = inner, False

        def set_model(self, model: Any) -> None:
            super().set_model(model)
            inner.set_model(model)

        def set_params(self, params: Any) -> None:
            super().set_params(params)
            inner.set_params(params)

        def on_train_begin(self, logs: Any = None) -> None:
            if not self.started:
                self.started = True
                inner.on_train_begin(logs)

        def end_run(self) -> None:
            inner.on_train_end({})

    for hook in EPOCH_AND_BATCH_HOOKS:
        setattr(RunScoped, hook, lambda self, *args, _hook=hook, **kw: getattr(self.inner, _hook)(*args, **kw))
    return RunScoped()


def _one_line(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [""])[-1]
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
