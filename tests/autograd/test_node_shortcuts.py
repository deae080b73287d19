"""Backward nodes with a shortcut ahead of their formulas (same-shape add/sub, mul, one-key
select/slice) and node methods with per-class code: gradients against closed forms and central
differences, in plain and recorded (``create_graph``) passes, with inputs that need no gradient."""

import numpy as np
import pytest

import tadiff as td
from tadiff.autograd.graph import _PER_CLASS_METHODS, Node
from tadiff.ops import derivatives as d


def _central(fn, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``fn`` at ``x`` (float64: error O(eps^2) ~ 1e-12,
    plus rounding ~1e-16/eps ~ 1e-10, so 1e-7 tolerances leave a wide margin)."""
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        grad[i] = (fn(up) - fn(down)) / (2 * eps)
    return grad


def _check(program, *arrays: np.ndarray) -> None:
    """Gradient and Hessian-vector product (create_graph) of the scalar ``program`` against
    central differences of the program run on plain values."""
    xs = [td.tensor(a, requires_grad=True) for a in arrays]
    out = program(*xs)
    grads = td.autograd.grad(out, xs, create_graph=True)
    for k, a in enumerate(arrays):

        def value(v, k=k):
            args = [td.tensor(b) for b in arrays]
            args[k] = td.tensor(v)
            return program(*args).item()

        np.testing.assert_allclose(grads[k].data, _central(value, a), rtol=1e-7, atol=1e-8)
    # second derivatives: the recorded pass takes the formulas' path
    direction = sum((g * td.tensor(np.cos(np.arange(g.numel()) + 1.0).reshape(g.shape))).sum()
                    for g in grads)  # fmt: skip
    hvps = td.autograd.grad(direction, xs, allow_unused=True)
    for k, a in enumerate(arrays):

        def first(v, k=k):
            args = [td.tensor(b, requires_grad=True) for b in arrays]
            args[k] = td.tensor(v, requires_grad=True)
            gs = td.autograd.grad(program(*args), args, create_graph=True)
            return sum((g * td.tensor(np.cos(np.arange(g.numel()) + 1.0).reshape(g.shape)))
                       .sum() for g in gs).item()  # fmt: skip

        expected = _central(first, a, eps=1e-5)
        got = np.zeros_like(a) if hvps[k] is None else hvps[k].data
        # the first derivative is itself exact here, so eps=1e-5 gives ~1e-10 truncation
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


RNG = np.random.default_rng(7)
A, B = RNG.standard_normal(5), RNG.standard_normal(5)


@pytest.mark.parametrize(
    "program",
    [
        lambda a, b: ((a + b) * (a - b) * a).sum(),  # same shapes: the shortcuts
        lambda a, b: ((a - b) ** 3).sum() + (b - a).sin().sum(),
        lambda a, b: (a * b * b).sum(),
        lambda a, b: (a.reshape(5, 1) + b - a * b.reshape(5, 1)).exp().sum(),  # broadcasting
        lambda a, b: a[2] * b[1:4].sum() - a[0:2].prod() * b[4] + a[-1] * a[-1],
        lambda a, b: (td.stack([a, b, a * b]) ** 2).sum() + td.stack([a, b], dim=1).sin().sum(),
        lambda a, b: (td.stack([a[0], b[1], a[2] * b[3]]) * td.stack(list(b[:3]))).sum(),
        lambda a, b: (a / (b * b + 1)).sum() + (a.reshape(5, 1) / (b + 3)).sum() + a[1] / b[2],
        lambda a, b: td.linalg.vector_norm(a) * b.norm() + td.stack([a, b]).norm(dim=0).sum(),
    ],
    ids=[
        "add-sub",
        "sub-cubed",
        "mul",
        "broadcast",
        "select-slice",
        "stack",
        "stack-scalars",
        "div",
        "norm",
    ],
)
def test_shortcut_nodes_match_central_differences(program) -> None:
    _check(program, A, B)


def test_shortcuts_skip_inputs_that_need_no_gradient() -> None:
    a = td.tensor(A, requires_grad=True)
    c = td.tensor(B)  # a constant: its edge is None
    for out, expected in [
        ((c - a).sum(), -np.ones(5)),
        ((a - c).sum(), np.ones(5)),
        ((a + c).sum(), np.ones(5)),
        ((c * a).sum(), B),
        ((a * c).sum(), B),
        ((a / c).sum(), 1 / B),
        ((c / a).sum(), -B / A**2),
        ((td.stack([c, a, c]) * td.tensor([1.0, 2.0, 3.0]).reshape(3, 1)).sum(), 2 * np.ones(5)),
    ]:
        (g,) = td.autograd.grad(out, a)
        # a quotient's gradient rounds up to three times, in another order than here
        np.testing.assert_allclose(g.data, expected, rtol=1e-15, atol=0)


def test_sums_of_zero_dimensional_elements() -> None:
    # Python's sum over a tensor: one add node per element, the case the shortcut is for
    x = td.tensor(A, requires_grad=True)
    total = sum(x * x)
    total.backward()
    np.testing.assert_allclose(x.grad.data, 2 * A, rtol=1e-15)  # 2a, one rounding at most


def test_one_key_select_and_slice_gradients_are_scattered_rows() -> None:
    x = td.tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    out = (x[1] * 2).sum() + (x[2:4] * 3).sum() + (x[1] * x[3]).sum()
    out.backward()
    expected = np.zeros((4, 3))
    expected[1] = 2 + x.data[3]
    expected[2:4] = 3
    expected[3] += x.data[1]
    np.testing.assert_allclose(x.grad.data, expected, rtol=1e-15)
    assert x.grad.dtype == td.float64


def test_one_key_select_keeps_float32() -> None:
    x = td.tensor(np.arange(6.0).reshape(3, 2), dtype=td.float32, requires_grad=True)
    y = x * 1  # not a leaf: its gradient is the scatter's array as it comes
    y.retain_grad()
    (y[1] * y[2]).sum().backward()
    assert y.grad.dtype == td.float32
    np.testing.assert_array_equal(y.grad.data, [[0, 0], [4, 5], [2, 3]])


def test_every_node_class_has_its_own_copy_of_the_hot_methods() -> None:
    classes = [d.AddBackward0, d.MulBackward0, d.SinBackward0, d.UnbindBackward0, d.CatBackward0]
    for name in _PER_CLASS_METHODS:
        codes = {id(getattr(cls, name).__code__) for cls in classes}
        assert len(codes) == len(classes), name
    # the copies keep what introspection shows of the original
    assert d.SinBackward0._unpack.__qualname__ == "Node._unpack"
    assert d.SinBackward0._unpack.__doc__ == Node._unpack.__doc__
    assert d.SinBackward0._apply.__qualname__ == "OpNode._apply"


def test_a_subclass_using_zero_argument_super_still_works() -> None:
    class Doubled(d.OpNode):
        __slots__ = ()
        vjps = (lambda F, g: g,)

        def _apply(self, g, create_graph):
            return [2 * out for out in super()._apply(g, create_graph)]

    x = td.tensor([1.0, 2.0], requires_grad=True)
    y = td.autograd.graph.record(Doubled, x.data * 1.0, (x,))
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 2.0])


def test_norm_gradient_is_zero_where_the_norm_is_zero() -> None:
    # torch's convention at 0 (the general formula); the other rows take the quotient x / |x|
    x = td.tensor([[0.0, 0.0], [3.0, 4.0]], dtype=td.float64, requires_grad=True)
    x.norm(dim=1).sum().backward()
    assert not x.grad.data[0].any()  # exactly 0, not NaN
    np.testing.assert_allclose(x.grad.data[1], [0.6, 0.8], rtol=1e-15)  # two roundings
    y = td.tensor([3.0, 4.0], dtype=td.float64, requires_grad=True)
    y.norm().backward()
    np.testing.assert_allclose(y.grad.data, [0.6, 0.8], rtol=1e-15)
