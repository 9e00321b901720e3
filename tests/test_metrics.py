"""The metric registry (sweep/vocab.py's METRICS) is the one place a metric is declared: every place
derived from it equals what it gives, so a derived tuple, label, compile call or docs/results.md's
table edited by hand fails here.
"""

from __future__ import annotations

import ast
import dataclasses

import numpy as np
import pytest
from conftest import REPO

from sweep import analysis, export, vocab
from sweep.report.figures import curves as plots
from sweep.train import recal, records
from sweep.vocab import METRICS, When

pytestmark = pytest.mark.unit


def names(when: set[When]) -> tuple[str, ...]:
    return tuple(m.name for m in METRICS if m.recorded in when)


def test_a_record_has_one_field_per_registered_metric_in_column_order() -> None:
    fields = dataclasses.fields(records.EpochRecord)
    assert [f.name for f in fields] == [m.name for m in METRICS]
    assert {f.name for f in fields if f.default is None} == set(vocab.OPTIONAL_METRICS)  # only where measured


def test_vocab_tuples_are_the_registry_s() -> None:
    sometimes = set(When) - {When.ALWAYS}
    assert names({When.ALWAYS}) == vocab.EPOCH_METRICS
    assert names({When.NOISE_SCALE}) == vocab.NOISE_METRICS
    assert names({When.RECALIBRATE_BN}) == vocab.RECAL_METRICS
    assert names(sometimes) == vocab.OPTIONAL_METRICS
    assert tuple(m.name for m in METRICS) == vocab.EPOCH_METRICS + vocab.OPTIONAL_METRICS  # optional columns last
    assert len({m.name for m in METRICS}) == len(METRICS)


def test_the_snapshot_is_the_registry_s_in_its_places() -> None:
    places = [m.snapshot for m in METRICS if m.snapshot is not None]
    assert len(set(places)) == len(places)
    by_place = [m for m in sorted(METRICS, key=lambda m: m.snapshot or 0) if m.snapshot is not None]
    assert tuple(m.name for m in by_place if m.recorded is When.ALWAYS) == analysis.SNAPSHOT_METRICS
    assert tuple(m.name for m in by_place if m.recorded is not When.ALWAYS) == analysis.SNAPSHOT_WHERE_MEASURED
    assert tuple(m for m in vocab.EPOCH_METRICS if m != vocab.EPOCH) == analysis.CURVE_METRICS


def test_figure_labels_are_the_registry_s() -> None:
    assert {m.name: m.label for m in METRICS if m.label} == plots.LABELS


def test_the_metrics_an_export_shows_first_are_the_registry_s_in_their_places() -> None:
    places = [m.headline for m in METRICS if m.headline is not None]
    assert sorted(places) == list(range(1, len(places) + 1))  # one place each, none skipped
    by_place = sorted((m for m in METRICS if m.headline is not None), key=lambda m: m.headline or 0)
    assert (
        tuple(m.name for m in by_place)
        == export.HEADLINE_METRICS
        == ("val_acc", "train_acc", "gap", "val_loss", "train_loss", "eval_gap")
    )


def test_the_compiled_metrics_are_the_keras_metrics_the_registry_reads() -> None:
    read = {m.keras for m in METRICS if m.keras}
    assert set(vocab.COMPILE_METRICS) == read - {vocab.LOSS}  # Keras tracks the loss itself
    assert len(set(vocab.COMPILE_METRICS)) == len(vocab.COMPILE_METRICS)


def compile_metrics_in(path: str) -> list[ast.expr]:
    """What each `compile(metrics=...)` keyword and each {"metrics": ...} entry in a module passes."""
    found = []
    for node in ast.walk(ast.parse((REPO / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.keyword) and node.arg == "metrics":
            found.append(node.value)
        if isinstance(node, ast.Dict):
            found += [
                v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and k.value == "metrics"
            ]
    return found


def test_single_pack_and_recal_compile_the_registry_s_metrics() -> None:
    """Each of the three compiled models (a run alone, a pack's towers and BatchNorm's twin) takes its
    metrics from vocab.COMPILE_METRICS, never from a list of its own.
    """
    modules = ("sweep/train/single.py", "sweep/train/pack.py", "sweep/train/recal.py")
    passed = {path: compile_metrics_in(path) for path in modules}
    assert {path: len(values) for path, values in passed.items()} == dict.fromkeys(passed, 1)
    for path, (value,) in passed.items():
        used = {n.attr for n in ast.walk(value) if isinstance(n, ast.Attribute)}
        literals = [n.value for n in ast.walk(value) if isinstance(n, ast.Constant)]
        assert "COMPILE_METRICS" in used and not literals, (path, ast.unparse(value))


def test_recalibrated_and_balanced_fields_are_the_registry_s() -> None:
    fields = recal.Recalibrated(0.5, 1.0, 0.25, 2.0).fields()
    assert set(fields) == set(vocab.RECAL_METRICS)
    predicted = np.array([[0.9, 0.1], [0.2, 0.8]])
    assert set(records.balanced(predicted, np.array([0, 1]))) == set(names({When.IMBALANCED}))


def epochs_csv_table() -> str:
    """docs/results.md's table of epochs.csv's columns: the lines of the table its header starts."""
    lines = (REPO / "docs" / "results.md").read_text(encoding="utf-8").splitlines(keepends=True)
    start = lines.index("| column | meaning |\n")
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "".join(lines[start:end])


def test_the_results_doc_table_is_rendered_from_the_registry() -> None:
    assert epochs_csv_table() == vocab.metrics_table(), (
        "docs/results.md's epochs.csv table differs from sweep/vocab.py's METRICS: paste vocab.metrics_table()"
    )
    for m in METRICS:
        assert f"`{m.name}`" in epochs_csv_table()
