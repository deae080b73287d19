"""Every op exported by tadiff.torch: gradcheck, gradgradcheck (or its documented refusal), the
torch.library versions against the Function versions, and torch.compile."""

import pytest

torch = pytest.importorskip("torch")

import tadiff.torch as tdt  # noqa: E402
from tadiff.errors import AutogradError, InputError  # noqa: E402
from tadiff.structured.householder import householder_sequential  # noqa: E402
from tadiff.structured.sinkhorn import sinkhorn_forward  # noqa: E402
from tadiff.torch import library  # noqa: E402

F64 = torch.float64
GC = {"eps": 1e-6, "atol": 1e-8, "rtol": 1e-6}
GGC = {"eps": 1e-6, "atol": 1e-7, "rtol": 1e-5}


def _rand(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=F64, generator=gen)


def _leaf(*shape, seed=0):
    return _rand(*shape, seed=seed).requires_grad_(True)


def _mass(t):
    """Marginals of mass 1 from free parameters, so gradcheck's perturbations keep equal mass."""
    return t.softmax(-1)


# Each case: (name, fn, inputs, twice) — twice: gradgradcheck must pass; otherwise it must raise.
def _cases():
    V, X = _leaf(4, 5), _leaf(2, 5, 3, seed=1)
    S = _leaf(2, 3, 4, seed=2)
    a, b = _leaf(3, seed=3), _leaf(2, 4, seed=4)
    x = _leaf(3, 5, seed=5)
    orth = tdt.Orthogonal(5, k=4, block=2, init="random", dtype=F64)
    svd = tdt.LinearSVD(5, 3, block=2, init="random", dtype=F64)
    torch.manual_seed(0)
    with torch.no_grad():
        svd.s.uniform_(0.5, 1.5)
        svd.bias.normal_()
    converged = {"iters": 500, "tol": 1e-13}
    return [
        ("householder_apply", lambda v, x: tdt.householder_apply(v, x, block=2), (V, X), True),
        (
            "householder_apply transpose",
            lambda v, x: tdt.householder_apply(v, x, block=3, transpose=True),
            (V, X),
            True,
        ),
        ("householder_product", lambda v: tdt.householder_product(v, block=2), (V,), True),
        (
            "Orthogonal",
            lambda v, x: torch.func.functional_call(orth, {"V": v}, (x,)),
            (orth.V.detach().clone().requires_grad_(True), x),
            True,
        ),
        (
            "LinearSVD",
            lambda vi, vo, s, bias, x: torch.func.functional_call(
                svd, {"V_in": vi, "V_out": vo, "s": s, "bias": bias}, (x,)
            ),
            (*(p.detach().clone().requires_grad_(True) for p in svd.parameters()), x),
            True,
        ),
        ("sinkhorn", lambda s: tdt.sinkhorn(s, **converged), (S,), False),
        (
            "sinkhorn marginals",
            lambda s, a, b: tdt.sinkhorn(s, _mass(a), _mass(b), **converged),
            (S, a, b),
            False,
        ),
        ("sinkhorn direct", lambda s: tdt.sinkhorn(s, backward="direct", **converged), (S,), False),
        (
            "sinkhorn unrolled",
            lambda s: tdt.sinkhorn(s, iters=30, backward="unrolled"),
            (S,),
            True,
        ),
        (
            "library.householder_apply",
            lambda v, x: library.householder_apply(v, x, block=2, transpose=True),
            (V, X),
            True,
        ),
        ("library.householder_product", lambda v: library.householder_product(v), (V,), True),
        ("library.sinkhorn", lambda s: library.sinkhorn(s, **converged), (S,), False),
        (
            "library.sinkhorn marginals",
            lambda s, a, b: library.sinkhorn(s, _mass(a), _mass(b), **converged),
            (S, a, b),
            False,
        ),
        (
            "library.sinkhorn one marginal",
            lambda s, a: library.sinkhorn(s, 3 * _mass(a), **converged),
            (S, a),
            False,
        ),
    ]


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradcheck(case):
    _, fn, inputs, _ = case
    assert torch.autograd.gradcheck(fn, inputs, **GC)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradgradcheck_or_clear_refusal(case):
    _, fn, inputs, twice = case
    if twice:
        assert torch.autograd.gradgradcheck(fn, inputs, **GGC)
        return
    # Sinkhorn's implicit backward is once-differentiable: the second derivative is refused.
    with pytest.raises(AutogradError, match="sinkhorn: the implicit backward is once-diff"):
        torch.autograd.gradgradcheck(fn, inputs, **GGC)


