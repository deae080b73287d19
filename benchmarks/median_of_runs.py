"""Combine the Markdown output of several runs of a benchmark into one table of medians.

This machine is shared and noisy, so the figures in ``docs/`` are medians of several runs. Save
each run's output and pass the files::

    for i in 1 2 3; do python benchmarks/householder.py > /tmp/run$i.md; done
    python benchmarks/median_of_runs.py /tmp/run1.md /tmp/run2.md /tmp/run3.md

Every Markdown table of the first run is printed again, cell by cell:

* a number, optionally followed by ``%`` or by ``×`` and a word (``2.313``, ``17 %``, ``5.4×``,
  ``4.7× less``): the median over the runs, with the decimals of the inputs, if every run has
  the same suffix; ratio cells (``×``) also list every run's value, ``5.4× (5.4 5.3 5.6)``, so
  the spread stays visible;
* a range ``a–b×``: the lowest ``a`` to the highest ``b``;
* anything else (``skip``, names): kept if the runs agree, else every run's text joined by ``/``.

Tables are matched by their position in the output and rows by their first cell (the n-th row
starting with ``512`` matches the n-th such row of every run), so a row that one run skipped does
not shift the others. Lines that are not part of a table are not printed,
except each table's bold title line (with "— median of N runs" added).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from dataclasses import dataclass, field

_NUMBER = re.compile(r"^(-?\d+(?:\.(\d+))?)(×.*| ?%)?$")
_RANGE = re.compile(r"^(-?\d+(?:\.\d+)?)–(-?\d+(?:\.\d+)?)(×)?$")


@dataclass
class Table:
    """One Markdown table: the bold title above it (or ""), the rest of that line, its header and
    its rows of cells."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    caption: str = ""


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_tables(text: str) -> list[Table]:
    """The Markdown tables of ``text``, in order.

    Example:
        >>> t = parse_tables("**A**\\n\\n| d | t |\\n|---:|---:|\\n| 1 | 2.0 |\\n")
        >>> t[0].title, t[0].header, t[0].rows
        ('A', ['d', 't'], [['1', '2.0']])
    """
    tables: list[Table] = []
    title, caption, current = "", "", None
    for line in text.splitlines():
        if line.startswith("|"):
            if current is None:
                current = Table(title, _cells(line), caption=caption)
                tables.append(current)
            elif not set(line.strip()) <= set("|-: "):  # skip the alignment row
                current.rows.append(_cells(line))
            continue
        current = None
        if line.startswith("**") and line.count("**") >= 2:
            _, title, caption = line.split("**", 2)
            caption = caption.strip()
    return tables


def _format(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def median_cell(cells: list[str]) -> str:
    """The combined cell for one position of the table over the runs (see the module docs).

    Example:
        >>> median_cell(["5.4×", "5.3×", "5.6×"])
        '5.4× (5.4 5.3 5.6)'
        >>> median_cell(["2.0", "3.0", "10.0"]), median_cell(["3.9–4.3×", "4.0–4.5×"])
        ('3.0', '3.9–4.5×')
        >>> median_cell(["skip", "12.0"])
        'skip/12.0'
    """
    numbers = [_NUMBER.match(c) for c in cells]
    if all(numbers):
        values = [float(m.group(1)) for m in numbers]
        decimals = max(len(m.group(2) or "") for m in numbers)
        unit = numbers[0].group(3) or ""
        if any((m.group(3) or "") != unit for m in numbers):
            return "/".join(cells)
        median = _format(statistics.median(values), decimals) + unit
        if unit.startswith("×") and len(values) > 1:
            median += " (" + " ".join(_format(v, decimals) for v in values) + ")"
        return median
    ranges = [_RANGE.match(c) for c in cells]
    if all(ranges):
        low = min(ranges, key=lambda m: float(m.group(1))).group(1)
        high = max(ranges, key=lambda m: float(m.group(2))).group(2)
        return f"{low}–{high}{ranges[0].group(3) or ''}"
    return cells[0] if len(set(cells)) == 1 else "/".join(cells)


def _keyed_rows(table: Table) -> dict[tuple[str, int], list[str]]:
    """Rows by (first cell, how many earlier rows start with the same cell)."""
    seen: dict[str, int] = {}
    keyed = {}
    for row in table.rows:
        n = seen[row[0]] = seen.get(row[0], -1) + 1
        keyed[(row[0], n)] = row
    return keyed


def median_tables(texts: list[str]) -> str:
    """Markdown for the tables of the first text, every cell combined over all texts.

    Example:
        >>> table = "| d | r |\\n|---|---:|\\n| 1 | {}× |\\n"
        >>> print(median_tables([table.format(2.0), table.format(4.0)]))
        | d | r |
        |---|---:|
        | 1 | 3.0× (2.0 4.0) |
        <BLANKLINE>
    """
    runs = [[_keyed_rows(t) for t in parse_tables(text)] for text in texts]
    out = []
    for i, table in enumerate(parse_tables(texts[0])):
        if table.title:
            caption = f" {table.caption}" if table.caption else ""
            out.append(f"**{table.title}**{caption} — median of {len(texts)} runs\n")
        out.append("| " + " | ".join(table.header) + " |")
        out.append("|---" + "|---:" * (len(table.header) - 1) + "|")
        for key, row in runs[0][i].items():
            others = [run[i].get(key) for run in runs[1:] if i < len(run)]
            combined = [row[0]]
            for j in range(1, len(row)):
                cells = [row[j]] + [o[j] for o in others if o is not None and j < len(o)]
                combined.append(median_cell(cells))
            out.append("| " + " | ".join(combined) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="saved outputs of the same benchmark command")
    args = parser.parse_args(argv)
    texts = []
    for name in args.files:
        with open(name, encoding="utf-8") as f:
            texts.append(f.read())
    if not parse_tables(texts[0]):
        print(f"median_of_runs: no Markdown table in {args.files[0]}", file=sys.stderr)
        return 2
    print(median_tables(texts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
