"""The examples of the seed document (PyTorch internals notes), reproduced exactly."""

import numpy as np
import pytest

import tadiff as td
from tadiff.autograd import AccumulateGrad
from tadiff.errors import AutogradError


def _seed_graph():
    a = td.tensor(2.0, requires_grad=True)
    b = td.tensor(3.0)
    c = a * b
    d = td.tensor(4.0, requires_grad=True)
    e = c * d
    return a, b, c, d, e


def test_e_equals_abd_gradients_and_accumulation():
    a, b, c, d, e = _seed_graph()
    e.backward(retain_graph=True)
    assert a.grad.item() == 12.0  # b * d
    assert d.grad.item() == 6.0  # a * b
    assert b.grad is None  # b does not require grad
    assert c.grad is None  # non-leaf: not retained
    e.backward()
    assert a.grad.item() == 24.0  # accumulated across calls
    assert d.grad.item() == 12.0


def test_grad_fn_and_next_functions_shape():
    a, b, c, d, e = _seed_graph()
    assert e.grad_fn.name() == "MulBackward0"
    (n0, i0), (n1, i1) = e.grad_fn.next_functions
    assert n0 is c.grad_fn and n0.name() == "MulBackward0" and i0 == 0
    assert isinstance(n1, AccumulateGrad) and n1.variable is d and i1 == 0
    (m0, j0), (m1, j1) = c.grad_fn.next_functions
    assert isinstance(m0, AccumulateGrad) and m0.variable is a and j0 == 0
    assert m1 is None and j1 == 0  # b needs no gradient
    assert a.is_leaf and b.is_leaf and d.is_leaf and not c.is_leaf and not e.is_leaf
    assert repr(e).startswith("tensor(24., grad_fn=<MulBackward0>")


def test_second_backward_without_retain_graph_raises_torch_error():
    _, _, _, _, e = _seed_graph()
    e.backward()
    with pytest.raises(AutogradError, match="backward through the graph a second time"):
        e.backward()


def test_implicit_gradient_only_for_scalar_outputs():
    x = td.rand(1, 3, requires_grad=True)
    y = td.rand(1, 3, requires_grad=True)
    out = x * y
    with pytest.raises(AutogradError, match="grad can be implicitly created only for scalar"):
        out.backward()
    out.backward(td.tensor([[1.0, 1.0, 1.0]]))
    np.testing.assert_array_equal(x.grad.data, y.data)
    np.testing.assert_array_equal(y.grad.data, x.data)


def test_unbind_routes_gradients_to_the_right_slots():
    xyz = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x, _y, z = xyz.unbind()
    out = x * z
    (n0, i0), (n1, i1) = out.grad_fn.next_functions
    assert n0 is n1 and n0.name() == "UnbindBackward0"
    assert (i0, i1) == (0, 2)
    out.backward()
    np.testing.assert_array_equal(xyz.grad.data, [3.0, 0.0, 1.0])  # [z, 0, x]


def test_float32_graph_gives_float32_gradients():
    a, _, _, d, e = _seed_graph()
    e.backward()
    assert a.dtype == np.float32 and a.grad.dtype == np.float32 and d.grad.dtype == np.float32
