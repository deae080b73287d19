"""tadiff.torch.sinkhorn: the implicit backward against torch autograd through the iterations."""

import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tadiff.errors import InputError, ShapeError  # noqa: E402
from tadiff.structured.sinkhorn import sinkhorn as generic_sinkhorn  # noqa: E402
from tadiff.structured.sinkhorn import sinkhorn_vjp as generic_vjp  # noqa: E402
from tadiff.torch.sinkhorn import SinkhornFunction, sinkhorn  # noqa: E402

SOLVERS = ["implicit", "implicit-2n", "direct"]


def _unrolled_grad(X, G, iters, a=None, b=None):
    X = X.detach().clone().requires_grad_()
    R = sinkhorn(X, a, b, iters=iters, backward="unrolled")
    assert R.grad_fn is not None and not isinstance(R.grad_fn, SinkhornFunction)
    (grad,) = torch.autograd.grad(R, X, G)
    return grad


def _implicit_grad(X, G, iters, method, a=None, b=None):
    X = X.detach().clone().requires_grad_()
    R = sinkhorn(X, a, b, iters=iters, backward=method)
    assert type(R.grad_fn).__name__ == "SinkhornFunctionBackward"
    (grad,) = torch.autograd.grad(R, X, G)
    return grad


@pytest.mark.parametrize("method", SOLVERS)
@pytest.mark.parametrize("shape", [(64, 4, 4), (32, 8, 8), (8, 16, 16), (16, 3, 7), (16, 6, 2)])
def test_implicit_matches_unrolled_autograd_after_convergence(method, shape):
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(shape, generator=gen, dtype=torch.float64) * 4
    G = torch.randn(shape, generator=gen, dtype=torch.float64)  # never all ones
    reference = _unrolled_grad(X, G, iters=300)
    grad = _implicit_grad(X, G, iters=300, method=method)
    assert reference.abs().max() > 1e-2  # the comparison is not between two zeros
    assert (grad - reference).abs().max().item() <= 1e-9


def test_implicit_matches_unrolled_with_general_marginals():
    gen = torch.Generator().manual_seed(1)
    X = torch.randn(8, 5, 3, generator=gen, dtype=torch.float64)
    a = torch.rand(8, 5, generator=gen, dtype=torch.float64) + 0.5
    b = torch.rand(3, generator=gen, dtype=torch.float64) + 0.5
    a = a / a.sum(-1, keepdim=True) * b.sum()
    G = torch.randn(X.shape, generator=gen, dtype=torch.float64)
    reference = _unrolled_grad(X, G, 400, a, b)
    for method in SOLVERS:
        grad = _implicit_grad(X, G, 400, method, a, b)
        assert (grad - reference).abs().max().item() <= 1e-9, method


def test_marginal_gradients_match_unrolled_along_equal_mass_directions():
    gen = torch.Generator().manual_seed(2)
    X = torch.randn(4, 3, 5, generator=gen, dtype=torch.float64)
    theta_a = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    theta_b = torch.randn(5, generator=gen, dtype=torch.float64, requires_grad=True)
    G = torch.randn(X.shape, generator=gen, dtype=torch.float64)
    grads = {}
    for method in ["unrolled", "implicit"]:
        # softmax keeps both marginals at mass 2, so every direction in theta is admissible.
        a, b = 2 * theta_a.softmax(-1), 2 * theta_b.softmax(-1)
        R = sinkhorn(X, a, b, iters=400, backward=method)
        grads[method] = torch.autograd.grad(R, (theta_a, theta_b), G)
    for implicit, unrolled in zip(grads["implicit"], grads["unrolled"], strict=True):
        assert (implicit - unrolled).abs().max().item() <= 1e-9


def test_twenty_iterations_float32_is_close_to_unrolled():
    # Not a fixed point: the implicit gradient is that of the limit, the unrolled one that of the
    # 20-step map. The gap is reported in docs/sinkhorn.md; here it must stay small relative to
    # the gradient (measured: ~1e-4 absolute against gradients of order 1).
    gen = torch.Generator().manual_seed(3)
    X = torch.rand(1024, 4, 4, generator=gen) * 4
    G = torch.randn(X.shape, generator=gen)
    reference = _unrolled_grad(X, G, iters=20)
    grad = _implicit_grad(X, G, iters=20, method="implicit")
    gap = (grad - reference).abs().max().item()
    print(f"20-iteration float32 forward: max |implicit - unrolled| = {gap:.2e}")
    assert grad.dtype == torch.float32
    assert gap <= 1e-2 * reference.abs().max().item()


@pytest.mark.parametrize("method", SOLVERS)
def test_gradcheck_small_cases(method):
    gen = torch.Generator().manual_seed(4)
    for shape in [(2, 3, 3), (2, 2, 4), (1, 1, 1)]:
        X = torch.randn(shape, generator=gen, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(
            lambda X: sinkhorn(X, iters=1000, tol=1e-15, backward=method), (X,)
        )


def test_gradcheck_with_marginals():
    gen = torch.Generator().manual_seed(5)
    X = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    ta = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True)
    tb = torch.randn(2, 4, generator=gen, dtype=torch.float64, requires_grad=True)

    def f(X, ta, tb):
        return sinkhorn(X, ta.softmax(-1), tb.softmax(-1), iters=1000, tol=1e-15)

    assert torch.autograd.gradcheck(f, (X, ta, tb))


