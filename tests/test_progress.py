"""``tadiff.utils.progress``: the progress feedback of the examples and benchmarks."""

from __future__ import annotations

import io
import sys

import pytest

from tadiff.utils import progress as module
from tadiff.utils.progress import progress, set_quiet


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_items_pass_through_unchanged_and_quiet_writes_nothing():
    out = io.StringIO()
    assert list(progress(iter("abc"), quiet=True, file=out)) == ["a", "b", "c"]
    assert out.getvalue() == ""
    before = set_quiet(True)
    try:
        assert list(progress(range(3), file=out)) == [0, 1, 2] and out.getvalue() == ""
        assert list(progress(range(2), file=out, quiet=False, bar=False)) == [0, 1]
        assert out.getvalue().startswith("2/2")  # an explicit quiet=False wins
    finally:
        set_quiet(before)


def test_the_counter_writes_one_line_to_a_log_and_redraws_on_a_terminal(monkeypatch):
    log = io.StringIO()
    list(progress(range(40), desc="epoch 3", file=log, bar=False))
    assert log.getvalue().count("\n") == 1 and log.getvalue().startswith("epoch 3 40/40 (")
    unknown = io.StringIO()
    list(progress((i for i in range(7)), desc="steps", file=unknown, bar=False))
    assert unknown.getvalue().startswith("steps 7 (")  # no total known
    monkeypatch.setattr(module, "_REFRESH_SECONDS", 0.0)
    terminal = _Terminal()
    list(progress(range(5), desc="batches", file=terminal, bar=False))
    text = terminal.getvalue()
    assert text.count("\r") == 6 and text.endswith(")\n") and "\rbatches 3/5 (" in text


def test_tqdm_draws_the_bar_where_it_is_installed():
    pytest.importorskip("tqdm")
    out = io.StringIO()
    assert list(progress(range(3), desc="rounds", file=out)) == [0, 1, 2]
    assert "rounds" in out.getvalue() and "/3" in out.getvalue()  # the bar (cleared at the end)


def test_without_tqdm_the_counter_is_used(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # an import of tqdm fails
    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: None)
    out = io.StringIO()
    list(progress(range(2), desc="rounds", file=out))
    assert out.getvalue().startswith("rounds 2/2 (")
