"""FastH in tadiff's engine: Function gradients vs engine autograd through the sequential loop,
tadiff gradcheck, and the engine-side Orthogonal / LinearSVD layers."""

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import ShapeError
from tadiff.nn.orthogonal import LinearSVD, Orthogonal
from tadiff.optim import Adam
from tadiff.structured import householder as hh
from tadiff.structured.householder import (
    householder_apply,
    householder_product,
    householder_sequential,
)


def explicit_product(V):
    d = V.shape[1]
    U = np.eye(d)
    for v in V:
        U = U @ (np.eye(d) - 2.0 * np.outer(v, v) / (v @ v))
    return U


def _grads(fn, V, X, G):
    Vt = td.tensor(V, requires_grad=True)
    Xt = td.tensor(X, requires_grad=True)
    Y = fn(Vt, Xt)
    (Y * td.tensor(G)).sum().backward()
    return Y.data, Vt.grad.data, Xt.grad.data


@pytest.mark.parametrize(
    ("k", "d", "m", "block", "batch"),
    [(5, 7, 3, 2, ()), (9, 9, 2, 4, (2,)), (4, 13, 1, None, ()), (12, 12, 3, 5, (1, 2))],
)
@pytest.mark.parametrize("transpose", [False, True])
def test_engine_grads_equal_autograd_through_sequential(k, d, m, block, batch, transpose):
    rng = np.random.default_rng(k + d)
    V, X = rng.standard_normal((k, d)), rng.standard_normal((*batch, d, m))
    G = rng.standard_normal(X.shape)
    Y, gV, gX = _grads(
        lambda v, x: householder_apply(v, x, block=block, transpose=transpose), V, X, G
    )
    Ys, gVs, gXs = _grads(lambda v, x: householder_sequential(v, x, transpose=transpose), V, X, G)
    U = explicit_product(V)
    np.testing.assert_allclose(Y, (U.T if transpose else U) @ X, atol=1e-12, rtol=0)
    np.testing.assert_allclose(Ys, Y, atol=1e-12, rtol=0)
    np.testing.assert_allclose(gV, gVs, atol=1e-9, rtol=0)
    np.testing.assert_allclose(gX, gXs, atol=1e-9, rtol=0)


@pytest.mark.parametrize(("k", "d", "block"), [(5, 7, 2), (6, 6, 4), (3, 8, 8)])
@pytest.mark.parametrize("transpose", [False, True])
def test_tadiff_gradcheck(k, d, block, transpose):
    rng = np.random.default_rng(7)
    V = td.tensor(rng.standard_normal((k, d)), requires_grad=True)
    X = td.tensor(rng.standard_normal((2, d, 3)), requires_grad=True)
    fn = lambda v, x: householder_apply(v, x, block=block, transpose=transpose)  # noqa: E731
    assert td.autograd.gradcheck(fn, (V, X), eps=1e-6, atol=1e-8, rtol=1e-6)


def test_engine_float32_preserved_and_only_x_grad():
    rng = np.random.default_rng(8)
    V = rng.standard_normal((6, 10)).astype(np.float32)
    X = td.tensor(rng.standard_normal((10, 3)).astype(np.float32), requires_grad=True)
    Y = householder_apply(td.tensor(V), X, block=4)
    assert Y.dtype == np.float32
    Y.sum().backward()
    assert X.grad.dtype == np.float32
    expected = explicit_product(V.astype(np.float64)).T @ np.ones((10, 3))
    np.testing.assert_allclose(X.grad.data, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("k", "d", "block", "transpose"), [(5, 7, 2, False), (4, 4, 3, True)])
