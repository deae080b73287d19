"""``tadiff.special`` against ``torch.special``: values, first and second derivatives, float32,
integer inputs and errors; and, where torch's answer is not the oracle to trust (far tails,
roundtrips), exact identities and central differences.

Tolerances: both libraries evaluate these functions by different algorithms in float64.
tadiff's kernels are accurate to a few 1e-15 relative (``erfinv``/``ndtri`` inherit ``erf``'s
1e-14; ``erfcx``'s tail fit 6e-14 — measured against mpmath while writing them); 1e-12 leaves
two orders of magnitude for other CPUs' ``exp``/``log``. Gradients are formulas of the values,
so the same bound holds, except where a formula amplifies (noted per case). float32 results are
compared at 2e-6: a few float32 ulps (1.2e-7) of torch's own float32 kernels.
"""

import math

import numpy as np
import pytest

import tadiff as td

torch = pytest.importorskip("torch")

GRID = np.linspace(-4.0, 4.0, 33)
UNIT = np.concatenate([np.linspace(-0.999, 0.999, 41), [-1 + 1e-12, 1 - 1e-12, 1e-300, -1e-20]])
PROBABILITY = np.concatenate([np.logspace(-250, -1, 40), np.linspace(0.02, 0.98, 25),
                              1 - np.logspace(-15, -2, 12)])  # fmt: skip
POSITIVE = np.concatenate([np.logspace(-3, 2, 30), [1e-300, 1e300]])
BESSEL = np.concatenate([np.linspace(-40, 40, 81), [1e-9, -1e-9, 24.9, 25.1, -700.0, 700.0]])

# (name, torch function, points) for the one-argument functions
UNARY = [
    ("expit", torch.special.expit, GRID),
    ("logit", torch.special.logit, np.linspace(0.01, 0.99, 25)),
    ("erf", torch.special.erf, GRID),
    ("erfc", torch.special.erfc, GRID),
    ("erfcx", torch.special.erfcx, np.concatenate([GRID, [10.0, 1e3, 1e8, -20.0]])),
    ("erfinv", torch.special.erfinv, UNIT),
    ("gammaln", torch.special.gammaln, np.concatenate([POSITIVE[:-2], [-2.5, -0.5]])),
    ("digamma", torch.special.digamma, np.concatenate([POSITIVE[:-2], [-2.5, -0.5]])),
    ("psi", torch.special.psi, POSITIVE[:-2]),
    ("ndtr", torch.special.ndtr, np.concatenate([GRID, [10.0]])),
    ("ndtri", torch.special.ndtri, PROBABILITY),
    ("log_ndtr", torch.special.log_ndtr, np.concatenate([GRID, [-50.0, -1e3, 8.0, 30.0]])),
    ("i0", torch.special.i0, BESSEL[:-2]),
    ("i0e", torch.special.i0e, BESSEL),
    ("i1", torch.special.i1, BESSEL[:-2]),
    ("i1e", torch.special.i1e, BESSEL),
    ("sinc", torch.special.sinc, np.concatenate([GRID, [1e-8, 0.5, 2.0]])),
    ("entr", torch.special.entr, POSITIVE[:-2]),
    ("log1p", torch.special.log1p, np.linspace(-0.9, 5.0, 20)),
    ("expm1", torch.special.expm1, GRID),
    ("exp2", torch.special.exp2, GRID),
    ("round", torch.special.round, GRID + 0.3),
]

# gradients that a formula amplifies beyond 1e-12: erfinv and ndtri grow like exp(x²) of their
# result, whose rounding (1e-15 relative at x ≈ 7) is multiplied by 2x² ≈ 100
GRAD_RTOL = {"erfinv": 1e-11, "ndtri": 1e-11}
# torch's trigamma (digamma's derivative) is off by up to 5e-10 relative; tadiff's is within
# 1e-14 of mpmath (test_gamma.py)
GRAD_RTOL.update(digamma=1e-9, psi=1e-9)
# points where torch's gradient formula is ill-conditioned (terms that cancel), checked against
# asymptotic series in test_far_tails_follow_their_asymptotic_series instead: erfcx's
# 2x·erfcx(x) - 2/sqrt(pi) for large x, log_ndtr's exp(-(log_ndtr(x) + x²/2)) for very negative x
TORCH_ILL_CONDITIONED = {
    "erfcx": lambda x: x > 100,
    "log_ndtr": lambda x: x < -50,
    "sinc": lambda x: np.abs(x) < 1e-3,  # torch's sinc' cancels near 0 (56% off at 1e-8)
}


