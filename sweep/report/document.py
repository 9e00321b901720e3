"""The report as a list of blocks (headings, paragraphs, bullets, tables, figures), and its Markdown and HTML
renderers.

Sections write blocks; the renderers never decide content. The HTML is one file:
figures embedded as PNG data URIs, no scripts, no external requests. A `Row` puts blocks side by
side in the HTML (the first screen's verdict table and main figure); a `Contents` block lists every
level-2 heading after it, and in the HTML each such section is folded (`<details>`) under its
heading, so the first screen is the answer and the rest opens on demand.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sweep.analysis.outcome import CONTRADICTED, INCONCLUSIVE, NOT_TESTED, SUPPORTED
from sweep.claims.findings import DIRECTION_SHOWN
from sweep.report.figures.files import FigureFile

TITLE = "Does the post's advice hold? Keep batch_size <= 32, and its other claims, checked"


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


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Contents:
    """The table of contents: the level-2 headings after it, linked."""


@dataclass(frozen=True)
class Row:
    """Blocks side by side in the HTML (one after the other in Markdown)."""

    blocks: tuple[Heading | Paragraph | Table | Figure | Bullets, ...]


Block = Heading | Paragraph | Table | Figure | Bullets | Contents | Row


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

    def bullets(self, items: Sequence[str]) -> None:
        self.blocks.append(Bullets(tuple(items)))

    def contents(self) -> None:
        self.blocks.append(Contents())

    def row(self, *blocks: Heading | Paragraph | Table | Figure | Bullets) -> None:
        self.blocks.append(Row(tuple(blocks)))

    def folded(self) -> list[Heading]:
        """The level-2 headings after the Contents block (none without one)."""
        marks = [i for i, b in enumerate(self.blocks) if isinstance(b, Contents)]
        after = self.blocks[marks[0] + 1 :] if marks else []
        return [b for b in after if isinstance(b, Heading) and b.level == 2]


def slugs(headings: Sequence[Heading]) -> list[str]:
    """GitHub's anchor for each heading (lower case, punctuation dropped, spaces to hyphens, repeats numbered),
    so the Markdown contents link on GitHub and the HTML ids are the same.
    """
    seen: dict[str, int] = {}
    out = []
    for heading in headings:
        base = re.sub(r"[^a-z0-9 _-]", "", heading.text.lower()).replace(" ", "-")
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.append(base if count == 0 else f"{base}-{count}")
    return out


# --- Markdown


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown_lines(block: Block, out: Path, doc: Doc) -> list[str]:
    if isinstance(block, Row):
        return [line for inner in block.blocks for line in _markdown_lines(inner, out, doc)]
    if isinstance(block, Bullets):
        return [f"- {item}" for item in block.items] + [""]
    if isinstance(block, Contents):
        headings = doc.folded()
        links = [f"- [{h.text}](#{slug})" for h, slug in zip(headings, slugs(headings), strict=True)]
        return ["## Contents", "", *links, ""]
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
    return "\n".join(line for block in doc.blocks for line in _markdown_lines(block, out, doc))


# --- HTML

CSS = """
body { font-family: system-ui, sans-serif; max-width: 86rem; margin: 1rem auto; padding: 0 1rem; color: #222;
       line-height: 1.45; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f3f3f3; padding: 0 0.2rem; }
img { max-width: 100%; border: 1px solid #eee; }
figure { margin: 1.5rem 0; }
h1 { font-size: 1.4rem; margin: 0 0 0.5rem; }
.row { display: flex; gap: 1.2rem; align-items: flex-start; }
.row > div:first-child { flex: 1 1 62%; } .row > div:last-child { flex: 1 1 38%; }
.row table { font-size: 0.78rem; margin-top: 0; line-height: 1.3; } .row td, .row th { padding: 0.2rem 0.4rem; }
.row figure { margin: 0; }
.row figcaption { font-size: 0.8rem; }
details { border-top: 1px solid #ddd; padding: 0.2rem 0; }
summary { cursor: pointer; } summary h2 { display: inline; font-size: 1.25rem; }
nav.contents ol { columns: 2; font-size: 0.9rem; }
.supported { color: #176317; font-weight: 600; } .contradicted { color: #a11; font-weight: 600; }
.inconclusive { color: #8a5a00; font-weight: 600; } .not-tested { color: #666; font-weight: 600; }
.shown { color: #3d6b17; font-weight: 600; }
"""
VERDICT_CLASSES = {  # a verdict's leading word -> its colour's CSS class
    SUPPORTED: "supported",
    DIRECTION_SHOWN: "shown",  # "direction shown, size not": the sign decided, the post's size not reached
    CONTRADICTED: "contradicted",
    INCONCLUSIVE: "inconclusive",
    "undecided": "inconclusive",  # an inconclusive verdict's words say at how many seeds
    NOT_TESTED: "not-tested",
}


class Marked(str):
    """A verdict's text: Markdown writes the text; HTML colours its leading word `lead` (`VERDICT_CLASSES`)."""

    lead: str

    def __new__(cls, text: str, lead: str) -> Marked:
        marked = super().__new__(cls, text)
        marked.lead = lead
        return marked


def _inline(text: str) -> str:
    """Escape, then `code` -> <code>, [words](#anchor) -> a link within the page, and colour a verdict's word."""
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(text)))
    escaped = re.sub(r"\[([^\]]+)\]\((#[a-z0-9_-]+)\)", r'<a href="\2">\1</a>', escaped)
    lead = getattr(text, "lead", "")
    if lead in VERDICT_CLASSES and escaped.startswith(lead):
        escaped = f'<span class="{VERDICT_CLASSES[lead]}">{lead}</span>{escaped[len(lead) :]}'
    return escaped


def _html(block: Block, doc: Doc) -> str:
    if isinstance(block, Heading):
        return f"<h{block.level}>{_inline(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f"<p>{_inline(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Row):
        return '<div class="row">' + "".join(f"<div>{_html(b, doc)}</div>" for b in block.blocks) + "</div>"
    if isinstance(block, Contents):
        headings = doc.folded()
        items = "".join(
            f'<li><a href="#{slug}">{_inline(h.text)}</a></li>'
            for h, slug in zip(headings, slugs(headings), strict=True)
        )
        return f'<nav class="contents"><h2>Contents</h2><ol>{items}</ol></nav>'
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


def _body(doc: Doc) -> list[str]:
    """The blocks in order; from the Contents block on, each level-2 section folded under its heading."""
    folded = doc.folded()
    ids = {id(h): slug for h, slug in zip(folded, slugs(folded), strict=True)}
    out, inside = [], False
    for block in doc.blocks:
        if isinstance(block, Heading) and id(block) in ids:
            out.append("</details>" if inside else "")
            out.append(f'<details id="{ids[id(block)]}"><summary><h2>{_inline(block.text)}</h2></summary>')
            inside = True
            continue
        out.append(_html(block, doc))
    return [*out, "</details>" if inside else ""]


def to_html(doc: Doc) -> str:
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{TITLE}</title>",
        f"<style>{CSS}</style></head><body>",
    ]
    return "\n".join(line for line in [*head, *_body(doc), "</body></html>"] if line)
