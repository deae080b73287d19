"""The examples in the docstrings of tadiff.autograd and tadiff.ops run and print what they
claim."""

import doctest
import importlib

import pytest

MODULES = [
    "tadiff.autograd.tensor",
    "tadiff.autograd.grad_mode",
    "tadiff.autograd.engine",
    "tadiff.autograd.function",
    "tadiff.autograd.anomaly",
    "tadiff.autograd.gradcheck",
    "tadiff.autograd.functional",
    "tadiff.autograd.factories",
    "tadiff.ops.elementwise",
    "tadiff.ops.reductions",
    "tadiff.ops.shape",
    "tadiff.ops.indexing",
    "tadiff.ops.inplace",
    "tadiff.ops.linalg",
]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # anomaly's NaN
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
