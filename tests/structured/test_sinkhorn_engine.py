"""Sinkhorn in tadiff's engine: the implicit Function against autograd through the iterations."""

import numpy as np
import pytest

td = pytest.importorskip("tadiff")
if not hasattr(td, "tensor"):  # pragma: no cover - only while the engine is landing
    pytest.skip("tadiff's engine has not landed", allow_module_level=True)

from tadiff.errors import ConvergenceWarning, ShapeError  # noqa: E402
from tadiff.structured.sinkhorn import sinkhorn, sinkhorn_forward, sinkhorn_vjp  # noqa: E402

SOLVERS = ["implicit", "implicit-2n", "direct"]


def _grad(X, G, method, iters, a=None, b=None):
    x = td.tensor(X, requires_grad=True)
    R = sinkhorn(x, a, b, iters=iters, backward=method)
    assert isinstance(R, td.Tensor)
    is_function = type(R.grad_fn).__name__ == "SinkhornFunctionBackward"
    assert is_function == (method != "unrolled")
    R.backward(td.tensor(G))
    return x.grad.numpy()


@pytest.mark.parametrize("shape", [(16, 4, 4), (4, 8, 8), (6, 3, 5), (6, 5, 2)])
def test_engine_implicit_matches_engine_unrolled(shape):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 4, shape)
    G = rng.normal(size=shape)
    reference = _grad(X, G, "unrolled", 300)
    assert abs(reference).max() > 1e-2
    for method in SOLVERS:
        assert abs(_grad(X, G, method, 300) - reference).max() <= 1e-9, method


def test_engine_matches_torch_unrolled():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    X = rng.uniform(0, 4, (8, 5, 5))
    G = rng.normal(size=X.shape)
    x = torch.tensor(X, requires_grad=True)
    R, _ = sinkhorn_forward(x, iters=300)
    R.backward(torch.tensor(G))
    assert abs(_grad(X, G, "implicit", 300) - x.grad.numpy()).max() <= 1e-9


def test_engine_marginals_and_their_gradients():
    rng = np.random.default_rng(2)
    X = td.tensor(rng.normal(size=(2, 3, 4)), requires_grad=True)
    ta = td.tensor(rng.normal(size=3), requires_grad=True)
    tb = td.tensor(rng.normal(size=(2, 4)), requires_grad=True)
    G = td.tensor(rng.normal(size=(2, 3, 4)))
    grads = {}
    for method in ["unrolled", "implicit"]:
        R = sinkhorn(X, 2 * ta.softmax(-1), 2 * tb.softmax(-1), iters=400, backward=method)
        rows = np.broadcast_to(2 * ta.softmax(-1).numpy(), (2, 3))
        np.testing.assert_allclose(R.numpy().sum(-1), rows, atol=1e-12)
        grads[method] = [g.numpy() for g in td.autograd.grad((R * G).sum(), [X, ta, tb])]
    for implicit, unrolled in zip(grads["implicit"], grads["unrolled"], strict=True):
        assert abs(implicit - unrolled).max() <= 1e-9


@pytest.mark.parametrize("method", SOLVERS)
def test_tadiff_gradcheck(method):
    rng = np.random.default_rng(3)
    X = td.tensor(rng.normal(size=(2, 3, 4)), requires_grad=True)
    ta = td.tensor(rng.normal(size=3), requires_grad=True)

    def f(X, ta):
        return sinkhorn(X, 4 * ta.softmax(-1), None, iters=1000, tol=1e-15, backward=method)

    assert td.autograd.gradcheck(f, (X, ta))


def test_engine_float32_large_entries_and_no_grad():
    rng = np.random.default_rng(4)
    X = rng.choice([-500.0, 500.0], size=(8, 4, 4)).astype(np.float32)
    x = td.tensor(X, requires_grad=True)
    with pytest.warns(ConvergenceWarning, match="column sums are off"):  # cannot be balanced
        R = sinkhorn(x, iters=100)
    assert R.dtype == np.float32 and np.isfinite(R.numpy()).all()
    R.backward(td.tensor(rng.normal(size=X.shape).astype(np.float32)))
    assert x.grad.dtype == np.float32 and np.isfinite(x.grad.numpy()).all()
    with td.no_grad():
        assert sinkhorn(x, warn_tol=None).grad_fn is None


def test_engine_gradient_is_the_array_vjp():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3, 6, 6))
    G = rng.normal(size=X.shape)
    R, _ = sinkhorn_forward(X, iters=20)  # unconverged: still the same implicit formula
    np.testing.assert_allclose(_grad(X, G, "implicit", 20), sinkhorn_vjp(R, G), atol=1e-14)


def test_engine_bad_input():
    with pytest.raises(ShapeError, match=r"shape \(3,\)"):
        sinkhorn(td.tensor([1.0, 2.0, 3.0], requires_grad=True))


def test_demo_self_checks_pass():
    from tadiff.structured.sinkhorn_demo import run

    lines = []
    assert run(lines.append)
    assert any("max |implicit − unrolled autograd|" in line for line in lines)


def test_docstring_examples_run():
    import doctest

    import tadiff.structured.sinkhorn as module

    result = doctest.testmod(module)
    assert result.attempted >= 8 and result.failed == 0
