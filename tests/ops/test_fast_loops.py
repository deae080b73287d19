"""The compiled element-wise loops (Numba): the exponential against an exact oracle, its
special values and fallbacks, the masked selection and ReLU against NumPy's and torch's exact
results, and the ops that use them against torch."""

import numpy as np
import pytest

import tadiff as td
from tadiff.ops import fast_loops
from tadiff.ops.fast_loops import (
    _masked_numpy,
    exp_array,
    masked_array,
    relu_array,
    relu_grad_array,
)

pytest.importorskip("numba")

# long double carries 11 more bits than float64 on x86 (an exact oracle there); where it does
# not (other platforms), NumPy's exp, within half an ulp, is the oracle and the bound 1.5 ulp
WIDE = np.finfo(np.longdouble).eps < np.finfo(np.float64).eps / 2
ORACLE, BOUND = (np.longdouble, 1.0 + 2.0**-10) if WIDE else (np.float64, 1.5)


@pytest.fixture
def compiled_from_one(monkeypatch):
    """Every float64 array takes the compiled loop, whatever its size."""
    monkeypatch.setattr(fast_loops, "FAST_LOOP_MIN_SIZE", 1)


def _ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    exact = np.exp(x.astype(ORACLE))
    with np.errstate(over="ignore"):  # beyond float64's range: inf, left out below
        rounded = exact.astype(np.float64)
    normal = np.isfinite(rounded) & (rounded >= np.finfo(np.float64).tiny)
    return np.abs(got[normal].astype(ORACLE) - exact[normal]) / np.spacing(rounded[normal])


def test_the_compiled_exp_is_within_one_ulp_and_special_values_are_exp_s(compiled_from_one):
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-746, 710, 200_000), rng.standard_normal(100_000) * 3])
    assert _ulps(exp_array(x), x).max() <= BOUND
    specials = np.array([0.0, -0.0, 1e-300, np.inf, -np.inf, np.nan, 709.79, 710.0, -746.0])
    with np.errstate(over="ignore"):
        want = np.exp(specials)
    np.testing.assert_array_equal(exp_array(specials), want)  # NaN equal to NaN here
    # results in the subnormal range: exact to the two smallest subnormals
    tiny = np.linspace(-744.0, -709.0, 1001)
    np.testing.assert_allclose(
        exp_array(tiny), np.exp(tiny), rtol=0, atol=2 * np.finfo(np.float64).smallest_subnormal
    )


def test_the_compiled_float32_exp_is_within_one_ulp_of_the_rounded_value(compiled_from_one):
    # float32's correctly rounded value: the float64 exp of the float32 input, rounded once
    x = np.concatenate([np.linspace(-103.0, 88.7, 400_001), [0.0, 1e-30, -1e-30]])
    x = x.astype(np.float32)
    got = exp_array(x)
    assert got.dtype == np.float32
    rounded = np.exp(x.astype(np.float64)).astype(np.float32)
    normal = rounded >= np.finfo(np.float32).tiny
    ulps = np.abs(got[normal].astype(np.float64) - rounded[normal]) / np.spacing(rounded[normal])
    assert ulps.max() <= 1.0
    specials = np.array([np.inf, -np.inf, np.nan, 89.0, -104.0], np.float32)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(exp_array(specials), np.exp(specials))


def test_exp_array_writes_in_place_and_falls_back_to_numpy_where_it_does_not_apply(
    compiled_from_one,
):
    x = np.linspace(-5, 5, 64)
    inplace = x.copy()
    assert exp_array(inplace, out=inplace) is inplace
    assert _ulps(inplace, x).max() <= BOUND
    # a strided view, float16 and an integer array take np.exp: its exact results and dtypes
    strided = np.linspace(-5, 5, 128)[::2]
    np.testing.assert_array_equal(exp_array(strided), np.exp(strided))
    half = x.astype(np.float16)
    assert exp_array(half).dtype == np.float16
    np.testing.assert_array_equal(exp_array(half), np.exp(half))
    np.testing.assert_array_equal(exp_array(np.arange(4)), np.exp(np.arange(4)))


