"""The reverse pass: order, accumulation, retain_graph, create_graph, grad(), inputs=, modes."""

import threading
import weakref

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import AutogradError, ShapeError


def test_gradients_summed_over_every_path_before_a_node_runs():
    # y is used by three consumers; its node must run once with the summed gradient
    x = td.tensor([0.5, -1.0], dtype="float64", requires_grad=True)
    y = x.sin()
    calls = []
    y.grad_fn.register_prehook(lambda grads: calls.append(grads[0].data.copy()))
    z = (y * y + y.exp() + 3 * y).sum()
    z.backward()
    xd = x.data
    s = np.sin(xd)
    assert len(calls) == 1
    np.testing.assert_allclose(calls[0], 2 * s + np.exp(s) + 3)
    np.testing.assert_allclose(x.grad.data, (2 * s + np.exp(s) + 3) * np.cos(xd))


def test_second_and_third_derivatives_against_closed_forms():
    x = td.tensor([0.3, 1.7], dtype="float64", requires_grad=True)
    y = (x.sin() * x**3).sum()
    (g1,) = td.autograd.grad(y, x, create_graph=True)
    (g2,) = td.autograd.grad(g1.sum(), x, create_graph=True)
    (g3,) = td.autograd.grad(g2.sum(), x)
    a = x.data
    s, c = np.sin(a), np.cos(a)
    np.testing.assert_allclose(g1.data, c * a**3 + 3 * a**2 * s)
    np.testing.assert_allclose(g2.data, -s * a**3 + 6 * a**2 * c + 6 * a * s)
    np.testing.assert_allclose(g3.data, -c * a**3 - 9 * a**2 * s + 18 * a * c + 6 * s)


def test_backward_create_graph_makes_grad_differentiable():
    x = td.tensor(2.0, dtype="float64", requires_grad=True)
    (x**4).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad and g.item() == 32.0  # 4x^3
    (h,) = td.autograd.grad(g, x)
    assert h.item() == 48.0  # 12x^2


def test_freed_buffers_error_only_when_needed():
    a = td.tensor([1.0, 2.0], requires_grad=True)
    s = (a + 1).sum()  # AddBackward0 and SumBackward0 save no tensors
    s.backward()
    s.backward()  # fine: nothing freed was needed
    np.testing.assert_array_equal(a.grad.data, [2.0, 2.0])
    m = (a * a).sum()  # MulBackward0 saves its inputs
    m.backward()
    with pytest.raises(AutogradError, match="retain_graph=True"):
        m.backward()


def test_retain_graph_keeps_buffers():
    a = td.tensor([1.0, 2.0], requires_grad=True)
    m = (a * a).sum()
    m.backward(retain_graph=True)
    m.backward()
    np.testing.assert_array_equal(a.grad.data, [4.0, 8.0])


def test_grad_does_not_touch_dot_grad_and_handles_unused():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    w = td.tensor([3.0, 4.0], requires_grad=True)
    unused = td.tensor(1.0, requires_grad=True)
    out = (x * w).sum()
    (gx,) = td.autograd.grad(out, x, retain_graph=True)
    assert x.grad is None and w.grad is None
    np.testing.assert_array_equal(gx.data, w.data)
    with pytest.raises(AutogradError, match="appears to not have been used in the graph"):
        td.autograd.grad(out, [x, unused], retain_graph=True)
    gx, gu = td.autograd.grad(out, [x, unused], allow_unused=True, retain_graph=True)
    assert gu is None
    _, gz = td.autograd.grad(out, [x, unused], materialize_grads=True)
    assert gz.item() == 0.0


def test_grad_with_respect_to_intermediate_tensor():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    out = (h * h).sum()
    (gh,) = td.autograd.grad(out, h)
    np.testing.assert_array_equal(gh.data, 2 * h.data)
    assert x.grad is None


def test_backward_inputs_accumulates_only_there():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    w = td.tensor([3.0, 4.0], requires_grad=True)
    (x * w).sum().backward(inputs=[w])
    assert x.grad is None
    np.testing.assert_array_equal(w.grad.data, x.data)


