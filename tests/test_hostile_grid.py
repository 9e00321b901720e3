"""Hostile grid files: every input is either a valid sweep or one clean line of error.

The property tests start from the real grid files (experiments/*.yaml and the test
fixtures), break them in the ways people and tools break YAML (wrong types, huge or
negative numbers, unicode, nested lists, deleted / renamed / duplicated keys, random
bytes, invalid UTF-8, deep nesting), and call `load_grid` and `plan` in-process: any
exception other than `ConfigError`, or a `ConfigError` whose message is not one line
naming the file, is a failure. A few subprocess checks confirm that the command line
turns the same inputs into exit code 2 and no traceback.
"""

from __future__ import annotations

import copy
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, write_grid
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from sweep import cli, config
from sweep.config import ConfigError, gridyaml, load_grid
from sweep.config.plan import plan

pytestmark = pytest.mark.unit

REAL_GRIDS = sorted((REPO / "experiments").glob("*.yaml")) + sorted((REPO / "tests/fixtures/grids").glob("*.yaml"))
REAL_TEXTS = [p.read_text(encoding="utf-8") for p in REAL_GRIDS]
REAL_DOCS = [yaml.safe_load(text) for text in REAL_TEXTS]

# Every key a grid file knows, so mutations often land on meaningful names.
KNOWN_KEYS = [
    *config.TOP_LEVEL_KEYS,
    *config.SECTIONS,
    *config.field_docs(),
    *(key.split(".")[1] for key in config.field_docs()),
]

# Every Hypothesis test here draws the same examples on every run (a failure is seen again on a rerun)
# and writes no example database (.hypothesis/examples) into the checkout.
REPEATABLE = settings(derandomize=True, database=None)
FUZZ = settings(REPEATABLE, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# One folder for every example: it holds the grid file and a few things data.path may name.
_FOLDER = Path(tempfile.mkdtemp(prefix="hostile-grid-"))
(_FOLDER / "imgs").mkdir()
(_FOLDER / "d.npz").write_bytes(b"not checked at plan time")


def accepted_or_clean_error(text: str | bytes) -> None:
    """The property: load_grid + plan either succeed or raise ConfigError with one line naming the file."""
    path = _FOLDER / "grid.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    try:
        grid = load_grid(path)
        runs = plan(grid)
    except ConfigError as err:
        message = str(err)
        assert message.startswith("grid.yaml: ") or message.startswith(f"{path}: "), message
        assert len(message.splitlines()) == 1, message
        assert len(message) < 2000, message[:300]  # a message, not a dump of the input
        return
    ids = [run.run_id for run in runs]  # what `plan` prints: slugs and hashes of every spec
    assert len(set(ids)) == len(ids)
    assert runs and all(len(run.varying) >= 1 for run in runs)


# --- hostile values and structural mutations of the real files

SPECIAL_STRINGS = [
    "",
    " ",
    ".",
    "..",
    "../x",
    "/abs",
    "a/b",
    "~",
    "~nosuchuser/x",
    "a\nb",
    "tab\there",
    "\u2028",
    "x\x00y",
    "é",
    "日本語",
    "🙂",
    "imgs",
    "d.npz",
    "grid.yaml",
    "glyphs120",
    "folder",
    "npz",
    "digits",
    "adam",
    "sgd",
    "linear",
    "sqrt",
    "steps",
    "epochs",
    "none",
    "scale",
    "yes",
    "null",
    "1e3",
    "0x10",
]
SPECIAL_NUMBERS = [
    0,
    1,
    -1,
    -4,
    2,
    3,
    7,
    8,
    64,
    2**31,
    2**63,
    2**64 + 1,
    10**300,
    10**400,
    -(10**400),
    0.0,
    -0.0,
    0.5,
    1.0,
    1.5,
    0.999999,
    1e-320,
    1e308,
    -1e308,
    math.inf,
    -math.inf,
    math.nan,
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(SPECIAL_STRINGS),
    st.sampled_from(SPECIAL_NUMBERS),
    st.dates(),
)
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=12), st.integers(-3, 3), st.none(), st.booleans())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=3)),
    max_leaves=12,
)


def _slots(node: Any) -> Iterator[tuple[Any, Any]]:
    """Every (container, key or index) in a parsed YAML tree."""
    if isinstance(node, dict):
        for key, child in node.items():
            yield node, key
            yield from _slots(child)
    elif isinstance(node, list):
        for index, child in enumerate(node):
            yield node, index
            yield from _slots(child)