def test_library_ops_equal_function_versions_and_oracles():
    V, X = _rand(6, 7), _rand(3, 7, 2, seed=1)
    G = _rand(3, 7, 2, seed=2)
    for transpose in (False, True):
        got = library.householder_apply(V, X, block=4, transpose=transpose)
        torch.testing.assert_close(
            got, householder_sequential(V, X, transpose=transpose), atol=1e-12, rtol=0
        )
        Vl, Xl = V.clone().requires_grad_(True), X.clone().requires_grad_(True)
        g1 = torch.autograd.grad(
            library.householder_apply(Vl, Xl, transpose=transpose), (Vl, Xl), G
        )
        g2 = torch.autograd.grad(householder_sequential(Vl, Xl, transpose=transpose), (Vl, Xl), G)
        for p, q in zip(g1, g2, strict=True):
            torch.testing.assert_close(p, q, atol=1e-9, rtol=0)
    S = _leaf(5, 4, 4, seed=3)
    Gs = _rand(5, 4, 4, seed=4)
    R = library.sinkhorn(S, iters=400, tol=1e-13)
    (gl,) = torch.autograd.grad(R, S, Gs)
    Ru, _ = sinkhorn_forward(S, iters=400)  # unrolled torch autograd: the oracle
    (gu,) = torch.autograd.grad(Ru, S, Gs)
    torch.testing.assert_close(R, Ru, atol=1e-12, rtol=0)
    torch.testing.assert_close(gl, gu, atol=1e-9, rtol=0)


def test_library_ops_pass_torch_opcheck():
    V, X, G = _rand(4, 5), _rand(5, 3, seed=1), _rand(5, 3, seed=2)
    ops = torch.ops.tadiff
    torch.library.opcheck(ops.householder_apply.default, (V.requires_grad_(True), X, 2, False))
    # The vjp's own backward (second order) calls torch.autograd.grad on data-dependent Python
    # code: it runs eagerly but is not traceable, so the aot_dispatch checks are left out.
    eager_checks = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(ops.householder_vjp.default, (V, X, G, 2, True), test_utils=eager_checks)
    S = _rand(2, 3, 3, seed=3)
    args = (S, None, None, 50, None, "auto", False, "implicit", None, None, 1e-4)
    torch.library.opcheck(ops.sinkhorn.default, args)


def _compiled_grads(fn, inputs, **compile_kwargs):
    torch._dynamo.reset()
    compiled = torch.compile(fn, **compile_kwargs)
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = compiled(*leaves)
    return out.detach(), torch.autograd.grad(out, leaves)


def _eager_grads(fn, inputs):
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    return out.detach(), torch.autograd.grad(out, leaves)


def _loss_library(V, X, S):
    Y = library.householder_apply(V, X, block=2)
    R = library.sinkhorn(S, iters=40)
    return (Y.tanh() * Y).sum() + (R * R.cos()).sum()


def _loss_functions(V, X, S):
    Y = tdt.householder_apply(V, X, block=2)
    R = tdt.sinkhorn(S, iters=40)
    return (Y.tanh() * Y).sum() + (R * R.cos()).sum()


def test_library_ops_compile_as_one_graph_with_equal_results():
    inputs = (_rand(4, 6), _rand(6, 3, seed=1), _rand(2, 4, 4, seed=2))
    want = _eager_grads(_loss_library, inputs)
    explanation = torch._dynamo.explain(_loss_library)(*inputs)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    got = _compiled_grads(_loss_library, inputs, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(got[0], want[0], atol=1e-12, rtol=0)
    for p, q in zip(got[1], want[1], strict=True):
        torch.testing.assert_close(p, q, atol=1e-12, rtol=0)


def test_function_versions_are_graph_break_safe_under_compile():
    inputs = (_rand(4, 6), _rand(6, 3, seed=1), _rand(2, 4, 4, seed=2))
    want = _eager_grads(_loss_functions, inputs)
    got = _compiled_grads(_loss_functions, inputs, backend="aot_eager")
    torch.testing.assert_close(got[0], want[0], atol=1e-12, rtol=0)
    for p, q in zip(got[1], want[1], strict=True):
        torch.testing.assert_close(p, q, atol=1e-12, rtol=0)


def test_inductor_compiles_a_training_step_with_library_ops():
    # inductor generates and builds C++ for the code around the ops (gcc is needed)
    inputs = (_rand(4, 6), _rand(6, 3, seed=1), _rand(2, 4, 4, seed=2))
    want = _eager_grads(_loss_library, inputs)
    got = _compiled_grads(_loss_library, inputs, fullgraph=True)
    torch.testing.assert_close(got[0], want[0], atol=1e-10, rtol=0)
    for p, q in zip(got[1], want[1], strict=True):
        torch.testing.assert_close(p, q, atol=1e-10, rtol=0)


def test_library_errors_name_the_argument():
    with pytest.raises(InputError, match="log_domain must be 'auto', True or False, got 'yes'"):
        library.sinkhorn(_rand(2, 3, 3), log_domain="yes")
    with pytest.raises(InputError, match="a must be a torch tensor or None"):
        library.sinkhorn(_rand(2, 3, 3), [1.0, 1.0, 1.0])
    with pytest.raises(InputError, match=r"X\[0, 0, 2\] = nan"):
        library.sinkhorn(torch.tensor([[[0.0, 0.0, float("nan")]] * 3] * 2))
    with pytest.raises(Exception, match=r"X must have shape \(\.\.\., d, m\)"):
        library.householder_apply(_rand(3, 4), _rand(5, 2))
