import numpy as np
import pytest

from tadiff._array import namespace


def test_numpy_arrays_and_scalars_get_numpy():
    assert namespace(np.ones(2), 3.0) is np


def test_torch_tensor_gets_torch_even_after_numpy_values():
    torch = pytest.importorskip("torch")
    assert namespace(np.ones(2), torch.ones(2)) is torch


def test_object_can_name_its_own_namespace():
    import types

    mine = types.ModuleType("mine")

    class Wrapped:
        @staticmethod
        def __tadiff_namespace__():
            return mine

    assert namespace(Wrapped()) is mine
