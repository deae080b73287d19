"""Sinkhorn's torch bridge under ``torch.func`` transforms and ``torch.autocast``.

Oracle: the same transform applied to the unrolled forward (``backward="unrolled"``: torch
autograd through the iterations), after enough iterations that the balanced matrix is a fixed
point in float64 (the implicit gradient is that of the limit). Measured gaps: 2e-16; compared at
1e-9, the tolerance of test_sinkhorn_torch.py for the same comparison in eager mode.
"""

import pytest

torch = pytest.importorskip("torch")
func = torch.func

from tadiff.errors import AutogradError  # noqa: E402
from tadiff.torch.sinkhorn import sinkhorn  # noqa: E402

F64 = torch.float64
ITERS = 300
TOL = 1e-9


def _inputs(shape=(5, 4, 4), seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(shape, generator=g, dtype=F64) * 4
    G = torch.randn(shape, generator=g, dtype=F64)
    return X, G


def _close(a, b):
    assert a.shape == b.shape
    assert b.abs().max() > 1e-3  # not a comparison of two zeros
    assert (a - b).abs().max().item() <= TOL


def _loss(backward, G):
    return lambda X: (sinkhorn(X, iters=ITERS, backward=backward) * G).sum()


@pytest.mark.parametrize("method", ["implicit", "implicit-2n", "direct"])
def test_grad_equals_grad_of_the_unrolled_forward(method):
    X, G = _inputs()
    _close(func.grad(_loss(method, G))(X), func.grad(_loss("unrolled", G))(X))


def test_grad_of_the_marginals():
    X, G = _inputs((3, 4, 6), seed=1)
    g = torch.Generator().manual_seed(2)
    theta_a = torch.randn(3, 4, generator=g, dtype=F64)
    theta_b = torch.randn(6, generator=g, dtype=F64)

    def loss(method):
        def f(theta_a, theta_b):  # softmax keeps both masses at 2: every direction admissible
            a, b = 2 * theta_a.softmax(-1), 2 * theta_b.softmax(-1)
            return (sinkhorn(X, a, b, iters=400, backward=method) * G).sum()

        return f

    got = func.grad(loss("implicit"), argnums=(0, 1))(theta_a, theta_b)
    want = func.grad(loss("unrolled"), argnums=(0, 1))(theta_a, theta_b)
    for a, b in zip(got, want, strict=True):
        _close(a, b)


@pytest.mark.parametrize("in_dim", [0, 1, 2])
def test_vmap_folds_the_mapped_dimension_into_the_batch(in_dim):
    X, _ = _inputs((6, 3, 4, 4), seed=3)
    moved = X.movedim(0, in_dim)
    got = func.vmap(lambda x: sinkhorn(x, iters=ITERS), in_dims=in_dim)(moved)
    want = torch.stack([sinkhorn(x, iters=ITERS) for x in X])
    assert (got - want).abs().max().item() <= 1e-12


def test_vmap_over_marginals_with_shared_logits():
    X, _ = _inputs((4, 4), seed=4)
    g = torch.Generator().manual_seed(5)
    a = torch.rand(7, 4, generator=g, dtype=F64) + 0.5
    b = a.sum(-1, keepdim=True) * torch.full((7, 4), 0.25, dtype=F64)  # equal mass
    got = func.vmap(lambda a, b: sinkhorn(X, a, b, iters=ITERS))(a, b)
    want = torch.stack([sinkhorn(X, ai, bi, iters=ITERS) for ai, bi in zip(a, b, strict=True)])
    assert (got - want).abs().max().item() <= 1e-12


def test_vmap_lines_up_batches_of_different_ranks():
    # per sample: X (3, 4, 5) with marginals (4,) mapped over 6 / X (2, 3, 4, 5) mapped over 6
    # with marginals of batch (3,) unmapped: the mapped dimension must not pair with a batch one
    X, _ = _inputs((3, 4, 5), seed=10)
    g = torch.Generator().manual_seed(11)
    A = torch.rand(6, 4, generator=g, dtype=F64) + 0.5

    def per_marginal(a):
        return sinkhorn(X, a, a.sum(-1, keepdim=True) * torch.full((5,), 0.2, dtype=F64))

    got = func.vmap(per_marginal)(A)
    assert got.shape == (6, 3, 4, 5)
    assert (got - torch.stack([per_marginal(a) for a in A])).abs().max().item() <= 1e-12
    Xs, _ = _inputs((6, 2, 3, 4, 5), seed=12)
    a = torch.rand(3, 4, generator=g, dtype=F64) + 0.5
    b = a.sum(-1, keepdim=True) * torch.full((5,), 0.2, dtype=F64)
    got = func.vmap(lambda x: sinkhorn(x, a, b), in_dims=1)(Xs.movedim(0, 1))
    want = torch.stack([sinkhorn(x, a, b) for x in Xs])
    assert (got - want).abs().max().item() <= 1e-12


def test_per_sample_gradients_by_vmap_of_grad():
    X, G = _inputs((6, 4, 4), seed=6)
    implicit = func.vmap(func.grad(lambda x, g: (sinkhorn(x, iters=ITERS) * g).sum()))(X, G)
    # the unrolled forward checks its input's values (not vmappable): one sample at a time
    unrolled = torch.stack([func.grad(_loss("unrolled", g))(x) for x, g in zip(X, G, strict=True)])
    _close(implicit, unrolled)


def test_jacrev_and_vjp_equal_the_unrolled_ones():
    X, G = _inputs((4, 5), seed=7)
    implicit = func.jacrev(lambda x: sinkhorn(x, iters=ITERS))(X)
    unrolled = func.jacrev(lambda x: sinkhorn(x, iters=ITERS, backward="unrolled"))(X)
    assert implicit.shape == (4, 5, 4, 5)
    _close(implicit, unrolled)
    _, vjp_fn = func.vjp(lambda x: sinkhorn(x, iters=ITERS), X)
    _close(vjp_fn(G)[0], func.grad(_loss("unrolled", G))(X))


def test_second_derivatives_raise_instead_of_returning_zeros():
    X, G = _inputs((4, 4))
    inner = func.grad(_loss("implicit", G))
    with pytest.raises(AutogradError, match="once-differentiable"):
        func.grad(lambda x: inner(x).square().sum())(X)
    with pytest.raises(AutogradError, match="forward-mode"):
        func.jacfwd(lambda x: sinkhorn(x, iters=20))(X)
    # the unrolled forward differentiates to any order under the transforms
    hess = func.hessian(lambda x: (sinkhorn(x, iters=30, backward="unrolled") * G).sum())(X)
    assert hess.shape == (4, 4, 4, 4) and torch.isfinite(hess).all()


# ---- autocast: compute in float32, as FastH does ------------------------------------------------


@pytest.mark.parametrize("half", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("backward", ["implicit", "unrolled"])
def test_half_inputs_under_autocast_are_computed_in_float32(half, backward):
    g = torch.Generator().manual_seed(8)
    X = (torch.rand(3, 5, 5, generator=g) * 4).to(half).requires_grad_(True)
    G = torch.randn(3, 5, 5, generator=g)
    with torch.autocast("cpu", dtype=half):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == half  # autocast is on
        R = sinkhorn(X, iters=50, backward=backward)
        (gX,) = torch.autograd.grad((R * G).sum(), X)
    X32 = X.detach().float().requires_grad_(True)
    R32 = sinkhorn(X32, iters=50, backward=backward)
    (g32,) = torch.autograd.grad((R32 * G).sum(), X32)
    assert R.dtype == torch.float32 and torch.equal(R, R32)
    assert gX.dtype == half and torch.equal(gX, g32.to(half))  # autograd casts back
    # balanced to float32's precision: half precision would leave errors near 1e-2
    assert (R.sum(-2) - 1).abs().max() < 1e-5


def test_float32_under_autocast_is_not_lowered():
    g = torch.Generator().manual_seed(9)
    X = torch.rand(4, 6, 6, generator=g) * 4
    reference = sinkhorn(X, iters=50)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        R = sinkhorn(X, iters=50)
        R_transformed = func.vmap(lambda x: sinkhorn(x, iters=50))(X)
    assert torch.equal(R, reference) and torch.equal(R_transformed, reference)
