"""The package's layering: which package may import which, read from the source (every import, also
those inside functions). `python tests/layers.py` prints the layers, each package's modules with the
first line of their docstring, and which packages each one imports; tests/test_layers.py checks the
rules below on every commit.

Data flows down the list: a grid file is read (config), queued (store), trained (train) by workers
(run), its records read back (analysis), the claims checked on them (claims) and reported (report). A
package imports only packages of a lower layer, never one of its own layer, and the module import graph
has no cycle.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

SWEEP = Path(__file__).resolve().parent.parent / "sweep"

# layer -> its packages (top-level modules count as packages of their own)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("vocab", "exits"),  # the shared names and exit codes
    ("base",),  # files written whole
    ("config",),  # the grid file: keys, validation, the plan of runs
    ("store", "train", "analysis"),  # the queue; training one run; reading results back (peers: independent)
    ("claims",),  # the post's claims: checks, readings, error control, verdicts (what run and report both ask)
    ("report", "export"),  # the report; results to TensorBoard and MLflow
    ("run",),  # a sweep: workers, the orchestrator, Slurm, seeds until decided
    ("cli",),  # the commands
    ("__main__",),
)
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    found = {}
    for path in sorted(SWEEP.rglob("*.py")):
        parts = path.relative_to(SWEEP.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def edges() -> dict[str, set[str]]:
    """Module -> the package modules it imports (a name imported from a package resolves to its
    submodule when there is one).
    """
    known = modules()

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "sweep":
                targets = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names if alias.name.split(".")[0] == "sweep"]
            for target in targets:
                module = resolve(target)
                if module and module != name:
                    graph[name].add(module)
    return graph


def package_of(module: str) -> str:
    """`sweep.train.data` -> train; `sweep.vocab` -> vocab; `sweep` -> sweep."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def violations() -> list[str]:
    """Each import against the layering: to a package of a higher layer, or of the same layer."""
    found = []
    for source, targets in sorted(edges().items()):
        for target in sorted(targets):
            mine, theirs = package_of(source), package_of(target)
            if mine == theirs or "sweep" in (mine, theirs):
                continue
            if RANK[theirs] >= RANK[mine]:
                found.append(f"{source} imports {target}: {mine} (layer {RANK[mine]}) may not import {theirs}")
    return found


def cycles() -> list[list[str]]:
    """The module import graph's cycles (strongly connected components of more than one module)."""
    graph, index, low, stack, on_stack, found = edges(), {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def describe() -> str:
    """The layers, top to bottom, each package with its modules and the packages it imports."""
    known, graph = modules(), edges()
    lines = []
    for rank in range(len(LAYERS) - 1, -1, -1):
        lines.append(f"layer {rank}")
        for package in LAYERS[rank]:
            members = sorted(m for m in known if package_of(m) == package)
            uses = sorted({package_of(t) for m in members for t in graph.get(m, ())} - {package, "sweep"})
            lines.append(f"  {package}" + (f"  (imports {', '.join(uses)})" if uses else ""))
            for member in members:
                lines.append(f"    {member:32} {first_line(known[member])}")
    return "\n".join(lines)


def first_sentence(path: Path) -> str:
    """The docstring's first sentence, its lines joined: what the module holds, as its table row says it."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


BEGIN = "<!-- modules: generated by `python tests/layers.py --markdown` from the docstrings; do not edit -->"
END = "<!-- end of the generated modules -->"


def markdown() -> str:
    """The layers as docs/design.md's module tables, between BEGIN and END: top layer first, a table per package
    of each module and the first line of its docstring.
    """
    known, graph = modules(), edges()
    lines = [BEGIN, ""]
    for rank in range(len(LAYERS) - 1, -1, -1):
        for package in LAYERS[rank]:
            members = sorted(m for m in known if package_of(m) == package)
            uses = sorted({package_of(t) for m in members for t in graph.get(m, ())} - {package, "sweep"})
            imports = f"; imports {', '.join(uses)}" if uses else ""
            lines += [f"**`{package}`** (layer {rank}{imports})", "", "| module | what it holds |", "|---|---|"]
            for member in members:
                where = known[member].relative_to(SWEEP.parent).as_posix()
                what = first_sentence(known[member]).replace("|", "\\|")
                lines.append(f"| `{where}` | {what} |")
            lines.append("")
    return "\n".join([*lines, END])


def generated(page: str) -> str:
    """The part of a page between BEGIN and END (empty when it has none)."""
    if BEGIN not in page or END not in page:
        return ""
    return page[page.index(BEGIN) : page.index(END) + len(END)]


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        print(markdown())
        sys.exit(0)
    print(describe())
    problems = violations() + [" -> ".join(c) for c in cycles()]
    for problem in problems:
        print("against the layering:", problem)
    sys.exit(1 if problems else 0)
