"""Tables, result files, docs fragments and figures, in the one form every study uses.

A table is built once as rows of strings and rendered as Markdown (console and
``benchmarks/results/*.md``) or as a reStructuredText ``list-table`` (the fragments
``docs/results/*.inc`` that the docs include), so the two can never disagree. A study's
report is a list of sections (title, note or figure, tables): :func:`publish` prints it and
writes both. Ratios print as ``1.23x`` and targets as met / **not met**, in every study.
Kept free of third-party imports: worker processes that measure RSS may import it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness import DOCS_RESULTS, RESULTS

Table = tuple[list[str], list[list[str]]]
Section = tuple[str, str, list[tuple[str, Table]]]
"""``(title, note, [(caption, table), ...])``; a note ending in ``.png`` is a figure in
``docs/results/``, any other note a paragraph."""


# -- the command line -----------------------------------------------------------------------


def arg_parser(doc: str | None, quick: str | None = None) -> argparse.ArgumentParser:
    """A parser described by the docstring's first paragraph, with ``--quick`` if helped."""
    out = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    if quick is not None:
        out.add_argument("--quick", action="store_true", help=quick)
    return out


def output_options(parser: argparse.ArgumentParser, *, code: str, name: str) -> None:
    """``--code`` (which ``scrapy_twolevel`` the workers import), ``--out-dir``, ``--name``."""
    where = {"head": "as committed at HEAD", "worktree": "as on disk now"}
    other = "worktree" if code == "head" else "head"
    parser.add_argument(
        "--code",
        choices=tuple(where),
        default=code,
        help=f"benchmark scrapy_twolevel {where[code]} (default) or {where[other]}",
    )
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default=None, help=f"results file stem (default: {name})")


def command_line(script: str, args: Sequence[str]) -> str:
    """How the run was started, as results record it: ``python benchmarks/x.py ...``."""
    return "python " + shlex.join([os.path.relpath(script), *args])


class Clock:
    """Seconds since the run started, and progress lines stamped with them."""

    def __init__(self, stamp: str = "[{:6.1f}s] {}") -> None:
        self.stamp = stamp
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def log(self, msg: str) -> None:
        print(self.stamp.format(self.elapsed(), msg), flush=True)


def finish(text: str, elapsed: float, results: str) -> int:
    """The end of a run: its report, how long it took and where the results are; exit 0."""
    print()
    print(text)
    print(f"Whole run: {elapsed / 60:.1f} min; results in {results}")
    return 0


# -- ratios and verdicts --------------------------------------------------------------------


def ratio(value: float) -> str:
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def verdict(ok: bool, figure: str) -> str:
    return f"{'met' if ok else '**not met**'} ({figure})"


def yes_no(met: bool) -> str:
    return "yes" if met else "**no**"


# -- tables ---------------------------------------------------------------------------------


def markdown(table: Table) -> str:
    head, rows = table
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def rst(table: Table, title: str = "") -> str:
    """A ``list-table`` directive (Markdown bold becomes reST bold unchanged)."""
    head, rows = table
    out = [f".. list-table:: {title}".rstrip(), "   :header-rows: 1", ""]
    for row in [head, *rows]:
        cells = [c.replace("|", "/") or "-" for c in row]
        out.append(f"   * - {cells[0]}")
        out += [f"     - {c}" for c in cells[1:]]
    return "\n".join(out) + "\n\n"


def tables_from_markdown(text: str) -> list[Table]:
    """The pipe tables of a Markdown text, to render them again with :func:`rst`."""
    tables: list[Table] = []
    rows: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):  # skip the |---| line
                rows.append(cells)
        elif rows:
            tables.append((rows[0], rows[1:]))
            rows = []
    return tables


# -- reports --------------------------------------------------------------------------------


def render(
    title: str, intro: Sequence[str], sections: Sequence[Section], definitions: dict[str, str]
) -> tuple[list[str], list[str]]:
    """The report as Markdown lines (``benchmarks/results``) and reST lines (the docs)."""
    md, inc = [f"# {title}", ""], []
    for paragraph in intro:
        md += [paragraph, ""]
        inc += [paragraph, ""]
    for heading, note, tables in sections:
        md += [f"## {heading}", ""]
        inc += [heading, "~" * len(heading), ""]
        if note.endswith(".png"):
            md += [f"![{note}](../../docs/results/{note})", ""]
            inc += [f".. image:: results/{note}", "   :width: 100%", ""]
        elif note:
            md += [note, ""]
            inc += [note, ""]
        for caption, table in tables:
            md += ([f"{caption}:", ""] if caption else []) + [markdown(table)]
            inc.append(rst(table, caption))
    md += ["## Definitions", "", *[f"- **{k}**: {v}" for k, v in definitions.items()], ""]
    return md, inc


def print_sections(sections: Sequence[Section]) -> None:
    for heading, _, tables in sections:
        print(f"## {heading}\n")
        for _, table in tables:
            print(markdown(table))


def write_docs_fragment(name: str, lines: Sequence[str]) -> Path:
    """``docs/results/<name>.inc``: reST that a docs page includes."""
    DOCS_RESULTS.mkdir(parents=True, exist_ok=True)
    path = DOCS_RESULTS / f"{name}.inc"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def publish(
    name: str,
    title: str,
    intro: Sequence[str],
    sections: Sequence[Section],
    definitions: dict[str, str],
    figures: Callable[[], None] | None = None,
) -> None:
    """Print the report; write ``results/<name>.md``, its docs fragment, then the figures."""
    md, inc = render(title, intro, sections, definitions)
    print_sections(sections)
    (RESULTS / f"{name}.md").write_text("\n".join(md), encoding="utf-8")
    write_docs_fragment(name, inc)
    if figures is not None:
        figures()
    print(f"Results: {RESULTS}/{name}.*, {DOCS_RESULTS}/")


def compact_json(data: Any, **dumps: Any) -> str:
    """Indented JSON with every innermost list (numbers, curve points) on one line."""
    text = json.dumps(data, indent=1, **dumps)

    def one_line(found: re.Match[str]) -> str:
        try:
            return json.dumps(json.loads(found.group(0)))
        except ValueError:  # brackets inside a string ("[scrapy.core.engine] ERROR: ...")
            return found.group(0)

    return re.sub(r"\[[^\[\]{}\"]*\]", one_line, text)


def save_figure(fig: Any, path: Path, dpi: int = 100) -> None:
    """Lay out, write and close a matplotlib figure (its folder made if need be)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def progress(
    prefix: str, run: dict[str, Any], ok: bool, figures: Callable[[], Sequence[str]]
) -> str:
    """A worker's progress line: its figures and wall time, or its error."""
    if not ok:
        return f"{prefix}{run.get('error')}"
    return f"{prefix}{', '.join(figures())} [{run['process_wall_s']:.0f}s]"


def columns(header: str) -> list[str]:
    """A table's column names, written as one line: ``"variant | total s | ratio"``."""
    return header.split(" | ")