def test_gradcheck_with_one_marginal_given():
    # Only b given: a spreads b's mass evenly, and the gradient must flow through both.
    gen = torch.Generator().manual_seed(9)
    X = torch.randn(2, 4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    tb = torch.randn(3, generator=gen, dtype=torch.float64, requires_grad=True)

    def f(X, tb):
        return sinkhorn(X, None, 3 * tb.softmax(-1), iters=1000, tol=1e-15)

    R = f(X, tb)
    assert torch.allclose(R.sum(-1), torch.full((2, 4), 0.75, dtype=torch.float64))
    assert torch.autograd.gradcheck(f, (X, tb))


def test_gradient_rows_and_columns_sum_to_zero():
    gen = torch.Generator().manual_seed(6)
    X = torch.rand(256, 8, 8, generator=gen, requires_grad=True)
    (sinkhorn(X) * torch.randn(X.shape, generator=gen)).sum().backward()
    assert X.grad.abs().max() > 1e-2
    assert X.grad.sum(-1).abs().max() < 1e-5
    assert X.grad.sum(-2).abs().max() < 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_entries_and_near_permutations_give_finite_results(dtype):
    gen = torch.Generator().manual_seed(7)
    big = (torch.randint(0, 2, (32, 4, 4), generator=gen) * 1000 - 500).to(dtype)
    perm = torch.stack([torch.eye(6)[torch.randperm(6, generator=gen)] for _ in range(32)])
    near = (40 * perm + torch.randn(perm.shape, generator=gen)).to(dtype)
    for X in [big, near]:
        for method in SOLVERS:
            X = X.detach().requires_grad_()
            # some of these cannot be balanced (the check would warn): the test is about
            # finite values and gradients
            R = sinkhorn(X, iters=50, backward=method, warn_tol=None)
            R.backward(torch.randn(R.shape, generator=gen, dtype=dtype))
            assert torch.isfinite(R).all() and torch.isfinite(X.grad).all(), method


def test_generic_entry_point_dispatches_torch_tensors():
    X = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    R = generic_sinkhorn(X, iters=30)
    assert isinstance(R, torch.Tensor)
    assert type(R.grad_fn).__name__ == "SinkhornFunctionBackward"
    np.testing.assert_allclose(R.detach().sum(-1).numpy(), 1, atol=1e-12)


def test_bad_input_raises_before_any_work():
    with pytest.raises(ShapeError, match=r"shape \(5,\)"):
        sinkhorn(torch.ones(5))
    with pytest.raises(InputError, match="cg_tol must be"):
        sinkhorn(torch.ones(2, 2, requires_grad=True), cg_tol=-1.0)  # at the call, not backward
    with pytest.raises(InputError, match="backward must be one of"):
        sinkhorn(torch.ones(2, 2), backward="implicit-4n")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    X = torch.rand(64, 8, 8, dtype=torch.float64) * 4
    G = torch.randn_like(X)
    cpu = _implicit_grad(X, G, 200, "implicit")
    gpu = _implicit_grad(X.cuda(), G.cuda(), 200, "implicit")
    assert (gpu.cpu() - cpu).abs().max().item() <= 1e-9


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("method", SOLVERS)
def test_half_precision_gradients_are_solved_in_float32(dtype, method):
    gen = torch.Generator().manual_seed(8)
    X = (torch.rand(64, 4, 4, generator=gen) * 4).to(dtype).requires_grad_()
    G = torch.randn(X.shape, generator=gen).to(dtype)
    R = sinkhorn(X, iters=30, backward=method, warn_tol=None)  # half precision: ~1e-3 off
    R.backward(G)
    assert R.dtype == dtype and X.grad.dtype == dtype
    # Oracle: the float64 solve on the same (rounded) R and G.
    exact = generic_vjp(R.detach().double(), G.double(), method="direct")
    assert (X.grad.double() - exact).abs().max().item() <= 1e-2 * exact.abs().max().item()


def test_docstring_examples_run():
    import doctest

    module = importlib.import_module("tadiff.torch.sinkhorn")

    result = doctest.testmod(module)
    assert result.attempted >= 4 and result.failed == 0


@pytest.mark.slow
@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_stress_large_batches_float64(n):
    # Many random matrices, a quarter pushed towards permutations: the worst element of a big
    # batch. The batch shrinks with n to keep the unrolled graph near 1 GB.
    batch = 65536 // (n * n)
    gen = torch.Generator().manual_seed(n)
    X = torch.rand(batch, n, n, generator=gen, dtype=torch.float64) * 4
    quarter = batch // 4
    perm = torch.stack([torch.eye(n)[torch.randperm(n, generator=gen)] for _ in range(quarter)])
    X[:quarter] += 3 * perm.double()
    G = torch.randn(X.shape, generator=gen, dtype=torch.float64)
    reference = _unrolled_grad(X, G, iters=600)
    for method in SOLVERS:
        assert (_implicit_grad(X, G, 600, method) - reference).abs().max().item() <= 1e-9
