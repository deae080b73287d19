"""Derived gradients against two independent oracles: central differences and brute-force scatter.

Every case differentiates with respect to every argument; second order re-derives the derivative
and compares against the same oracles applied to the first derivative.
"""

from __future__ import annotations

import numpy as np
import pytest
from index_oracles import central_vjp, scatter_vjp

from tadiff.errors import BoundsError, InputError
from tadiff.index.function import define

# (definition, argument shapes): the hand-picked corpus of the issue and the brief
CORPUS = [
    ("z[i,j] = sum[k](x[i,k] * w[k,j])", {"x": (2, 3), "w": (3, 2)}),  # matmul
    ("z[b,i,j] = sum[k](x[b,i,k] * w[b,k,j])", {"x": (2, 2, 3), "w": (2, 3, 2)}),  # batched
    ("y[j,i] = x[i,j]", {"x": (2, 3)}),  # transpose
    ("t[] = sum[i](a[i,i])", {"a": (3, 3)}),  # trace
    ("y[i] = c[i,i]", {"c": (3, 3)}),  # diagonal: out(x) = in(x, x)
    ("f[i:2,j:3] = exp(x[3*i+j])", {"x": (8,)}),  # f[i,j] = exp(x[m*i+j]), partial coverage
    ("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])", {"x": (1, 2, 8), "w": (2, 2, 3)}),  # stride
    ("y[t] = sum[k](x[t+2*k] * w[k])", {"x": (9,), "w": (3,)}),  # dilated convolution
    ("y[i] = maximum(x[2*i], x[2*i+1])", {"x": (7,)}),  # max pooling (odd tail unused)
    ("y[i] = sum[k=0:3](x[3*i+k]) / 3", {"x": (9,)}),  # average pooling
    ("f[s, t:4] = x[4*s+t]", {"x": (10,)}),  # flattening, partial coverage
    ("y[i] = x[5-i]", {"x": (6,)}),  # reversal x[9-i] style
    ("y[i] = x[i] * x[i] + sin(x[i])", {"x": (4,)}),  # an argument used twice, same index
    ("y[i,j] = x[i] * x[j]", {"x": (3,)}),  # an argument used twice, different indices
    ("y[i] = sum[k](x[2*k+i] * w[k])", {"x": (9,), "w": (3,)}),  # sum with stride coefficient
    ("y[i, j:3] = x[i] * 2", {"x": (4,)}),  # an unused output index
    ("y[i] = sum[k](d[i+k] * a[k])", {"d": (6,), "a": (3,)}),  # shifted d[i+k]
    (
        "f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))",  # the example
        {"a": (2, 3), "b": (3, 3), "c": (2, 2), "d": (5,)},
    ),
    ("y[i,j] = where(i == j, x[i,j], 0) + where(i > j, 2 * x[i,j], 0)", {"x": (3, 3)}),  # delta
    ("y[i] = x[2*i]", {"x": (7,)}),  # integrality: odd entries of x get zero
    ("y[i:3] = x[3*i+1] * x[i]", {"x": (8,)}),
    ("y[i] = log(x[i]) / sqrt(x[i]) + tanh(x[i]) - cos(x[i]) * tan(x[i]) ** 2", {"x": (3,)}),
    ("y[i] = sigmoid(x[i]) * abs(x[i] - 1) + minimum(x[i], w[i]) ** w[i]", {"x": (3,), "w": (3,)}),
    ("y[i:4] = sum[k=0:i+1](x[k])", {"x": (4,)}),  # triangular (prefix) sum
    ("y[i] = a[] * x[i] + a[]**2", {"a": (), "x": (3,)}),  # a scalar argument
    (  # a bias added to a convolution: the output starts from it (an addend, see root_addend)
        "y[b,o,h,v] = c[o] + sum[k,i,j](x[b,k,h+i,v+j] * w[o,k,i,j])",
        {"c": (2,), "x": (2, 2, 4, 5), "w": (2, 2, 2, 3)},
    ),
    (  # several addends, one of them subtracted, around a subtracted contraction
        "z[i,j] = 2*u[i] - sum[k](x[i,k] * w[k,j]) + exp(v[j])",
        {"u": (3,), "x": (3, 4), "w": (4, 2), "v": (2,)},
    ),
    # regression: k = q - i - 1 >= 0 bounds the gathered sum (i <= q - 1); it must survive the
    # pruning of sum bounds, although 2*q == p + 1 with p >= 0 makes i <= 0 the tighter one
    # over the integers (q >= 1): over the rationals (q = 1/2) the sum would read x[-1, 0]
    (
        "y[i:1] = sum[k=0:1, l=0:1](x[2*k, 0] * w[0] * x[2*i + 2*k + l + 1, i + k + 1])",
        {"x": (3, 2), "w": (1,)},
    ),
    (
        "y[i:1] = sum[k=0:1, l=0:1](x[2*k, 0] * w[0] * x[2*i + 2*k + l + 1, i + k + 1])",
        {"x": (5, 3), "w": (2,)},  # margins: elements of x and w that are never read
    ),
]


