"""conv1d/conv2d (index-notation definitions with derived gradients), pad, and the Conv layers,
against PyTorch in float64: values and every gradient, over random geometries."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _both(dims, x, w, b, upstream_seed=0, **kwargs):
    """(ours, torch) outputs and gradients of x, w, b for one random upstream gradient."""
    ours_in = [td.tensor(a.copy(), requires_grad=True) for a in (x, w, b)]
    theirs_in = [torch.from_numpy(a.copy()).requires_grad_(True) for a in (x, w, b)]
    conv, tconv = (F.conv1d, TF.conv1d) if dims == 1 else (F.conv2d, TF.conv2d)
    ours, theirs = conv(*ours_in, **kwargs), tconv(*theirs_in, **kwargs)
    upstream = np.random.default_rng(upstream_seed).standard_normal(tuple(theirs.shape))
    (ours * td.tensor(upstream)).sum().backward()
    (theirs * torch.from_numpy(upstream)).sum().backward()
    return ours, theirs, ours_in, theirs_in


def _assert_same(dims, x, w, b, **kwargs):
    ours, theirs, ours_in, theirs_in = _both(dims, x, w, b, **kwargs)
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-10, atol=1e-12)
    for name, a, t in zip("xwb", ours_in, theirs_in, strict=True):
        np.testing.assert_allclose(
            a.grad.data, t.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=f"d{name}"
        )


@settings(max_examples=30, deadline=None)
@given(
    data=st.data(),
    dims=st.sampled_from([1, 2]),
    batch=st.integers(1, 2),
    cin=st.integers(1, 3),
    cout=st.integers(1, 3),
)
def test_conv_matches_torch_on_random_geometries(data, dims, batch, cin, cout):
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(dims))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(dims))
    dilation = tuple(data.draw(st.integers(1, 2)) for _ in range(dims))
    padding = tuple(data.draw(st.integers(0, 2)) for _ in range(dims))
    size = tuple(
        data.draw(st.integers(d * (k - 1) + 1 - 2 * p if d * (k - 1) + 1 > 2 * p else 1, 9))
        for k, d, p in zip(kernel, dilation, padding, strict=True)
    )
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    x = rng.standard_normal((batch, cin, *size))
    w = rng.standard_normal((cout, cin, *kernel))
    b = rng.standard_normal(cout)
    _assert_same(dims, x, w, b, stride=stride, padding=padding, dilation=dilation)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("kernel", [(3, 3), (2, 4)])
@pytest.mark.filterwarnings("ignore:Using padding='same'")  # torch, for even kernels
def test_string_paddings_match_torch(padding, kernel):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 7, 9))
    w, b = rng.standard_normal((3, 2, *kernel)), rng.standard_normal(3)
    _assert_same(2, x, w, b, padding=padding, dilation=(1, 2))


def test_unbatched_input_float32_and_no_bias():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 10)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3)).astype(np.float32)
    y = F.conv1d(td.tensor(x), td.tensor(w), stride=2, padding=1)
    expected = TF.conv1d(torch.from_numpy(x), torch.from_numpy(w), stride=2, padding=1)
    assert y.dtype == np.float32 and y.shape == tuple(expected.shape) == (5, 5)
    np.testing.assert_allclose(y.data, expected.numpy(), rtol=1e-5, atol=1e-5)


def test_conv_is_twice_differentiable():
    rng = np.random.default_rng(5)
    x = td.tensor(rng.standard_normal((1, 2, 5, 4)), requires_grad=True)
    w = td.tensor(rng.standard_normal((2, 2, 2, 2)), requires_grad=True)
    b = td.tensor(rng.standard_normal(2), requires_grad=True)
    fn = lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1).tanh()  # noqa: E731
    assert td.autograd.gradcheck(fn, (x, w, b))
    assert td.autograd.gradgradcheck(fn, (x, w, b))


@pytest.mark.parametrize("widths", [(1, 2), (0, 1, 2, 0), (1, 1, 1, 1, 1, 1)])
def test_pad_matches_torch(widths):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4))
    ours, theirs = td.tensor(x, requires_grad=True), torch.from_numpy(x).requires_grad_(True)
    out, expected = F.pad(ours, widths, value=0.5), TF.pad(theirs, widths, value=0.5)
    np.testing.assert_array_equal(out.data, expected.detach().numpy())
    upstream = rng.standard_normal(tuple(expected.shape))
    (out * td.tensor(upstream)).sum().backward()
    (expected * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_array_equal(ours.grad.data, theirs.grad.numpy())
    assert out.grad_fn.name() == "ConstantPadNdBackward0"
    assert td.autograd.gradgradcheck(lambda t: F.pad(t, widths) ** 2, (ours,))


def test_layers_match_torch_modules_and_init_ranges():
    td.manual_seed(0)
    ours = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, (3, 2), stride=2, dilation=(1, 2))
    ).double()
    t = torch.nn
    theirs = t.Sequential(
        t.Conv2d(3, 8, 3, padding=1), t.ReLU(), t.Conv2d(8, 4, (3, 2), stride=2, dilation=(1, 2))
    ).double()
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    x = np.random.default_rng(7).standard_normal((2, 3, 9, 9))
    out, expected = ours(td.tensor(x)), theirs(torch.from_numpy(x))
    np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    out.sum().backward()
    expected.sum().backward()
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(
            p.grad.data, theirs_params[name].grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name
        )
    layer = nn.Conv1d(16, 4, 5)  # fan_in 80: weights and bias in U(-1/sqrt(80), 1/sqrt(80))
    bound = 1 / np.sqrt(80)
    assert layer.weight.dtype == np.float32 and layer.weight.shape == (4, 16, 5)
    assert np.abs(layer.weight.data).max() <= bound and np.abs(layer.bias.data).max() <= bound
    assert "kernel_size=(5,)" in repr(layer)


def test_conv_errors_name_what_is_wrong():
    x, w = td.ones(1, 3, 8, 8), td.ones(4, 3, 3, 3)
    with pytest.raises(ShapeError, match=r"input has 2 channels .* weight expects 3"):
        F.conv2d(td.ones(1, 2, 8, 8), w)
    with pytest.raises(ShapeError, match=r"input of shape \(8, 8\); expected 4 dims"):
        F.conv2d(td.ones(8, 8), w)
    with pytest.raises(ShapeError, match=r"weight of shape \(4, 3, 3\); expected 4 dims"):
        F.conv2d(x, td.ones(4, 3, 3))
    with pytest.raises(ShapeError, match=r"spatial size \(2, 2\) is smaller than the dilated"):
        F.conv2d(td.ones(1, 3, 2, 2), w)
    with pytest.raises(ShapeError, match=r"bias of shape \(3,\); expected \(4,\)"):
        F.conv2d(x, w, td.ones(3))
    with pytest.raises(InputError, match="groups=2 is not supported"):
        F.conv2d(x, w, groups=2)
    with pytest.raises(InputError, match="padding='same' needs stride 1"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(InputError, match=r"padding='full'; expected"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(InputError, match=r"stride=\(1, 2, 3\); expected an int or 2 ints"):
        F.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(InputError, match="must be >= 1"):
        F.conv2d(x, w, dilation=0)
    with pytest.raises(DTypeError, match="input has dtype float64 and weight float32"):
        F.conv2d(td.tensor(np.ones((1, 3, 8, 8))), w)
    with pytest.raises(RuntimeError, match="bias has dtype float64 and input float32"):
        F.conv2d(x, w, td.tensor(np.ones(4)))  # torch raises RuntimeError too
    with pytest.raises(InputError, match="in_channels=0; expected a positive int"):
        nn.Conv2d(0, 3, 3)
    with pytest.raises(InputError, match="mode='wrap'; expected one of"):
        F.pad(x, (1, 1), mode="wrap")
    with pytest.raises(ShapeError, match="must hold \\(left, right\\) pairs"):
        F.pad(x, (1, 1, 1))
    with pytest.raises(InputError, match="non-negative ints"):
        F.pad(x, (1, -1))
