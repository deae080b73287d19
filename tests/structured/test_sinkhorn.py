"""Sinkhorn–Knopp kernels on NumPy arrays: forward, implicit backward solvers, errors.

Oracles: central differences of a converged float64 forward, exact algebraic identities (constant
marginal sums), and agreement of independent solvers on the same system.
"""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tadiff.errors import (
    ConvergenceError,
    ConvergenceWarning,
    DTypeError,
    InputError,
    ShapeError,
)
from tadiff.structured.sinkhorn import (
    choose_backward,
    sinkhorn,
    sinkhorn_forward,
    sinkhorn_vjp,
)

SOLVERS = ["implicit", "implicit-2n", "direct"]


def _marginals(rng, batch, n, m):
    a = rng.uniform(0.5, 2.0, (*batch, n))
    b = rng.uniform(0.5, 2.0, (*batch, m))
    b *= a.sum(-1, keepdims=True) / b.sum(-1, keepdims=True)
    return a, b


def _converged(X, a=None, b=None):
    return sinkhorn_forward(X, a, b, iters=5000, tol=1e-14)[0]


# ---------------------------------------------------------------------------- forward


@pytest.mark.parametrize("log_domain", [False, True])
@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 5), (2, 6, 2)])
def test_forward_reaches_the_requested_marginals(shape, log_domain):
    rng = np.random.default_rng(0)
    X = rng.normal(size=shape) * 2
    a, b = _marginals(rng, shape[:-2], *shape[-2:])
    R, stats = sinkhorn_forward(X, a, b, iters=5000, tol=1e-13, log_domain=log_domain)
    assert stats.log_domain is log_domain
    np.testing.assert_allclose(R.sum(-1), a, atol=1e-12)
    np.testing.assert_allclose(R.sum(-2), b, atol=1e-12)
    # The fixed point has the form diag(x) exp(X) diag(y): log R − X is a rank-2 sum.
    L = np.log(R) - X
    np.testing.assert_allclose(L - L[..., :1, :] - L[..., :, :1] + L[..., :1, :1], 0, atol=1e-9)


def test_default_marginals_square_and_rectangular():
    X = np.random.default_rng(1).normal(size=(2, 3, 6))
    R = _converged(X)
    np.testing.assert_allclose(R.sum(-1), 1, atol=1e-12)
    np.testing.assert_allclose(R.sum(-2), 0.5, atol=1e-12)  # n / m


