"""The fused Triton backward against the torch kernels (CPU under TRITON_INTERPRET=1, or CUDA)."""

import importlib

import pytest

torch = pytest.importorskip("torch")

# On CPU the kernels run in Triton's interpreter: tests/conftest.py switches it on before triton
# is first imported.
pytest.importorskip("triton")

from tadiff.errors import InputError, ShapeError  # noqa: E402
from tadiff.structured.sinkhorn import sinkhorn_forward, sinkhorn_vjp  # noqa: E402
from tadiff.structured.sinkhorn_triton import (  # noqa: E402
    sinkhorn_forward_triton,
    sinkhorn_vjp_triton,
    supports,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _case(shape, dtype, seed, scale=4.0, iters=60):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(shape, generator=gen, dtype=torch.float64) * scale
    R, _ = sinkhorn_forward(X, iters=iters)
    G = torch.randn(shape, generator=gen, dtype=torch.float64)
    return R.to(DEVICE, dtype), G.to(DEVICE, dtype)


@pytest.mark.parametrize(
    ("shape", "dtype", "atol"),
    [
        ((5, 4, 4), torch.float64, 1e-12),
        ((37, 4, 4), torch.float32, 1e-5),  # batch not a multiple of the tile
        ((6, 5, 5), torch.float64, 1e-12),  # padded to 8 × 8
        ((4, 3, 7), torch.float64, 1e-12),  # wide: solved transposed through the strides
        ((2, 3, 8, 2), torch.float32, 1e-5),  # several batch dimensions, tall
        ((3, 16, 16), torch.float32, 1e-5),
    ],
)
def test_triton_matches_torch_kernel(shape, dtype, atol):
    R, G = _case(shape, dtype, seed=sum(shape))
    expected = sinkhorn_vjp(R, G, method="implicit")
    got = sinkhorn_vjp_triton(R, G)
    assert got.shape == R.shape and got.dtype == dtype
    assert expected.abs().max() > 1e-2
    assert (got - expected).abs().max().item() <= atol


def test_triton_half_precision_is_computed_in_float32():
    R, G = _case((8, 4, 4), torch.float32, seed=1)
    expected = sinkhorn_vjp(R, G)
    got = sinkhorn_vjp_triton(R.half(), G.half())
    assert got.dtype == torch.float16
    assert (got.float() - expected).abs().max().item() <= 5e-3


def test_triton_near_permutation_is_finite_and_balanced():
    gen = torch.Generator().manual_seed(2)
    perm = torch.stack([torch.eye(6)[torch.randperm(6, generator=gen)] for _ in range(16)])
    X = 40 * perm + torch.randn(perm.shape, generator=gen)
    R, _ = sinkhorn_forward(X, iters=50)
    G = torch.randn(R.shape, generator=gen)
    dX = sinkhorn_vjp_triton(R.to(DEVICE), G.to(DEVICE)).cpu()
    assert torch.isfinite(dX).all()
    assert dX.sum(-1).abs().max() < 1e-4 and dX.sum(-2).abs().max() < 1e-4


def test_triton_rejects_what_it_cannot_do():
    assert supports(torch.zeros(2, 64, 64)) and not supports(torch.zeros(2, 65, 4))
    with pytest.raises(InputError, match=r"n, m <= 64, got shape \(1, 65, 65\)"):
        sinkhorn_vjp_triton(torch.zeros(1, 65, 65), torch.zeros(1, 65, 65))
    with pytest.raises(ShapeError, match=r"G must have the shape of R \(1, 4, 4\)"):
        sinkhorn_vjp_triton(torch.zeros(1, 4, 4), torch.zeros(1, 4, 3))


@pytest.mark.parametrize(
    ("shape", "dtype", "atol"),
    [
        ((5, 4, 4), torch.float64, 1e-14),
        ((37, 5, 3), torch.float32, 1e-6),  # padded, batch tail
        ((2, 3, 2, 7), torch.float64, 1e-14),
    ],
)
def test_triton_forward_matches_the_generic_loop(shape, dtype, atol):
    gen = torch.Generator().manual_seed(sum(shape))
    X = (torch.randn(shape, generator=gen, dtype=torch.float64) * 3).to(DEVICE, dtype)
    expected, _ = sinkhorn_forward(X, iters=7, log_domain=False, warn_tol=None)
    got = sinkhorn_forward_triton(X, iters=7)
    assert got.dtype == dtype
    assert (got - expected).abs().max().item() <= atol


def test_triton_forward_with_marginals_broadcast_over_the_batch():
    gen = torch.Generator().manual_seed(3)
    X = torch.randn(4, 3, 5, generator=gen, dtype=torch.float64).to(DEVICE)
    a = (torch.rand(4, 3, generator=gen, dtype=torch.float64) + 0.5).to(DEVICE)
    b = (torch.rand(5, generator=gen, dtype=torch.float64) + 0.5).to(DEVICE)
    b = b / b.sum() * a.sum(-1, keepdim=True)  # (4, 5): equal mass per matrix
    expected, _ = sinkhorn_forward(X, a, b, iters=9)
    got = sinkhorn_forward_triton(X, a, b, iters=9)
    assert (got - expected).abs().max().item() <= 1e-14


def test_torch_function_dispatches_to_triton(monkeypatch):
    # On CUDA the Function picks the fused kernels itself; here the interpreter stands in.
    import tadiff.structured.sinkhorn_triton as kernels

    torch_sinkhorn = importlib.import_module("tadiff.torch.sinkhorn")

    calls = []
    for name in ["sinkhorn_forward_triton", "sinkhorn_vjp_triton"]:
        original = getattr(kernels, name)
        counted = lambda *args, _f=original, _n=name, **kw: calls.append(_n) or _f(*args, **kw)  # noqa: E731
        monkeypatch.setattr(kernels, name, counted)
    gen = torch.Generator().manual_seed(4)
    X = torch.rand(16, 6, 6, generator=gen, dtype=torch.float64) * 4
    G = torch.randn(X.shape, generator=gen, dtype=torch.float64)
    results = {}
    for fused in [False, True]:
        usable = lambda R, method="implicit", _fused=fused: _fused and method == "implicit"  # noqa: E731
        monkeypatch.setattr(torch_sinkhorn, "_triton_usable", usable)
        x = X.clone().to(DEVICE).requires_grad_()
        R = torch_sinkhorn.sinkhorn(x, iters=30)
        R.backward(G.to(DEVICE))
        results[fused] = (R.detach().cpu(), x.grad.cpu())
    assert calls == ["sinkhorn_forward_triton", "sinkhorn_vjp_triton"]
    for plain, fused in zip(results[False], results[True], strict=True):
        assert (plain - fused).abs().max().item() <= 1e-12


def test_triton_forward_rejects_large_matrices():
    with pytest.raises(InputError, match=r"n, m <= 64, got shape \(1, 3, 65\)"):
        sinkhorn_forward_triton(torch.zeros(1, 3, 65))


def test_fused_forward_of_the_torch_function_checks_the_balance_too(monkeypatch):
    # the torch Function takes the fused kernels when they apply (on CUDA); forced here on CPU
    from tadiff.errors import ConvergenceWarning

    tsk = importlib.import_module("tadiff.torch.sinkhorn")  # the module, not the function

    monkeypatch.setattr(tsk, "_triton_usable", lambda R, method="implicit": True)
    gen = torch.Generator().manual_seed(11)
    X = (torch.randn(6, 4, 4, generator=gen, dtype=torch.float64) * 3).to(DEVICE)
    with pytest.warns(ConvergenceWarning, match="column sums are off"):
        R = tsk.sinkhorn(X, iters=5)
    expected, _ = sinkhorn_forward(X, iters=5, log_domain=False, warn_tol=None)
    assert (R - expected).abs().max().item() <= 1e-12  # it was the fused kernel's R
