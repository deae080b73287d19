"""examples/lstm_addition.py keeps its promise: an LSTM learns multi-digit addition."""

import importlib.util
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "lstm_addition.py"


def _load():
    spec = importlib.util.spec_from_file_location("lstm_addition", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_sums_are_the_digits_of_a_plus_b():
    module = _load()
    inputs, targets = module.make_sums(50, np.random.default_rng(0))
    powers = 10 ** np.arange(module.DIGITS + 1)
    a = (inputs[:, :, :10].argmax(-1) * powers[:, None]).sum(0)
    b = (inputs[:, :, 10:].argmax(-1) * powers[:, None]).sum(0)
    np.testing.assert_array_equal((targets * powers[:, None]).sum(0), a + b)


def test_lstm_learns_to_add_to_the_stated_accuracy(capsys):
    module = _load()
    untrained = module.Adder()
    inputs, targets = module.make_sums(1000, np.random.default_rng(1))
    assert module.exact_accuracy(untrained, inputs, targets) < 0.05  # chance is 1e-6
    assert module.main([]) == 0
    out = capsys.readouterr().out
    final = float(out.split("final test accuracy ")[1].split("%")[0]) / 100
    assert final >= module.TARGET_ACCURACY
