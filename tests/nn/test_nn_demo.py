"""The `tadiff demo` showcase of nn/optim/viz passes its self-checks and writes its picture."""

import shutil

import pytest

from tadiff import viz
from tadiff.nn import demo


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` not installed")
def test_demo_trains_checks_and_draws_svg(tmp_path):
    lines = []
    assert demo.run(lines.append, tmp_path) is True
    text = "\n".join(lines)
    assert "loss fell by more than half: ok" in text
    assert "gradient vs central differences (float64)" in text and "FAILED" not in text
    svg = (tmp_path / "mlp_graph.svg").read_text()
    assert "<svg" in svg and svg.count("AddmmBackward") == 2


def test_demo_without_graphviz_writes_dot_text(tmp_path, monkeypatch):
    monkeypatch.setattr(viz, "dot_available", lambda: False)
    lines = []
    assert demo.run(lines.append, tmp_path) is True
    assert any("install graphviz" in line for line in lines)
    assert (tmp_path / "mlp_graph.dot").read_text().startswith("digraph backward {")
