"""FastH kernels on NumPy arrays, against dense explicit products and central differences."""

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.structured import householder as hh
from tadiff.structured.householder import (
    autotune_block,
    default_block,
    householder_apply,
    householder_product,
    householder_sequential,
    orthogonal_forward,
    orthogonal_inverse,
)


def explicit_product(V):
    """U = H_1 ⋯ H_k from dense reflector matrices: the independent oracle."""
    d = V.shape[1]
    U = np.eye(d)
    for v in V.astype(np.float64):
        U = U @ (np.eye(d) - 2.0 * np.outer(v, v) / (v @ v))
    return U


# (k, d, m, block): k < d, d not divisible by the block, block > k, block 1, one block
CASES = [(6, 6, 3, 4), (5, 9, 2, 2), (9, 9, 4, 3), (7, 10, 1, 7), (1, 3, 2, None), (12, 12, 5, 1)]
CASES += [(10, 17, 3, 4), (17, 17, 6, None), (4, 13, 2, 16), (12, 5, 2, 4)]  # last: k > d


@pytest.mark.parametrize(("k", "d", "m", "block"), CASES)
@pytest.mark.parametrize("transpose", [False, True])
def test_apply_equals_explicit_product(k, d, m, block, transpose):
    rng = np.random.default_rng(k * 100 + d)
    V, X = rng.standard_normal((k, d)), rng.standard_normal((d, m))
    U = explicit_product(V)
    expected = (U.T if transpose else U) @ X
    got = householder_apply(V, X, block=block, transpose=transpose)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    seq = householder_sequential(V, X, transpose=transpose)
    np.testing.assert_allclose(seq, expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize(("k", "d", "block"), [(7, 7, 3), (4, 9, 2), (16, 16, None), (1, 5, 1)])
def test_product_is_orthogonal_and_matches_oracle(k, d, block):
    V = np.random.default_rng(3).standard_normal((k, d))
    U = householder_product(V, block=block)
    np.testing.assert_allclose(U, explicit_product(V), atol=1e-12, rtol=0)
    np.testing.assert_allclose(U.T @ U, np.eye(d), atol=1e-12, rtol=0)
    np.testing.assert_allclose(householder_product(V, block=block, transpose=True), U.T, atol=1e-12)
    assert np.isclose(np.linalg.det(U), (-1.0) ** k)


@pytest.mark.parametrize("block", [None, 7, 32])
def test_many_blocks_stay_accurate_at_d_96(block):
    rng = np.random.default_rng(15)
    V, X = rng.standard_normal((96, 96)), rng.standard_normal((96, 8))
    U = explicit_product(V)
    np.testing.assert_allclose(householder_apply(V, X, block=block), U @ X, atol=1e-12, rtol=0)
    np.testing.assert_allclose(householder_product(V, block=block), U, atol=1e-12, rtol=0)


def test_batched_x_and_inverse_roundtrip():
    rng = np.random.default_rng(5)
    V, X = rng.standard_normal((11, 11)), rng.standard_normal((2, 3, 11, 4))
    Y = householder_apply(V, X, block=4)
    np.testing.assert_allclose(Y, explicit_product(V) @ X, atol=1e-12, rtol=0)
    np.testing.assert_allclose(householder_apply(V, Y, block=3, transpose=True), X, atol=1e-12)


def test_float32_is_preserved_and_accurate():
    rng = np.random.default_rng(6)
    V, X = rng.standard_normal((20, 24)), rng.standard_normal((3, 24, 5))
    Y32 = householder_apply(V.astype(np.float32), X.astype(np.float32), block=8)
    assert Y32.dtype == np.float32
    np.testing.assert_allclose(Y32, explicit_product(V) @ X, atol=2e-5, rtol=0)
    assert householder_sequential(V.astype(np.float32), X.astype(np.float32)).dtype == np.float32


def test_unnormalised_vectors_scale_free():
    rng = np.random.default_rng(7)
    V, X = rng.standard_normal((5, 8)), rng.standard_normal((8, 2))
    scales = np.array([1e-3, 1.0, 1e3, 2.0, 0.5])[:, None]
    np.testing.assert_allclose(
        householder_apply(V * scales, X, block=2), householder_apply(V, X, block=3), atol=1e-12
    )


def _loss_and_grads(V, X, G, block, transpose):
    d = V.shape[1]
    blocks = hh._build_blocks(np, np.flip(V, 0) if transpose else V, block)
    Y, saved = hh._forward(np, blocks, X, save=True)
    gV, gX = hh._backward(np, blocks, saved, G, need_v=True)
    if transpose:
        gV = np.flip(gV, 0)
    _, gX_only = hh._backward(np, blocks, None, G, need_v=False)
    np.testing.assert_allclose(gX_only, gX, atol=1e-13)
    assert gX.shape == (d, X.shape[1])
    return float(np.sum(G * Y)), gV, gX


@pytest.mark.parametrize(("k", "d", "m", "block"), [(5, 7, 3, 2), (7, 7, 2, 3), (3, 8, 4, 8)])
@pytest.mark.parametrize("transpose", [False, True])
def test_backward_kernel_matches_central_differences(k, d, m, block, transpose):
    rng = np.random.default_rng(11)
    V, X, G = rng.standard_normal((k, d)), rng.standard_normal((d, m)), rng.standard_normal((d, m))
    _, gV, gX = _loss_and_grads(V, X, G, block, transpose)

    def loss(V_, X_):
        U = explicit_product(V_)
        return float(np.sum(G * ((U.T if transpose else U) @ X_)))

    eps = 1e-6
    num_V = np.zeros_like(V)
    for idx in np.ndindex(V.shape):
        e = np.zeros_like(V)
        e[idx] = eps
        num_V[idx] = (loss(V + e, X) - loss(V - e, X)) / (2 * eps)
    num_X = np.zeros_like(X)
    for idx in np.ndindex(X.shape):
        e = np.zeros_like(X)
        e[idx] = eps
        num_X[idx] = (loss(V, X + e) - loss(V, X - e)) / (2 * eps)
    np.testing.assert_allclose(gV, num_V, atol=1e-7, rtol=1e-6)
    np.testing.assert_allclose(gX, num_X, atol=1e-7, rtol=1e-6)


def test_sequential_backward_baseline_agrees_with_fasth_backward():
    rng = np.random.default_rng(12)
    V, X, G = (
        rng.standard_normal((9, 11)),
        rng.standard_normal((11, 3)),
        rng.standard_normal((11, 3)),
    )
    for transpose in (False, True):
        _, gV, gX = _loss_and_grads(V, X, G, 4, transpose)
        Y = householder_sequential(V, X, transpose=transpose)
        sV, sX = hh._sequential_backward(V, Y, G, transpose=transpose)
        np.testing.assert_allclose(sV, gV, atol=1e-12)
        np.testing.assert_allclose(sX, gX, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    d=st.integers(1, 14),
    k_frac=st.floats(0.05, 1.0),
    m=st.integers(1, 4),
    block=st.one_of(st.none(), st.integers(1, 16)),
    transpose=st.booleans(),
    batch=st.sampled_from([(), (2,)]),
    seed=st.integers(0, 2**16),
)
def test_property_apply_matches_explicit(d, k_frac, m, block, transpose, batch, seed):
    k = max(1, round(k_frac * d))
    rng = np.random.default_rng(seed)
    V, X = rng.standard_normal((k, d)), rng.standard_normal((*batch, d, m))
    U = explicit_product(V)
    got = householder_apply(V, X, block=block, transpose=transpose)
    np.testing.assert_allclose(got, (U.T if transpose else U) @ X, atol=1e-11, rtol=0)


def test_orthogonal_rows_forward_inverse():
    rng = np.random.default_rng(13)
    V, x = rng.standard_normal((4, 6)), rng.standard_normal((2, 5, 6))
    y = orthogonal_forward(V, x, block=3)
    np.testing.assert_allclose(y, x @ explicit_product(V).T, atol=1e-12)
    np.testing.assert_allclose(orthogonal_inverse(V, y), x, atol=1e-12)


def test_default_block_rule_and_autotune():
    for k in (1, 5, 16, 64, 100, 512, 1024, 10000):
        for n, with_grad in ((1, 32), (16, 32), (17, 64), (32, 64), (33, 128), (4096, 128)):
            assert default_block(k, n) == min(k, with_grad)
            assert default_block(k, n, backward=False) == min(k, 32)
    b = autotune_block(40, 8, candidates=[4, 8, 40], repeats=1)
    assert b in (4, 8, 40)


def test_numpy_apply_uses_the_forward_block_rule(monkeypatch):
    seen = []
    real = hh._forward
    monkeypatch.setattr(
        hh,
        "_forward",
        lambda xp, blocks, X, save: (
            seen.append(blocks.V.shape[1]),
            real(xp, blocks, X, save=save),
        )[1],
    )
    rng = np.random.default_rng(21)
    V, X = rng.standard_normal((300, 310)), rng.standard_normal((310, 40))
    householder_apply(V, X)  # NumPy arrays: no gradient, so the forward rule
    hh.householder_vjp(V, X, X)  # gradient wrt V with n = 40 columns
    hh.householder_vjp(V, X[:, :20], X[:, :20])
    hh.householder_vjp(V, X[None, :, :8].repeat(3, 0), X[None, :, :8].repeat(3, 0))  # n = 3 * 8
    assert seen == [32, 128, 64, 64]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 32])
