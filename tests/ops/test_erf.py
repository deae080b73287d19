"""Vectorized erf/erfc against the standard library (dense grids, both dtypes), PyTorch, and
their gradients (gradcheck, second order)."""

import math

import numpy as np
import pytest

import tadiff as td
from tadiff.ops._erf import erf_array, erfc_array

GRID = np.concatenate([np.linspace(-6, 6, 24001), np.linspace(-27, 27, 5401)])


def _reference(fn, values):
    return np.array([fn(float(v)) for v in values])


def test_float64_matches_math_to_rounding():
    erf, erfc = erf_array(GRID), erfc_array(GRID)
    expected_erf, expected_erfc = _reference(math.erf, GRID), _reference(math.erfc, GRID)
    nonzero = expected_erf != 0
    assert np.max(np.abs(erf - expected_erf)[nonzero] / np.abs(expected_erf[nonzero])) < 1e-14
    assert np.all(erf[~nonzero] == 0)
    normal = expected_erfc > np.finfo(np.float64).tiny  # subnormal results carry no precision
    relative = np.abs(erfc - expected_erfc)[normal] / expected_erfc[normal]
    # the fitted tail polynomial is good to 2e-14; the far tail is limited by exp(-z²), whose
    # argument z² is rounded: about z² ulp more
    assert np.all(relative <= 2e-14 + 2 * GRID[normal] ** 2 * np.finfo(np.float64).eps)


def test_float32_stays_float32_and_matches_math():
    z = GRID.astype(np.float32)
    erf, erfc = erf_array(z), erfc_array(z)
    assert erf.dtype == erfc.dtype == np.float32
    expected_erf, expected_erfc = _reference(math.erf, z), _reference(math.erfc, z)
    nonzero = expected_erf != 0
    rel = np.abs(erf - expected_erf)[nonzero] / np.abs(expected_erf[nonzero])
    assert rel.max() < 4 * np.finfo(np.float32).eps
    normal = expected_erfc > np.finfo(np.float32).tiny
    rel = np.abs(erfc - expected_erfc)[normal] / expected_erfc[normal]
    assert rel.max() < 16 * np.finfo(np.float32).eps  # 1 - erf just below |z| = 1: erfc 0.16


def test_special_values():
    z = np.array([0.0, -0.0, 1e-300, -1e-12, np.inf, -np.inf, np.nan])
    erf, erfc = erf_array(z), erfc_array(z)
    assert erf[0] == 0 and np.signbit(erf[1]) and erf[4] == 1 and erf[5] == -1
    assert erf[2] == pytest.approx(2 / math.sqrt(math.pi) * 1e-300, rel=1e-15)
    assert erfc[4] == 0 and erfc[5] == 2 and erfc[0] == 1
    assert np.isnan(erf[6]) and np.isnan(erfc[6])
    assert erf_array(np.array([1, 2])).dtype == np.float64  # integers compute in float64


def test_ops_match_torch_and_are_twice_differentiable():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        x = (rng.standard_normal(1000) * 3).astype(dtype)
        for ours, theirs in ((td.erf, torch.erf), (td.erfc, torch.special.erfc)):
            got, expected = ours(td.tensor(x)), theirs(torch.from_numpy(x))
            assert got.dtype == dtype
            tol = 1e-6 if dtype == np.float32 else 1e-14
            np.testing.assert_allclose(got.data, expected.numpy(), rtol=tol, atol=tol)
    x = td.tensor(rng.standard_normal(5) * 2, requires_grad=True)
    for fn in (td.erf, td.erfc, lambda t: t.erf() * t.erfc()):
        assert td.autograd.gradcheck(fn, (x,))
        assert td.autograd.gradgradcheck(fn, (x,))
    assert td.erf(x).grad_fn.name() == "ErfBackward0"
