"""The report as a list of blocks (headings, paragraphs, tables, figures), and its Markdown and HTML renderers.

Sections write blocks; the renderers never decide content. The HTML is one file:
figures embedded as PNG data URIs, no scripts, no external requests.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sweep.estimates import CONTRADICTED, INCONCLUSIVE, NOT_TESTED, SUPPORTED
from sweep.plots import FigureFile

TITLE = "Batch-size claims report"


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Figure:
    file: FigureFile


Block = Heading | Paragraph | Table | Figure


@dataclass
class Doc:
    """Blocks in reading order; sections append to it."""

    blocks: list[Block] = field(default_factory=list)

    def h(self, level: int, text: str) -> None:
        self.blocks.append(Heading(level, text))

    def p(self, text: str) -> None:
        self.blocks.append(Paragraph(text))

    def table(self, head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.blocks.append(Table(tuple(head), tuple(tuple(r) for r in rows)))

    def figure(self, fig: FigureFile) -> None:
        self.blocks.append(Figure(fig))


# --- Markdown


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown_lines(block: Block, out: Path) -> list[str]:
    if isinstance(block, Heading):
        return [f"{'#' * block.level} {block.text}", ""]
    if isinstance(block, Paragraph):
        return [block.text, ""]
    if isinstance(block, Table):
        lines = ["| " + " | ".join(map(_cell, block.head)) + " |", "|" + "---|" * len(block.head)]
        return lines + ["| " + " | ".join(map(_cell, r)) + " |" for r in block.rows] + [""]
    fig = block.file
    return [f"![{fig.title}]({fig.png.relative_to(out).as_posix()})", "", f"*{fig.title}* {fig.caption}", ""]


def to_markdown(doc: Doc, out: Path) -> str:
    """Markdown with figure links relative to `out`, the folder report.md is written to."""
    return "\n".join(line for block in doc.blocks for line in _markdown_lines(block, out))


# --- HTML

CSS = """
body { font-family: system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222;
       line-height: 1.45; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f3f3f3; padding: 0 0.2rem; }
img { max-width: 100%; border: 1px solid #eee; }
figure { margin: 1.5rem 0; }
.supported { color: #176317; font-weight: 600; } .contradicted { color: #a11; font-weight: 600; }
.inconclusive { color: #8a5a00; font-weight: 600; } .not-tested { color: #666; font-weight: 600; }
"""
VERDICT_CLASSES = (
    (SUPPORTED, "supported"),
    (CONTRADICTED, "contradicted"),
    (INCONCLUSIVE, "inconclusive"),
    ("undecided", "inconclusive"),  # an inconclusive verdict's words say at how many seeds
    (NOT_TESTED, "not-tested"),
)


def _inline(text: str) -> str:
    """Escape, then `code` -> <code>, and colour verdict words."""
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(text)))
    for word, css in VERDICT_CLASSES:
        escaped = re.sub(rf"^(C\d: )?{word}", rf'\1<span class="{css}">{word}</span>', escaped)
    return escaped


def _html(block: Block) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{_inline(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f"<p>{_inline(block.text)}</p>"
    if isinstance(block, Table):
        head = "<table><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in block.head) + "</tr>"
        rows = ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in block.rows]
        return "\n".join([head, *rows, "</table>"])
    fig = block.file
    data = base64.b64encode(fig.png.read_bytes()).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(fig.title)}">'
        f"<figcaption><em>{_inline(fig.title)}</em> {_inline(fig.caption)}</figcaption></figure>"
    )


def to_html(doc: Doc) -> str:
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{TITLE}</title>",
        f"<style>{CSS}</style></head><body>",
    ]
    return "\n".join([*head, *(_html(b) for b in doc.blocks), "</body></html>"])
