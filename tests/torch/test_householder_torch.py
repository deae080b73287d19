"""FastH for torch: gradients vs torch autograd through the sequential loop, gradcheck, layers."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from tadiff.errors import DTypeError, InputError, ShapeError  # noqa: E402
from tadiff.structured import householder as hh  # noqa: E402
from tadiff.structured.householder import householder_sequential  # noqa: E402
from tadiff.torch.householder import (  # noqa: E402
    LinearSVD,
    Orthogonal,
    householder_apply,
    householder_product,
)

F64 = torch.float64


def _explicit(V):
    d = V.shape[1]
    U = torch.eye(d, dtype=V.dtype)
    for v in V:
        U = U @ (torch.eye(d, dtype=V.dtype) - 2 * torch.outer(v, v) / (v @ v))
    return U


def _grads(fn, V, X, G):
    V = V.clone().requires_grad_(True)
    X = X.clone().requires_grad_(True)
    Y = fn(V, X)
    gV, gX = torch.autograd.grad(Y, (V, X), G)
    return Y.detach(), gV, gX


CASES = [(6, 6, 3, 4), (5, 9, 2, 2), (9, 9, 4, 3), (7, 10, 1, 7), (1, 3, 2, None)]
CASES += [(10, 17, 3, 4), (20, 20, 5, None), (4, 13, 2, 16)]


@pytest.mark.parametrize(("k", "d", "m", "block"), CASES)
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("batch", [(), (2, 1)])
def test_grads_equal_autograd_through_sequential_loop(k, d, m, block, transpose, batch):
    gen = torch.Generator().manual_seed(k * 31 + d)
    V = torch.randn(k, d, dtype=F64, generator=gen)
    X = torch.randn(*batch, d, m, dtype=F64, generator=gen)
    G = torch.randn(*batch, d, m, dtype=F64, generator=gen)
    Y, gV, gX = _grads(
        lambda v, x: householder_apply(v, x, block=block, transpose=transpose), V, X, G
    )
    Ys, gVs, gXs = _grads(lambda v, x: householder_sequential(v, x, transpose=transpose), V, X, G)
    torch.testing.assert_close(Y, Ys, atol=1e-12, rtol=0)
    torch.testing.assert_close(gV, gVs, atol=1e-9, rtol=0)
    torch.testing.assert_close(gX, gXs, atol=1e-9, rtol=0)


@pytest.mark.parametrize(("k", "d", "m", "block"), [(5, 7, 2, 2), (6, 6, 3, 4), (3, 8, 2, 8)])
@pytest.mark.parametrize("transpose", [False, True])
def test_gradcheck(k, d, m, block, transpose):
    gen = torch.Generator().manual_seed(1)
    V = torch.randn(k, d, dtype=F64, generator=gen, requires_grad=True)
    X = torch.randn(2, d, m, dtype=F64, generator=gen, requires_grad=True)
    fn = lambda v, x: householder_apply(v, x, block=block, transpose=transpose)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (V, X), eps=1e-6, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize(("k", "d", "block", "transpose"), [(4, 5, 2, False), (3, 3, 2, True)])
def test_gradgradcheck_second_derivatives(k, d, block, transpose):
    gen = torch.Generator().manual_seed(6)
    V = torch.randn(k, d, dtype=F64, generator=gen, requires_grad=True)
    X = torch.randn(d, 2, dtype=F64, generator=gen, requires_grad=True)
    fn = lambda v, x: householder_apply(v, x, block=block, transpose=transpose)  # noqa: E731
    assert torch.autograd.gradgradcheck(fn, (V, X), eps=1e-6, atol=1e-7, rtol=1e-5)
    Xc = X.detach()  # second derivative wrt V alone, X constant
    assert torch.autograd.gradgradcheck(lambda v: fn(v, Xc), (V,), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_only_one_input_requires_grad():
    gen = torch.Generator().manual_seed(2)
    V = torch.randn(7, 9, dtype=F64, generator=gen)
    X = torch.randn(9, 3, dtype=F64, generator=gen)
    G = torch.randn(9, 3, dtype=F64, generator=gen)
    _, gVs, gXs = _grads(householder_sequential, V, X, G)
    Vr = V.clone().requires_grad_(True)
    (gV,) = torch.autograd.grad(householder_apply(Vr, X, block=4), (Vr,), G)
    Xr = X.clone().requires_grad_(True)
    (gX,) = torch.autograd.grad(householder_apply(V, Xr, block=4), (Xr,), G)
    torch.testing.assert_close(gV, gVs, atol=1e-9, rtol=0)
    torch.testing.assert_close(gX, gXs, atol=1e-9, rtol=0)


def test_float32_dtype_preserved_in_values_and_grads():
    gen = torch.Generator().manual_seed(3)
    V64 = torch.randn(12, 16, dtype=F64, generator=gen)
    X64 = torch.randn(16, 4, dtype=F64, generator=gen)
    G64 = torch.randn(16, 4, dtype=F64, generator=gen)
    Y, gV, gX = _grads(
        lambda v, x: householder_apply(v, x, block=5), V64.float(), X64.float(), G64.float()
    )
    assert Y.dtype == gV.dtype == gX.dtype == torch.float32
    Ys, gVs, gXs = _grads(householder_sequential, V64, X64, G64)
    torch.testing.assert_close(Y, Ys.float(), atol=1e-5, rtol=0)
    torch.testing.assert_close(gV, gVs.float(), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gX, gXs.float(), atol=1e-5, rtol=0)


def test_product_matches_explicit_and_is_orthogonal_with_grad():
    gen = torch.Generator().manual_seed(4)
    V = torch.randn(6, 9, dtype=F64, generator=gen, requires_grad=True)
    U = householder_product(V, block=4)
    torch.testing.assert_close(U, _explicit(V.detach()), atol=1e-12, rtol=0)
    torch.testing.assert_close(U.T @ U, torch.eye(9, dtype=F64), atol=1e-12, rtol=0)
    W = torch.randn(9, 9, dtype=F64, generator=gen)
    (g,) = torch.autograd.grad((U * W).sum(), V)
    (g_ref,) = torch.autograd.grad((_explicit(V) * W).sum(), V)
    torch.testing.assert_close(g, g_ref, atol=1e-9, rtol=0)


@settings(max_examples=25, deadline=None)
@given(
    d=st.integers(1, 12),
    k_frac=st.floats(0.05, 1.0),
    m=st.integers(1, 3),
    block=st.one_of(st.none(), st.integers(1, 13)),
    transpose=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_grads_match_sequential(d, k_frac, m, block, transpose, seed):
    k = max(1, round(k_frac * d))
    gen = torch.Generator().manual_seed(seed)
    V = torch.randn(k, d, dtype=F64, generator=gen)
    X = torch.randn(d, m, dtype=F64, generator=gen)
    G = torch.randn(d, m, dtype=F64, generator=gen)
    Y, gV, gX = _grads(
        lambda v, x: householder_apply(v, x, block=block, transpose=transpose), V, X, G
    )
    Ys, gVs, gXs = _grads(lambda v, x: householder_sequential(v, x, transpose=transpose), V, X, G)
    torch.testing.assert_close(Y, Ys, atol=1e-11, rtol=0)
    torch.testing.assert_close(gV, gVs, atol=1e-8, rtol=1e-8)
    torch.testing.assert_close(gX, gXs, atol=1e-9, rtol=0)


def test_sequential_numpy_backward_baseline_matches_torch_autograd():
    gen = torch.Generator().manual_seed(5)
    V = torch.randn(8, 10, dtype=F64, generator=gen)
    X = torch.randn(10, 3, dtype=F64, generator=gen)
    G = torch.randn(10, 3, dtype=F64, generator=gen)
    for transpose in (False, True):
        Y, gVs, gXs = _grads(
            lambda v, x, t=transpose: householder_sequential(v, x, transpose=t), V, X, G
        )
        gV, gX = hh._sequential_backward(V.numpy(), Y.numpy(), G.numpy(), transpose=transpose)
        np.testing.assert_allclose(gV, gVs.numpy(), atol=1e-12)
        np.testing.assert_allclose(gX, gXs.numpy(), atol=1e-12)


def test_generic_entry_point_dispatches_to_torch():
    V = torch.randn(3, 5, dtype=F64, requires_grad=True)
    Y = hh.householder_apply(V, torch.eye(5, dtype=F64))
    assert isinstance(Y, torch.Tensor) and Y.grad_fn is not None
    torch.testing.assert_close(Y, _explicit(V.detach()), atol=1e-12, rtol=0)


def test_orthogonal_layer_forward_inverse_logdet():
    torch.manual_seed(0)
    layer = Orthogonal(10, k=7, block=3, dtype=F64)
    x = torch.randn(4, 2, 10, dtype=F64)
    U = _explicit(layer.V.detach())
    torch.testing.assert_close(layer(x), x @ U.T, atol=1e-12, rtol=0)
    torch.testing.assert_close(layer.inverse(layer(x)), x, atol=1e-12, rtol=0)
    torch.testing.assert_close(layer.matrix(), U, atol=1e-12, rtol=0)
    assert torch.equal(layer.log_abs_det(x), torch.zeros(4, 2, dtype=F64))
    assert layer.V.shape == (7, 10)


def test_orthogonal_identity_init_is_near_identity_for_even_k():
    torch.manual_seed(1)
    U = Orthogonal(16, dtype=F64).matrix()
    assert (U - torch.eye(16, dtype=F64)).abs().max() < 0.1
    assert Orthogonal(16, init="random", dtype=F64).matrix().diagonal().abs().mean() < 0.9


def test_orthogonal_layer_trains_to_a_target_rotation():
    torch.manual_seed(2)
    d = 6
    target = torch.linalg.qr(torch.randn(d, d, dtype=F64))[0]
    if torch.det(target) < 0:
        target[:, 0] = -target[:, 0]
    layer = Orthogonal(d, dtype=F64)
    opt = torch.optim.Adam(layer.parameters(), lr=0.05)
    x = torch.randn(64, d, dtype=F64)
    first = None
    for _ in range(100):
        loss = ((layer(x) - x @ target.T) ** 2).mean()
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05 * first


def test_linear_svd_matches_dense_weight_and_inverts():
    torch.manual_seed(3)
    layer = LinearSVD(6, 4, init="random", dtype=F64)
    with torch.no_grad():
        layer.s.copy_(torch.tensor([2.0, 0.5, 1.5, 3.0], dtype=F64))
        layer.bias.copy_(torch.arange(4, dtype=F64))
    x = torch.randn(3, 6, dtype=F64)
    W = layer.matrix()
    torch.testing.assert_close(layer(x), x @ W.T + layer.bias, atol=1e-12, rtol=0)
    torch.testing.assert_close(
        torch.linalg.svdvals(W), torch.tensor([3.0, 2.0, 1.5, 0.5], dtype=F64)
    )
    sq = LinearSVD(5, 5, init="random", dtype=F64)
    with torch.no_grad():
        sq.s.copy_(torch.tensor([0.5, 2.0, 1.0, 3.0, 0.25], dtype=F64))
    x = torch.randn(2, 5, dtype=F64)
    torch.testing.assert_close(sq.inverse(sq(x)), x, atol=1e-12, rtol=0)
    logdet = torch.linalg.slogdet(sq.matrix())[1]
    torch.testing.assert_close(sq.log_abs_det(x), logdet.expand(2), atol=1e-12, rtol=0)
    with pytest.raises(ShapeError, match="in_features == out_features"):
        layer.inverse(torch.ones(1, 4, dtype=F64))


def test_torch_errors_name_the_argument():
    V = torch.ones(3, 4, dtype=F64)
    with pytest.raises(ShapeError, match=r"\(\.\.\., 4, m\)"):
        householder_apply(V, torch.ones(5, 2, dtype=F64))
    with pytest.raises(DTypeError, match="V has dtype float64 but X has dtype float32"):
        householder_apply(V, torch.ones(4, 2))
    with pytest.raises(DTypeError, match="same kind of array"):
        householder_apply(V, np.ones((4, 2)))
    with pytest.raises(ShapeError, match=r"x must have shape \(\.\.\., 4\)"):
        Orthogonal(4, dtype=F64)(torch.ones(2, 3, dtype=F64))
    with pytest.raises(InputError, match="init must be"):
        Orthogonal(4, init="eye")


def test_import_changes_no_global_torch_state():
    code = (
        "import torch; before = (torch.get_default_dtype(), torch.get_num_threads(), "
        "torch.is_grad_enabled()); import tadiff.torch.householder; "
        "after = (torch.get_default_dtype(), torch.get_num_threads(), torch.is_grad_enabled()); "
        "assert before == after, (before, after); print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_autotune_block_torch_backend_returns_a_candidate():
    assert hh.autotune_block(24, 4, candidates=[4, 8, 24], backend="torch", repeats=1) in (4, 8, 24)
    with pytest.raises(InputError, match="backend must be"):
        hh.autotune_block(8, 2, backend="jax")


def test_no_grad_forward_saves_no_block_inputs(monkeypatch):
    import tadiff.torch.householder as th

    seen = []
    real = th._forward
    monkeypatch.setattr(
        th, "_forward", lambda *a, save: (seen.append(save), real(*a, save=save))[1]
    )
    V = torch.randn(4, 6, dtype=F64, requires_grad=True)
    X = torch.randn(6, 2, dtype=F64)
    with torch.no_grad():
        Y = householder_apply(V, X)
    assert seen == [False] and Y.grad_fn is None
    torch.testing.assert_close(Y, _explicit(V.detach()) @ X, atol=1e-12, rtol=0)
    householder_apply(V, X).sum().backward()
    assert seen[-1] is True and V.grad is not None


def test_block_rule_follows_whether_v_needs_a_gradient(monkeypatch):
    import tadiff.torch.householder as th

    seen = []
    real = th._forward
    monkeypatch.setattr(
        th,
        "_forward",
        lambda xp, blocks, X, save: (
            seen.append(blocks.V.shape[1]),
            real(xp, blocks, X, save=save),
        )[1],
    )
    V = torch.randn(300, 300)
    X = torch.randn(300, 40)
    householder_apply(V.requires_grad_(True), X)  # gradient wrt V, n = 40: forward+backward rule
    with torch.no_grad():
        householder_apply(V, X)
    householder_apply(V.detach(), X.requires_grad_(True))  # only X: the backward is one sweep
    assert seen == [128, 32, 32]


@pytest.mark.parametrize("n", [1, 2, 7, 32])
def test_triangular_inverse_torch_reads_only_the_upper_triangle(n):
    T = torch.randn(3, n, n, dtype=F64) + 3 * torch.eye(n, dtype=F64)
    got = hh._triu_inverse(torch, T)
    torch.testing.assert_close(got, torch.linalg.inv(T.triu()), atol=1e-12, rtol=0)
    assert torch.all(got.tril(-1) == 0)


def test_backward_twice_with_retain_graph_gives_the_same_gradients():
    V = torch.randn(10, 12, dtype=F64, requires_grad=True)
    X = torch.randn(12, 3, dtype=F64, requires_grad=True)
    Y = householder_apply(V, X, block=4)
    G1, G2 = torch.randn_like(Y), torch.randn_like(Y)
    first = torch.autograd.grad(Y, (V, X), G1, retain_graph=True)
    torch.autograd.grad(Y, (V, X), G2, retain_graph=True)
    again = torch.autograd.grad(Y, (V, X), G1)
    ref = _grads(lambda V_, X_: householder_sequential(V_, X_), V.detach(), X.detach(), G1)[1:]
    for a, b, r in zip(first, again, ref, strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
        torch.testing.assert_close(a, r, atol=1e-9, rtol=0)