def test_triangular_inverse_reads_only_the_upper_triangle(n):
    rng = np.random.default_rng(n)
    T = rng.standard_normal((3, n, n)) + 3 * np.eye(n)  # garbage below the diagonal
    expected = np.linalg.inv(np.triu(T))
    got = hh._triu_inverse(np, T)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.all(np.tril(got, -1) == 0)


def test_bad_inputs_raise_named_errors():
    V, X = np.ones((3, 4)), np.ones((4, 2))
    with pytest.raises(ShapeError, match=r"V must have shape \(k, d\)"):
        householder_apply(np.ones(4), X)
    with pytest.raises(ShapeError, match=r"X must have shape \(\.\.\., d, m\) = \(\.\.\., 4, m\)"):
        householder_apply(V, np.ones((5, 2)))
    with pytest.raises(ShapeError, match=r"X must have shape"):
        householder_apply(V, np.ones(4))
    with pytest.raises(DTypeError, match="V has dtype float32 but X has dtype float64"):
        householder_apply(V.astype(np.float32), X)
    with pytest.raises(DTypeError, match="X must be float32 or float64, got dtype int64"):
        householder_apply(V, X.astype(np.int64))
    with pytest.raises(InputError, match="block must be a positive int"):
        householder_apply(V, X, block=0)
    with pytest.raises(InputError, match="block must be a positive int"):
        householder_apply(V, X, block=2.5)
    V0 = V.copy()
    V0[1] = 0
    with pytest.raises(InputError, match="row 1 of V is zero"):
        householder_apply(V0, X)
    V5 = np.random.default_rng(5).standard_normal((5, 4))
    V5[4] = 0  # in the last block, next to the padding (blocks of 3: one padded row)
    with pytest.raises(InputError, match="row 4 of V is zero"):
        householder_apply(V5, X, block=3)
    with pytest.raises(ShapeError, match="k >= 1"):
        householder_apply(np.ones((0, 4)), X)
    with pytest.raises(ShapeError, match=r"x must have shape \(\.\.\., 4\)"):
        orthogonal_forward(V, np.ones((2, 3)))
    with pytest.raises(DTypeError, match="must be an array"):
        householder_apply([[1.0]], X)


