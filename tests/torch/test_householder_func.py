"""FastH under ``torch.func`` transforms: grad, vmap, jacrev, jacfwd, hessian and their nestings.

Oracle: the same transform applied to the sequential loop (``householder_sequential``, one
reflector at a time, differentiated by autograd) — a different algorithm, in float64.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
func = torch.func

import tadiff.torch.householder as th  # noqa: E402
from tadiff.errors import InputError  # noqa: E402
from tadiff.structured.householder import householder_sequential  # noqa: E402
from tadiff.torch import library  # noqa: E402
from tadiff.torch.householder import Orthogonal, householder_apply  # noqa: E402

F64 = torch.float64


def _pair(block=3, transpose=False):
    def fasth(V, X):
        return householder_apply(V, X, block=block, transpose=transpose)

    def sequential(V, X):
        return householder_sequential(V, X, transpose=transpose)

    return fasth, sequential


def _loss(apply):
    return lambda V, X: apply(V, X).sin().sum()


def _inputs(k=5, d=7, m=2, batch=(), seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(k, d, generator=g, dtype=F64), torch.randn(
        *batch, d, m, generator=g, dtype=F64
    )


def _close(a, b, tol=1e-9):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _close(x, y, tol)
        return
    assert a.shape == b.shape
    assert torch.allclose(a, b, rtol=tol, atol=tol), (a - b).abs().max()


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize(("k", "d", "batch"), [(5, 7, ()), (7, 7, (2,)), (3, 8, (2, 1))])
def test_grad_matches_sequential(k, d, batch, transpose):
    fasth, seq = _pair(transpose=transpose)
    V, X = _inputs(k, d, batch=batch)
    got = func.grad(_loss(fasth), argnums=(0, 1))(V, X)
    _close(got, func.grad(_loss(seq), argnums=(0, 1))(V, X))


@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("transpose", [False, True])
def test_grad_of_grad_and_hessian_match_sequential(transpose, batch):
    fasth, seq = _pair(transpose=transpose)
    V, X = _inputs(batch=batch)

    def gradgrad(apply):
        inner = func.grad(_loss(apply), argnums=(0, 1))
        return func.grad(lambda V, X: sum(g.square().sum() for g in inner(V, X)), argnums=(0, 1))

    _close(gradgrad(fasth)(V, X), gradgrad(seq)(V, X))
    _close(
        func.hessian(_loss(fasth), argnums=(0, 1))(V, X),
        func.hessian(_loss(seq), argnums=(0, 1))(V, X),
    )


@pytest.mark.parametrize("transpose", [False, True])
def test_create_graph_in_plain_autograd_matches_sequential(transpose):
    """Plain autograd's second order runs the same differentiable VJP as the transforms."""
    fasth, seq = _pair(transpose=transpose)
    g = torch.Generator().manual_seed(3)
    G = torch.randn(2, 7, 2, generator=g, dtype=F64)

    def second(apply):
        V, X = (t.clone().requires_grad_(True) for t in _inputs(batch=(2,)))
        gV, gX = torch.autograd.grad(apply(V, X), (V, X), G, create_graph=True)
        return torch.autograd.grad(gV.square().sum() + gX.sin().sum(), (V, X))

    _close(second(fasth), second(seq))


@pytest.mark.parametrize("jac", [func.jacrev, func.jacfwd])
def test_jacobians_match_sequential(jac):
    fasth, seq = _pair(transpose=True)
    V, X = _inputs(k=4, d=6, m=3)
    _close(jac(fasth, argnums=(0, 1))(V, X), func.jacrev(seq, argnums=(0, 1))(V, X))


def test_jvp_with_one_tangent_matches_sequential():
    fasth, seq = _pair()
    V, X = _inputs()
    dX = torch.randn_like(X)
    got = func.jvp(lambda X: fasth(V, X), (X,), (dX,))
    _close(got, func.jvp(lambda X: seq(V, X), (X,), (dX,)))


def test_vmap_over_X_is_one_blocked_call(monkeypatch):
    fasth, seq = _pair()
    V, Xs = _inputs(batch=(4,))
    calls = []
    forward = th._forward
    monkeypatch.setattr(th, "_forward", lambda *a, **kw: calls.append(1) or forward(*a, **kw))
    got = func.vmap(fasth, in_dims=(None, 0))(V, Xs)
    assert len(calls) == 1
    _close(got, seq(V, Xs))
    # the batch dimension anywhere in X
    _close(func.vmap(fasth, in_dims=(None, 2))(V, Xs.movedim(0, 2)), got)


