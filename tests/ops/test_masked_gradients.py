"""Masked backward formulas (relu, clamp, max ties) zero masked-out gradients, like torch."""

import numpy as np
import pytest

import tadiff as td
from tadiff.ops._dual import _masked


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_masked_matches_where_including_nan_and_strided_inputs(dtype):
    rng = np.random.default_rng(0)
    g = rng.standard_normal((5, 7)).astype(dtype)
    g[0, 0], g[1, 1] = np.nan, np.inf
    keep = rng.random((5, 7)) > 0.5
    keep[0, 0] = keep[1, 1] = False
    expected = np.where(keep, g, 0).astype(dtype)
    got = _masked(keep, g)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(_masked(keep.T, g.T), expected.T)


def test_relu_backward_turns_nan_upstream_gradient_into_zero_like_torch():
    torch = pytest.importorskip("torch")
    x = np.array([-1.0, 2.0, -3.0, 4.0])
    upstream = np.array([np.nan, 1.0, np.inf, 2.0])
    t = td.tensor(x, requires_grad=True)
    t.relu().backward(td.tensor(upstream))
    tt = torch.tensor(x, requires_grad=True)
    tt.relu().backward(torch.tensor(upstream))
    np.testing.assert_array_equal(t.grad.numpy(), tt.grad.numpy())


def _torch_and_tadiff(fn, x, dtype):
    """``x.grad`` after ``fn(lib, x).backward()`` in torch and in tadiff."""
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (torch, td):
        t = lib.tensor(x, dtype=getattr(lib, dtype), requires_grad=True)
        fn(lib, t).backward()
        grads.append(t.grad.numpy())
    return grads


FULL_EXTREMES = {
    "max": lambda lib, t: t.max(),
    "min": lambda lib, t: t.min(),
}
ALL_SHARE = {
    # an infinite or NaN upstream gradient stays on the extremes; the rest is exactly 0
    "max * inf": lambda lib, t: t.max() * float("inf"),
    "min * nan": lambda lib, t: t.min() * float("nan"),
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", [*FULL_EXTREMES, *ALL_SHARE])
def test_max_and_min_without_dim_share_the_gradient_among_ties_and_nans_like_torch(name, dtype):
    fn = {**FULL_EXTREMES, **ALL_SHARE}[name]
    cases = [
        np.array([[1.0, 3.0, -2.0], [3.0, -2.0, 3.0]]),  # three tied maxima, two tied minima
        np.array([1.0, np.nan, -2.0, np.nan]),  # NaN is the result: the NaNs share it
        np.array(2.5),  # a 0-d tensor is its own extreme
    ]
    for x in cases:
        expected, got = _torch_and_tadiff(fn, x, dtype)
        # exact: every share is the upstream gradient over a small count of ties
        np.testing.assert_array_equal(got, expected, err_msg=f"{name} of {x}")
        assert got.dtype == expected.dtype


def test_max_without_dim_is_differentiable_twice_like_torch():
    torch = pytest.importorskip("torch")
    x = np.array([1.0, 3.0, -3.0, 2.0])
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    second = []
    for lib in (torch, td):
        t = lib.tensor(x, requires_grad=True)
        (g,) = lib.autograd.grad((t**2).max(), t, create_graph=True)
        (h,) = lib.autograd.grad((g * lib.tensor(weights)).sum(), t)
        second.append((g.detach().numpy(), h.numpy()))
    # x**2 ties at 9 (x = 3 and -3): each gets half of 2x, and its second derivative
    for ours, theirs in zip(second[1], second[0], strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-15)
