"""Reading a grid file's YAML: safely, and with every error on one line.

A subclass of yaml.SafeLoader (no Python tags, nothing executed) that also reads
1e-4 as a number and refuses repeated keys; nesting deeper than any grid file
needs is refused before parsing. Checking the values is sweep/config/gridfile.py's job.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

MAX_NESTING = 100  # levels of [ and { in a grid file


class YamlError(ValueError):
    """A grid file that cannot be read as YAML. The message is one line, naming the file."""


_LINE_BREAKS = str.maketrans({c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"})


def one_line(text: str, limit: int) -> str:
    """`text` with every character str.splitlines() breaks at escaped, cut to `limit`: stderr gets one line."""
    text = text.translate(_LINE_BREAKS)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader (no Python tags, nothing executed) that also reads 1e-4 as a number.

    PyYAML follows YAML 1.1, where an exponent needs a dot (1.0e-4) and 1e-4 is a
    string; YAML 1.2 and every other tool read it as the float users mean.
    It also refuses a repeated key, which plain YAML resolves silently to the last one.
    """

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        # Checked on the raw node, before merge keys (<<) are expanded: overriding a merged key is fine.
        node = super().compose_mapping_node(anchor)
        seen = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                if (key.tag, key.value) in seen:
                    raise yaml.composer.ComposerError(
                        None, None, f"duplicate key '{key.value}' (YAML would keep only the last one)", key.start_mark
                    )
                seen.add((key.tag, key.value))
        return node


SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_yaml(path: Path) -> Any:
    """The file's YAML as Python values; YamlError with one line naming the file otherwise."""
    if not path.is_file():
        hint = " (it is a folder)" if path.is_dir() else ""
        raise YamlError(f"{path}: no such grid file{hint}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise YamlError(f"{path.name}: not a UTF-8 text file (invalid byte at offset {err.start})") from None
    except OSError as err:
        raise YamlError(f"{path}: cannot read the grid file: {err.strerror or err}") from None
    return parse_yaml(text, path.name)


def parse_yaml(text: str, label: str) -> Any:
    """YAML text as Python values; YamlError with one line naming `label` (a file, or an override) otherwise."""
    # PyYAML's scanner is quadratic in the depth of [ and { (5000 levels: seconds; 100k: hours) and its
    # parser recursive, so deep nesting is refused before parsing; a real grid file nests 3 or 4 levels.
    depth = 0
    for bracket in re.finditer(r"[\[\]{}]", text):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_NESTING:
            line = text.count("\n", 0, bracket.start()) + 1
            raise YamlError(
                f"{label}: line {line}: YAML error: nested too deeply (more than {MAX_NESTING} levels of [ or {{)"
            )
    try:
        return yaml.load(text, Loader=SafeLoader)  # noqa: S506 - a SafeLoader: no Python tags, nothing executed
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or (str(err).splitlines() or [type(err).__name__])[0]
        semantic = isinstance(err, (yaml.constructor.ConstructorError, yaml.composer.ComposerError))
        kind = "YAML error" if semantic else "YAML syntax error"
        raise YamlError(one_line(f"{label}: {where}{kind}: {problem}", 1000)) from None
    except RecursionError:  # PyYAML parses nesting recursively: [[[[... a thousand levels deep
        raise YamlError(f"{label}: YAML error: nested too deeply") from None
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - PyYAML's constructors raise plain errors on some scalars: !!int '', 2001-13-45, a 5000-digit int
        detail = (str(err).splitlines() or [""])[0]
        what = f"a value cannot be read ({type(err).__name__}: {detail})"
        raise YamlError(one_line(f"{label}: YAML error: {what}", 1000)) from None
