"""One range rule everywhere: the largest range for which every access, as written, is in
bounds; and a bounds check that reasons over the integers, refusing only real out-of-bounds
reads. Values are checked against explicit NumPy (or brute force) and the reference
interpreter; derivatives against the brute-force scatter oracle."""

from __future__ import annotations

import itertools
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from index_oracles import scatter_vjp
from test_random_definitions import definitions

from tadiff.errors import BoundsError, ShapeError, TadiffError
from tadiff.index.function import define

rng = np.random.default_rng(5)

BACKENDS = ("reference", "numpy", "numba", "triton", "auto")


def _evaluate(fn, arrays, backend):
    """``fn`` on ``arrays`` by the reference interpreter or a compiled backend (Triton in its
    CPU interpreter, tests/conftest.py)."""
    if backend == "reference":
        return fn.reference(**arrays)
    if backend in ("numba", "triton"):
        pytest.importorskip(backend)
    if backend == "triton":
        pytest.importorskip("torch")
    return fn.evaluate(arrays, backend=backend)


# -- output ranges --------------------------------------------------------------------------------


def test_a_shifted_second_access_shortens_the_range():
    x = rng.normal(size=10)
    f = define("y[t] = x[t] + x[t+1]")
    np.testing.assert_array_equal(f(x=x), x[:-1] + x[1:])
    np.testing.assert_array_equal(f.reference(x=x), x[:-1] + x[1:])
    assert [str(b) for b in f.out_ranges[0][1]] == ["x.shape[0] - 2"]  # symbolic
    # the derivation sees the symbolic range: each access contributes where it reads
    assert str(f.grad("x")) == (
        "dx[t:x.shape[0]] = where(t + 2 <= x.shape[0], dy[t], 0) + where(t >= 1, dy[t - 1], 0)"
    )


def test_five_point_stencil_infers_n_minus_2():
    x = rng.normal(size=(7, 6))
    f = define("y[i,j] = 4*x[i+1,j+1] - x[i,j+1] - x[i+2,j+1] - x[i+1,j] - x[i+1,j+2]")
    expected = 4 * x[1:-1, 1:-1] - x[:-2, 1:-1] - x[2:, 1:-1] - x[1:-1, :-2] - x[1:-1, 2:]
    np.testing.assert_allclose(f(x=x), expected, rtol=1e-14, atol=1e-14)
    assert f.output_shape(x=(7, 6)) == (5, 4)


def test_the_convolution_and_the_prefix_sum_use_the_same_rule():
    x, w = rng.normal(size=9), rng.normal(size=3)
    conv = define("y[t] = sum[k](x[t+k] * w[k])")
    np.testing.assert_allclose(conv(x=x, w=w), np.convolve(x, w[::-1], "valid"), rtol=1e-13)
    prefix = define("y[i] = sum[k=0:i+1](x[k])")  # i in a sum bound, read through k
    assert prefix.output_shape(x=(3,)) == (3,)
    np.testing.assert_allclose(prefix(x=x), np.cumsum(x), rtol=1e-13)
    # the largest in-bounds size, 1 here: i + k - j + 2 <= 2 needs i <= 0 at k = j
    f = define("f[i, j:2] = sum[k=0:j+1](x[i+k-j+2])")
    assert f.output_shape(x=(3,)) == (1, 2)


def test_accesses_the_simplifier_drops_still_decide_and_are_checked():
    # 0 * u[s, t] decides s and t; it is still read (0 * inf is nan)
    f = define("f[s,t] = x[10*s+t]**2 + 0*u[s,t]")
    x, u = rng.normal(size=20), rng.normal(size=(2, 10))
    np.testing.assert_array_equal(f(x=x, u=u), x.reshape(2, 10) ** 2)
    assert define("y[i] = x[i] - x[i]").output_shape(x=(2,)) == (2,)
    with pytest.raises(BoundsError, match=r"access x\[i\] is out of bounds.*takes values 0\.\.2"):
        define("y[i:3] = x[i]**0")(x=np.ones(2))
    # the printed definition is the definition as written
    assert str(f) == "f[s, t] = x[10*s + t]**2 + 0 * u[s, t]"


def test_plain_uses_of_different_sizes_are_an_error_naming_both():
    f = define("y[i] = x[i] * w[i]")
    with pytest.raises(ShapeError, match=r"'i' runs over .*x.shape\[0\] = 3.*w.shape\[0\] = 4"):
        f(x=np.ones(3), w=np.ones(4))
    s = define("s[] = sum[k](x[k] * w[k])")
    with pytest.raises(ShapeError, match=r"'k' runs over .*x.shape\[0\] = 3.*w.shape\[0\] = 4"):
        s(x=np.ones(3), w=np.ones(4))


