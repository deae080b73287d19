"""Padding modes, instance norm, PReLU and the small wrapper modules against torch."""

import numpy as np
import pytest

import tadiff as td
import tadiff.nn.functional as F
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(0)


def _same(ours, theirs, arrays, **tol):
    a = [td.tensor(x, requires_grad=True) for x in arrays]
    t = [torch.tensor(x, requires_grad=True) for x in arrays]
    y, ty = ours(*a), theirs(*t)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-10, atol=1e-12, **tol)
    up = np.cos(np.arange(y.data.size)).reshape(y.shape)
    (y * td.tensor(up)).sum().backward()
    (ty * torch.tensor(up)).sum().backward()
    for p, q in zip(a, t, strict=True):
        np.testing.assert_allclose(p.grad.data, q.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular", "constant"])
@pytest.mark.parametrize("pad", [(2, 1), (1, 2, 0, 3), (3, 0, 1, 1, 2, 2)])
def test_pad_modes_match_torch(mode, pad):
    # torch's non-constant modes take (N, C, *) with 1-3 padded dims: size the input to match
    x = RNG.standard_normal((2, 3, 4, 5, 6)[: 2 + len(pad) // 2])
    _same(lambda t: F.pad(t, pad, mode), lambda t: torch.nn.functional.pad(t, pad, mode), [x])


def test_pad_modules_and_errors():
    x = RNG.standard_normal((1, 2, 4, 5))
    x3 = x[0]
    for ours, theirs in [
        (td.nn.ReflectionPad2d((1, 2, 0, 3)), torch.nn.ReflectionPad2d((1, 2, 0, 3))),
        (td.nn.ReplicationPad1d(2), torch.nn.ReplicationPad1d(2)),
        (td.nn.ReflectionPad1d((0, 3)), torch.nn.ReflectionPad1d((0, 3))),
        (td.nn.ZeroPad2d(1), torch.nn.ZeroPad2d(1)),
        (td.nn.ConstantPad2d((1, 0, 2, 1), 3.5), torch.nn.ConstantPad2d((1, 0, 2, 1), 3.5)),
    ]:
        arr = x3 if ours._dims == 1 else x
        np.testing.assert_array_equal(ours(td.tensor(arr)).data, theirs(torch.tensor(arr)).numpy())
    with pytest.raises(ShapeError, match="must be smaller than the dim's size 5"):
        F.pad(td.tensor(x), (5, 0), "reflect")
    with pytest.raises(InputError, match="mode='wrap'"):
        F.pad(td.tensor(x), (1, 1), "wrap")


@pytest.mark.parametrize("affine", [False, True])
def test_instance_norm_matches_torch(affine):
    x = RNG.standard_normal((2, 3, 4, 5))
    ours, theirs = (
        td.nn.InstanceNorm2d(3, affine=affine).double(),
        torch.nn.InstanceNorm2d(3, affine=affine).double(),
    )
    _same(ours, theirs, [x])
    tracked = td.nn.InstanceNorm1d(3, track_running_stats=True).double()
    ttracked = torch.nn.InstanceNorm1d(3, track_running_stats=True).double()
    x1 = RNG.standard_normal((4, 3, 6))
    tracked(td.tensor(x1))
    ttracked(torch.tensor(x1))
    np.testing.assert_allclose(tracked.running_var.data, ttracked.running_var.numpy(), rtol=1e-12)
    tracked.eval()
    ttracked.eval()
    np.testing.assert_allclose(
        tracked(td.tensor(x1)).data, ttracked(torch.tensor(x1)).numpy(), rtol=1e-10
    )


def test_prelu_and_wrappers():
    x = RNG.standard_normal((2, 3, 4))
    w = np.array([0.1, 0.25, -0.5])
    _same(F.prelu, torch.nn.functional.prelu, [x, w])
    _same(F.prelu, torch.nn.functional.prelu, [x, w[:1]])
    assert td.nn.PReLU(3).weight.data.tolist() == [0.25, 0.25, 0.25]
    a, b = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    np.testing.assert_allclose(
        td.nn.CosineSimilarity()(td.tensor(a), td.tensor(b)).data,
        torch.nn.CosineSimilarity()(torch.tensor(a), torch.tensor(b)).numpy(),
    )
    np.testing.assert_allclose(
        td.nn.PairwiseDistance()(td.tensor(a), td.tensor(b)).data,
        torch.nn.PairwiseDistance()(torch.tensor(a), torch.tensor(b)).numpy(),
    )