def test_engine_second_derivatives_gradgradcheck(k, d, block, transpose):
    rng = np.random.default_rng(9)
    V = td.tensor(rng.standard_normal((k, d)), requires_grad=True)
    X = td.tensor(rng.standard_normal((2, d, 2)), requires_grad=True)
    fn = lambda v, x: householder_apply(v, x, block=block, transpose=transpose)  # noqa: E731
    assert td.autograd.gradgradcheck(fn, (V, X), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_engine_create_graph_gradient_equals_first_order_fast_path():
    rng = np.random.default_rng(10)
    V = td.tensor(rng.standard_normal((6, 8)), requires_grad=True)
    X = td.tensor(rng.standard_normal((8, 3)), requires_grad=True)
    fast = td.autograd.grad(householder_apply(V, X, block=4).sum(), (V, X))
    slow = td.autograd.grad(householder_apply(V, X, block=4).sum(), (V, X), create_graph=True)
    for f, s in zip(fast, slow, strict=True):
        assert s.requires_grad
        np.testing.assert_allclose(f.data, s.data, atol=1e-12, rtol=0)


def test_engine_product_and_mixed_inputs():
    rng = np.random.default_rng(10)
    V = rng.standard_normal((4, 6))
    U = householder_product(td.tensor(V, requires_grad=True), block=3)
    np.testing.assert_allclose(U.data, explicit_product(V), atol=1e-12, rtol=0)
    Y = householder_apply(td.tensor(V), np.eye(6))  # a NumPy X is wrapped
    np.testing.assert_allclose(Y.data, explicit_product(V), atol=1e-12, rtol=0)
    with pytest.raises(ShapeError, match=r"\(\.\.\., 6, m\)"):
        householder_apply(td.tensor(V), td.ones(5, 2, dtype=td.float64))


def test_engine_orthogonal_layer():
    td.manual_seed(0)
    layer = Orthogonal(9, k=6, block=4, dtype=td.float64)
    x = td.randn(3, 2, 9, dtype=td.float64)
    U = explicit_product(layer.V.data)
    np.testing.assert_allclose(layer(x).data, x.data @ U.T, atol=1e-12, rtol=0)
    np.testing.assert_allclose(layer.inverse(layer(x)).data, x.data, atol=1e-12, rtol=0)
    np.testing.assert_allclose(layer.matrix().data, U, atol=1e-12, rtol=0)
    assert layer.log_abs_det(x).shape == (3, 2) and not layer.log_abs_det(x).data.any()
    near = Orthogonal(8, dtype=td.float64).matrix().data
    assert np.abs(near - np.eye(8)).max() < 0.1


def test_engine_orthogonal_layer_trains():
    td.manual_seed(1)
    rng = np.random.default_rng(1)
    target = np.linalg.qr(rng.standard_normal((6, 6)))[0]
    if np.linalg.det(target) < 0:
        target[:, 0] *= -1
    layer = Orthogonal(6, dtype=td.float64)
    opt = Adam(layer.parameters(), lr=0.05)
    x = td.tensor(rng.standard_normal((32, 6)))
    y = td.tensor(x.data @ target.T)
    losses = []
    for _ in range(120):
        loss = ((layer(x) - y) ** 2).mean()
        losses.append(float(loss.data))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 0.05 * losses[0]


def test_engine_linear_svd():
    td.manual_seed(2)
    layer = LinearSVD(6, 4, init="random", dtype=td.float64)
    layer.s.data[:] = [2.0, 0.5, 1.5, 3.0]
    layer.bias.data[:] = np.arange(4.0)
    x = td.randn(3, 6, dtype=td.float64)
    W = layer.matrix().data
    np.testing.assert_allclose(layer(x).data, x.data @ W.T + np.arange(4.0), atol=1e-12, rtol=0)
    np.testing.assert_allclose(np.linalg.svd(W, compute_uv=False), [3.0, 2.0, 1.5, 0.5], atol=1e-12)
    sq = LinearSVD(5, 5, init="random", dtype=td.float64)
    sq.s.data[:] = [0.5, 2.0, 1.0, 3.0, 0.25]
    x = td.randn(2, 5, dtype=td.float64)
    np.testing.assert_allclose(sq.inverse(sq(x)).data, x.data, atol=1e-12, rtol=0)
    logdet = np.linalg.slogdet(sq.matrix().data)[1]
    np.testing.assert_allclose(sq.log_abs_det(x).data, [logdet, logdet], atol=1e-12)
    (sq(x).sum() + sq.log_abs_det(x).sum()).backward()
    assert sq.s.grad is not None and sq.V_in.grad.shape == (5, 5)
    with pytest.raises(ShapeError, match="in_features == out_features"):
        layer.inverse(td.ones(1, 4, dtype=td.float64))


def test_engine_no_grad_forward_saves_no_block_inputs(monkeypatch):
    seen = []
    real = hh._forward
    monkeypatch.setattr(
        hh, "_forward", lambda *a, save: (seen.append(save), real(*a, save=save))[1]
    )
    V = td.tensor(np.random.default_rng(11).standard_normal((4, 6)), requires_grad=True)
    X = td.tensor(np.eye(6))
    with td.no_grad():
        Y = householder_apply(V, X)
    assert seen == [False] and Y.grad_fn is None
    np.testing.assert_allclose(Y.data, explicit_product(V.data), atol=1e-12, rtol=0)
    householder_apply(V, X).sum().backward()
    assert seen[-1] is True and V.grad is not None
