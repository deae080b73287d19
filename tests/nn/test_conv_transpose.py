"""Transposed convolutions (derived symbolically from the convolution) against torch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
import tadiff.nn.functional as F
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")


def _compare(dims, x, w, b, **kw):
    fn = F.conv_transpose1d if dims == 1 else F.conv_transpose2d
    tfn = (
        torch.nn.functional.conv_transpose1d if dims == 1 else torch.nn.functional.conv_transpose2d
    )
    ours = [td.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
    y, ty = fn(*ours, **kw), tfn(*theirs, **kw)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    up = np.cos(np.arange(y.data.size)).reshape(y.shape)
    (y * td.tensor(up)).sum().backward()
    (ty * torch.tensor(up)).sum().backward()
    for a, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a.grad.data, t.grad.numpy(), rtol=1e-9, atol=1e-11)


@settings(max_examples=25, deadline=None)
@given(
    dims=st.sampled_from([1, 2]),
    size=st.integers(1, 5),
    k=st.integers(1, 3),
    stride=st.integers(1, 3),
    dilation=st.integers(1, 2),
    padding=st.integers(0, 2),
    extra=st.integers(0, 2),
)
def test_matches_torch_on_random_geometries(dims, size, k, stride, dilation, padding, extra):
    extra = min(extra, max(stride, dilation) - 1)
    full = (size - 1) * stride + dilation * (k - 1) + 1 + extra
    if full - 2 * padding < 1:
        return
    rng = np.random.default_rng(size * 7 + k)
    x = rng.standard_normal((2, 3, *([size] * dims)))
    w = rng.standard_normal((3, 2, *([k] * dims)))
    b = rng.standard_normal(2)
    _compare(dims, x, w, b, stride=stride, padding=padding, output_padding=extra, dilation=dilation)


def test_second_derivatives_and_the_module():
    rng = np.random.default_rng(0)
    x = td.tensor(rng.standard_normal((1, 2, 3, 3)), requires_grad=True)
    w = td.tensor(rng.standard_normal((2, 2, 2, 2)), requires_grad=True)
    assert td.autograd.gradgradcheck(lambda a, b: F.conv_transpose2d(a, b, stride=2), [x, w])
    layer = td.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
    tl = torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
    assert layer.weight.shape == tuple(tl.weight.shape)
    layer.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    inp = rng.standard_normal((2, 4, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(
        layer(td.tensor(inp)).data, tl(torch.tensor(inp)).detach().numpy(), rtol=1e-5, atol=1e-6
    )
    bound = 1 / np.sqrt(2 * 9)  # torch's init bound: fan-in from dim 1 of the weight
    assert np.abs(layer.bias.data).max() <= bound


def test_errors():
    with pytest.raises(ShapeError, match="input has 3 channels"):
        F.conv_transpose2d(td.ones(1, 3, 4, 4), td.ones(2, 2, 3, 3))
    with pytest.raises(InputError, match="output_padding"):
        F.conv_transpose2d(td.ones(1, 2, 4, 4), td.ones(2, 2, 3, 3), stride=2, output_padding=2)
    with pytest.raises(InputError, match="groups=2 is not supported"):
        F.conv_transpose1d(td.ones(1, 2, 4), td.ones(2, 2, 3), groups=2)
