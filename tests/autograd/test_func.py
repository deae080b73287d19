"""tadiff.func transforms against torch.func, their composition, and their errors."""

import numpy as np
import pytest

import tadiff as td
from tadiff import func
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")
tf = torch.func

X = np.array([0.3, -1.2, 2.0])
Y = np.array([1.5, 0.25, -0.5])


def f(m, x, y):
    return (m.sin(x) * y**2).sum() + (x * x).sum() * y[0]


def vec(m, x):
    return m.tanh(x) * x[0] + x**3


def _np(t):
    return np.asarray(t.detach().numpy() if isinstance(t, torch.Tensor) else t.data)


def _both(transform_td, transform_torch, *arrays):
    ours = transform_td(*[td.tensor(a) for a in arrays])
    theirs = transform_torch(*[torch.tensor(a) for a in arrays])
    return ours, theirs


def _assert_tree_close(a, b):
    if isinstance(a, (tuple, list)):
        assert isinstance(b, (tuple, list)) and len(a) == len(b)
        for p, q in zip(a, b, strict=True):
            _assert_tree_close(p, q)
    else:
        np.testing.assert_allclose(_np(a), _np(b), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_grad_and_value_and_grad_match_torch(argnums):
    ours, theirs = _both(
        func.grad(lambda x, y: f(td, x, y), argnums),
        tf.grad(lambda x, y: f(torch, x, y), argnums),
        X, Y,
    )  # fmt: skip
    _assert_tree_close(ours, theirs)
    ours, theirs = _both(
        func.value_and_grad(lambda x, y: f(td, x, y), argnums),
        tf.grad_and_value(lambda x, y: f(torch, x, y), argnums),
        X, Y,
    )  # fmt: skip
    _assert_tree_close((ours[1], ours[0]), theirs)


def test_higher_order_by_composition_matches_torch():
    def second(m, t):
        g = (func.grad if m is td else tf.grad)(lambda x: f(m, x, m.tensor(Y)))
        return (func.grad if m is td else tf.grad)(lambda x: (g(x) * m.cos(x)).sum())

    _assert_tree_close(second(td, None)(td.tensor(X)), second(torch, None)(torch.tensor(X)))
    ours, theirs = _both(
        func.hessian(lambda x: f(td, x, td.tensor(Y))),
        tf.hessian(lambda x: f(torch, x, torch.tensor(Y))),
        X,
    )
    _assert_tree_close(ours, theirs)


def test_jacobians_vjp_and_jvp_match_torch():
    for ours_t, theirs_t in ((func.jacrev, tf.jacrev), (func.jacfwd, tf.jacfwd)):
        ours, theirs = _both(ours_t(lambda x: vec(td, x)), theirs_t(lambda x: vec(torch, x)), X)
        _assert_tree_close(ours, theirs)
    out, fn = func.vjp(lambda x: vec(td, x), td.tensor(X))
    tout, tfn = tf.vjp(lambda x: vec(torch, x), torch.tensor(X))
    _assert_tree_close((out, fn(td.tensor(Y))), (tout, tfn(torch.tensor(Y))))
    ours = func.jvp(lambda x: vec(td, x), (td.tensor(X),), (td.tensor(Y),))
    theirs = tf.jvp(lambda x: vec(torch, x), (torch.tensor(X),), (torch.tensor(Y),))
    _assert_tree_close(ours, theirs)
    # Hessian-vector product: forward-over-reverse in torch, reverse-over-reverse here
    ours = func.jvp(func.grad(lambda x: f(td, x, td.tensor(Y))), (td.tensor(X),), (td.tensor(Y),))
    theirs = tf.jvp(
        tf.grad(lambda x: f(torch, x, torch.tensor(Y))), (torch.tensor(X),), (torch.tensor(Y),)
    )
    _assert_tree_close(ours, theirs)


def test_has_aux_and_captured_parameters():
    g, aux = func.grad(lambda x: ((x**2).sum(), x.mean()), has_aux=True)(td.tensor(X))
    np.testing.assert_allclose(g.data, 2 * X)
    assert not aux.requires_grad and float(aux.data) == pytest.approx(X.mean())
    w = td.tensor(Y, requires_grad=True)
    g = func.grad(lambda x: (x**3 * w).sum())(td.tensor(X))  # depends on the captured w
    g.sum().backward()
    np.testing.assert_allclose(w.grad.data, 3 * X**2)
    plain = func.grad(lambda x: (x**3).sum())(td.tensor(X))
    assert not plain.requires_grad


def test_errors():
    with pytest.raises(ShapeError, match="one-element Tensor"):
        func.grad(lambda x: x * 2)(td.tensor(X))
    with pytest.raises(InputError, match="argnums 2 out of range"):
        func.grad(lambda x: x.sum(), argnums=2)(td.tensor(X))
    with pytest.raises(InputError, match="floating tensor"):
        func.grad(lambda x: x.sum())(td.tensor([1, 2]))
    with pytest.raises(InputError, match=r"return \(output, aux\)"):
        func.grad(lambda x: x.sum(), has_aux=True)(td.tensor(X))
    with pytest.raises(ShapeError, match="does not match its primal"):
        func.jvp(lambda x: x, (td.tensor(X),), (td.ones(2, dtype=td.float64),))
    _, fn = func.vjp(lambda x: x * 2, td.tensor(X))
    with pytest.raises(ShapeError, match="cotangent must have the output's shape"):
        fn(td.ones(2, dtype=td.float64))