def test_a_plain_use_caps_the_range_under_conditions():
    # i and j appear only under conditions on them: their plain uses still bound them
    f = define("y[i,j] = where(i == j, x[i,j], 0) + where(i > j, 2 * x[i,j], 0)")
    assert f.output_shape(x=(3, 4)) == (3, 4)


def test_sizes_that_are_not_decided():
    with pytest.raises(ShapeError, match="no access bounds it"):
        define("y[i, j] = where(j == 0, x[i], 0)")(x=np.ones(3))
    with pytest.raises(ShapeError, match=r"sizes of output indices s, t of f.*s up to 2, t up to"):
        define("f[s,t] = x[10*s+t]")(x=np.ones(20))
    with pytest.raises(ShapeError, match=r"'t' of y would have size 0.*x\[2\*t \+ k\]"):
        define("y[t] = sum[k](x[2*t+k] * w[k])")(x=np.ones(2), w=np.ones(3))


def test_sum_ranges_from_every_single_index_access():
    d = rng.normal(size=7)
    # plain use and a shifted one: 0 <= k <= 5
    s = define("s[] = sum[k](d[k] * d[k+1])")
    np.testing.assert_allclose(s(d=d), np.dot(d[:-1], d[1:]), rtol=1e-13)
    # an access under a condition on k does not shrink the range
    g = define("s[] = sum[k](where(k >= 1, d[k-1], 0) + d[k])")
    np.testing.assert_allclose(g(d=d), d[:-1].sum() + d.sum(), rtol=1e-13)


def test_zero_sizes_are_refused():
    with pytest.raises(ShapeError, match=r"x of y has shape \(0, 3\).*at least 1"):
        define("y[i] = sum[j](x[i, j])")(x=np.ones((0, 3)))


# -- the bounds check is exact over the integers --------------------------------------------


def test_floor_bounds_are_integer_bounds():
    # c <= floor((l + 1)/2): 2*l - 2*c >= 0 for every integer l, c (rationally, -1 at l = 0)
    f = define("y[l:2] = sum[c=0:floor((l+1)/2)+1](x[2*l - 2*c])")
    x = np.array([1.0, 10.0, 100.0])
    assert f(x=x).tolist() == [1.0, 101.0]  # l = 0: x[0]; l = 1: x[2] + x[0]
    assert f.reference(x=x).tolist() == [1.0, 101.0]


