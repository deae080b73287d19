"""tadiff.linalg against torch.linalg (values and gradients, float64, batched), second
derivatives by gradgradcheck, and the errors."""

from fractions import Fraction

import numpy as np
import pytest

import tadiff as td
from tadiff.autograd import gradcheck, gradgradcheck
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
SQUARE = RNG.standard_normal((3, 4, 4))
RHS = RNG.standard_normal((3, 4, 2))
SPD = SQUARE @ SQUARE.transpose(0, 2, 1) + 4 * np.eye(4)
TALL = RNG.standard_normal((2, 5, 3))
WIDE = TALL.transpose(0, 2, 1).copy()


def _gauge_free_svd(m, r):
    # |U| and |V| do not depend on the signs LAPACK picks for the singular vectors
    k = r[1].shape[-1]
    return r[0].abs().sum(-1)[..., :k] * r[1] + r[2].abs().sum(-2)[..., :k]


CASES = {
    "inv": (lambda m, a: m.linalg.inv(a), [SQUARE]),
    "det": (lambda m, a: m.linalg.det(a), [SQUARE]),
    "slogdet": (lambda m, a: m.linalg.slogdet(a)[1], [SQUARE]),
    "logdet": (lambda m, a: (m.linalg.logdet if m is td else torch.logdet)(a), [SPD]),
    "solve": (lambda m, a, b: m.linalg.solve(a, b), [SQUARE, RHS]),
    "solve_vector": (lambda m, a, b: m.linalg.solve(a, b), [SQUARE, RHS[..., 0]]),
    "solve_broadcast": (lambda m, a, b: m.linalg.solve(a, b), [SQUARE[0], RHS]),
    "solve_right": (
        lambda m, a, b: m.linalg.solve(a, b, left=False),
        [SQUARE, RHS.transpose(0, 2, 1)],
    ),
    "solve_triangular": (
        lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True),
        [SQUARE, RHS],
    ),
    "solve_triangular_unit": (
        lambda m, a, b: m.linalg.solve_triangular(a, b, upper=False, unitriangular=True),
        [SQUARE, RHS],
    ),
    "solve_triangular_right": (
        lambda m, a, b: m.linalg.solve_triangular(a, b, upper=True, left=False),
        [SQUARE, RHS.transpose(0, 2, 1)],
    ),
    "cholesky": (lambda m, a: m.linalg.cholesky(a), [SPD]),
    "cholesky_upper": (lambda m, a: m.linalg.cholesky(a, upper=True), [SPD]),
    "eigvalsh": (lambda m, a: m.linalg.eigvalsh(a), [SPD]),
    "eigh_vectors": (lambda m, a: m.linalg.eigh(a)[1].abs(), [SPD]),
    "svdvals": (lambda m, a: m.linalg.svdvals(a), [TALL]),
    "svd_tall": (lambda m, a: _gauge_free_svd(m, m.linalg.svd(a, full_matrices=False)), [TALL]),
    "svd_wide": (lambda m, a: _gauge_free_svd(m, m.linalg.svd(a, full_matrices=False)), [WIDE]),
    "svd_square": (lambda m, a: _gauge_free_svd(m, m.linalg.svd(a)), [SQUARE]),
    "qr": (lambda m, a: m.linalg.qr(a)[0].abs().sum(-1) + (m.linalg.qr(a)[1] ** 2).sum(), [TALL]),
    "pinv": (lambda m, a: m.linalg.pinv(a), [TALL]),
    "matrix_power": (lambda m, a: m.linalg.matrix_power(a, 3), [SQUARE]),
    "matrix_power_negative": (lambda m, a: m.linalg.matrix_power(a, -2), [SQUARE]),
    "vector_norm": (lambda m, a: m.linalg.vector_norm(a, 3, dim=-1), [TALL]),
    "vector_norm_inf": (lambda m, a: m.linalg.vector_norm(a, float("inf"), dim=(0, 2)), [TALL]),
    "norm": (lambda m, a: m.linalg.norm(a), [TALL]),
    "vecdot": (lambda m, a, b: m.linalg.vecdot(a, b), [TALL, TALL[::-1].copy()]),
}
for _ord in ("fro", "nuc", 2, -2, 1, -1, float("inf"), float("-inf")):
    CASES[f"matrix_norm_{_ord}"] = (lambda m, a, o=_ord: m.linalg.matrix_norm(a, o), [TALL])


