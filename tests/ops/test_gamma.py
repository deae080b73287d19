"""lgamma, digamma, polygamma: values against mpmath (50 digits) over a wide range, negative
arguments and the poles as torch defines them."""

import math

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import InputError

mpmath = pytest.importorskip("mpmath")

GRID = np.concatenate([
    np.linspace(-9.75, 40.0, 797),
    [1e-8, 0.5, 1.0, 2.0, 1e3, 1e5, 123.456, -0.5, -3.25],
])  # fmt: skip
GRID = GRID[~((GRID <= 0) & (np.floor(GRID) == GRID))]


def _reference(fn):
    return np.array([float(fn(mpmath.mpf(float(v)))) for v in GRID])


def test_lgamma_matches_mpmath():
    ref = np.array([math.lgamma(v) for v in GRID])  # libm, accurate to an ulp or so
    got = td.lgamma(td.tensor(GRID)).data
    np.testing.assert_allclose(got, ref, rtol=5e-14, atol=5e-14)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_digamma_and_polygamma_match_mpmath(n):
    with mpmath.workdps(30):
        ref = _reference(lambda v: mpmath.polygamma(n, v))
    got = td.polygamma(n, td.tensor(GRID)).data
    np.testing.assert_allclose(got, ref, rtol=2e-12, atol=0)
    if n == 0:
        np.testing.assert_array_equal(td.digamma(td.tensor(GRID)).data, got)


def test_poles_follow_torch():
    torch = pytest.importorskip("torch")
    x = np.array([0.0, -0.0, -1.0, -2.0])
    for name in ("lgamma", "digamma"):
        np.testing.assert_array_equal(
            getattr(td, name)(td.tensor(x)).data, getattr(torch, name)(torch.tensor(x)).numpy()
        )
    for n in (1, 2, 3):
        np.testing.assert_array_equal(
            td.polygamma(n, td.tensor(x[:1])).data, torch.polygamma(n, torch.tensor(x[:1])).numpy()
        )
    assert td.lgamma(td.tensor([2.5], dtype=td.float32)).dtype == np.float32
    with pytest.raises(InputError, match="n must be a non-negative int"):
        td.polygamma(-1, td.tensor([1.0]))
