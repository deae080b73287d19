"""Hypothesis property tests where inputs have structure: broadcastable shape pairs, reduction
dims, permutations, index sets — each checked against PyTorch."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tadiff as td

torch = pytest.importorskip("torch")

_SETTINGS = settings(max_examples=40, deadline=None)


def _values(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _pair(a, b):
    return td.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


@_SETTINGS
@given(
    shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3),
    op=st.sampled_from(["add", "sub", "mul", "maximum", "where"]),
    seed=st.integers(0, 2**16),
)
def test_broadcasting_binary_ops_match_torch(shapes, op, seed):
    sa, sb = shapes.input_shapes
    a, b = _values(sa, seed), _values(sb, seed + 1)
    fns = {
        "add": lambda m, x, y: x + y,
        "sub": lambda m, x, y: x - y,
        "mul": lambda m, x, y: x * y,
        "maximum": lambda m, x, y: m.maximum(x, y),
        "where": lambda m, x, y: m.where(x > y, x * 2, y),
    }
    ta, pa = _pair(a, None)
    tb, pb = _pair(b, None)
    out = fns[op](td, ta, tb)
    ref = fns[op](torch, pa, pb)
    np.testing.assert_allclose(out.data, ref.detach().numpy())
    v = _values(out.shape, seed + 2)
    ga, gb = td.autograd.grad(out, [ta, tb], td.tensor(v))
    ra, rb = torch.autograd.grad(ref, [pa, pb], torch.tensor(v))
    assert ga.shape == sa and gb.shape == sb
    np.testing.assert_allclose(ga.data, ra.numpy(), atol=1e-12)
    np.testing.assert_allclose(gb.data, rb.numpy(), atol=1e-12)


@_SETTINGS
@given(
    shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3),
    data=st.data(),
    op=st.sampled_from(["sum", "mean", "var", "amax", "logsumexp", "prod", "std"]),
    keepdim=st.booleans(),
)
def test_reductions_over_random_dims_match_torch(shape, data, op, keepdim):
    ndim = len(shape)
    dims = data.draw(
        st.lists(
            st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim, unique_by=lambda d: d % ndim
        )
    )
    dims = tuple(dims) if op != "prod" else dims[0]  # torch.prod takes a single dim
    x = _values(shape, len(shape) + int(np.abs(np.atleast_1d(dims)).sum()))
    if op in ("var", "std") and np.prod([shape[d] for d in np.atleast_1d(dims)]) < 2:
        return  # a single element has no unbiased variance
    tx, px = _pair(x, None)
    out = getattr(td, op)(tx, dim=dims, keepdim=keepdim)
    ref = getattr(torch, op)(px, dim=dims, keepdim=keepdim)
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10)
    v = _values(out.shape, 3)
    (g,) = td.autograd.grad(out, tx, td.tensor(v))
    (r,) = torch.autograd.grad(ref, px, torch.tensor(v))
    np.testing.assert_allclose(g.data, r.numpy(), rtol=1e-9, atol=1e-12)


@_SETTINGS
@given(perm=st.permutations(range(4)), seed=st.integers(0, 100))
def test_permute_and_reshape_roundtrip_gradients(perm, seed):
    x = _values((2, 3, 1, 2), seed)
    tx, px = _pair(x, None)
    out = tx.permute(*perm).reshape(-1, 2).exp()
    ref = px.permute(*perm).reshape(-1, 2).exp()
    np.testing.assert_allclose(out.data, ref.detach().numpy())
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(tx.grad.data, px.grad.numpy())


@_SETTINGS
@given(idx=st.lists(st.integers(-4, 3), min_size=1, max_size=6), seed=st.integers(0, 100))
def test_advanced_indexing_with_repeats_accumulates_like_torch(idx, seed):
    x = _values((4, 2), seed)
    tx, px = _pair(x, None)
    w = _values((len(idx), 2), seed + 1)
    (tx[idx] * td.tensor(w)).sum().backward()
    (px[idx] * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(tx.grad.data, px.grad.numpy())


@st.composite
def _einsum_problems(draw):
    letters = "abcd"
    sizes = {c: draw(st.integers(1, 3)) for c in letters}
    n_ops = draw(st.integers(1, 3))
    specs = [
        "".join(draw(st.lists(st.sampled_from(letters), min_size=0, max_size=3)))
        for _ in range(n_ops)
    ]
    used = sorted(set("".join(specs)))
    out = "".join(draw(st.permutations(used))[: draw(st.integers(0, len(used)))])
    shapes = [tuple(sizes[c] for c in s) for s in specs]
    return ",".join(specs) + "->" + out, shapes


@_SETTINGS
@given(problem=_einsum_problems(), seed=st.integers(0, 100))
def test_random_einsum_equations_match_torch(problem, seed):
    equation, shapes = problem
    xs = [_values(s, seed + i) for i, s in enumerate(shapes)]
    ours = [td.tensor(x, requires_grad=True) for x in xs]
    theirs = [torch.tensor(x, requires_grad=True) for x in xs]
    out = td.einsum(equation, *ours)
    ref = torch.einsum(equation, *theirs)
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    v = _values(out.shape, seed + 9)
    grads = td.autograd.grad(out, ours, td.tensor(v))
    refs = torch.autograd.grad(ref, theirs, torch.tensor(v), allow_unused=True)
    for g, r, x in zip(grads, refs, xs, strict=True):
        expected = np.zeros(x.shape) if r is None else r.numpy()
        np.testing.assert_allclose(g.data, expected, rtol=1e-10, atol=1e-12)


_SMOOTH = {
    "sin": lambda m, x: m.sin(x),
    "tanh": lambda m, x: m.tanh(x),
    "sigmoid": lambda m, x: m.sigmoid(x),
    "square": lambda m, x: x * x,
    "softplus": lambda m, x: m.log1p(m.exp(x)),
    "softmax": lambda m, x: m.softmax(x, dim=-1),
    "logsumexp": lambda m, x: m.logsumexp(x, dim=-1, keepdim=True) - x,
    "norm": lambda m, x: x / m.norm(x, dim=-1, keepdim=True),
    "matmul": lambda m, x: x @ x.mT,
    "cumulate": lambda m, x: m.cat([x[..., :1], x[..., 1:] + x[..., :-1]], dim=-1),
    "var": lambda m, x: x - x.var(dim=0, keepdim=True),
    "prod": lambda m, x: x.prod(dim=-1, keepdim=True) + x,
}


@_SETTINGS
@given(
    names=st.lists(st.sampled_from(sorted(_SMOOTH)), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
)
def test_hessian_vector_products_of_random_compositions_match_torch(names, seed):
    x = _values((2, 3, 3), seed) * 0.5
    v = _values((2, 3, 3), seed + 1)

    def f(m, t):
        for name in names:
            t = _SMOOTH[name](m, t)
        return (t * t).sum()

    ours = td.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    (g,) = td.autograd.grad(f(td, ours), ours, create_graph=True)
    (rg,) = torch.autograd.grad(f(torch, theirs), theirs, create_graph=True)
    np.testing.assert_allclose(g.data, rg.detach().numpy(), rtol=1e-8, atol=1e-10)
    (h,) = td.autograd.grad((g * td.tensor(v)).sum(), ours)
    (rh,) = torch.autograd.grad((rg * torch.tensor(v)).sum(), theirs)
    np.testing.assert_allclose(h.data, rh.numpy(), rtol=1e-7, atol=1e-9)