@st.composite
def mutated_docs(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(REAL_DOCS)))
    for _ in range(draw(st.integers(1, 4))):
        slots = list(_slots(doc))
        operation = draw(st.sampled_from(["replace", "replace", "delete", "rename", "wrap", "add", "root"]))
        if operation == "root" or not slots:
            doc = draw(values)
            continue
        container, key = draw(st.sampled_from(slots))
        if operation == "replace":
            container[key] = draw(values)
        elif operation == "delete":
            del container[key]
        elif operation == "wrap":  # the value nested one or more levels deeper
            for _ in range(draw(st.integers(1, 30))):
                container[key] = [container[key]] if draw(st.booleans()) else {"k": container[key]}
        elif isinstance(container, dict) and operation == "rename":
            container[draw(keys)] = container.pop(key)
        elif isinstance(container, dict):  # add a key next to this one
            container[draw(keys)] = draw(values)
        else:
            container.append(draw(values))
    return doc


@FUZZ
@given(doc=mutated_docs(), unicode=st.booleans())
@example(doc={"name": "x", "base": {"train": {"lr": 10**400}}}, unicode=False)
@example(doc={"name": "x", "grid": {"train.lr": [10**400]}}, unicode=False)
@example(doc={"name": "x", "base": {"data": {"dataset": "folder", "path": "~nosuchuser/x"}}}, unicode=False)
@example(doc={"name": "x", "base": {"data": {"dataset": "folder", "path": "x\x00y"}}}, unicode=False)
@example(doc={"name": "x", "base": {"data": {"dataset": "folder", "path": "n" * 5000}}}, unicode=False)
@example(doc={"name": "x", "base": {"train": {"epochs": "a\nb"}}}, unicode=True)
@example(doc={"name": "x", "base": {"train": {"a\nb": 1}}}, unicode=True)
@example(doc={"name": "x\n"}, unicode=False)
def test_mutated_real_grids_are_accepted_or_rejected_cleanly(doc: Any, unicode: bool) -> None:
    text = yaml.safe_dump(doc, allow_unicode=unicode, sort_keys=False)
    accepted_or_clean_error(text)


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    data = draw(st.sampled_from(REAL_TEXTS)).encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        operation = draw(st.sampled_from(["insert", "overwrite", "truncate", "invalid-utf8", "duplicate-line", "nest"]))
        if operation == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
        elif operation == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=8))
            data = data[:at] + chunk + data[at + len(chunk) :]
        elif operation == "truncate":
            data = data[:at]
        elif operation == "invalid-utf8":
            bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xfe\xff", b"\x80"]))
            data = data[:at] + bad + data[at:]
        elif operation == "duplicate-line":  # duplicate keys: YAML would silently keep the last
            lines = data.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            data = b"\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1 :])
        else:  # deep nesting, up to far past the parser's recursion limit
            depth = draw(st.sampled_from([50, 500, 5000]))
            data += b"\nextra: " + b"[" * depth + b"]" * depth + b"\n"
    return data


@FUZZ
@given(data=mutated_bytes())
def test_byte_mutations_of_real_grids_are_accepted_or_rejected_cleanly(data: bytes) -> None:
    accepted_or_clean_error(data)


@FUZZ
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
@example(data=b"\xef\xbb\xbfname: x\n")  # UTF-8 byte-order mark
@example(data="name: x\n".encode("utf-16"))
@example(data=b"name: x\x00\n")
@example(data=b"name: " + b"1" * 5000 + b"\n")  # an integer Python refuses to parse by default
@example(data=b"name: x\nseeds: " + b"[" * 2000 + b"]" * 2000 + b"\n")
@example(
    data=b"a: &a [1,2,3,4,5,6,7,8,9]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
    b"f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
    b"name: x\nbase: {train: {epochs: *g}}\n"
)  # "billion laughs": a repr of it would never end
@example(
    data=b"name: x\ngrid:\n"
    + b"".join(
        f"  train.{k}: [{', '.join(str(v) for v in vs)}]\n".encode()
        for k, vs in [
            ("batch_size", range(1, 41)),
            ("epochs", range(1, 41)),
            ("lr", [i / 1000 for i in range(1, 41)]),
            ("optimizer", ["adam", "sgd", "momentum"]),
        ]
    )
    + b"  data.seed: ["
    + b", ".join(b"%d" % i for i in range(40))
    + b"]\n"
)
def test_random_bytes_are_accepted_or_rejected_cleanly(data: bytes) -> None:
    accepted_or_clean_error(data)


