"""Every example in every tadiff docstring runs and prints what it claims.

One walk over the whole package, so a new module's examples are tested without registering it.
Modules that need an optional extra are skipped when it is absent.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import tadiff

_NEEDS = {
    "tadiff.torch": "torch",
    "tadiff.structured.sinkhorn_triton": "triton",
    "tadiff.ops._batchnorm_numba": "numba",
    "tadiff.ops._elementwise_numba": "numba",
}


def _modules() -> list[str]:
    return sorted(info.name for info in pkgutil.walk_packages(tadiff.__path__, prefix="tadiff."))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # anomaly's NaN
@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    for prefix, extra in _NEEDS.items():
        if name.startswith(prefix) and importlib.util.find_spec(extra) is None:
            pytest.skip(f"{name} needs {extra}")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} failing example(s) in {name}"
