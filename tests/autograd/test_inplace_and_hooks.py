"""In-place ops with version counters; tensor and node hooks; retain_grad."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import AutogradError, DTypeError


def test_inplace_rebases_the_graph_with_correct_gradients():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    w = td.tensor([3.0, 5.0], requires_grad=True)
    y = x * 1
    y.mul_(w)
    y += 2
    y.sub_(x, alpha=0.5)
    assert y._version == 3
    assert y.grad_fn.name() == "SubBackward0"
    y.sum().backward()
    # y = x * w + 2 - 0.5 x
    np.testing.assert_array_equal(x.grad.data, w.data - 0.5)
    np.testing.assert_array_equal(w.grad.data, x.data)


def test_modifying_a_saved_input_raises_naming_the_op():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = h * h  # MulBackward0 saves h
    h.add_(1)
    with pytest.raises(AutogradError, match=r"saved tensor 0 of MulBackward0 .* is at version 1"):
        y.sum().backward()


def test_modifying_a_saved_result_raises():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()  # ExpBackward0 saves its result
    y.mul_(2)
    with pytest.raises(AutogradError, match=r"ExpBackward0 .* is at version 1"):
        y.sum().backward()


def test_inplace_on_a_view_of_a_saved_tensor_bumps_the_shared_counter():
    x = td.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    h = x * 1
    y = (h * h).sum()
    with td.no_grad():
        h[0].fill_(0.0)  # h[0] is a view: the version counter is shared with h
    assert h._version == 1
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        y.backward()


def test_inplace_on_leaf_requiring_grad_is_refused_but_allowed_under_no_grad():
    w = td.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(AutogradError, match="leaf Variable that requires grad"):
        w.add_(1)
    with td.no_grad():
        w -= 0.5
    np.testing.assert_array_equal(w.data, [0.5, 1.5])
    assert w.is_leaf and w.requires_grad


def test_setitem_records_index_put():
    x = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = td.tensor(10.0, requires_grad=True)
    buf = x * 1
    buf[1] = v * 2
    (buf * td.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(buf.data, [1.0, 20.0, 3.0])
    np.testing.assert_array_equal(x.grad.data, [1.0, 0.0, 3.0])
    assert v.grad.item() == 4.0


def test_zero_fill_copy():
    t = td.ones(3)
    t.zero_()
    np.testing.assert_array_equal(t.data, 0)
    t.fill_(2.5)
    np.testing.assert_array_equal(t.data, 2.5)
    t.copy_(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(t.data, [1, 2, 3])
    assert t.dtype == np.float32 and t._version == 3


def test_inplace_dtype_error():
    t = td.tensor([1, 2])
    with pytest.raises(DTypeError, match="can't be cast to the desired output type int64"):
        t.add_(0.5)


def test_tensor_hooks_modify_gradients_leaf_and_non_leaf():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    seen = []
    y.register_hook(lambda g: seen.append(g.data.copy()))
    handle = y.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: g + 1)
    y.sum().backward()
    np.testing.assert_array_equal(seen[0], [1.0, 1.0])
    np.testing.assert_array_equal(x.grad.data, [31.0, 31.0])  # (1 * 10) * 3 + 1
    handle.remove()
    x.grad = None
    (x * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [4.0, 4.0])


def test_retain_grad_on_non_leaf():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    h.retain_grad()
    assert h.retains_grad
    (h * 3).sum().backward()
    np.testing.assert_array_equal(h.grad.data, [3.0, 3.0])
    np.testing.assert_array_equal(x.grad.data, 6 * x.data)


def test_node_hooks_see_and_replace_gradients():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    log = []

    def post(grad_inputs, grad_outputs):
        log.append((grad_inputs[0].data.copy(), grad_outputs[0].data.copy()))
        return (grad_inputs[0] * 0, *grad_inputs[1:])

    y.grad_fn.register_hook(post)
    y.sum().backward()
    np.testing.assert_array_equal(log[0][0], [2.0, 2.0])
    np.testing.assert_array_equal(log[0][1], [1.0, 1.0])
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.0])


def test_hook_on_tensor_without_grad_raises():
    with pytest.raises(AutogradError, match="doesn't require gradient"):
        td.ones(2).register_hook(lambda g: g)


def test_hooks_under_create_graph_are_differentiable():
    x = td.tensor([1.5], dtype="float64", requires_grad=True)
    y = x * x
    y.register_hook(lambda g: g * x)  # gradient becomes x * g: d/dx (x * 2x) = 4x
    (g,) = td.autograd.grad(y.sum(), x, create_graph=True)
    np.testing.assert_allclose(g.data, [2 * 1.5 * 1.5])
    (h,) = td.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(h.data, [4 * 1.5])


def test_hooks_and_retain_grad_on_outputs_of_a_multi_output_node():
    xyz = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x, y, z = xyz.unbind()
    y.register_hook(lambda g: g * 100)
    z.retain_grad()
    (x * 2 + y * 3 + z * 4).backward()
    np.testing.assert_array_equal(xyz.grad.data, [2.0, 300.0, 4.0])
    assert z.grad.item() == 4.0 and x.grad is None


def test_backward_inputs_on_non_leaf_accumulates_into_it():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    (h * h).sum().backward(inputs=[h])
    np.testing.assert_array_equal(h.grad.data, 2 * h.data)
    assert x.grad is None