def _ours(name):
    return getattr(td.special, name)


@pytest.mark.parametrize(("name", "theirs", "points"), UNARY, ids=[u[0] for u in UNARY])
def test_values_and_gradients_equal_torch(name, theirs, points):
    x = td.tensor(points, dtype=td.float64, requires_grad=True)
    t = torch.tensor(points, dtype=torch.float64, requires_grad=True)
    ours, reference = _ours(name)(x), theirs(t)
    np.testing.assert_allclose(ours.data, reference.detach().numpy(), rtol=1e-12, atol=0)
    upstream = np.linspace(0.5, 1.5, len(points))
    (g,) = td.autograd.grad(ours, x, td.tensor(upstream))
    (h,) = torch.autograd.grad(reference, t, torch.tensor(upstream))
    rtol = GRAD_RTOL.get(name, 1e-12)
    trusted = ~TORCH_ILL_CONDITIONED.get(name, lambda x: np.zeros(x.shape, bool))(points)
    np.testing.assert_allclose(g.data[trusted], h.numpy()[trusted], rtol=rtol, atol=1e-300)


SECOND_ORDER = ["logit", "erfcx", "erfinv", "ndtr", "ndtri", "log_ndtr", "i0", "i0e", "i1",
                "i1e", "sinc", "entr"]  # fmt: skip


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_second_derivatives_equal_torch(name):
    theirs, points = next((f, p) for n, f, p in UNARY if n == name)
    points = points[np.isfinite(points) & (np.abs(points) < 30)][::3]
    if name in ("i1", "i1e", "sinc"):
        # near 0 torch's second derivatives cancel to noise (NaN at 0): tadiff switches to
        # Taylor series there, checked against their closed forms below
        points = points[np.abs(points) > 0.05]
    x = td.tensor(points, dtype=td.float64, requires_grad=True)
    t = torch.tensor(points, dtype=torch.float64, requires_grad=True)
    (g,) = td.autograd.grad(_ours(name)(x).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(theirs(t).sum(), t, create_graph=True)
    (gg,) = td.autograd.grad(g.sum(), x)
    (hh,) = torch.autograd.grad(h.sum(), t)
    np.testing.assert_allclose(gg.data, hh.numpy(), rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize("name", [*SECOND_ORDER, "expit", "gammaln", "digamma"])
def test_gradients_pass_central_differences(name):
    points = next(p for n, _, p in UNARY if n == name)
    finite = points[np.isfinite(points) & (np.abs(points) < 10)]
    if name in ("ndtri", "logit"):
        finite = finite[(finite > 1e-3) & (finite < 1 - 1e-3)]  # steep ends: differences fail
    if name in ("i0e", "i1e"):
        finite = finite[np.abs(finite) > 1e-3]  # a kink at 0 (exp(-|x|)) the differences cross
    if name == "erfinv":
        finite = finite[np.abs(finite) < 0.99]  # the steep ends: central differences diverge
    if name == "entr":
        finite = finite[finite > 1e-2]
    x = td.tensor(finite[::2], dtype=td.float64, requires_grad=True)
    assert td.autograd.gradcheck(_ours(name), (x,), eps=1e-7, atol=1e-6, rtol=1e-5)
    assert td.autograd.gradgradcheck(_ours(name), (x,), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_derivatives_near_zero_equal_their_taylor_series():
    # where torch's formulas cancel: sinc' = π(-u/3 + u³/30), sinc'' = π²(-1/3 + u²/10) in
    # u = πx; i1'' = 3x/8 + 5x³/96; i1e'' = i1'' e^-|x| - 2 sign(x) i1' e^-|x| + i1 e^-|x|
    x = td.tensor([0.0, 1e-12, 1e-8, -1e-5], dtype=td.float64, requires_grad=True)
    u = np.pi * x.data
    (g,) = td.autograd.grad(td.special.sinc(x).sum(), x, create_graph=True)
    (gg,) = td.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.data, np.pi * (-u / 3 + u**3 / 30), rtol=1e-15, atol=0)
    np.testing.assert_allclose(gg.data, np.pi**2 * (-1 / 3 + u**2 / 10), rtol=1e-15)
    (g,) = td.autograd.grad(td.special.i1(x).sum(), x, create_graph=True)
    (gg,) = td.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(g.data, 0.5 + 3 * x.data**2 / 16, rtol=1e-15)
    np.testing.assert_allclose(gg.data, 3 * x.data / 8 + 5 * x.data**3 / 96, rtol=1e-15, atol=0)
    # i1e has a kink at 0 (exp(-|x|)): central differences on one side of it
    near = td.tensor([1e-3, 0.3, -0.2, -0.45], dtype=td.float64, requires_grad=True)
    assert td.autograd.gradcheck(td.special.i1e, (near,), eps=1e-7, atol=1e-7)
    assert td.autograd.gradgradcheck(td.special.i1e, (near,), eps=1e-7, atol=1e-6)


def test_logit_with_eps_clamps_like_torch():
    points = np.array([-0.5, 0.0, 0.05, 0.1, 0.5, 0.95, 1.0, 1.5])
    for eps in (None, 0.1, 1e-6):
        x = td.tensor(points, dtype=td.float64, requires_grad=True)
        t = torch.tensor(points, dtype=torch.float64, requires_grad=True)
        with np.errstate(all="ignore"):
            ours = td.special.logit(x, eps)
        theirs = torch.special.logit(t, eps)
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-14)
        (g,) = td.autograd.grad(ours.sum(), x)
        (h,) = torch.autograd.grad(theirs.sum(), t)
        np.testing.assert_allclose(g.data, h.numpy(), rtol=1e-14)  # NaN/inf where torch's


@pytest.mark.parametrize("name", ["xlogy", "xlog1py"])
def test_xlogy_and_xlog1py_equal_torch_with_broadcasting_and_scalars(name):
    ours_fn, theirs_fn = getattr(td.special, name), getattr(torch.special, name)
    a = np.array([[0.0], [1.5], [-2.0]])
    b = np.array([0.0, 0.5, 3.0, np.nan, np.inf])
    x, y = td.tensor(a, requires_grad=True), td.tensor(b, requires_grad=True)
    s, t = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ours, theirs = ours_fn(x, y), theirs_fn(s, t)
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-14)
    gx, gy = td.autograd.grad(ours.sum(), (x, y))
    hx, hy = torch.autograd.grad(theirs.sum(), (s, t))
    np.testing.assert_allclose(gx.data, hx.numpy(), rtol=1e-14)
    np.testing.assert_allclose(gy.data, hy.numpy(), rtol=1e-14)
    np.testing.assert_allclose(
        ours_fn(2.0, td.tensor(b)).data, theirs_fn(2.0, torch.tensor(b)).numpy(), rtol=1e-14
    )
    np.testing.assert_allclose(
        ours_fn(td.tensor(a), 3.0).data, theirs_fn(torch.tensor(a), 3.0).numpy(), rtol=1e-14
    )
    with pytest.raises(RuntimeError, match="do not broadcast"):
        ours_fn(td.ones(2), td.ones(3))


