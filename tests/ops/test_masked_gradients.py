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