# Keys that count something: a value below 1 is refused, naming the key (not merely "no crash").
COUNT_KEYS = ["train.epochs", "train.batch_size", "train.gpus", "data.samples_per_class", "search.trials"]


def _count_doc(key: str, value: Any, where: str) -> tuple[dict[str, Any], str]:
    """A grid with `key` set to `value` (in base, or as the second value of a grid axis); the key's name in errors."""
    section, name = key.split(".")
    if section == "search":
        return {"name": "x", "search": {"lr": {"low": 1e-4, "high": 1e-1}, name: value}}, key
    if where == "base":
        return {"name": "x", "base": {section: {name: value}}}, f"base.{key}"
    return {"name": "x", "grid": {key: [2, value]}}, f"grid.{key}[1]"


@settings(REPEATABLE, max_examples=60, deadline=None)
@given(
    key=st.sampled_from(COUNT_KEYS),
    value=st.integers(max_value=0) | st.sampled_from([0, -1, -(2**63), -(10**400)]),
    where=st.sampled_from(["base", "grid"]),
)
@example(key="train.epochs", value=-1, where="base")
@example(key="train.batch_size", value=0, where="grid")
def test_a_count_below_one_is_refused_naming_its_key(key: str, value: int, where: str) -> None:
    doc, named = _count_doc(key, value, where)
    path = _FOLDER / "grid.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_grid(path)
    message = str(info.value)
    assert message.startswith(f"grid.yaml: {named}: must be a positive integer, got ") and "\n" not in message
    if len(str(value)) <= 20:  # longer numbers are shortened in the message
        assert message.endswith(f"got {value}")


@pytest.mark.parametrize(("key", "value", "where"), [("train.epochs", -3, "base"), ("train.batch_size", 0, "grid")])
def test_cli_plan_refuses_a_count_below_one_with_exit_2_naming_the_key(
    tmp_path: Path, key: str, value: int, where: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    doc, named = _count_doc(key, value, where)
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "grid.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: grid.yaml: {named}: must be a positive integer, got {value}\n"


# --- targeted checks


def test_grid_files_are_parsed_with_a_safe_loader_only() -> None:
    sources = {p.name: p.read_text(encoding="utf-8") for p in Path(config.__file__).parent.glob("*.py")}
    # One call parses grid files, with a subclass of yaml.SafeLoader (it adds the 1e-4 float and duplicate keys).
    assert [name for name, text in sources.items() if "yaml.load(" in text] == ["gridyaml.py"]
    source = sources["gridyaml.py"]
    assert source.count("yaml.load(") == 1 and "yaml.load(text, Loader=SafeLoader)" in source
    assert "unsafe_load" not in source and "FullLoader" not in source and "UnsafeLoader" not in source
    assert issubclass(gridyaml.SafeLoader, yaml.SafeLoader)


@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system",
        "!!python/object/new:os.system",
        "!!python/name:os.system",
        "!<tag:yaml.org,2002:python/object/apply:os.system>",
    ],
)
def test_python_tags_are_refused_and_never_run(tmp_path: Path, tag: str) -> None:
    write_grid(tmp_path, f'name: x\nbase: {tag} ["touch PWNED"]\n')
    with pytest.raises(
        ConfigError, match=r"^grid\.yaml: line 2, column 7: YAML error: could not determine a constructor"
    ):
        load_grid(tmp_path / "grid.yaml")
    assert not (tmp_path / "PWNED").exists()


def test_duplicate_keys_are_an_error_not_last_one_wins(tmp_path: Path) -> None:
    write_grid(tmp_path, "name: x\ngrid:\n  train.batch_size: [8]\n  train.batch_size: [64]\n")
    with pytest.raises(ConfigError) as info:
        load_grid(tmp_path / "grid.yaml")
    assert str(info.value) == (
        "grid.yaml: line 4, column 3: YAML error: duplicate key 'train.batch_size' (YAML would keep only the last one)"
    )
    # A key merged in with << may be overridden: that is what merging is for.
    write_grid(tmp_path, "name: x\nvariants:\n  - {}\n  - <<: {train.lr: 0.1, train.epochs: 3}\n    train.lr: 0.2\n")
    assert load_grid(tmp_path / "grid.yaml").variants[1] == (("train.lr", 0.2), ("train.epochs", 3))


