"""The examples run and keep their promises (accuracy reached, losses agree with torch)."""

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mlp_moons_reaches_its_stated_accuracy(capsys):
    module = _load("mlp_moons")
    assert module.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("train acc") == 30  # one line per epoch
    final = float(out.split("final test accuracy ")[1].split("%")[0]) / 100
    assert final >= module.TARGET_ACCURACY


@pytest.mark.parametrize(("dtype", "optimizer"), [("float32", "adam"), ("float64", "sgd")])
def test_compare_with_torch_agrees(capsys, dtype, optimizer):
    pytest.importorskip("torch")
    module = _load("compare_with_torch")
    assert module.main(["--dtype", dtype, "--optimizer", optimizer, "--epochs", "3"]) == 0
    assert "agree within" in capsys.readouterr().out


def test_cnn_shapes_reaches_its_stated_accuracy(capsys):
    module = _load("cnn_shapes")
    assert module.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("train acc") == 12  # one line per epoch
    final = float(out.split("final test accuracy ")[1].split("%")[0]) / 100
    assert final >= module.TARGET_ACCURACY


def test_mlp_moons_picture_without_graphviz_writes_the_dot_text(tmp_path, monkeypatch, capsys):
    from tadiff import viz

    monkeypatch.setattr(viz, "dot_available", lambda: False)
    module = _load("mlp_moons")
    module.main(["--epochs", "1", "--quiet", "--picture", str(tmp_path / "graph.svg")])
    captured = capsys.readouterr()
    assert "graphviz `dot` not found" in captured.out and "apt-get install graphviz" in captured.out
    assert (tmp_path / "graph.dot").read_text().startswith("digraph backward {")
    assert not (tmp_path / "graph.svg").exists()
    assert captured.err == ""  # --quiet: no progress


def test_examples_show_progress_unless_quiet(capsys):
    module = _load("gaussian_process")
    module.main(["--steps", "5"])
    shown = capsys.readouterr().err
    module.main(["--steps", "5", "--quiet"])
    assert "Adam steps" in shown and capsys.readouterr().err == ""
