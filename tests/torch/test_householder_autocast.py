"""FastH under ``torch.autocast``: half-precision inputs are computed in float32.

The oracle is the same model run outside autocast with the casts written out by hand
(``.to(half)`` where autocast lowers a matmul, ``.float()`` where FastH raises the precision), so
values and gradients must agree exactly; a precision check shows the kernels did not run in half.
"""

import pytest

torch = pytest.importorskip("torch")

from tadiff.errors import DTypeError  # noqa: E402
from tadiff.torch import library  # noqa: E402
from tadiff.torch.householder import (  # noqa: E402
    LinearSVD,
    Orthogonal,
    autocast_inputs,
    householder_apply,
)

HALF = [torch.bfloat16, torch.float16]
APPLY = {"function": householder_apply, "library": library.householder_apply}


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Linear(12, 12), Orthogonal(12, k=9, block=4, init="random")


def _grads(params):
    return [p.grad.clone() for p in params]


@pytest.mark.parametrize("half", HALF)
def test_orthogonal_after_linear_matches_hand_cast_model(half):
    lin, orth = _model()
    x, target = torch.randn(5, 12), torch.randn(5, 12)
    params = [lin.weight, lin.bias, orth.V]

    with torch.autocast("cpu", dtype=half):
        h = lin(x)
        y = orth(h)
    assert h.dtype == half and y.dtype == torch.float32
    (y - target).square().sum().backward()
    got = _grads(params)

    for p in params:
        p.grad = None
    h_ref = torch.nn.functional.linear(x.to(half), lin.weight.to(half), lin.bias.to(half))
    y_ref = orth(h_ref.float())
    (y_ref - target).square().sum().backward()

    assert torch.equal(y, y_ref)
    for g, r in zip(got, _grads(params), strict=True):
        assert g.dtype == r.dtype == torch.float32
        assert torch.equal(g, r)


@pytest.mark.parametrize("which", sorted(APPLY))
@pytest.mark.parametrize("half", HALF)
def test_half_V_and_X_are_computed_in_float32(which, half):
    apply = APPLY[which]
    torch.manual_seed(1)
    V = torch.randn(7, 10).to(half).requires_grad_(True)
    X = torch.randn(10, 3).to(half).requires_grad_(True)
    G = torch.randn(10, 3)
    with torch.autocast("cpu", dtype=half):
        Y = apply(V, X, block=3)
        gV, gX = torch.autograd.grad(Y, (V, X), G)  # backward inside the region too
    V32, X32 = V.detach().float().requires_grad_(True), X.detach().float().requires_grad_(True)
    Y32 = apply(V32, X32, block=3)
    rV, rX = torch.autograd.grad(Y32, (V32, X32), G)
    assert Y.dtype == torch.float32 and torch.equal(Y, Y32)
    assert gV.dtype == gX.dtype == half  # autograd casts back through the .float()
    assert torch.equal(gV, rV.to(half)) and torch.equal(gX, rX.to(half))


@pytest.mark.parametrize("half", HALF)
def test_kernels_run_in_float32_not_half(half):
    """U from half inputs is orthogonal to float32 precision: a half-precision T⁻¹ would not be."""
    torch.manual_seed(2)
    V = torch.randn(64, 64).to(half)
    eye = torch.eye(64, dtype=half)
    with torch.autocast("cpu", dtype=half):
        U = householder_apply(V, eye)
    err = (U @ U.T - torch.eye(64)).abs().max().item()
    assert U.dtype == torch.float32 and err < 1e-4


def test_linear_svd_under_autocast_matches_float32():
    torch.manual_seed(3)
    layer = LinearSVD(6, 4, init="random")
    x = torch.randn(3, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = layer(x.to(torch.bfloat16))
    assert y.dtype == torch.float32
    assert torch.equal(y, layer(x.to(torch.bfloat16).float()))


def test_float32_and_float64_are_not_cast_under_autocast():
    V, X = torch.randn(4, 4, dtype=torch.float64), torch.randn(4, 2, dtype=torch.float64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert autocast_inputs(V, X) == (V, X)
        assert householder_apply(V, X).dtype == torch.float64
        V32, X32 = V.float(), X.float()
        assert autocast_inputs(V32, X32)[0] is V32


@pytest.mark.parametrize("which", sorted(APPLY))
def test_second_derivatives_under_autocast(which):
    V = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    X = torch.randn(6, 2, dtype=torch.float64, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.autograd.gradgradcheck(lambda V, X: APPLY[which](V, X, block=4), (V, X))


@pytest.mark.parametrize("which", sorted(APPLY))
def test_half_outside_autocast_is_a_clear_error(which):
    V, X = torch.randn(4, 4), torch.randn(4, 2, dtype=torch.bfloat16)
    with pytest.raises(DTypeError, match=r"X must be float32 or float64.*torch\.autocast"):
        APPLY[which](V, X)
    with pytest.raises(DTypeError, match=r"V must be float32 or float64.*torch\.autocast"):
        APPLY[which](V.half(), X.float())


@pytest.mark.parametrize("which", sorted(APPLY))
def test_non_tensor_under_autocast_is_a_clear_error(which):
    import numpy as np

    with torch.autocast("cpu", dtype=torch.bfloat16):
        with pytest.raises(DTypeError, match="same kind of array"):
            APPLY[which](torch.randn(4, 4), np.ones((4, 2), dtype=np.float32))
        with pytest.raises(DTypeError, match="same kind of array"):
            APPLY[which](np.ones((4, 4), dtype=np.float32), torch.randn(4, 2))