@pytest.mark.parametrize(
    "name", ["../x", "/abs", "a/b", ".", "..", "", "x\n", "x/", "a\\b", " x", "x y", "é", None, 7, ["x"]]
)
def test_a_sweep_name_cannot_escape_the_results_folder(tmp_path: Path, name: Any) -> None:
    write_grid(tmp_path, yaml.safe_dump({"name": name}))
    with pytest.raises(ConfigError) as info:
        load_grid(tmp_path / "grid.yaml")
    message = str(info.value)
    assert message.startswith(
        "grid.yaml: name: must be letters, digits, '_', '.' or '-' (it names the results folder), got "
    )
    assert len(message.splitlines()) == 1


def test_a_sweep_name_is_at_most_100_characters(tmp_path: Path) -> None:
    write_grid(tmp_path, f"name: {'n' * 101}\n")
    with pytest.raises(
        ConfigError,
        match=r"^grid\.yaml: name: must be at most 100 characters \(it names the "
        r"results folder\), got 'n{27}\.\.\.n{28}'$",
    ):
        load_grid(tmp_path / "grid.yaml")


@pytest.mark.parametrize("name", ["x", "a.b", "run-2_final", "n" * 100])
def test_plain_sweep_names_are_accepted(tmp_path: Path, name: str) -> None:
    write_grid(tmp_path, f"name: {name}\n")
    assert load_grid(tmp_path / "grid.yaml").name == name


def test_the_default_name_from_the_file_name_is_checked_too(tmp_path: Path) -> None:
    write_grid(tmp_path, "seeds: [0]\n", name="my grid.yaml")
    with pytest.raises(ConfigError, match=r"^my grid\.yaml: name: must be"):
        load_grid(tmp_path / "my grid.yaml")


def test_a_grid_of_millions_of_runs_is_refused_before_it_is_built(tmp_path: Path) -> None:
    axis = "[" + ", ".join(str(i) for i in range(1, 101)) + "]"
    write_grid(tmp_path, f"name: x\ngrid: {{train.batch_size: {axis}, train.epochs: {axis}, data.seed: {axis}}}\n")
    with pytest.raises(
        ConfigError,
        match=r"^grid\.yaml: grid: makes 1000000 runs \(1000000 points x 1 seeds\); "
        r"at most 100000",
    ):
        load_grid(tmp_path / "grid.yaml")


# --- the command line: exit 2, one line on stderr, no traceback, nothing written or run


@pytest.mark.parametrize(
    "content",
    [
        b'name: x\nbase: !!python/object/apply:os.system ["touch PWNED"]\n',
        b"name: x\nbase: {train: {epochs: 1}}\n\xff\xfe\n",
        b"name: x\nseeds: " + b"[" * 3000 + b"]" * 3000 + b"\n",
        b"name: x\nbase: {train: {lr: " + b"9" * 5000 + b"}}\n",
        b"name: ../../etc\n",
    ],
    ids=["python-tag", "invalid-utf8", "deep-nesting", "huge-integer", "escaping-name"],
)
def test_cli_plan_rejects_hostile_files_with_exit_2_and_no_traceback(
    tmp_path: Path, content: bytes, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "grid.yaml").write_bytes(content)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "grid.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: grid.yaml: ") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "results").exists()


ALIAS_BOMB = b"""name: x
base:
  model:
    options:
      a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
      i: [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (ALIAS_BOMB, "model.options: holds more than 10,000 values (YAML aliases expanding?)"),
        (
            b'name: x\nbase:\n  model:\n    options: "' + b"\\x5b" * 3000 + b"\\x5d" * 3000 + b'"\n',
            "model.options: nests more than 20 levels",
        ),
        (
            b'name: x\nbase:\n  train:\n    early_stopping: "' + b"\\x7b\\x22p\\x22:" * 3000 + b'"\n',
            "train.early_stopping: nests more than 20 levels",
        ),
    ],
    ids=["alias-bomb-in-options", "escaped-nesting-in-options", "escaped-nesting-in-early-stopping"],
)
def test_decoded_grid_values_are_bounded_in_size_and_depth(
    tmp_path: Path, content: bytes, says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file's own brackets are few; what they decode to is not: a YAML alias bomb (9^9 values from 11
    lines; before the bound, 8 levels took 24 s and 500 MB) and JSON nested through \\x5b escapes (a
    RecursionError and a traceback before) are refused: one line, exit 2.
    """
    (tmp_path / "grid.yaml").write_bytes(content)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["plan", "grid.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and says in err and len(err.splitlines()) == 1, err
