"""tadiff.utils.checkpoint: same values and gradients as without it, intermediates not kept."""

import gc
import weakref

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import AutogradError, InputError
from tadiff.utils.checkpoint import checkpoint


def _grads(use_checkpoint):
    td.manual_seed(0)
    model = td.nn.Sequential(
        td.nn.Linear(4, 8), td.nn.Tanh(), td.nn.Dropout(0.3), td.nn.Linear(8, 2)
    ).double()
    x = td.tensor(np.random.default_rng(1).standard_normal((5, 4)), requires_grad=True)
    td.manual_seed(7)  # the dropout mask: drawn again in the recomputation, from this state
    y = checkpoint(model, x) if use_checkpoint else model(x)
    td.rand(3)  # moves the generator on: the recomputation must restore its state
    (y * y).sum().backward()
    return [y.data, x.grad.data, *(p.grad.data for p in model.parameters())]


def test_values_and_gradients_equal_those_without_checkpoint():
    # Two code paths (recomputed inside checkpoint's backward, or recorded once) running the same
    # float64 operations: equal to rounding. Another dropout mask would change entries by O(1).
    for a, b in zip(_grads(True), _grads(False), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)


def test_intermediates_are_not_kept_and_tuple_outputs_work():
    refs = []

    def block(x, scale):
        h = x * scale
        refs.append(weakref.ref(h))
        return h.sin(), h.cos() * 0

    x = td.tensor([0.5, 1.0], dtype=td.float64, requires_grad=True)
    a, _ = checkpoint(block, x, 3.0)
    gc.collect()
    assert refs[0]() is None  # nothing of the forward's graph survives
    a.sum().backward()
    np.testing.assert_allclose(x.grad.data, 3 * np.cos(3 * x.data))


def test_errors():
    x = td.tensor([1.0], requires_grad=True)
    with pytest.raises(InputError, match="must be callable"):
        checkpoint(3, x)
    y = checkpoint(lambda t: (t * t).sum(), x)
    with pytest.raises(AutogradError, match="create_graph=True is not supported"):
        td.autograd.grad(y, x, create_graph=True)
