"""``benchmarks/median_of_runs.py``: the tool behind the medians quoted in docs/."""

from __future__ import annotations

import doctest
import importlib.util
import statistics
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "median_of_runs.py"
_spec = importlib.util.spec_from_file_location("median_of_runs", _PATH)
mor = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = mor  # dataclasses look the module up while the class is made
_spec.loader.exec_module(mor)


def _run(title: str, rows: list[tuple[str, ...]]) -> str:
    lines = [f"**{title}** (ms)", "", "| d | mode | t | ratio |", "|---:|---|---:|---:|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "header line\n\n" + "\n".join(lines) + "\n\ntrailing text\n"


def test_docstring_examples():
    result = doctest.testmod(mor)
    assert result.attempted > 0 and result.failed == 0


@given(st.lists(st.floats(0.001, 999.0), min_size=1, max_size=7))
def test_numeric_cell_is_the_median_with_the_inputs_decimals(values):
    cells = [f"{v:.3f}" for v in values]
    assert mor.median_cell(cells) == f"{statistics.median(float(c) for c in cells):.3f}"


def test_ratio_cells_list_every_run():
    assert mor.median_cell(["4.2×", "4.6×", "4.4×"]) == "4.4× (4.2 4.6 4.4)"
    assert mor.median_cell(["5.2× less", "5.4× less"]) == "5.3× less (5.2 5.4)"
    assert mor.median_cell(["17 %", "19 %", "18 %"]) == "18 %"


def test_ranges_span_all_runs_and_mixed_cells_are_kept_apart():
    assert mor.median_cell(["3.97–4.58×", "4.10–4.71×", "3.90–4.40×"]) == "3.90–4.71×"
    assert mor.median_cell(["skip", "skip"]) == "skip"
    assert mor.median_cell(["skip", "3.2"]) == "skip/3.2"
    assert mor.median_cell(["2.0×", "2.0 %"]) == "2.0×/2.0 %"


def test_rows_match_by_first_cell_and_occurrence_not_by_position():
    first = _run("T", [("512", "fwd", "1.0", "5.0×"), ("512", "bwd", "2.0", "6.0×")])
    # run two lists the rows in the same order but is missing a d = 256 row run three has
    second = _run("T", [("512", "fwd", "3.0", "7.0×"), ("512", "bwd", "4.0", "8.0×")])
    third = _run(
        "T",
        [
            ("256", "fwd", "9.0", "9.0×"),
            ("512", "fwd", "5.0", "9.0×"),
            ("512", "bwd", "6.0", "4.0×"),
        ],
    )
    out = mor.median_tables([first, second, third])
    assert "**T** (ms) — median of 3 runs" in out
    assert "| 512 | fwd | 3.0 | 7.0× (5.0 7.0 9.0) |" in out
    assert "| 512 | bwd | 4.0 | 6.0× (6.0 8.0 4.0) |" in out
    assert "| 256 |" not in out  # rows come from the first run
    assert "trailing text" not in out and "header line" not in out


def test_parse_tables_separates_consecutive_tables():
    text = _run("A", [("1", "x", "1.0", "1.0×")]) + "**unclosed bold\n"
    text += _run("B", [("2", "y", "2.0", "2.0×")])
    tables = mor.parse_tables(text)
    assert [t.title for t in tables] == ["A", "B"]
    assert [t.rows for t in tables] == [[["1", "x", "1.0", "1.0×"]], [["2", "y", "2.0", "2.0×"]]]


def test_main_prints_medians_and_rejects_a_file_without_tables(tmp_path, capsys):
    files = []
    for i, t in enumerate(("1.0", "3.0", "2.0")):
        f = tmp_path / f"run{i}.md"
        f.write_text(_run("T", [("64", "fwd", t, f"{t}×")]), encoding="utf-8")
        files.append(str(f))
    assert mor.main(files) == 0
    assert "| 64 | fwd | 2.0 | 2.0× (1.0 3.0 2.0) |" in capsys.readouterr().out
    empty = tmp_path / "empty.md"
    empty.write_text("no table here\n", encoding="utf-8")
    assert mor.main([str(empty)]) == 2
    assert "no Markdown table in" in capsys.readouterr().err


@pytest.mark.parametrize("n_runs", [1, 2])
def test_a_single_run_or_two_runs(n_runs):
    runs = [_run("T", [("8", "m", f"{i + 1}.0", f"{i + 1}.0×")]) for i in range(n_runs)]
    out = mor.median_tables(runs)
    expected = "| 8 | m | 1.0 | 1.0× |" if n_runs == 1 else "| 8 | m | 1.5 | 1.5× (1.0 2.0) |"
    assert expected in out