@pytest.mark.parametrize("x_dim", [None, 0])
def test_vmap_over_V(x_dim):
    fasth, seq = _pair()
    g = torch.Generator().manual_seed(1)
    Vs = torch.randn(3, 5, 7, generator=g, dtype=F64)
    X = torch.randn(*((3,) if x_dim == 0 else ()), 7, 2, generator=g, dtype=F64)
    got = func.vmap(fasth, in_dims=(0, x_dim))(Vs, X)
    want = torch.stack([seq(v, X[i] if x_dim == 0 else X) for i, v in enumerate(Vs)])
    _close(got, want)


def test_per_sample_gradients_and_ensembles():
    """vmap(grad): per-sample gradients with a shared V, and an ensemble of Vs."""
    fasth, seq = _pair()
    V, Xs = _inputs(batch=(4,))
    per_sample = func.vmap(func.grad(_loss(fasth)), in_dims=(None, 0))
    _close(per_sample(V, Xs), func.vmap(func.grad(_loss(seq)), in_dims=(None, 0))(V, Xs))
    Vs = torch.stack([V, 2 * V + 1, V.flip(0)])
    ensemble = func.vmap(func.grad(_loss(fasth), argnums=(0, 1)))
    _close(ensemble(Vs, Xs[:3]), func.vmap(func.grad(_loss(seq), argnums=(0, 1)))(Vs, Xs[:3]))


def test_orthogonal_module_with_functional_call_and_stacked_params():
    torch.manual_seed(0)
    models = [Orthogonal(6, k=5, block=2, init="random", dtype=F64) for _ in range(3)]
    params, buffers = func.stack_module_state(models)
    x = torch.randn(4, 6, dtype=F64)

    def loss(p, b, x):
        return func.functional_call(models[0], (p, b), (x,)).square().sum()

    got = func.vmap(func.grad(loss), in_dims=(0, 0, None))(params, buffers, x)["V"]
    for i, model in enumerate(models):
        model(x).square().sum().backward()
        _close(got[i], model.V.grad)


def test_zero_row_is_reported_under_vmap():
    V, Xs = _inputs(batch=(2,))
    V[2] = 0
    with pytest.raises(InputError, match="row 2 of V is zero"):
        func.vmap(householder_apply, in_dims=(None, 0))(V, Xs)
    with pytest.raises(InputError, match="row 2 of V is zero"):
        func.vmap(householder_apply, in_dims=(0, None))(V[None].expand(2, -1, -1), Xs[0])


def test_library_op_under_transforms(recwarn):
    """The torch.compile entry point also works under torch.func (no per-sample fallback)."""
    _, seq = _pair()
    V, Xs = _inputs(batch=(3,))

    def op(V, X):
        return library.householder_apply(V, X, block=3)

    _close(
        func.grad(_loss(op), argnums=(0, 1))(V, Xs), func.grad(_loss(seq), argnums=(0, 1))(V, Xs)
    )
    _close(func.vmap(op, in_dims=(None, 0))(V, Xs), seq(V, Xs))
    assert not [w for w in recwarn if "performance drop" in str(w.message)]


def test_plain_autograd_keeps_the_fast_function():
    """Outside torch.func the Function that keeps the forward's blocks is used (no recompute)."""
    V, X = _inputs()
    Y = householder_apply(V.requires_grad_(True), X)
    assert type(Y.grad_fn).__name__ == "_HouseholderApplyBackward"
    assert not th._transforms_active()


@settings(max_examples=25, deadline=None)
@given(
    d=st.integers(1, 9),
    k_frac=st.floats(0.1, 1.0),
    m=st.integers(1, 3),
    block=st.integers(1, 5),
    transpose=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_grad_matches_sequential_property(d, k_frac, m, block, transpose, seed):
    k = max(1, round(k_frac * d))
    fasth, seq = _pair(block=block, transpose=transpose)
    V, X = _inputs(k, d, m, seed=seed)
    got = func.grad(_loss(fasth), argnums=(0, 1))(V, X)
    _close(got, func.grad(_loss(seq), argnums=(0, 1))(V, X))
