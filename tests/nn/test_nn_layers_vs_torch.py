"""Layers and activations against PyTorch: same weights and input -> same output and gradients
(float64, so differences are rounding only)."""

import math

import numpy as np
import pytest

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(7)


def _copy_to_torch(ours, theirs):
    theirs = theirs.double()  # before loading: float32 storage would round our float64 values
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    return theirs


def _compare(ours, theirs, x, integer_input=False, atol=1e-12):
    """Forward values, input gradient and parameter gradients for a random upstream gradient."""
    tx = torch.from_numpy(x.copy())
    ox = td.tensor(x.copy(), requires_grad=not integer_input)
    if not integer_input:
        tx.requires_grad_(True)
    expected = theirs(tx)
    got = ours(ox)
    np.testing.assert_allclose(got.data, expected.detach().numpy(), rtol=1e-12, atol=atol)
    upstream = RNG.standard_normal(expected.shape)
    (expected * torch.from_numpy(upstream)).sum().backward()
    (got * td.tensor(upstream)).sum().backward()
    if not integer_input:
        np.testing.assert_allclose(ox.grad.data, tx.grad.numpy(), rtol=1e-10, atol=atol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.grad.data, theirs_params[name].grad.numpy(), rtol=1e-10, atol=atol, err_msg=name
        )


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 3), (2, 4, 3), (3,)])
def test_linear(bias, shape):
    ours = nn.Linear(3, 4, bias=bias).double()
    theirs = _copy_to_torch(ours, torch.nn.Linear(3, 4, bias=bias))
    _compare(ours, theirs, RNG.standard_normal(shape))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(5, 6), (2, 4, 6), (6,), (0, 6)])
def test_wide_layers_chain_column_major_results(bias, shape):
    # wide layers (>= 64 outputs) return column-major results that feed the next layer and
    # ReLU's backward; values and every gradient must still be torch's
    t = torch.nn
    ours = nn.Sequential(
        nn.Linear(6, 70, bias=bias), nn.ReLU(), nn.Linear(70, 80, bias=bias), nn.ReLU(),
        nn.Linear(80, 3, bias=bias),
    ).double()  # fmt: skip
    theirs = _copy_to_torch(
        ours,
        t.Sequential(
            t.Linear(6, 70, bias=bias), t.ReLU(), t.Linear(70, 80, bias=bias), t.ReLU(),
            t.Linear(80, 3, bias=bias),
        ),
    )  # fmt: skip
    _compare(ours, theirs, RNG.standard_normal(shape))
    h = ours[0](td.tensor(RNG.standard_normal((5, 6))))
    assert h.data.flags.f_contiguous and not h.data.flags.c_contiguous  # the path under test


def test_wide_linear_is_twice_differentiable_from_a_column_major_input():
    x = td.tensor(np.asfortranarray(RNG.standard_normal((5, 4))), requires_grad=True)
    w = td.tensor(RNG.standard_normal((64, 4)), requires_grad=True)
    w2 = td.tensor(RNG.standard_normal((3, 64)), requires_grad=True)
    assert td.autograd.gradcheck(lambda x, w, w2: F.linear(F.linear(x, w).tanh(), w2), (x, w, w2))
    assert td.autograd.gradgradcheck(lambda x, w: F.linear(x, w), (x, w))


def test_mlp_sequential():
    ours = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    ours.double()
    t = torch.nn
    theirs = _copy_to_torch(
        ours, t.Sequential(t.Linear(3, 8), t.ReLU(), t.Linear(8, 8), t.Tanh(), t.Linear(8, 2))
    )
    _compare(ours, theirs, RNG.standard_normal((6, 3)))


ACTIVATIONS = [
    (nn.ReLU(), torch.nn.ReLU()),
    (nn.Tanh(), torch.nn.Tanh()),
    (nn.Sigmoid(), torch.nn.Sigmoid()),
    (nn.GELU(), torch.nn.GELU()),
    (nn.GELU("tanh"), torch.nn.GELU("tanh")),
    (nn.Softmax(1), torch.nn.Softmax(1)),
    (nn.LogSoftmax(-1), torch.nn.LogSoftmax(-1)),
]