def test_multigammaln_equals_torch_and_the_lgamma_sum():
    a = np.array([[2.0, 3.5], [10.0, 1.6]])
    for p in (1, 2, 3):
        x = td.tensor(a, dtype=td.float64, requires_grad=True)
        t = torch.tensor(a, dtype=torch.float64, requires_grad=True)
        ours, theirs = td.special.multigammaln(x, p), torch.special.multigammaln(t, p)
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-13)
        (g,) = td.autograd.grad(ours.sum(), x)
        (h,) = torch.autograd.grad(theirs.sum(), t)
        np.testing.assert_allclose(g.data, h.numpy(), rtol=1e-12)
        # the definition, term by term in Python floats
        want = [p * (p - 1) / 4 * math.log(math.pi) + sum(math.lgamma(v - j / 2) for j in range(p))
                for v in a.ravel()]  # fmt: skip
        np.testing.assert_allclose(ours.data.ravel(), want, rtol=1e-13)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        torch.special.multigammaln(torch.tensor([2.0]), 0)
    with pytest.raises(RuntimeError, match="p has to be greater than or equal to 1"):
        td.special.multigammaln(td.tensor([2.0]), 0)
    # torch documents elements at or below (p-1)/2 as undefined behaviour and returns numbers;
    # tadiff refuses them (a deliberate difference, in docs/autograd.md)
    with pytest.raises(RuntimeError, match=r"greater than \(p-1\)/2 = 1.0"):
        td.special.multigammaln(td.tensor([0.9, 2.0]), 3)