def _run(lib, fn, arrays):
    make = td.tensor if lib is td else torch.tensor
    xs = [make(a.copy(), requires_grad=True) for a in arrays]
    out = fn(lib, *xs)
    w = np.cos(np.arange(int(np.prod(out.shape)))).reshape(tuple(out.shape))
    (out * make(w)).sum().backward()
    value = out.detach().numpy() if lib is torch else out.data
    return np.asarray(value), [
        np.asarray(x.grad.numpy() if lib is torch else x.grad.data) for x in xs
    ]


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    fn, arrays = CASES[name]
    (v1, g1), (v2, g2) = _run(td, fn, arrays), _run(torch, fn, arrays)
    np.testing.assert_allclose(v1, v2, rtol=1e-10, atol=1e-12)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-11)


def _exact_det(rows):
    """Laplace expansion over Fractions: the exact determinant of a small integer matrix."""
    if len(rows) == 1:
        return rows[0][0]
    return sum(
        (-1) ** j * rows[0][j] * _exact_det([r[:j] + r[j + 1 :] for r in rows[1:]])
        for j in range(len(rows))
    )


def _exact_cofactors(a):
    """d det A / dA = the cofactor matrix, from exact minors (no library, no rounding)."""
    rows = [[Fraction(int(v)) for v in row] for row in a]
    n = len(rows)

    def minor(i, j):
        return [r[:j] + r[j + 1 :] for k, r in enumerate(rows) if k != i]

    return np.array(
        [[float((-1) ** (i + j) * _exact_det(minor(i, j))) for j in range(n)] for i in range(n)]
    )


SINGULAR = {
    "rank 2": [[1, 2, 3], [2, 4, 6], [1, 0, 1]],
    "rank 1": [[1, 2, 3], [2, 4, 6], [-1, -2, -3]],
    "zero": [[0, 0, 0], [0, 0, 0], [0, 0, 0]],
    "rank 3 of 4": [[2, 1, 0, 1], [1, 3, 1, 0], [3, 4, 1, 1], [0, 1, 5, 2]],
}