def test_iteration_order_columns_then_rows_against_hand_written_loop():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(4, 5, 5))
    P = np.exp(X)
    for _ in range(3):
        P = P / P.sum(-2, keepdims=True)
        P = P / P.sum(-1, keepdims=True)
    R, stats = sinkhorn_forward(X, iters=3, warn_tol=None)  # 3 iterations on purpose
    assert stats.iterations == 3 and stats.residual is None
    np.testing.assert_allclose(R, P, rtol=1e-13)
    R_log, _ = sinkhorn_forward(X, iters=3, log_domain=True, warn_tol=None)
    np.testing.assert_allclose(R_log, P, rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 5),
    m=st.integers(1, 5),
    seed=st.integers(0, 2**31 - 1),
    shift=st.floats(-300, 300),
)
def test_row_and_column_shifts_of_X_do_not_change_R(n, m, seed, shift):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2, n, m))
    rows, cols = rng.normal(size=(2, n, 1)), rng.normal(size=(2, 1, m)) * shift
    # A column shift is undone by the first column step: the iterates themselves agree.
    np.testing.assert_allclose(
        sinkhorn_forward(X, iters=3, warn_tol=None)[0],
        sinkhorn_forward(X + cols, iters=3, warn_tol=None)[0],
        atol=1e-12,
    )
    # A row shift changes the iterates but not the fixed point.
    np.testing.assert_allclose(_converged(X), _converged(X + rows + cols), atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_entries_of_plus_minus_500_stay_finite(dtype):
    rng = np.random.default_rng(3)
    X = rng.choice([-500.0, 500.0], size=(8, 4, 4)) + rng.normal(size=(8, 4, 4))
    X = X.astype(dtype)
    # such sign patterns cannot be balanced (the columns stay off by 1): the default check says so
    with pytest.warns(ConvergenceWarning, match="column sums are off"):
        R, stats = sinkhorn_forward(X, iters=200)
    assert stats.log_domain  # "auto" switched: exp(1000) overflows any float
    assert R.dtype == dtype and np.isfinite(R).all()
    np.testing.assert_allclose(R.sum(-1), 1, atol=1e-5)
    G = rng.normal(size=R.shape).astype(dtype)
    for method in SOLVERS:
        dX = sinkhorn_vjp(R, G, method=method)
        assert dX.dtype == dtype and np.isfinite(dX).all(), method


def test_auto_log_domain_matches_scaling_domain_where_both_work():
    X = np.random.default_rng(4).normal(size=(3, 4, 4)) * 30  # spread > 177/... in float32 only
    # the truncated iterates are compared: no balance check
    R32, s32 = sinkhorn_forward(X.astype(np.float32), iters=30, warn_tol=None)
    R64, s64 = sinkhorn_forward(X, iters=30, log_domain=False, warn_tol=None)
    assert s32.log_domain and not s64.log_domain
    np.testing.assert_allclose(R32, R64, atol=1e-5)


def test_tol_stops_early_and_reports_the_residual():
    X = np.random.default_rng(5).normal(size=(4, 4, 4))
    R, stats = sinkhorn_forward(X, iters=1000, tol=1e-8)
    assert stats.iterations < 1000
    assert stats.residual <= 1e-8
    assert abs(R.sum(-2) - 1).max() == pytest.approx(stats.residual, abs=1e-15)
    assert abs(R.sum(-2) - 1).max() <= 1e-8


def test_non_convergence_warns_or_raises_when_strict():
    rng = np.random.default_rng(6)
    perm = np.stack([np.eye(5)[rng.permutation(5)] for _ in range(3)])
    X = 12 * perm + rng.normal(size=perm.shape)  # near a permutation: slow convergence
    with pytest.warns(
        ConvergenceWarning, match=r"column-marginal error .* > tol 1\.000e-12"
    ) as seen:
        sinkhorn_forward(X, iters=5, tol=1e-12)
    assert seen[0].filename == __file__  # the warning points at the caller's line
    with pytest.raises(ConvergenceError, match="after 5 iterations"):
        sinkhorn_forward(X, iters=5, tol=1e-12, strict=True)
    # without tol, the returned R is checked against warn_tol (1e-3 of the largest marginal)
    Y = rng.normal(size=(3, 5, 5)) * 3  # about 5e-2 off after 5 iterations
    with pytest.warns(ConvergenceWarning, match=r"column sums are off .* after 5 iter") as seen:
        R, stats = sinkhorn_forward(Y, iters=5)
    assert seen[0].filename == __file__
    assert stats.residual == pytest.approx(abs(R.sum(-2) - 1).max(), rel=1e-12)
    with pytest.raises(ConvergenceError, match="gradient of the balanced limit"):
        sinkhorn_forward(Y, iters=5, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sinkhorn_forward(Y, iters=5, warn_tol=None)  # the check turned off
        sinkhorn_forward(Y, iters=300)  # balanced: nothing to report
        sinkhorn_forward(X, iters=5)  # 2.2e-4 off: within the default warn_tol


# ---------------------------------------------------------------------------- backward


def _directional_fd(X, D, G, a=None, b=None, h=1e-5):
    plus = _converged(X + h * D, a, b)
    minus = _converged(X - h * D, a, b)
    return float(((plus - minus) * G).sum() / (2 * h))


@pytest.mark.parametrize("method", SOLVERS)
@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 5), (2, 5, 2), (1, 1, 3)])
def test_vjp_matches_central_differences(method, shape):
    rng = np.random.default_rng(7)
    X = rng.normal(size=shape)
    a, b = _marginals(rng, shape[:-2], *shape[-2:])
    G = rng.normal(size=shape)
    R = _converged(X, a, b)
    dX = sinkhorn_vjp(R, G, method=method)
    for _ in range(3):
        D = rng.normal(size=shape)
        fd = _directional_fd(X, D, G, a, b)
        assert float((dX * D).sum()) == pytest.approx(fd, abs=1e-8)