@pytest.mark.parametrize(
    "name",
    [
        "erfinv",
        "erfcx",
        "ndtr",
        "ndtri",
        "log_ndtr",
        "i0",
        "i0e",
        "i1",
        "i1e",
        "sinc",
        "entr",
        "logit",
        "expit",
    ],
)
def test_float32_stays_float32_and_integers_take_the_default_dtype(name):
    theirs, points = next((f, p) for n, f, p in UNARY if n == name)
    points = points[np.isfinite(points) & (np.abs(points) < 30) & (np.abs(points) > 1e-30)]
    points = points.astype(np.float32)
    ours = _ours(name)(td.tensor(points))
    assert ours.dtype == np.float32
    # against torch in float64 on the same float32 points: torch's own float32 kernels are
    # less accurate than float32 allows in places (its float32 ndtr is 3e-4 off at x = -4)
    reference = theirs(torch.tensor(points, dtype=torch.float64)).numpy()
    representable = np.abs(reference) < np.finfo(np.float32).max
    np.testing.assert_allclose(ours.data[representable], reference[representable], rtol=2e-6,
                               atol=1e-30)  # fmt: skip
    assert np.isinf(ours.data[~representable]).all()
    ints = [0, 1, 2] if name not in ("ndtri", "logit", "erfinv") else [0, 1]
    assert str(_ours(name)(td.tensor(ints)).dtype) == str(theirs(torch.tensor(ints)).dtype)[6:]


def test_softmax_and_log_softmax_take_a_dtype_like_torch():
    x = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 5.0]], dtype=np.float32)
    for name in ("softmax", "log_softmax"):
        ours = getattr(td.special, name)(td.tensor(x), 1, dtype=td.float64)
        theirs = getattr(torch.special, name)(torch.tensor(x), 1, dtype=torch.float64)
        assert ours.dtype == np.float64
        np.testing.assert_allclose(ours.data, theirs.numpy(), rtol=1e-14)
    np.testing.assert_allclose(
        td.special.logsumexp(td.tensor(x), 1).data,
        torch.special.logsumexp(torch.tensor(x), 1).numpy(),
        rtol=1e-6,
    )


# ---- exact oracles where torch is not the one to trust ---------------------------------------


def test_inverse_functions_invert_their_functions():
    # roundtrips: erf(erfinv(y)) = y and ndtr(ndtri(p)) = p, relative to y and p (for tiny p
    # through log_ndtr, which keeps the digits ndtr's 1 - tiny would lose)
    y = td.tensor(UNIT[np.abs(UNIT) < 0.9], dtype=td.float64)
    np.testing.assert_allclose(td.special.erf(td.special.erfinv(y)).data, y.data, rtol=1e-14)
    p = td.tensor(PROBABILITY[PROBABILITY < 0.5], dtype=td.float64)
    back = td.special.log_ndtr(td.special.ndtri(p)).data
    np.testing.assert_allclose(back, np.log(p.data), rtol=1e-13)