def test_small_arrays_keep_numpy_s_exp_exactly():
    # below the size threshold nothing changes: NumPy's own results, bit for bit
    x = np.linspace(-5, 5, fast_loops.FAST_LOOP_MIN_SIZE - 1)
    np.testing.assert_array_equal(exp_array(x), np.exp(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_ops_built_on_exp_match_torch_on_large_inputs(dtype):
    # exp, sigmoid, softmax, log_softmax and logsumexp, values and gradients, on 3 x 8192
    # values (above the threshold: the compiled loop). Tolerances of a few ulp of the dtype:
    # both libraries' exp are within an ulp, sums of 8192 terms add a few more
    torch = pytest.importorskip("torch")
    x = (np.random.default_rng(1).standard_normal((3, 8192)) * 4).astype(dtype)
    upstream = np.random.default_rng(2).standard_normal((3, 8192)).astype(dtype)
    rtol = 1e-13 if dtype == np.float64 else 2e-5
    cases = [
        ("exp", lambda m, t: m.exp(t)),
        ("sigmoid", lambda m, t: m.sigmoid(t)),
        ("softmax", lambda m, t: m.softmax(t, 1)),
        ("log_softmax", lambda m, t: m.log_softmax(t, 1)),
        ("logsumexp", lambda m, t: m.logsumexp(t, 1)),
    ]
    for name, op in cases:
        ours_x = td.tensor(x, requires_grad=True)
        theirs_x = torch.tensor(x, requires_grad=True)
        ours, theirs = op(td, ours_x), op(torch, theirs_x)
        g = upstream[:, :1] if ours.ndim == 1 else upstream  # logsumexp: one value per row
        (ours * td.tensor(g.reshape(ours.shape))).sum().backward()
        (theirs * torch.tensor(g.reshape(ours.shape))).sum().backward()
        assert ours.dtype == ours_x.grad.dtype == td.tensor(x).dtype
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=rtol, err_msg=name)
        # a softmax-type gradient subtracts a row sum from each element (y (g - sum(g y))):
        # where the two nearly cancel, both libraries keep only absolute accuracy, so the
        # gradients agree to rtol of their largest element
        want = theirs_x.grad.numpy()
        scale = np.abs(want).max()
        np.testing.assert_allclose(
            ours_x.grad.data, want, rtol=rtol, atol=rtol * scale, err_msg=name
        )


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_masked_and_relu_loops_select_exactly_as_numpy_and_torch(compiled_from_one, dtype):
    # selections, no arithmetic: the compiled loops must equal the NumPy path bit for bit,
    # signs of zero and NaN included
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal(4096).astype(dtype)
    x[:6] = [-0.0, 0.0, np.nan, np.inf, -np.inf, -1e-30]
    g = rng.standard_normal(4096).astype(dtype)
    g[6:9] = [np.nan, -0.0, np.inf]
    keep = x > 0
    keep[6:8] = [False, True]  # a NaN gradient dropped, a -0.0 kept
    got = masked_array(keep, g)
    want = _masked_numpy(keep, g)
    assert got.dtype == dtype
    np.testing.assert_array_equal(
        got.view(got.dtype.str.replace("f", "i")), want.view(want.dtype.str.replace("f", "i"))
    )
    assert got[6] == 0.0 and np.signbit(got[7])
    relu = relu_array(x)
    expected = torch.relu(torch.from_numpy(x)).numpy()
    assert relu.dtype == dtype
    np.testing.assert_array_equal(np.signbit(relu), np.signbit(expected))
    np.testing.assert_array_equal(relu, expected)  # NaN equal to NaN here


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_relu_gradient_loop_selects_exactly_as_the_numpy_path(compiled_from_one, dtype):
    # a selection from the output's sign: bit for bit the masked NumPy path's result (NaN in
    # the output passes the gradient, -0.0 and 0 stop it, NaN gradients are dropped or kept)
    rng = np.random.default_rng(7)
    result = np.maximum(rng.standard_normal(4096), 0).astype(dtype)
    result[:6] = [-0.0, 0.0, np.nan, np.inf, 1e-30, 0.0]
    g = rng.standard_normal(4096).astype(dtype)
    g[:6] = [1.0, 2.0, 3.0, -0.0, np.nan, np.nan]
    got = relu_grad_array(result, g)
    want = _masked_numpy(~(result <= 0), g)
    assert got.dtype == dtype
    as_bits = dtype().dtype.str.replace("f", "i")
    np.testing.assert_array_equal(got.view(as_bits), want.view(as_bits))
    assert got[0] == 0 and got[1] == 0 and got[2] == 3 and np.signbit(got[3]) and got[5] == 0


def test_the_relu_gradient_falls_back_to_numpy_where_the_loop_does_not_apply(compiled_from_one):
    rng = np.random.default_rng(8)
    result = np.maximum(rng.standard_normal((8, 16)), 0)
    g = rng.standard_normal((8, 16))
    want = np.where(result > 0, g, 0)
    for r, grad in (
        (result, g[:, ::-1]),  # a strided gradient
        (result.astype(np.float32), g),  # mixed dtypes (a gradient in the wider one)
        (result[0, 0], g[0, 0]),  # 0-d
    ):
        got = relu_grad_array(r, np.asarray(grad))
        expected = np.where(np.asarray(r) > 0, grad, 0)
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(relu_grad_array(result, g), want)


def test_masked_and_relu_fall_back_to_numpy_where_the_loops_do_not_apply(compiled_from_one):
    x = np.linspace(-2, 2, 64)
    strided = np.linspace(-2, 2, 128)[::2]
    np.testing.assert_array_equal(relu_array(strided), strided.clip(0, np.inf))
    half = x.astype(np.float16)
    assert relu_array(half).dtype == np.float16
    keep = np.broadcast_to(np.array([True, False]), (32, 2))  # a broadcast mask: not contiguous
    g = np.ones((32, 2))
    np.testing.assert_array_equal(masked_array(keep, g), np.where(keep, g, 0))
    np.testing.assert_array_equal(masked_array(x > 0, half), np.where(x > 0, half, 0))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize(
    ("keep_shape", "shape"),
    [((48, 48, 1), (48, 48, 3)), ((1, 48, 1), (48, 48, 3)), ((48, 1), (48, 48, 3)),
     ((2048, 1), (2048, 8)), ((2048, 1), (2048, 9)), ((8, 1), (8, 3)), ((), (48, 48, 3))],
)  # fmt: skip
def test_a_broadcast_mask_selects_exactly_as_numpy_where(dtype, keep_shape, shape):
    """A where-condition broadcast along a short last axis is copied to the gradient's shape
    first (from 1 024 values): the selection stays NumPy's, NaN masked to exactly 0."""
    rng = np.random.default_rng(5)
    keep = rng.random(keep_shape) < 0.5
    g = rng.standard_normal(shape).astype(dtype)
    g.flat[::7] = np.nan
    got = masked_array(keep, g)
    expected = np.where(keep, g, 0).astype(dtype)
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_array_equal(got, expected)  # NaN where kept, exactly 0 where not
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(
    ("cond", "sa", "sb"),
    [((48, 48, 1), (48, 48, 3), (48, 48, 3)), ((48, 48, 1), (48, 48, 3), (3,)),
     ((48, 48), (48, 48), (1,)), ((4, 1), (4, 3), (4, 3))],
)  # fmt: skip
def test_where_with_a_broadcast_condition_has_torchs_gradients(dtype, cond, sa, sb):
    """The ray caster's ``where(hit.unsqueeze(-1), colour, image)`` and smaller: selections,
    so the gradients equal torch's exactly where nothing is summed, and to rounding where a
    broadcast input's gradient is (float32 sums of up to 2 304 terms: 1e-5 relative)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    condition = rng.random(cond) < 0.5
    values = [rng.standard_normal(s) for s in (sa, sb)]
    upstream = rng.standard_normal(np.broadcast_shapes(cond, sa, sb))
    grads = []
    for m in (td, torch):
        a, b = (m.tensor(v, dtype=getattr(m, dtype), requires_grad=True) for v in values)
        out = m.where(m.tensor(condition), a, b)
        (out * m.tensor(upstream, dtype=getattr(m, dtype))).sum().backward()
        grads.append([np.asarray(t.grad.numpy(), np.float64) for t in (a, b)])
    tol = 1e-12 if dtype == "float64" else 1e-5
    for ours, theirs in zip(*grads, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(16, 8, 16, 16), (2, 3)])
def test_relu_and_clamp_gradients_match_torch_at_zero_and_nan(dtype, shape):
    # above the threshold (the compiled loops) and below (NumPy); selections: exact equality
    # with torch, whose ReLU passes the gradient where the input is NaN and clamp does not
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[:4] = [0.0, -0.0, np.nan, 1.0]
    upstream = rng.standard_normal(x.shape).astype(dtype)
    for name, op in (
        ("relu", lambda m, t: m.relu(t)),
        ("clamp", lambda m, t: m.clamp(t, -0.5, 0.5)),
    ):
        ours_x, theirs_x = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        ours, theirs = op(td, ours_x), op(torch, theirs_x)
        (ours * td.tensor(upstream)).sum().backward()
        (theirs * torch.tensor(upstream)).sum().backward()
        np.testing.assert_array_equal(ours.data, theirs.detach().numpy(), err_msg=name)
        np.testing.assert_array_equal(ours_x.grad.data, theirs_x.grad.numpy(), err_msg=name)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_pooling_gradient_on_a_large_batch_with_ties_matches_torch(dtype):
    # 32 768 windows' gradients written through the compiled put loop: after a ReLU most
    # windows hold tied zeros, and the gradient goes to each window's first maximum as in
    # torch. Selections only: exact equality
    torch = pytest.importorskip("torch")
    x = np.maximum(np.random.default_rng(5).standard_normal((16, 8, 32, 32)), 0).astype(dtype)
    upstream = np.random.default_rng(6).standard_normal((16, 8, 16, 16)).astype(dtype)
    ours_x, theirs_x = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours = td.nn.functional.max_pool2d(ours_x, 2)
    theirs = torch.nn.functional.max_pool2d(theirs_x, 2)
    (ours * td.tensor(upstream)).sum().backward()
    (theirs * torch.tensor(upstream)).sum().backward()
    np.testing.assert_array_equal(ours.data, theirs.detach().numpy())
    np.testing.assert_array_equal(ours_x.grad.data, theirs_x.grad.numpy())


def test_a_numba_that_fails_to_import_leaves_the_numpy_paths_with_one_warning(monkeypatch):
    # Numba installed but broken (built for another NumPy, say): the ops must still run
    import importlib
    import sys

    from tadiff import _optional

    def broken(name, *args, **kwargs):
        raise ImportError(f"{name} was built for another NumPy")

    _optional._imports.cache_clear()
    monkeypatch.delitem(sys.modules, "numba", raising=False)  # as before its first import
    monkeypatch.setattr(importlib, "import_module", broken)
    try:
        x = np.linspace(-3, 3, fast_loops.FAST_LOOP_MIN_SIZE)
        with pytest.warns(RuntimeWarning, match="numba is installed but fails to import"):
            assert not fast_loops.loops_apply(x)
        np.testing.assert_array_equal(exp_array(x), np.exp(x))  # NumPy's own result, no warning
    finally:
        monkeypatch.undo()
        _optional._imports.cache_clear()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_put_writes_a_strided_gradient_as_numpy_s_assignment(compiled_from_one, monkeypatch, dtype):
    # the interior of a padded array (a convolution's cropped input gradient) written at
    # flat positions through the compiled loop: a pure copy, so exactly NumPy's values
    loops = []
    run = fast_loops._run
    monkeypatch.setattr(fast_loops, "_run", lambda loop, *a: (loops.append(loop), run(loop, *a)))
    rng = np.random.default_rng(3)
    padded = rng.standard_normal((4, 3, 10, 10)).astype(dtype)
    values = padded[:, :, 1:-1, 1:-1]
    assert not values.flags.c_contiguous
    positions = rng.permutation(4 * 3 * 16 * 16)[: values.size].reshape(values.shape)
    want = np.zeros((4, 3, 16, 16), dtype)
    want.reshape(-1)[positions.reshape(-1)] = values.reshape(-1)
    got = fast_loops.put_array(values, positions.astype(np.int64), want.shape)
    assert loops == [fast_loops._elementwise().put] and got.dtype == dtype
    np.testing.assert_array_equal(got, want)
