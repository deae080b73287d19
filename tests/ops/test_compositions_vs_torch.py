"""torch functions written as compositions (``tadiff.ops.compositions``) against PyTorch:
values, dtypes and gradients (float64), ties and NaN in the cumulative extremes, zero
distances, weights of ``cov``, and errors."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(3)
A = RNG.standard_normal((4, 3))
B = RNG.standard_normal((5, 3))
V = RNG.standard_normal(6)


def _compare(ours, theirs, arrays, rtol=1e-12, atol=1e-13, grads=True):
    """Values equal to rounding, and the gradients of ``sum(out * w)`` for a random ``w``
    (the same operations on the same numbers: only summation order differs)."""
    got_in = [td.tensor(a, requires_grad=grads and a.dtype.kind == "f") for a in arrays]
    exp_in = [torch.tensor(a, requires_grad=grads and a.dtype.kind == "f") for a in arrays]
    got, expected = ours(*got_in), theirs(*exp_in)
    if isinstance(expected, tuple):
        got, expected = got[0], expected[0]
    e = expected.detach().numpy()
    np.testing.assert_allclose(got.data, e, rtol=rtol, atol=atol)
    assert got.shape == tuple(expected.shape) and got.dtype == e.dtype
    if not expected.requires_grad:
        return
    w = RNG.standard_normal(e.shape)
    (got * td.tensor(w)).sum().backward()
    (expected * torch.tensor(w)).sum().backward()
    for i, (o, t) in enumerate(zip(got_in, exp_in, strict=True)):
        if t.grad is not None:
            np.testing.assert_allclose(o.grad.data, t.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient {i}")  # fmt: skip


CASES = {
    "dist": (lambda a, b: td.dist(a, b[:4]), lambda a, b: torch.dist(a, b[:4]), [A, B]),
    "dist-p1": (lambda a, b: td.dist(a, b[:4], 1), lambda a, b: torch.dist(a, b[:4], 1), [A, B]),
    "cdist": (td.cdist, torch.cdist, [A, B]),
    "cdist-p1": (lambda a, b: td.cdist(a, b, 1.0), lambda a, b: torch.cdist(a, b, 1.0), [A, B]),
    "cdist-p3": (lambda a, b: td.cdist(a, b, 3.0), lambda a, b: torch.cdist(a, b, 3.0), [A, B]),
    "cdist-batch": (td.cdist, torch.cdist, [RNG.standard_normal((2, 4, 3)), RNG.standard_normal((2, 5, 3))]),  # noqa: E501
    "pdist": (td.pdist, torch.pdist, [B]),
    "cummax": (lambda x: td.cummax(x, 1).values, lambda x: torch.cummax(x, 1).values, [A]),
    "cummin": (lambda x: td.cummin(x, 0).values, lambda x: torch.cummin(x, 0).values, [A]),
    "std_mean": (lambda x: td.std_mean(x, 1)[0] + td.std_mean(x, 1)[1],
                 lambda x: torch.std_mean(x, 1)[0] + torch.std_mean(x, 1)[1], [A]),
    "var_mean-all": (lambda x: td.var_mean(x)[0] * td.var_mean(x)[1],
                     lambda x: torch.var_mean(x)[0] * torch.var_mean(x)[1], [A]),
    "cov": (td.cov, torch.cov, [A]),
    "cov-1d": (td.cov, torch.cov, [V]),
    "cov-correction0": (lambda x: td.cov(x, correction=0), lambda x: torch.cov(x, correction=0), [A]),  # noqa: E501
    "corrcoef": (td.corrcoef, torch.corrcoef, [A]),
    "trapezoid": (td.trapezoid, torch.trapezoid, [A]),
    "trapezoid-x": (lambda y, x: td.trapezoid(y, x), lambda y, x: torch.trapezoid(y, x), [A[0], np.cumsum(np.abs(V[:3]))]),  # noqa: E501
    "trapezoid-x-dim0": (lambda y, x: td.trapezoid(y, x, dim=0), lambda y, x: torch.trapezoid(y, x, dim=0), [A, np.cumsum(np.abs(V[:4]))]),  # noqa: E501
    "cumulative_trapezoid-x2d": (lambda y, x: td.cumulative_trapezoid(y, x), lambda y, x: torch.cumulative_trapezoid(y, x), [A, np.cumsum(np.abs(A), 1)]),  # noqa: E501
    "trapezoid-dx-dim0": (lambda y: td.trapezoid(y, dx=0.5, dim=0), lambda y: torch.trapezoid(y, dx=0.5, dim=0), [A]),  # noqa: E501
    "cumulative_trapezoid": (td.cumulative_trapezoid, torch.cumulative_trapezoid, [A]),
    "block_diag": (lambda a, b, v: td.block_diag(a, b, v), lambda a, b, v: torch.block_diag(a, b, v), [A, B[:2], V[:2]]),  # noqa: E501
    "cartesian_prod": (lambda a, b: td.cartesian_prod(a, b), lambda a, b: torch.cartesian_prod(a, b), [V[:3], V[3:]]),  # noqa: E501
    "diagflat": (lambda x: td.diagflat(x, 1), lambda x: torch.diagflat(x, 1), [A[:2]]),
    "addbmm": (lambda c, a, b: td.addbmm(c, a, b, beta=0.5, alpha=2.0),
               lambda c, a, b: torch.addbmm(c, a, b, beta=0.5, alpha=2.0),
               [A[:2, :2], RNG.standard_normal((3, 2, 4)), RNG.standard_normal((3, 4, 2))]),
    "chain_matmul": (td.chain_matmul, torch.chain_matmul, [A, A.T.copy(), B[:4]]),
    "inner": (td.inner, torch.inner, [A, B]),
    "vdot": (td.vdot, torch.vdot, [V, V[::-1].copy()]),
    "flipud": (td.flipud, torch.flipud, [A]),
    "fliplr": (td.fliplr, torch.fliplr, [A]),
    "rot90": (td.rot90, torch.rot90, [A]),
    "rot90-k3": (lambda x: td.rot90(x, 3, (1, 0)), lambda x: torch.rot90(x, 3, (1, 0)), [A]),
    "rot90-k2": (lambda x: td.rot90(x, -2), lambda x: torch.rot90(x, -2), [A]),
    "atleast_3d": (td.atleast_3d, torch.atleast_3d, [V]),
    "dstack": (lambda a, b: td.dstack([a, b]), lambda a, b: torch.dstack([a, b]), [A, A * 2]),
    "column_stack": (lambda v, a: td.column_stack([v[:4], a]), lambda v, a: torch.column_stack([v[:4], a]), [V, A]),  # noqa: E501
    "logaddexp2": (td.logaddexp2, torch.logaddexp2, [A * 50, A[::-1].copy() * 50]),
    "deg2rad": (td.deg2rad, torch.deg2rad, [A]),
    "rad2deg": (td.rad2deg, torch.rad2deg, [A]),
    "float_power": (lambda x: td.float_power(x.abs(), 2.5), lambda x: torch.float_power(x.abs(), 2.5), [A]),  # noqa: E501
    "true_divide": (td.true_divide, torch.true_divide, [A, A[::-1].copy()]),
    "fix": (td.fix, torch.fix, [A * 3]),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")
@pytest.mark.parametrize("name", sorted(CASES))
def test_compositions_match_torch(name):
    ours, theirs, arrays = CASES[name]
    _compare(ours, theirs, arrays)


@pytest.mark.parametrize(("n", "increasing"), [(4, False), (None, True), (1, False)])
def test_vander_matches_torch_and_central_differences(n, increasing):
    # torch's vander cannot be differentiated (its backward meets an in-place write): values
    # against torch, the gradient against central differences
    _compare(
        lambda x: td.vander(x, n, increasing),
        lambda x: torch.vander(x, n, increasing),
        [V],
        grads=False,
    )
    x = td.tensor(V, requires_grad=True)
    assert td.autograd.gradcheck(lambda t: td.vander(t, n, increasing), (x,))


def test_cumulative_extremes_follow_torch_at_ties_and_nans():
    for x in (
        np.array([1.0, 3.0, 2.0, 3.0, 3.0, 0.0]),
        np.array([1.0, np.nan, 5.0, np.nan, 2.0]),
        np.array([[2.0, 2.0], [1.0, 2.0], [2.0, 1.0]]),
    ):
        for ours, theirs in ((td.cummax, torch.cummax), (td.cummin, torch.cummin)):
            t = td.tensor(x, requires_grad=True)
            r = torch.tensor(x, requires_grad=True)
            got, expected = ours(t, 0), theirs(r, 0)
            np.testing.assert_array_equal(got.indices.data, expected.indices.numpy())
            np.testing.assert_array_equal(got.values.data, expected.values.detach().numpy())
            got.values.sum().backward()
            expected.values.sum().backward()
            # the gradient goes to the selected elements: exact counts
            np.testing.assert_array_equal(t.grad.data, r.grad.numpy())


def test_cumulative_extremes_of_empty_and_0d_tensors_match_torch():
    for x in (np.zeros((0, 3)), np.array(2.5)):
        got, expected = td.cummax(td.tensor(x), 0), torch.cummax(torch.tensor(x), 0)
        assert got.values.shape == tuple(expected.values.shape)
        np.testing.assert_array_equal(got.indices.data, expected.indices.numpy())


def test_zero_distances_have_gradient_zero_as_in_torch():
    x = np.array([[1.0, 2.0], [1.0, 2.0]])
    _compare(td.cdist, torch.cdist, [x, x.copy()], atol=0)
    _compare(td.pdist, torch.pdist, [x])


def test_cov_weights_match_torch():
    f = np.array([1, 3, 2])
    a = np.array([0.5, 1.0, 2.0])
    x = RNG.standard_normal((2, 3))
    _compare(
        lambda t: td.cov(t, fweights=td.tensor(f), aweights=td.tensor(a)),
        lambda t: torch.cov(t, fweights=torch.tensor(f), aweights=torch.tensor(a)),
        [x],
    )
    _compare(
        lambda t: td.cov(t, correction=0, aweights=td.tensor(a)),
        lambda t: torch.cov(t, correction=0, aweights=torch.tensor(a)),
        [x],
    )


def test_predicates_and_aliases():
    np.testing.assert_array_equal(
        td.signbit(td.tensor([-0.0, 0.0, -2.0])).data,
        torch.signbit(torch.tensor([-0.0, 0.0, -2.0])).numpy(),
    )
    np.testing.assert_array_equal(
        td.isin(td.tensor([1, 2, 3, 4]), td.tensor([2, 4]), invert=True).data,
        torch.isin(torch.tensor([1, 2, 3, 4]), torch.tensor([2, 4]), invert=True).numpy(),
    )
    x = td.tensor([1.0, -2.0])
    assert td.positive(x) is x
    assert td.atleast_1d(td.tensor(2.0)).shape == (1,)
    assert [t.shape for t in td.atleast_2d(td.tensor(1.0), td.ones(3))] == [(1, 1), (1, 3)]
    assert td.float_power(td.tensor([2.0], dtype=td.float32), 2).dtype == np.float64


def test_bad_arguments_raise_named_errors():
    with pytest.raises(ShapeError, match=r"cdist: x1 of shape \(4, 3\) and x2 of shape \(5, 2\)"):
        td.cdist(td.tensor(A), td.ones(5, 2))
    with pytest.raises(InputError, match="cdist: p=-1"):
        td.cdist(td.tensor(A), td.tensor(B), -1)
    with pytest.raises(ShapeError, match=r"pdist: input of shape \(3,\)"):
        td.pdist(td.ones(3))
    with pytest.raises(ShapeError, match="cummax: dim=2 is out of range"):
        td.cummax(td.ones(2, 2), 2)
    with pytest.raises(InputError, match="cov: fweights of dtype float"):
        td.cov(td.tensor(A), fweights=td.ones(3))
    with pytest.raises(InputError, match="cov: aweights has negative entries"):
        td.cov(td.tensor(A), aweights=td.tensor([1.0, -1.0, 1.0]))
    with pytest.raises(ShapeError, match=r"fliplr: input of shape \(3,\)"):
        td.fliplr(td.ones(3))
    with pytest.raises(ShapeError, match=r"rot90: dims=\(0, 0\) name one dim twice"):
        td.rot90(td.ones(2, 2), 1, (0, 0))
    with pytest.raises(ShapeError, match="block_diag: argument 0 has shape"):
        td.block_diag(td.ones(1, 1, 1))
    with pytest.raises(ShapeError, match="cartesian_prod: arguments of shapes"):
        td.cartesian_prod(td.ones(2, 2))
    with pytest.raises(ShapeError, match=r"vander: x of shape \(2, 2\)"):
        td.vander(td.ones(2, 2))


def test_tensor_methods_are_the_functions():
    # torch exposes these as methods too; a program calling x.cummax(1) runs unchanged
    x = td.tensor(A)
    np.testing.assert_array_equal(x.cummax(1).indices.data, td.cummax(x, 1).indices.data)
    np.testing.assert_array_equal(x.rot90(2).data, td.rot90(x, 2).data)
    for name in ("fliplr", "flipud", "fix", "deg2rad", "signbit", "positive"):
        np.testing.assert_array_equal(getattr(x, name)().data, getattr(td, name)(x).data)
        assert hasattr(torch.Tensor, name), name  # only torch's own methods are added


def test_cov_without_degrees_of_freedom_warns_like_torch():
    x = np.array([[1.0], [2.0]])  # one observation, correction 1
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0") as caught:
        got = td.cov(td.tensor(x))
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        expected = torch.cov(torch.tensor(x))
    np.testing.assert_array_equal(got.data, expected.numpy())  # NaN in both, same places
