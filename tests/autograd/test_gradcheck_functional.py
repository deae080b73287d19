"""gradcheck catches wrong gradients (full and fast mode); functional vjp/jvp/jacobian/hessian
agree with PyTorch."""

import numpy as np
import pytest

import tadiff as td
from tadiff.autograd import functional, gradcheck, gradgradcheck
from tadiff.errors import GradcheckError


class WrongSquare(td.autograd.Function):
    """Gradient off by a factor at element 1 only."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.data**2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        scale = td.tensor(np.where(np.arange(x.numel()) == 1, 3.0, 2.0).reshape(x.shape))
        return g * x * scale


class WrongSecondOrder(td.autograd.Function):
    """Right first derivative of x^3, but its backward treats x as a constant."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.data**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * td.tensor(3 * x.data**2)


def _x(*shape):
    return td.tensor(np.random.default_rng(0).standard_normal(shape) + 0.5, requires_grad=True)


def test_gradcheck_reports_the_worst_element():
    x = _x(3)
    with pytest.raises(
        GradcheckError, match=r"input 0: at \(output element, input element\) \(1, 1\)"
    ):
        gradcheck(WrongSquare.apply, (x,))
    assert gradcheck(WrongSquare.apply, (x,), raise_exception=False) is False


def test_gradcheck_perturbs_column_major_inputs():
    # a flattened copy of such an input would never reach the function: numerical zeros
    data = np.random.default_rng(1).standard_normal((6, 4)).T  # td.tensor keeps the layout
    x = td.tensor(data, requires_grad=True)
    assert x.data.flags.f_contiguous and not x.data.flags.c_contiguous
    w = td.tensor(np.random.default_rng(2).standard_normal((6, 5)))
    fn = lambda t: (t @ w).sin()  # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))
    with pytest.raises(GradcheckError, match=r"input 0"):
        gradcheck(WrongSquare.apply, (td.tensor(data, requires_grad=True),))


def test_fast_mode_catches_the_same_bug():
    x = _x(3)
    with pytest.raises(GradcheckError, match="Projection"):
        gradcheck(WrongSquare.apply, (x,), fast_mode=True)
    assert gradcheck(lambda t: (t * t).sin(), (x,), fast_mode=True)


def test_gradgradcheck_catches_a_wrong_second_derivative():
    x = _x(2)
    assert gradcheck(WrongSecondOrder.apply, (x,))
    with pytest.raises(GradcheckError):
        gradgradcheck(WrongSecondOrder.apply, (x,))


def test_gradcheck_multiple_inputs_and_outputs_and_fast_gradgrad():
    a, b = _x(2, 3), _x(3)

    def fn(p, q):
        return (p * q).tanh(), (p @ q).exp()

    assert gradcheck(fn, (a, b))
    assert gradgradcheck(fn, (a, b), fast_mode=True)


def test_functional_against_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).standard_normal(4)
    v = np.random.default_rng(4).standard_normal(4)

    def f(m, t):
        return (t.sin() * t.sum()).tanh() * t

    _out, g = functional.vjp(lambda t: f(td, t), td.tensor(x), td.tensor(v))
    _, tg = torch.autograd.functional.vjp(lambda t: f(torch, t), torch.tensor(x), torch.tensor(v))
    np.testing.assert_allclose(g.data, tg.numpy(), rtol=1e-10)
    _, jv = functional.jvp(lambda t: f(td, t), td.tensor(x), td.tensor(v))
    _, tjv = torch.autograd.functional.jvp(lambda t: f(torch, t), torch.tensor(x), torch.tensor(v))
    np.testing.assert_allclose(jv.data, tjv.numpy(), rtol=1e-10)
    jac = functional.jacobian(lambda t: f(td, t), td.tensor(x))
    tjac = torch.autograd.functional.jacobian(lambda t: f(torch, t), torch.tensor(x))
    np.testing.assert_allclose(jac.data, tjac.numpy(), rtol=1e-10)
    hes = functional.hessian(lambda t: f(td, t).sum(), td.tensor(x))
    thes = torch.autograd.functional.hessian(lambda t: f(torch, t).sum(), torch.tensor(x))
    np.testing.assert_allclose(hes.data, thes.numpy(), rtol=1e-9, atol=1e-12)


def test_jacobian_of_tuple_inputs_has_torch_layout():
    a, b = td.tensor([1.0, 2.0], dtype="float64"), td.tensor(3.0, dtype="float64")
    ja, jb = functional.jacobian(lambda p, q: p * q, (a, b))
    assert ja.shape == (2, 2) and jb.shape == (2,)
    np.testing.assert_array_equal(ja.data, 3 * np.eye(2))
    np.testing.assert_array_equal(jb.data, [1.0, 2.0])
