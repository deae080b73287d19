"""Draw the figures of docs/benchmarks.md from the benchmark output recorded there.

Every Markdown table in docs/benchmarks.md is output a benchmark script printed. For each table
this script draws one PNG into docs/images/ (needs matplotlib):

* a table with a time column ``... (s)`` and an ``IQR`` column (``train_under_load.py``): the
  median times as bars with their interquartile ranges;
* any other table with ratio columns (a header with ``/``, ``÷`` or ``ratio``, cells such as
  ``1.3×`` or ``0.49``): one group of bars per row, one bar per ratio column, and a line at 1
  (parity with the baseline);
* tables with neither are not drawn.

A figure is named after its section and its place in it (``one-training-step-1.png``); the page
shows it with ``![...](images/NAME.png)`` below the table. Run after recording new figures::

    python benchmarks/plot_figures.py            # writes docs/images/*.png, lists them

Usage: ``python benchmarks/plot_figures.py [--page docs/benchmarks.md] [--out docs/images]``
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_RANGE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*[–-]\s*(-?\d+(?:\.\d+)?)")


@dataclass
class Table:
    section: str
    index: int  # 1 for the section's first table
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.section.lower()).strip("-")
        return f"{slug}-{self.index}"


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_tables(page: Path) -> list[Table]:
    """The Markdown tables of ``page``, each with the ``##`` section it is in."""
    tables: list[Table] = []
    section, count, lines = "", 0, page.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section, count = line[3:].split(" — ")[0].strip(), 0
        elif line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            count += 1
            table = Table(section, count, _cells(line))
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                table.rows.append(_cells(lines[i]))
                i += 1
            tables.append(table)
            continue
        i += 1
    return tables


def _number(cell: str) -> float | None:
    match = _NUMBER.match(cell.replace("**", ""))
    return float(match.group(1)) if match else None


def _is_ratio(header: str) -> bool:
    return any(mark in header for mark in ("/", "÷", "ratio"))


def draw(table: Table, path: Path) -> bool:
    """Draw ``table`` into ``path``; False when it has nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [row[0] for row in table.rows]
    times = [j for j, h in enumerate(table.header) if h.endswith("(s)")]
    iqr = [j for j, h in enumerate(table.header) if h.startswith("IQR")]
    height = 0.9 + 0.38 * len(labels)
    if times and iqr:
        j, k = times[0], iqr[0]
        medians = [_number(row[j]) or 0.0 for row in table.rows]
        spans = [_RANGE.match(row[k]) for row in table.rows]
        low = [m - float(s.group(1)) if s else 0 for m, s in zip(medians, spans, strict=True)]
        high = [float(s.group(2)) - m if s else 0 for m, s in zip(medians, spans, strict=True)]
        fig, ax = plt.subplots(figsize=(7.5, height))
        ax.barh(labels, medians, xerr=[low, high], color="#4c72b0", capsize=3)
        ax.set_xlabel(f"{table.header[j]}: median, bars the interquartile range")
    else:
        columns = [
            j for j, h in enumerate(table.header)
            if j and _is_ratio(h) and all(_number(r[j]) is not None for r in table.rows)
        ]  # fmt: skip
        if not columns or not table.rows:
            return False
        fig, ax = plt.subplots(figsize=(7.5, height + 0.2 * len(columns)))
        width = 0.8 / len(columns)
        for n, j in enumerate(columns):
            values = [_number(row[j]) for row in table.rows]
            positions = [r + (n - (len(columns) - 1) / 2) * width for r in range(len(labels))]
            label = table.header[j]
            if label == "ratio":  # several plain "ratio" columns: say which column each divides
                label = f"{table.header[j - 1]} (ratio)"
            ax.barh(positions, values, height=width, label=label)
        ax.set_yticks(range(len(labels)), labels)
        ax.axvline(1.0, color="black", linewidth=0.8)
        values = [_number(r[j]) for r in table.rows for j in columns]
        if max(values) / max(min(values), 1e-9) > 30:
            ax.set_xscale("log")
        ax.set_xlabel("ratio (1 = parity with the baseline)")
        if len(columns) > 1:
            ax.legend(fontsize="small")
    ax.invert_yaxis()
    ax.set_title(f"{table.section} ({table.index})" if table.index > 1 else table.section)
    ax.tick_params(axis="y", labelsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--quiet", action="store_true", help="do not list the figures written")
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        sys.exit("drawing the figures needs matplotlib: pip install matplotlib (or tadiff[docs])")
    args.out.mkdir(parents=True, exist_ok=True)
    for table in read_tables(args.page):
        path = args.out / f"{table.name}.png"
        if draw(table, path) and not args.quiet:
            print(f"![{table.section}](images/{path.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
