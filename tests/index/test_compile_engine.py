"""Index-notation functions as engine ops: first and second order against central differences.

The oracle of a second derivative is independent of the engine: central differences (float64)
of the first derivative evaluated by the reference interpreter on the derived function.
"""

from __future__ import annotations

import numpy as np
import pytest
from index_oracles import central_vjp

import tadiff as td
from tadiff.errors import DTypeError, ShapeError
from tadiff.index import define

# (definition, shapes): a convolution, a flattening and a function with a delta
SECOND_ORDER_CASES = [
    ("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])", {"x": (2, 2, 7), "w": (3, 2, 3)}),
    ("f[s, t:10] = x[10*s+t] * x[10*s+t] * w[t]", {"x": (30,), "w": (10,)}),
    (
        "y[i,j] = where(i == j, x[i,j] * w[j], 0) + where(i > j, x[i,j] ** 2, 0)",
        {"x": (3, 3), "w": (3,)},
    ),
]


def _tensors(f, shapes, rng):
    return {n: td.tensor(rng.uniform(0.3, 0.9, size=shapes[n]), requires_grad=True) for n in f.args}


@pytest.mark.parametrize("backend", ["auto", "numba"])
@pytest.mark.parametrize(
    ("source", "shapes"), SECOND_ORDER_CASES, ids=[c[0] for c in SECOND_ORDER_CASES]
)
def test_second_order_through_the_engine_matches_central_differences(source, shapes, backend):
    if backend == "numba":
        pytest.importorskip("numba")
    rng = np.random.default_rng(0)
    f = define(source).using(backend)
    ts = _tensors(f, shapes, rng)
    y = f(**ts)
    g = rng.normal(size=y.shape)  # loss = sum(g * y**2) / 2, so dL/dy = g * y
    loss = (td.tensor(g) * y * y).sum() * 0.5
    first = f.args[0]
    (gx,) = td.autograd.grad(loss, [ts[first]], create_graph=True)
    v = rng.normal(size=gx.shape)
    second = td.autograd.grad((td.tensor(v) * gx).sum(), [ts[n] for n in f.args])
    arrays = {n: t.data for n, t in ts.items()}

    def first_derivative(**a):  # dL/d first, by the reference interpreter
        y_ref = f.reference(**a)
        return f.grad(first)(**a, **{f.grad_name: g * y_ref})

    np.testing.assert_allclose(gx.data, first_derivative(**arrays), rtol=1e-12, atol=1e-12)
    for name, got in zip(f.args, second, strict=True):
        expected = central_vjp(first_derivative, arrays, name, v)
        np.testing.assert_allclose(got.data, expected, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize(
    ("source", "shapes"),
    [
        ("y[b,o,t] = sum[c,k](x[b,c,t+2*k] * w[o,c,k])", {"x": (2, 2, 8), "w": (2, 2, 3)}),
        ("f[s, t:4] = sin(x[4*s+t])", {"x": (12,)}),
        ("y[i] = maximum(x[2*i], x[2*i+1]) * w[i]", {"x": (8,), "w": (4,)}),
        ("y[i,j] = where(i == j, exp(x[i,j]), 0)", {"x": (3, 3)}),
        ("z[i,j] = sum[k](x[i,k] * w[k,j])", {"x": (3, 4), "w": (4, 2)}),
    ],
)
def test_gradcheck_and_gradgradcheck(source, shapes):
    f = define(source)
    rng = np.random.default_rng(1)
    ts = _tensors(f, shapes, rng)
    names = list(f.args)

    def call(*xs):
        return f(**dict(zip(names, xs, strict=True)))

    inputs = tuple(ts[n] for n in names)
    assert td.autograd.gradcheck(call, inputs)
    assert td.autograd.gradgradcheck(call, inputs)


def test_float32_tensors_give_float32_results_and_gradients():
    f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    rng = np.random.default_rng(2)
    x = td.tensor(rng.normal(size=(2, 3, 9)).astype(np.float32), requires_grad=True)
    w = td.tensor(rng.normal(size=(4, 3, 3)).astype(np.float32), requires_grad=True)
    y = f(x=x, w=w)
    assert y.data.dtype == np.float32
    y.sum().backward()
    assert x.grad.data.dtype == np.float32 and w.grad.data.dtype == np.float32
    x64, w64 = x.data.astype(np.float64), w.data.astype(np.float64)
    ones = np.ones(y.shape)
    np.testing.assert_allclose(y.data, f(x=x64, w=w64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        x.grad.data, central_vjp(f, {"x": x64, "w": w64}, "x", ones), rtol=1e-4, atol=1e-4
    )


def test_arrays_mixed_with_tensors_are_constants():
    f = define("y[i] = x[i] * w[i]")
    x = td.tensor([1.0, 2.0], requires_grad=True)
    y = f(x=x, w=np.array([3.0, 5.0]))
    y.sum().backward()
    assert x.grad.data.tolist() == [3.0, 5.0]
    assert isinstance(y, td.Tensor)


def test_engine_call_errors_name_the_argument():
    f = define("z[i,j] = sum[k](x[i,k] * w[k,j])")
    x = td.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ShapeError, match="argument w of z is indexed with 2 indices"):
        f(x=x, w=np.ones(3))
    with pytest.raises(ShapeError, match="index 'k'"):
        f(x=x, w=np.ones((4, 2)))
    with pytest.raises(DTypeError, match="argument w of z must be a real number array"):
        f(x=x, w=np.ones((3, 2), dtype=complex))


def test_no_grad_records_nothing_and_backward_skips_unneeded_inputs():
    f = define("y[t] = sum[k](x[t+k] * w[k])")
    x = td.tensor(np.arange(5.0), requires_grad=True)
    w = td.tensor(np.ones(2))
    with td.no_grad():
        assert f(x=x, w=w).grad_fn is None
    f(x=x, w=w).sum().backward()
    assert w.grad is None
    assert x.grad.data.tolist() == [1.0, 2.0, 2.0, 2.0, 1.0]


def test_the_output_is_saved_only_where_a_derivative_reads_it():
    # as torch: exp saves its output, a product does not; modifying a saved output in place
    # before the backward is an error, modifying an unsaved one is not
    from tadiff.errors import AutogradError

    x = td.tensor(np.array([0.5, 1.0, 2.0]), requires_grad=True)
    w = td.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    product = define("y[i] = x[i] * w[i]")
    y = product(x=x, w=w)
    y.mul_(2.0)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.data, 2 * w.data)
    exponential = define("y[i] = exp(x[i])")
    assert exponential.grad_reads_output("x") and not product.grad_reads_output("x")
    y = exponential(x=x)
    y.mul_(2.0)
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        y.sum().backward()
