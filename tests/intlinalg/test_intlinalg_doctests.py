"""The examples in the intlinalg docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["affine", "smith", "solve", "fourier_motzkin", "demo"])
def test_docstring_examples(name):
    module = importlib.import_module(f"tadiff.intlinalg.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
