"""Every primitive op, on several shapes (broadcasting and zero-size edges included):

- forward values and gradients equal PyTorch's (CPU, float64),
- gradients pass ``gradcheck`` and second derivatives ``gradgradcheck`` (central differences),
- a float32 graph gives float32 results and float32 gradients.

The cases are the table in ``op_cases.py``.
"""

import numpy as np
import pytest
from op_cases import CASES

import tadiff as td
from tadiff.autograd import gradcheck, gradgradcheck


def _leaves(case, dtype=np.float64):
    return [td.tensor(x.astype(dtype), requires_grad=True) for x in case.inputs()]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_torch_forward_and_gradients(case):
    torch = pytest.importorskip("torch")
    xs = case.inputs()
    ours = [td.tensor(x, requires_grad=True) for x in xs]
    theirs = [torch.tensor(x, requires_grad=True) for x in xs]
    out = case.fn(td, *ours)
    ref = case.fn(torch, *theirs)
    assert out.shape == tuple(ref.shape)
    assert out.dtype == np.float64
    assert type(out.data) is np.ndarray  # never a NumPy scalar, even for 0-d results
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = np.random.default_rng(7).standard_normal(out.shape)
    grads = td.autograd.grad(out, ours, td.tensor(v), allow_unused=True)
    ref_grads = torch.autograd.grad(ref, theirs, torch.tensor(v), allow_unused=True)
    for i, (g, rg) in enumerate(zip(grads, ref_grads, strict=True)):
        expected = np.zeros(xs[i].shape) if rg is None else rg.numpy()
        got = np.zeros(xs[i].shape) if g is None else g.data
        assert got.shape == xs[i].shape, f"input {i}"
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, err_msg=f"input {i}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_gradcheck_and_gradgradcheck(case):
    xs = _leaves(case)

    def fn(*args):
        return case.fn(td, *args)

    assert gradcheck(fn, xs)
    assert gradgradcheck(fn, xs)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_float32_graph_keeps_float32(case):
    xs = _leaves(case, np.float32)
    out = case.fn(td, *xs)
    assert out.dtype == np.float32
    v = td.tensor(np.ones(out.shape, np.float32))
    grads = td.autograd.grad(out, xs, v, retain_graph=True, allow_unused=True)
    for g in grads:
        assert g is None or g.dtype == np.float32
    # second order stays float32 as well
    if out.data.size:
        first = td.autograd.grad(out, xs, v, create_graph=True, allow_unused=True)
        s = sum((g * g).sum() for g in first if g is not None and g.requires_grad)
        if isinstance(s, td.Tensor) and s.requires_grad:
            for g in td.autograd.grad(s, xs, allow_unused=True):
                assert g is None or g.dtype == np.float32


def test_large_tensors_take_the_view_paths_and_match_torch():
    # above the small-array threshold, broadcasts in backward are strided views, not copies
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).standard_normal((80, 70))

    def fn(m, t):
        return (m.mean(t, dim=0, keepdim=True).expand(80, 70) * t).sum() + m.logsumexp(
            t, dim=1
        ).sum()

    ours = td.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    fn(td, ours).backward()
    fn(torch, theirs).backward()
    np.testing.assert_allclose(ours.grad.data, theirs.grad.numpy(), rtol=1e-10)
    assert td.autograd.gradcheck(lambda t: fn(td, t), (ours,), fast_mode=True)
