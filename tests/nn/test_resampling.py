"""interpolate / Upsample / pixel_shuffle against torch: values and input gradients."""

import numpy as np
import pytest

import tadiff as td
import tadiff.nn.functional as F
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)
X1 = RNG.standard_normal((2, 3, 7))
X2 = RNG.standard_normal((2, 3, 5, 6))

CASES = [
    (X1, {"scale_factor": 2, "mode": "linear"}),
    (X1, {"size": 11, "mode": "linear", "align_corners": True}),
    (X1, {"size": 4, "mode": "linear"}),
    (X1, {"scale_factor": 1.7, "mode": "linear"}),
    (X1, {"scale_factor": 1.7, "mode": "linear", "recompute_scale_factor": True}),
    (X1, {"scale_factor": 2, "mode": "nearest"}),
    (X1, {"size": 5, "mode": "nearest"}),
    (X1, {"size": 10, "mode": "nearest-exact"}),
    (X1, {"scale_factor": 0.6, "mode": "nearest"}),
    (X2, {"scale_factor": 2, "mode": "bilinear"}),
    (X2, {"size": (3, 9), "mode": "bilinear", "align_corners": True}),
    (X2, {"scale_factor": (1.5, 0.5), "mode": "bilinear"}),
    (X2, {"size": (7, 4), "mode": "nearest"}),
    (X2, {"scale_factor": 3, "mode": "nearest-exact"}),
]


@pytest.mark.parametrize(("x", "kw"), CASES, ids=[str(kw) for _, kw in CASES])
def test_interpolate_matches_torch(x, kw):
    a, t = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, ty = F.interpolate(a, **kw), torch.nn.functional.interpolate(t, **kw)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-12, atol=1e-12)
    up = np.cos(np.arange(y.data.size)).reshape(y.shape)
    (y * td.tensor(up)).sum().backward()
    (ty * torch.tensor(up)).sum().backward()
    np.testing.assert_allclose(a.grad.data, t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_modules_and_pixel_shuffle():
    x = RNG.standard_normal((2, 8, 3, 3))
    np.testing.assert_array_equal(
        td.nn.PixelShuffle(2)(td.tensor(x)).data,
        torch.nn.PixelShuffle(2)(torch.tensor(x)).numpy(),
    )
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(td.tensor(x), 2), 2).data, x)
    up = td.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    tup = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    np.testing.assert_allclose(up(td.tensor(X2)).data, tup(torch.tensor(X2)).numpy(), atol=1e-12)
    assert td.autograd.gradgradcheck(
        lambda t: F.interpolate(t, size=4, mode="linear") ** 2,
        [td.tensor(X1[:1, :1], requires_grad=True)],
    )


def test_errors():
    with pytest.raises(InputError, match="exactly one of size and scale_factor"):
        F.interpolate(td.tensor(X1))
    with pytest.raises(InputError, match="mode 'bicubic' is not supported"):
        F.interpolate(td.tensor(X2), scale_factor=2, mode="bicubic")
    with pytest.raises(ShapeError, match="expects 4-D input"):
        F.interpolate(td.tensor(X1), scale_factor=2, mode="bilinear")
    with pytest.raises(ShapeError, match="divisible by upscale_factor"):
        F.pixel_shuffle(td.ones(1, 3, 2, 2), 2)