def test_marginal_gradients_match_central_differences_along_equal_mass_directions():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(2, 3, 4))
    a, b = _marginals(rng, (2,), 3, 4)
    G = rng.normal(size=X.shape)
    R = _converged(X, a, b)
    _, ga, gb = sinkhorn_vjp(R, G, marginal_grads=True)
    np.testing.assert_allclose(ga.sum(-1), gb.sum(-1), atol=1e-12)  # documented gauge
    for _ in range(3):
        da, db = rng.normal(size=a.shape), rng.normal(size=b.shape)
        db += (da.sum(-1, keepdims=True) - db.sum(-1, keepdims=True)) / 4  # keep mass equal
        h = 1e-5
        plus = _converged(X, a + h * da, b + h * db)
        minus = _converged(X, a - h * da, b - h * db)
        fd = float(((plus - minus) * G).sum() / (2 * h))
        assert float((ga * da).sum() + (gb * db).sum()) == pytest.approx(fd, abs=1e-8)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 6), m=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_gradient_rows_and_columns_sum_to_zero(n, m, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3, n, m)) * 2
    R, _ = sinkhorn_forward(X, iters=300)
    G = rng.normal(size=X.shape)
    for method in SOLVERS:
        dX = sinkhorn_vjp(R, G, method=method)
        # Adding c to a row (column) of X leaves R unchanged, so the gradient is orthogonal to it.
        np.testing.assert_allclose(dX.sum(-1), 0, atol=1e-10)
        np.testing.assert_allclose(dX.sum(-2), 0, atol=1e-10)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 6), m=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_upstream_gradient_constant_on_marginals_gives_zero(n, m, seed):
    # G = α1ᵀ + 1βᵀ: L = αᵀa + βᵀb does not depend on X at all.
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(2, n, m))
    R = _converged(X)
    G = rng.normal(size=(2, n, 1)) + rng.normal(size=(2, 1, m))
    for method in SOLVERS:
        np.testing.assert_allclose(sinkhorn_vjp(R, G, method=method), 0, atol=1e-11)


def test_solvers_agree_on_an_unconverged_forward():
    # After 3 iterations the columns are off by ~1e-2: the projected CG must still solve the
    # (consistent) system that the dense solve solves, without drifting along 1.
    rng = np.random.default_rng(9)
    X = rng.normal(size=(16, 6, 6)) * 2
    R, _ = sinkhorn_forward(X, iters=3, warn_tol=None)
    assert abs(R.sum(-2) - 1).max() > 1e-3
    G = rng.normal(size=X.shape)
    reference = sinkhorn_vjp(R, G, method="direct")
    for method in ["implicit", "implicit-2n"]:
        np.testing.assert_allclose(sinkhorn_vjp(R, G, method=method), reference, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_near_permutation_inputs_give_finite_gradients(dtype):
    rng = np.random.default_rng(10)
    perm = np.stack([np.eye(6)[rng.permutation(6)] for _ in range(16)])
    G = rng.normal(size=perm.shape).astype(dtype)
    for scale in [6, 30, 80]:
        X = (scale * perm + rng.normal(size=perm.shape)).astype(dtype)
        R, _ = sinkhorn_forward(X, iters=200, warn_tol=None)  # slow to converge; finite is all
        for method in SOLVERS:
            dX = sinkhorn_vjp(R, G, method=method)
            assert np.isfinite(dX).all(), (scale, method)
            np.testing.assert_allclose(dX.sum(-1), 0, atol=1e-4 if dtype == np.float32 else 1e-10)


def test_near_permutation_gradient_matches_central_differences():
    rng = np.random.default_rng(11)
    perm = np.stack([np.eye(5)[rng.permutation(5)] for _ in range(2)])
    X = 5 * perm + rng.normal(size=perm.shape)
    G = rng.normal(size=X.shape)
    R = _converged(X)
    dX = sinkhorn_vjp(R, G)
    D = rng.normal(size=X.shape)
    assert float((dX * D).sum()) == pytest.approx(_directional_fd(X, D, G), abs=1e-8)


def test_cg_maxiter_limits_the_solver():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(8, 8, 8)) * 3
    R = _converged(X)
    G = rng.normal(size=X.shape)
    exact = sinkhorn_vjp(R, G, method="direct")
    one_step = sinkhorn_vjp(R, G, cg_maxiter=1, cg_tol=0)
    assert abs(one_step - exact).max() > 1e-6  # a single CG step is not the solution
    np.testing.assert_allclose(sinkhorn_vjp(R, G, cg_tol=0), exact, atol=1e-11)