def test_far_tails_follow_their_asymptotic_series():
    # log Φ(x) = -x²/2 - log(-x) - log(2π)/2 - 1/x² + 5/(2x⁴) + O(x⁻⁶) as x → -inf
    x = np.array([-1e3, -1e5, -1e8])
    want = -x * x / 2 - np.log(-x) - 0.5 * math.log(2 * math.pi) - 1 / x**2 + 2.5 / x**4
    np.testing.assert_allclose(td.special.log_ndtr(td.tensor(x)).data, want, rtol=1e-15)
    # Φ(x) = φ(x)/(-x) · (1 - 1/x² + 3/x⁴ - 15/x⁶) + O(x⁻⁹ φ) where torch's ndtr underflows to 0
    x = np.array([-30.0, -37.0])
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    want = pdf / -x * (1 - 1 / x**2 + 3 / x**4 - 15 / x**6 + 105 / x**8 - 945 / x**10)
    np.testing.assert_allclose(td.special.ndtr(td.tensor(x)).data, want, rtol=1e-12)
    # erfcx(x) = (1 - 1/(2x²) + 3/(4x⁴)) / (x sqrt(pi)) + O(x⁻⁷)
    x = np.array([1e3, 1e6, 1e70])
    want = (1 - 0.5 / x**2 + 0.75 / x**4) / (x * math.sqrt(math.pi))
    # (1e-13: the accuracy of erfcx's tail fit, 6e-14 against mpmath)
    np.testing.assert_allclose(td.special.erfcx(td.tensor(x)).data, want, rtol=1e-13)
    # and their derivatives: d/dx log Φ(x) = -x - 1/x + 2/x³ + O(x⁻⁵) (the inverse Mills
    # ratio), erfcx'(x) = -(1 - 3/(2x²) + 15/(4x⁴)) / (x² sqrt(pi)) + O(x⁻⁸)
    x = td.tensor([-1e3, -1e5, -1e8], dtype=td.float64, requires_grad=True)
    (g,) = td.autograd.grad(td.special.log_ndtr(x).sum(), x)
    want = -x.data - 1 / x.data + 2 / x.data**3
    np.testing.assert_allclose(g.data, want, rtol=1e-14)
    x = td.tensor([100.0, 1e3, 1e6, 1e100], dtype=td.float64, requires_grad=True)
    (g,) = td.autograd.grad(td.special.erfcx(x).sum(), x)
    u = 1 / x.data**2
    want = -(1 - 1.5 * u + 3.75 * u * u - 13.125 * u**3) * u / math.sqrt(math.pi)
    np.testing.assert_allclose(g.data, want, rtol=1e-13)
    # i0e(x) = (1 + 1/(8x) + 9/(128x²)) / sqrt(2πx) + O(x^-3.5), far beyond where i0 overflows
    x = np.array([1e6, 1e10])
    want = (1 + 1 / (8 * x) + 9 / (128 * x * x)) / np.sqrt(2 * math.pi * x)
    np.testing.assert_allclose(td.special.i0e(td.tensor(x)).data, want, rtol=1e-15)


# Deliberate differences at the edges: i0 and i1 are ±inf at ±inf (torch: NaN)
EDGE_FIXES = {"i0": [np.inf, np.inf], "i1": [np.inf, -np.inf]}


def test_edge_values_equal_torch():
    edges = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan])
    for name, theirs, _ in UNARY:
        with np.errstate(all="ignore"):
            ours = _ours(name)(td.tensor(edges)).data
        reference = theirs(torch.tensor(edges)).numpy()
        if name in EDGE_FIXES:
            assert np.isnan(reference[4:6]).all()
            reference[4:6] = EDGE_FIXES[name]
        np.testing.assert_allclose(ours, reference, rtol=1e-12, err_msg=name)