@pytest.mark.parametrize(("ours", "theirs"), ACTIVATIONS, ids=lambda m: repr(m))
def test_activations(ours, theirs):
    x = RNG.standard_normal((4, 5)) * 3
    x[0, 0] = 0.5  # keep clear of relu's kink; the rest is random
    _compare(ours, theirs, x)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_twice_differentiable(approximate):
    x = td.tensor(RNG.standard_normal(5) * 2, requires_grad=True)
    assert td.autograd.gradgradcheck(lambda t: F.gelu(t, approximate=approximate), (x,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_gelu_matches_torch_over_a_wide_range(dtype):
    x = np.concatenate([np.linspace(-12, 12, 2001), [0.0, -0.0]]).astype(dtype)
    ours, theirs = td.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_(True)
    out, expected = F.gelu(ours), torch.nn.functional.gelu(theirs)
    out.sum().backward()
    expected.sum().backward()
    assert out.dtype == dtype
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=tol, atol=tol)


def test_exact_gelu_keeps_relative_accuracy_in_the_negative_tail():
    # x Phi(x) for x = -10 is -7.6e-23: 1 + erf(x/sqrt 2) would round to 0 there
    x = np.array([-10.0, -20.0, -30.0])
    expected = [v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x]
    # relative error about z² ulp (z = x/sqrt 2: the rounding of z² inside exp), 1e-13 at -30
    np.testing.assert_allclose(F.gelu(td.tensor(x)).data, expected, rtol=3e-13)


@pytest.mark.parametrize(("affine", "bias"), [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("normalized", [4, (3, 4)])
def test_layer_norm(affine, bias, normalized):
    ours = nn.LayerNorm(normalized, elementwise_affine=affine, bias=bias).double()
    for p in ours.parameters():  # non-trivial scale and shift
        p.data[...] = RNG.standard_normal(p.shape)
    theirs = _copy_to_torch(
        ours, torch.nn.LayerNorm(normalized, elementwise_affine=affine, bias=bias)
    )
    _compare(ours, theirs, RNG.standard_normal((2, 3, 4)) * 5 + 1, atol=1e-11)


@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_with_repeated_indices(padding_idx):
    ours = nn.Embedding(6, 3, padding_idx=padding_idx).double()
    theirs = _copy_to_torch(ours, torch.nn.Embedding(6, 3, padding_idx=padding_idx))
    indices = np.array([[0, 2, 2], [5, 0, 2]])  # repeats must accumulate gradient
    ox = td.tensor(indices)
    got = ours(ox)
    expected = theirs(torch.from_numpy(indices))
    np.testing.assert_array_equal(got.data, expected.detach().numpy())
    upstream = RNG.standard_normal(expected.shape)
    (expected * torch.from_numpy(upstream)).sum().backward()
    (got * td.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.data, theirs.weight.grad.numpy(), rtol=1e-12)
    if padding_idx is not None:
        assert not ours.weight.data[padding_idx].any()


def test_embedding_errors():
    emb = nn.Embedding(4, 2)
    with pytest.raises(InputError, match=r"index 4 at position \(1,\) is out of range for 4"):
        emb(td.tensor([0, 4]))
    with pytest.raises(DTypeError, match="indices must be integers"):
        emb(td.tensor([0.0]))


def test_dropout_mask_statistics_scaling_and_gradient():
    td.manual_seed(3)
    x = td.tensor(np.ones((200, 50)), requires_grad=True)
    layer = nn.Dropout(0.3)
    y = layer(x)
    kept = y.data != 0
    assert abs(kept.mean() - 0.7) < 0.02  # 10000 Bernoulli(0.7) draws: std 0.0046
    np.testing.assert_allclose(y.data[kept], 1 / 0.7)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, y.data)  # d(sum)/dx is the scaled mask
    layer.eval()
    assert layer(x) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).data, np.zeros_like(x.data))
    with pytest.raises(InputError, match=r"p=1.5 is not in \[0, 1\]"):
        nn.Dropout(1.5)


def test_layer_errors_name_the_shapes():
    with pytest.raises(ShapeError, match=r"input of shape \(2, 5\) does not fit weight of shape"):
        nn.Linear(3, 4)(td.ones(2, 5))
    with pytest.raises(ShapeError, match=r"does not end with normalized_shape \(4,\)"):
        nn.LayerNorm(4)(td.ones(2, 3))
    with pytest.raises(ShapeError, match=r"bias of shape \(3,\) does not fit .* expected \(4,\)"):
        F.linear(td.ones(2, 3), td.ones(4, 3), td.ones(3))
    with pytest.raises(DTypeError, match="input has dtype float32 but bias has dtype float64"):
        F.linear(td.ones(2, 3), td.ones(4, 3), td.tensor(np.ones(4)))
    with pytest.raises(DTypeError, match="input has dtype float64 but weight has dtype float32"):
        nn.Linear(3, 4)(td.tensor(np.ones((2, 3))))
    with pytest.raises(InputError, match="approximate='fast'"):
        F.gelu(td.ones(2), approximate="fast")


def test_default_init_ranges_match_torch():
    td.manual_seed(0)
    layer = nn.Linear(50, 40)
    bound = 1 / np.sqrt(50)
    assert layer.weight.dtype == np.float32
    assert np.abs(layer.weight.data).max() <= bound
    assert np.abs(layer.weight.data).max() > 0.95 * bound  # 2000 draws fill the range
    assert np.abs(layer.bias.data).max() <= bound


def test_linear_is_twice_differentiable():
    x = td.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    w = td.tensor(RNG.standard_normal((2, 4)), requires_grad=True)
    b = td.tensor(RNG.standard_normal(2), requires_grad=True)
    assert td.autograd.gradcheck(F.linear, (x, w, b))
    assert td.autograd.gradgradcheck(F.linear, (x, w, b))
    assert td.autograd.gradgradcheck(lambda x, w: F.linear(x, w), (x, w))
    # batch dimensions in front of the features, and the node torch would record
    x3 = td.tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    assert td.autograd.gradgradcheck(F.linear, (x3, w, b))
    assert F.linear(x3, w, b).grad_fn.name() == "AddmmBackward0"


def test_gradient_penalty_through_an_mlp_matches_torch():
    """d/dθ of ||d loss / d x||^2 (create_graph through Linear, Tanh and cross entropy)."""
    ours = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 4)).double()
    t = torch.nn
    theirs = _copy_to_torch(ours, t.Sequential(t.Linear(3, 5), t.Tanh(), t.Linear(5, 4)))
    x = RNG.standard_normal((6, 3))
    y = RNG.integers(0, 4, 6)

    ox = td.tensor(x.copy(), requires_grad=True)
    (gx,) = td.autograd.grad(F.cross_entropy(ours(ox), td.tensor(y)), (ox,), create_graph=True)
    (gx * gx).sum().backward()
    tx = torch.from_numpy(x.copy()).requires_grad_(True)
    (tgx,) = torch.autograd.grad(
        torch.nn.functional.cross_entropy(theirs(tx), torch.from_numpy(y)), (tx,), create_graph=True
    )
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(gx.data, tgx.detach().numpy(), rtol=1e-10, atol=1e-14)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.grad.data, theirs_params[name].grad.numpy(), rtol=1e-9, atol=1e-14, err_msg=name
        )