# ---------------------------------------------------------------------------- options and errors


def test_choose_backward():
    assert choose_backward("implicit-2n", 4, 4) == "implicit-2n"
    for size in [1, 4, 8, 16, 32, 64]:  # the measured rule: implicit everywhere
        assert choose_backward("auto", size, size) == "implicit"
    with pytest.raises(InputError, match="backward must be one of"):
        choose_backward("fast", 4, 4)


def test_numpy_input_returns_the_balanced_array():
    X = np.random.default_rng(13).normal(size=(2, 3, 3))
    np.testing.assert_array_equal(
        sinkhorn(X, iters=7, warn_tol=None), sinkhorn_forward(X, iters=7, warn_tol=None)[0]
    )


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: sinkhorn_forward(np.ones(3)), ShapeError, r"\(\.\.\., n, m\).*shape \(3,\)"),
        (lambda: sinkhorn_forward(np.ones((2, 0, 3))), ShapeError, "n, m >= 1"),
        (lambda: sinkhorn_forward(np.ones((2, 2), dtype=int)), DTypeError, "floating dtype"),
        (lambda: sinkhorn_forward([[1.0]]), DTypeError, "got list"),
        (
            lambda: sinkhorn_forward(np.array([[0.0, np.nan], [1.0, 2.0]])),
            InputError,
            r"X\[0, 1\] = nan",
        ),
        (lambda: sinkhorn_forward(np.ones((2, 3)), np.ones(3)), ShapeError, r"a must have .*2"),
        (
            lambda: sinkhorn_forward(np.ones((2, 3)), None, -np.ones(3)),
            InputError,
            "marginal b must be positive",
        ),
        (
            lambda: sinkhorn_forward(np.ones((2, 2)), [1.0, 1.0], [1.0, 2.0]),
            InputError,
            "same mass",
        ),
        (
            lambda: sinkhorn_forward(np.ones((4, 2, 2)), np.ones((3, 2))),
            ShapeError,
            r"batch shape of a \(3,\)",
        ),
        (  # a batch of marginals does not enlarge X's: R has X's shape
            lambda: sinkhorn_forward(np.ones((2, 2)), np.ones((3, 2)), np.ones((3, 2))),
            ShapeError,
            r"batch shape of a \(3,\) does not broadcast to the batch shape of X \(\)",
        ),
        (lambda: sinkhorn_forward(np.ones((2, 2)), iters=0), InputError, "iters must be"),
        (lambda: sinkhorn_forward(np.ones((2, 2)), tol=-1.0), InputError, "tol must be"),
        (lambda: sinkhorn_forward(np.ones((2, 2)), log_domain="x"), InputError, "log_domain"),
        (lambda: sinkhorn(np.ones((2, 2)), backward="adjoint"), InputError, "backward must be"),
        (
            lambda: sinkhorn_vjp(np.ones((2, 2)), np.ones((2, 3))),
            ShapeError,
            r"G must have the shape of R \(2, 2\)",
        ),
        (
            lambda: sinkhorn_vjp(np.ones((2, 2)), np.ones((2, 2)), method="unrolled"),
            InputError,
            "backward must be one of",
        ),
        (
            lambda: sinkhorn_vjp(np.ones((2, 2)), np.ones((2, 2)), cg_maxiter=0),
            InputError,
            "cg_maxiter",
        ),
    ],
)
def test_bad_input_raises_a_named_error(call, error, match):
    with pytest.raises(error, match=match):
        call()