def test_divisibility_over_two_indices():
    f = define("y[e:3, r:1] = where((3*e + r + 1) % 2 == 0, x[(3*e + r + 1)/2], 0)")
    x = np.arange(5.0)
    expected = [[x[(3 * e + 1) // 2] if (3 * e + 1) % 2 == 0 else 0.0] for e in range(3)]
    np.testing.assert_array_equal(f(x=x), expected)
    np.testing.assert_array_equal(f.reference(x=x), expected)


def test_a_fractional_index_without_its_condition_is_refused():
    with pytest.raises(BoundsError, match=r"x\[i/2\] reads a fractional index"):
        define("y[i:3] = x[i/2]")(x=np.ones(2))


def test_a_real_out_of_bounds_read_under_conditions_is_still_refused():
    f = define("y[i:4] = where(i != 2, x[i], 0)")  # i = 3 reads x[3]
    with pytest.raises(BoundsError, match=r"x\[i\].*takes values 0\.\.3.*shape \(3,\)"):
        f(x=np.ones(3))
    g = define("y[i:4] = where(i != 3, x[i], 0)")  # i = 3 is excluded exactly
    assert g(x=np.ones(3)).tolist() == [1.0, 1.0, 1.0, 0.0]


def test_a_derivative_nesting_a_sum_over_its_own_index_evaluates():
    # dx[i, k] nests the forward's sum over k: the bounds check sees two different k
    f = define("y[i:1] = sum[k=0:i+1](x[i, k])**2")
    x = np.array([[0.7], [0.2]])
    g = np.array([1.3])
    grad = f.grad("x")
    expected = scatter_vjp(f, {"x": x}, "x", g)
    np.testing.assert_allclose(grad.reference(x=x, dy=g), expected, rtol=1e-13)
    for backend in BACKENDS:
        got = _evaluate(grad, {"x": x, "dy": g}, backend)
        np.testing.assert_allclose(got, expected, rtol=1e-13, err_msg=backend)
    # and the engine's backward, which runs the same kernels
    import tadiff as td

    xt = td.tensor(x, requires_grad=True)
    (f(x=xt) * td.tensor(g)).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), expected, rtol=1e-13)


def test_a_second_derivative_reusing_an_output_index_as_a_sum_index_evaluates():
    # d/dx of dx[i, k] = ... sum[k1](x[i, k1]) has output indices i, k1 and nests sum[k]
    f = define("y[i:1] = sum[k=0:i+1](x[i, k])**2")
    x, g = np.array([[0.7], [0.2]]), np.array([1.3])
    first = f.grad("x")
    second = first.grad("x")
    args = {"x": x, "dy": g, first.grad_name: np.array([[0.4], [-1.1]])}
    expected = scatter_vjp(first, {"x": x, "dy": g}, "x", args[first.grad_name])
    for backend in BACKENDS:
        got = _evaluate(second, args, backend)
        np.testing.assert_allclose(got, expected, rtol=1e-13, err_msg=backend)


def test_derivatives_of_sums_that_are_empty_for_some_outputs_evaluate():
    # at i = 0 both sums are empty and x[i - 1] = x[-1] is never read: the forward evaluates,
    # and so must every derivative (the transposed ranges must not read out of bounds either)
    x = np.array([0.5, 2.0])
    cases = [
        ("y[i:3] = sum[k=0:i](x[k] * x[i-1])", [0.0, 0.25, 5.0]),
        ("y[i:3] = x[0] + sum[k=i:i-1](x[k+5]) + sum[k=0:i](x[i-1])**2", [0.5, 0.75, 16.5]),
    ]
    g = np.array([0.3, -1.2, 0.7])
    for source, values in cases:
        f = define(source)
        np.testing.assert_allclose(f.reference(x=x), values, rtol=1e-15, err_msg=source)
        expected = scatter_vjp(f, {"x": x}, "x", g)
        for backend in BACKENDS:
            got = _evaluate(f.grad("x"), {"x": x, "dy": g}, backend)
            np.testing.assert_allclose(got, expected, rtol=1e-13, err_msg=f"{source} {backend}")


# -- property: a forward that evaluates has derivatives that evaluate ----------------------------


@st.composite
def with_empty_sums(draw):
    """Random definitions whose sums may be empty for some outputs (``k=0:i`` at i = 0)."""
    source, shapes = draw(definitions())
    if "+ 1]" in source and draw(st.booleans()):
        source = source.replace(" + 1]", "]", 1)  # a triangular sum that starts empty
    return source, shapes


@settings(
    max_examples=40,
    deadline=timedelta(seconds=20),  # examples take about 0.05 s: room for a loaded machine
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(with_empty_sums(), st.integers(0, 2**32 - 1))
def test_every_derivative_of_a_defined_function_evaluates(case, seed):
    source, shapes = case
    f = define(source)
    r = np.random.default_rng(seed)
    arrays = {a: r.uniform(-1, 1, size=shapes[a]) for a in f.args}
    try:
        y = f.reference(**arrays)
    except TadiffError:
        return  # the forward itself does not fit these shapes: nothing to derive
    g = r.normal(size=y.shape)
    for name in f.args:
        derived = f.grad(name).reference(**arrays, **{f.grad_name: g})
        np.testing.assert_allclose(derived, scatter_vjp(f, arrays, name, g), rtol=1e-10, atol=1e-10)


@pytest.mark.slow
@settings(
    max_examples=1000,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(with_empty_sums(), st.integers(0, 2**32 - 1))
def test_every_derivative_evaluates_stress(case, seed):
    """The property above on many more examples (``pytest -m slow``, about a minute and a half)."""
    test_every_derivative_of_a_defined_function_evaluates.hypothesis.inner_test(case, seed)


def test_every_index_position_of_small_definitions_agrees_with_the_interpreter():
    # the static check and the interpreter's own per-access check agree: the check refuses
    # exactly the definitions whose evaluation reads outside (exhaustive over small offsets)
    for a, c, n in itertools.product([-2, -1, 1, 2], [-2, -1, 0, 1, 2], [2, 3]):
        f = define(f"y[i:{n}] = where(i % 2 == 0, x[{a}*i/2 + {c}], 0)")
        reads = [a * i // 2 + c for i in range(0, n, 2)]
        inside = all(0 <= r < 3 for r in reads)
        try:
            f.reference(x=np.ones(3))
            refused = False
        except BoundsError:
            refused = True
        assert refused == (not inside), f
