"""The examples in the docstrings of tadiff.index run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "__init__",
    "expr",
    "parse",
    "shapes",
    "interpret",
    "printer",
    "derive",
    "simplify",
    "function",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(
        "tadiff.index" if name == "__init__" else f"tadiff.index.{name}"
    )
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