def test_non_scalar_gradient_argument_and_shape_check():
    x = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    with pytest.raises(ShapeError, match="Mismatch in shape"):
        y.backward(td.ones(2))
    y.backward(td.tensor([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.grad.data, [2.0, 0.0, -2.0])


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(AutogradError, match="does not require grad and does not have a grad_fn"):
        td.ones(2).sum().backward()


def test_leaf_backward_and_dtype_cast_of_gradient_argument():
    x = td.tensor([1.0, 2.0], requires_grad=True)
    x.backward(np.array([3.0, 4.0]))  # float64 gradient for a float32 leaf is cast
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad.data, [3.0, 4.0])


def test_long_chain_is_iterative():
    x = td.tensor(1.0, dtype="float64", requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y * 1.0
    y.backward()
    assert x.grad.item() == 1.0


def test_no_grad_enable_grad_and_set_grad_enabled():
    x = td.tensor([1.0], requires_grad=True)
    with td.no_grad():
        assert not (x * 2).requires_grad
        with td.enable_grad():
            assert (x * 2).requires_grad
    td.set_grad_enabled(False)
    try:
        assert not td.is_grad_enabled()
    finally:
        td.set_grad_enabled(True)
    with td.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert td.is_grad_enabled()

    @td.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad and (x * 2).requires_grad


def test_grad_mode_is_thread_local():
    seen = []

    def worker():
        seen.append(td.is_grad_enabled())

    with td.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert not td.is_grad_enabled()
    assert seen == [True]


def test_gradient_of_multiple_outputs_and_grad_outputs():
    x = td.tensor([1.0, 2.0], dtype="float64", requires_grad=True)
    a, b = x * 2, x * x
    gx = td.autograd.grad(
        [a, b], x, [td.ones(2, dtype="float64"), td.tensor([1.0, 10.0], dtype="float64")]
    )
    np.testing.assert_array_equal(gx[0].data, [2 + 2, 2 + 40])


@pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning"
)  # the NaN is the point
def test_anomaly_mode_names_op_and_forward_location():
    x = td.tensor([0.0, 1.0], requires_grad=True)
    with td.autograd.detect_anomaly():
        y = td.sqrt(x) * 0  # 0 * inf = nan in the backward of sqrt at 0
        with pytest.raises(AutogradError, match="'SqrtBackward0' returned nan") as info:
            y.sum().backward()
    assert "test_engine.py" in str(info.value)
    assert not td.autograd.is_anomaly_enabled()


def test_dot_grad_accumulates_in_place_like_torch():
    x = td.tensor([1.0], requires_grad=True)
    (x * 2).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g and g.item() == 5.0


_MADE: list = []  # what _FreshGrad's backward returned (weak or strong references)


class _FreshGrad(td.autograd.Function):
    """``2 * x``, whose backward returns a new array and remembers it (weakly or strongly)."""

    @staticmethod
    def forward(ctx, x, keep):
        ctx.keep = keep
        return 2 * x.data

    @staticmethod
    def backward(ctx, grad):
        fresh = 2 * grad.data
        _MADE.append(fresh if ctx.keep else weakref.ref(fresh))
        return fresh, None


def test_leaf_keeps_an_unshared_first_gradient_without_copying():
    x = td.tensor(np.arange(6.0), requires_grad=True)
    _MADE.clear()
    _FreshGrad.apply(x, False).sum().backward()
    assert _MADE[0]() is x.grad.data  # adopted: nothing else held it
    np.testing.assert_array_equal(x.grad.data, np.full(6, 2.0))
    # a second pass adds in place into that array, as for any owned .grad
    _FreshGrad.apply(x, False).sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.full(6, 4.0))


def test_leaf_copies_a_gradient_someone_else_still_holds():
    x = td.tensor(np.arange(6.0), requires_grad=True)
    _MADE.clear()
    _FreshGrad.apply(x, True).sum().backward()
    held = _MADE[0]
    assert x.grad.data is not held and not np.shares_memory(x.grad.data, held)
    x.grad.data[0] = 99.0
    assert held[0] == 2.0


def test_leaves_sharing_one_upstream_gradient_get_separate_arrays():
    # ``a + b`` sends the same array to both leaves: neither may adopt it
    a = td.tensor(np.ones(5000), requires_grad=True)
    b = td.tensor(np.ones(5000), requires_grad=True)
    c = td.tensor(np.ones(5000), requires_grad=True)
    ((a + b) * c).sum().backward()
    assert not np.shares_memory(a.grad.data, b.grad.data)
    a.grad.data[:] = 7.0
    np.testing.assert_array_equal(b.grad.data, np.ones(5000))


def test_gradient_argument_and_views_are_never_adopted():
    x = td.tensor(np.zeros((4, 3)), requires_grad=True)
    seed = np.ones((4, 3))
    x.backward(seed)  # a leaf's own gradient argument
    assert not np.shares_memory(x.grad.data, seed)
    y = td.tensor(np.zeros(12), requires_grad=True)
    upstream = np.arange(12.0).reshape(3, 4)
    y.reshape(3, 4).backward(upstream)  # the leaf's gradient is a view of the argument
    assert not np.shares_memory(y.grad.data, upstream)
    np.testing.assert_array_equal(y.grad.data, np.arange(12.0))


def test_grad_with_respect_to_every_leaf_equals_the_pruned_pass():
    # grad(loss, all leaves) runs the unpruned pass and captures at the leaves; asking for a
    # subset (or for a non-leaf) prunes: both must give the same gradients, and neither may
    # touch .grad
    rng = np.random.default_rng(0)
    a = td.tensor(rng.standard_normal(4), requires_grad=True)
    b = td.tensor(rng.standard_normal(4), requires_grad=True)
    h = (a * b).exp()
    loss = (h * a).sum() + (b**2).sum()
    ga, gb = td.autograd.grad(loss, [a, b], retain_graph=True)
    (ga_only,) = td.autograd.grad(loss, [a], retain_graph=True)
    gh, gb_too = td.autograd.grad(loss, [h, b], retain_graph=True)
    np.testing.assert_allclose(ga.data, ga_only.data, rtol=1e-6)
    np.testing.assert_allclose(gb.data, gb_too.data, rtol=1e-6)
    np.testing.assert_allclose(gh.data, a.data, rtol=1e-6)  # d loss / d h = a
    assert a.grad is None and b.grad is None
    # create_graph through the unpruned pass: the second derivative is right
    x = td.tensor(1.5, dtype=td.float64, requires_grad=True)
    (g,) = td.autograd.grad(x**3, [x], create_graph=True)
    assert td.autograd.grad(g, [x])[0].item() == pytest.approx(9.0)
    # backward(inputs=every leaf) accumulates like a plain backward
    loss.backward(inputs=[a, b])
    np.testing.assert_allclose(a.grad.data, ga.data, rtol=1e-6)
