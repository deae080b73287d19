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