def _check(f, shapes, rng, low=0.3, high=0.9):
    arrays = {name: rng.uniform(low, high, size=shapes[name]) for name in f.args}
    y = f.reference(**arrays)
    g = rng.normal(size=y.shape)
    for name in f.args:
        grad = f.grad(name)
        derived = grad.reference(**arrays, **{f.grad_name: g})
        assert derived.shape == arrays[name].shape
        np.testing.assert_allclose(derived, scatter_vjp(f, arrays, name, g), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(derived, central_vjp(f, arrays, name, g), rtol=1e-6, atol=1e-8)
    return arrays, g


@pytest.mark.parametrize(("source", "shapes"), CORPUS, ids=[c[0] for c in CORPUS])
def test_gradient_matches_oracles(source, shapes):
    _check(define(source), shapes, np.random.default_rng(0))


# (definition, shapes, first wrt, second wrt)
SECOND_ORDER = [
    ("z[i,j] = sum[k](x[i,k] * w[k,j])", {"x": (2, 3), "w": (3, 2)}, "x", "w"),
    ("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])", {"x": (1, 2, 7), "w": (2, 2, 3)}, "x", "w"),
    ("y[i] = x[2*i]**3", {"x": (7,)}, "x", "x"),
    ("y[i] = x[2*i]**3", {"x": (7,)}, "x", "dy"),
    ("y[i] = c[i,i]**2", {"c": (3, 3)}, "c", "c"),
    ("f[s, t:3] = exp(x[3*s+t])", {"x": (7,)}, "x", "x"),
    ("y[i:4] = tanh(x[i] * x[i+1])", {"x": (5,)}, "x", "x"),
    (
        "f[i,j] = exp(-sum[k]((a[i,k] + b[j,k])**2 * c[i,i] + d[i+k]**3))",
        {"a": (2, 2), "b": (2, 2), "c": (2, 2), "d": (3,)},
        "d",
        "a",
    ),
    # regression: the first derivative sums j over max(0, p - 1)..0 for odd p; dropping j >= 0
    # because odd p is >= 1 left the second derivative (where p = q + 2*j + 1 and oddness is an
    # inner condition) reading dy[., -1]
    ("y[i:2, j:1] = where(2*i < j + 1, x[2*i+1] * x[2*i-2*j] + x[0], 0)", {"x": (4,)}, "x", "x"),
    ("y[i:2, j:1] = where(2*i < j + 1, x[2*i+1] * x[2*i-2*j] + x[0], 0)", {"x": (6,)}, "x", "x"),
    # without + x[0]: its second derivative once had a sum over j wider than its accesses
    # (dy[(q + 2*j)/2, j] at j = -1), refused by the bounds check
    ("y[i:2, j:1] = where(2*i < j + 1, x[2*i+1] * x[2*i-2*j], 0)", {"x": (4,)}, "x", "x"),
]


@pytest.mark.parametrize(
    ("source", "shapes", "first", "second"),
    SECOND_ORDER,
    ids=[f"{c[0]} {c[2]},{c[3]}" for c in SECOND_ORDER],
)
def test_second_order_by_rederivation(source, shapes, first, second):
    rng = np.random.default_rng(1)
    f = define(source)
    arrays = {name: rng.uniform(0.2, 0.8, size=shapes[name]) for name in f.args}
    g = rng.normal(size=f.reference(**arrays).shape)
    g1 = f.grad(first)
    args1 = {**arrays, f.grad_name: g}
    gg = rng.normal(size=g1(**args1).shape)
    g2 = g1.grad(second)
    derived = g2(**args1, **{g1.grad_name: gg})
    np.testing.assert_allclose(derived, scatter_vjp(g1, args1, second, gg), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(derived, central_vjp(g1, args1, second, gg), rtol=1e-6, atol=1e-8)


# -- readable derived text -----------------------------------------------------------------------


def test_matmul_gradients_are_plain_sums():
    f = define("z[i,j] = sum[k](x[i,k] * w[k,j])")
    assert str(f.grad("x")) == "dx[i, k] = sum[j=0:w.shape[1]](dz[i, j] * w[k, j])"
    assert str(f.grad("w")) == "dw[k, j] = sum[i=0:x.shape[0]](dz[i, j] * x[i, k])"


def test_strided_convolution_input_gradient_has_exact_window():
    f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    assert str(f.grad("x")) == (
        "dx[b, c, p:x.shape[2]] = sum[o=0:w.shape[0], "
        "t=max(0, ceil((p - w.shape[2] + 1)/2)):min(dy.shape[2], floor(p/2) + 1)]"
        "(dy[b, o, t] * w[o, c, p - 2*t])"
    )
    assert str(f.grad("w")) == (
        "dw[o, c, k:w.shape[2]] = "
        "sum[b=0:x.shape[0], t=0:dy.shape[2]](dy[b, o, t] * x[b, c, k + 2*t])"
    )


def test_diagonal_gradient_is_a_delta():
    # Halide gets out(x) = in(x, x) wrong; here it is a delta on the two indices of c
    assert str(define("y[i] = c[i,i]").grad("c")) == "dc[i, p:c.shape[0]] = where(i == p, dy[i], 0)"


def test_stride_two_access_gives_integrality_condition():
    # odd entries of x and entries past 2*len(y) get zero
    assert str(define("y[i] = x[2*i]").grad("x")) == (
        "dx[p:x.shape[0]] = where(p % 2 == 0 and p + 2 <= 2*dy.shape[0], dy[p/2], 0)"
    )


def test_huge_stride_is_exact():
    # exact integers throughout: no int64 overflow in Smith form or Fourier–Motzkin (TVM's issue)
    f = define("y[i:2] = x[1000000007*i + 3]")
    g = f.grad("x")
    assert str(g) == (
        "dx[p:x.shape[0]] = where((p + 1000000004) % 1000000007 == 0 and p <= 1000000010, "
        "dy[(p - 3)/1000000007], 0)"
    )
    # with 6 elements of x the forward's y[1] would read x[1000000010]: no derivative there
    with pytest.raises(BoundsError, match=r"access x\[1000000007\*i \+ 3\] is out of bounds"):
        g(x=np.ones(6), dy=np.array([2.0, 5.0]))
    # the printed derivative alone (it reads only dy and the size of x) is defined there:
    # only x[3] gets a gradient, from y[0]
    again = define(str(g))
    assert again.args == ("x", "dy") and again.shape_only == {"x"}
    np.testing.assert_array_equal(again(x=np.ones(6), dy=np.array([2.0, 5.0])), [0, 0, 0, 2, 0, 0])


def test_elementwise_gradient_reuses_forward_value():
    # d exp(u) = exp(u): the derivative refers to the forward node, not a recomputation rule
    f = define("y[i] = exp(x[i])")
    g = f.grad("x")
    assert str(g) == "dx[i] = dy[i] * exp(x[i])"
    assert g.body.args[1] is f.body  # the very same hash-consed node


def test_shifted_access_gradient_range():
    f = define("y[i] = sum[k](d[i+k] * a[k])")
    assert str(f.grad("d")) == (
        "dd[p:d.shape[0]] = "
        "sum[i=max(0, p - a.shape[0] + 1):min(dy.shape[0], p + 1)](dy[i] * a[p - i])"
    )


def test_no_simplification_leftovers_in_power_rule():
    # TensorAlgDiff prints ** (2 - 1); tadiff folds it
    assert str(define("y[i] = x[i]**2").grad("x")) == "dx[i] = 2 * dy[i] * x[i]"


# -- max/min subgradient convention --------------------------------------------------------------


def test_maximum_and_minimum_split_ties_evenly():
    x = np.array([1.0, 2.0, 3.0])
    w = np.array([1.0, 1.0, 5.0])
    g = np.array([1.0, 1.0, 1.0])
    fmax = define("y[i] = maximum(x[i], w[i])")
    gx = fmax.grad("x")(x=x, w=w, dy=g)
    gw = fmax.grad("w")(x=x, w=w, dy=g)
    np.testing.assert_array_equal(gx, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gw, [0.5, 0.0, 1.0])
    # at the tie this is exactly what a central difference measures
    np.testing.assert_allclose(gx, central_vjp(fmax, {"x": x, "w": w}, "x", g), atol=1e-9)
    fmin = define("y[i] = minimum(x[i], w[i])")
    np.testing.assert_array_equal(fmin.grad("x")(x=x, w=w, dy=g), [0.5, 0.0, 1.0])
    np.testing.assert_array_equal(fmin.grad("w")(x=x, w=w, dy=g), [0.5, 1.0, 0.0])


def test_maximum_of_a_value_with_itself_has_derivative_one():
    f = define("y[i] = maximum(x[i], x[i]) + minimum(x[i], x[i])")
    np.testing.assert_array_equal(f.grad("x")(x=np.ones(2), dy=np.ones(2)), [2.0, 2.0])


# -- vjp and errors ------------------------------------------------------------------------------


def test_vjp_returns_every_argument_gradient():
    rng = np.random.default_rng(3)
    f = define("z[i,j] = sum[k](x[i,k] * w[k,j])")
    x, w, g = rng.normal(size=(2, 3)), rng.normal(size=(3, 4)), rng.normal(size=(2, 4))
    grads = f.vjp(g, x=x, w=w)
    np.testing.assert_allclose(grads["x"], g @ w.T, rtol=1e-12)
    np.testing.assert_allclose(grads["w"], x.T @ g, rtol=1e-12)


def test_grad_of_unknown_argument_is_an_error():
    with pytest.raises(InputError, match="no argument 'q'"):
        define("y[i] = x[i]").grad("q")


def test_incoming_gradient_must_have_output_shape():
    f = define("y[t] = sum[k](x[2*t+k] * w[k])")
    with pytest.raises(InputError, match=r"dy must have the shape of y, \(3,\)"):
        f.grad("x")(x=np.ones(8), w=np.ones(3), dy=np.ones(4))


def test_latex_of_derivative():
    text = define("y[i] = x[2*i]").grad("x").latex()
    expected = r"\mathit{dx}_{p} = \left[2 \mid p, p + 2 \leq 2 N^{dy}_{0}\right] "
    assert text == expected + r"\mathit{dy}_{\frac{p}{2}}"


# -- Jacobian by a Kronecker delta for the incoming gradient --------------------------------------


@pytest.mark.parametrize(
    ("source", "shapes"),
    [
        ("y[i] = x[2*i]", {"x": (7,)}),
        ("y[i] = c[i,i]**2", {"c": (3, 3)}),
        ("z[i,j] = sum[k](x[i,k] * w[k,j])", {"x": (2, 3), "w": (3, 2)}),
        ("y[t] = sum[k](x[2*t+k] * w[k])", {"x": (7,), "w": (3,)}),
    ],
)
def test_jacobian_matches_central_differences(source, shapes):
    rng = np.random.default_rng(5)
    f = define(source)
    arrays = {name: rng.uniform(0.3, 0.9, size=shapes[name]) for name in f.args}
    wrt = f.args[0]
    jac = f.jacobian(wrt).reference(**arrays)
    out_shape = f.reference(**arrays).shape
    assert jac.shape == out_shape + arrays[wrt].shape
    for idx in np.ndindex(*out_shape):
        g = np.zeros(out_shape)
        g[idx] = 1.0  # row idx of the Jacobian is the VJP with a one-hot upstream gradient
        np.testing.assert_allclose(jac[idx], central_vjp(f, arrays, wrt, g), atol=1e-8)


def test_jacobian_of_convolution_has_no_leftover_deltas():
    assert str(define("y[t] = sum[k](x[2*t+k] * w[k])").jacobian("w")) == (
        "Jw[t1, k] = x[2*t1 + k]"
    )


def test_conditions_in_the_forward_become_deltas_and_half_spaces():
    f = define("y[i,j] = where(i == j, x[i,j], 0) + where(i > j, 2 * x[i,j], 0)")
    assert (
        str(f.grad("x"))
        == "dx[i, j] = where(i == j, dy[i, j], 0) + where(i >= j + 1, 2 * dy[i, j], 0)"
    )


def test_division_by_a_constant_stays_a_division():
    # 1/3 is inexact in floating point: keep dy / 3 rather than 0.333... * dy
    f = define("y[i] = sum[k=0:3](x[3*i+k]) / 3")
    assert str(f.grad("x")) == (
        "dx[p:x.shape[0]] = "
        "sum[i=max(0, ceil((p - 2)/3)):min(dy.shape[0], floor(p/3) + 1)](dy[i] / 3)"
    )
    assert str(define("y[i] = x[5-i]").grad("x")) == (
        "dx[p:x.shape[0]] = where(p <= 5 and p + dy.shape[0] >= 6, dy[5 - p], 0)"
    )


def test_divisibility_tightens_lower_bounds():
    # an odd p is at least 1: no "p >= 1" next to "(p + 1) % 2 == 0"
    text = str(define("y[i] = maximum(x[2*i], x[2*i+1])").grad("x"))
    assert "(p + 1) % 2 == 0 and p + 1 <= 2*dy.shape[0]," in text
    assert "p >= 1" not in text


def test_one_derivation_serves_every_shape():
    f = define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])")
    grad = f.grad("x")  # derived once, sizes symbolic
    rng = np.random.default_rng(9)
    for xs, ws in [((1, 2, 7), (2, 2, 3)), ((2, 1, 10), (1, 1, 2)), ((1, 1, 5), (3, 1, 5))]:
        arrays = {"x": rng.normal(size=xs), "w": rng.normal(size=ws)}
        g = rng.normal(size=f.reference(**arrays).shape)
        np.testing.assert_allclose(
            grad.reference(**arrays, dy=g), scatter_vjp(f, arrays, "x", g), rtol=1e-12, atol=1e-12
        )
    assert f.grad("x") is grad