def test_demo_self_checks_pass():
    from tadiff.structured import householder_demo

    lines = []
    assert householder_demo.run(lines.append)
    assert any("dense product of the reflectors" in line and "ok" in line for line in lines)
    assert not any("FAILED" in line for line in lines)
    if importlib.util.find_spec("torch") is not None:  # the optional torch.func check ran
        assert any("vmap(grad) per-sample" in line and "ok" in line for line in lines)


def test_vjp_batched_equals_sum_of_per_item_gradients():
    rng = np.random.default_rng(14)
    V, X, G = (
        rng.standard_normal((7, 9)),
        rng.standard_normal((3, 9, 2)),
        rng.standard_normal((3, 9, 2)),
    )
    dV, dX = hh.householder_vjp(V, X, G, block=3, transpose=True)
    per_item = [
        hh.householder_vjp(V, x, g, block=3, transpose=True) for x, g in zip(X, G, strict=True)
    ]
    np.testing.assert_allclose(dV, sum(v for v, _ in per_item), atol=1e-12)
    np.testing.assert_allclose(dX, np.stack([x for _, x in per_item]), atol=1e-12)
    # dX is Uᵀ G for U X (here U = H_k ⋯ H_1 with transpose): check against the dense product.
    np.testing.assert_allclose(dX, explicit_product(V) @ G, atol=1e-12)
    with pytest.raises(ShapeError, match=r"grad must have the shape \(3, 9, 2\)"):
        hh.householder_vjp(V, X, G[0])