@pytest.mark.parametrize("name", sorted(SINGULAR))
def test_det_gradient_at_singular_matrices_is_the_exact_cofactor_matrix(name):
    # LAPACK-based libraries disagree here (torch's det backward returns zeros on some CPUs), so
    # the oracle is exact: integer minors. det is affine in each single entry, so central
    # differences are exact up to rounding as well. Tolerance: the SVD rounds at 1e-16 x |A|^2.
    a = np.array(SINGULAR[name], dtype=np.float64)
    assert np.linalg.matrix_rank(a) < a.shape[0]
    want = _exact_cofactors(a)
    x = td.tensor(np.stack([a, 2 * a]), requires_grad=True)  # batched, and a scaled copy
    (det,) = td.autograd.grad(td.linalg.det(x).sum(), x)
    scale = np.abs(a).max() ** 2
    np.testing.assert_allclose(det.data[0], want, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(
        det.data[1], 2 ** (a.shape[0] - 1) * want, rtol=0, atol=1e-12 * scale
    )
    assert gradcheck(lambda t: td.linalg.det(t), [td.tensor(a, requires_grad=True)])


SYMMETRIC = {  # gradcheck perturbs single entries: feed symmetric inputs through a symmetrizer
    "cholesky": lambda x: td.linalg.cholesky(x @ x.mT + 3 * td.eye(3, dtype=td.float64)),
    "eigh": lambda x: td.linalg.eigh(x + x.mT)[0] + td.linalg.eigh(x + x.mT)[1].abs().sum(-1),
}
SECOND_ORDER = {
    "inv": lambda x: td.linalg.inv(x),
    "det": lambda x: td.linalg.det(x),
    "slogdet": lambda x: td.linalg.slogdet(x).logabsdet,
    "solve": lambda x: td.linalg.solve(x, x[..., :1] * 2),
    "solve_triangular": lambda x: td.linalg.solve_triangular(
        x + 3 * td.eye(3, dtype=td.float64), x, upper=False
    ),
    "svd": lambda x: _gauge_free_svd(td, td.linalg.svd(x, full_matrices=False)),
    "qr": lambda x: td.linalg.qr(x).Q.abs() + td.linalg.qr(x).R.abs(),
    **SYMMETRIC,
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_gradcheck_and_gradgradcheck(name):
    x = td.tensor(RNG.standard_normal((2, 3, 3)) + 2 * np.eye(3), requires_grad=True)
    fn = SECOND_ORDER[name]
    assert gradcheck(fn, [x])
    assert gradgradcheck(fn, [x])


def test_float32_stays_float32():
    a = td.tensor(SPD.astype(np.float32), requires_grad=True)
    out = td.linalg.cholesky(a).sum() + td.linalg.slogdet(a).logabsdet.sum()
    out.backward()
    assert out.dtype == np.float32 and a.grad.dtype == np.float32


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: td.linalg.inv(td.ones(2, 3)),
            ShapeError,
            r"square matrices of shape \(\*, n, n\)",
        ),
        (lambda: td.linalg.inv(td.zeros(2, 2)), InputError, "singular"),
        (lambda: td.linalg.cholesky(-td.eye(2)), InputError, "not definite"),
        (lambda: td.linalg.solve(td.eye(3), td.ones(2, 1)), ShapeError, "B needs 3 rows"),
        (
            lambda: td.linalg.solve(td.ones(3, 2, 2) + td.eye(2), td.ones(4, 2, 1)),
            ShapeError,
            r"batch dims of \(3, 2, 2\) and \(4, 2, 1\) do not broadcast",
        ),
        (lambda: td.linalg.eigh(td.eye(2), UPLO="X"), InputError, "UPLO must be"),
        (
            lambda: td.linalg.svd(td.ones(3, 2, requires_grad=True)),
            InputError,
            "full_matrices=False",
        ),
        (lambda: td.linalg.qr(td.ones(2, 3, requires_grad=True)), InputError, "rows >= columns"),
        (lambda: td.linalg.matrix_norm(td.ones(2, 2), "max"), InputError, "unsupported ord"),
        (lambda: td.linalg.matrix_power(td.eye(2), 1.5), InputError, "n must be an int"),
        (lambda: td.linalg.det(td.tensor([[1, 2], [3, 4]])), InputError, "float32 or float64"),
    ],
)
def test_errors_name_what_is_wrong(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_logdet_sign_conventions_and_results_are_named():
    neg = td.tensor(np.diag([-1.0, 2.0]))
    assert np.isnan(td.linalg.logdet(neg).item())
    assert td.linalg.logdet(td.tensor(np.zeros((2, 2)))).item() == -np.inf
    r = td.linalg.svd(td.tensor(TALL[0]), full_matrices=False)
    np.testing.assert_allclose((r.U * r.S) @ r.Vh, TALL[0].copy(), atol=1e-12)
    q = td.linalg.qr(td.tensor(TALL[0]))
    np.testing.assert_allclose(q.Q @ q.R, TALL[0], atol=1e-12)


@pytest.mark.parametrize(
    "shapes",
    [
        [(4, 3), (3, 5)],
        [(10,), (10, 3), (3, 20), (20, 2), (2,)],  # 1-d ends, an order that is not left-to-right
        [(2, 30), (30, 1), (1, 40), (40, 3)],
        [(5,), (5,)],
    ],
    ids=["two", "vector-ends", "chain", "two-vectors"],
)
def test_multi_dot_matches_torch(shapes):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(len(shapes))
    arrays = [rng.standard_normal(s) for s in shapes]
    ours = [td.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    got, expected = td.linalg.multi_dot(ours), torch.linalg.multi_dot(theirs)
    # products in another order (or the same, with another BLAS) round differently
    np.testing.assert_allclose(got.data, expected.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert got.shape == tuple(expected.shape)
    got.sum().backward()
    expected.sum().backward()
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o.grad.data, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_multi_dot_takes_the_cheapest_order_and_names_bad_shapes():
    from tadiff.linalg import _chain_order

    # (10 x 100)(100 x 5)(5 x 50): (AB)C costs 5000 + 2500, A(BC) 25000 + 50000
    assert _chain_order([10, 100, 5, 50]) == {(0, 1): 0, (1, 2): 1, (0, 2): 1}
    with pytest.raises(InputError, match="multi_dot: got 1 tensor"):
        td.linalg.multi_dot([td.ones(2, 2)])
    with pytest.raises(ShapeError, match=r"multi_dot: tensors 0 and 1 have shapes \(2, 3\)"):
        td.linalg.multi_dot([td.ones(2, 3), td.ones(4, 2)])
    with pytest.raises(ShapeError, match=r"multi_dot: tensor 1 has shape \(3,\)"):
        td.linalg.multi_dot([td.ones(2, 3), td.ones(3), td.ones(3, 2)])
