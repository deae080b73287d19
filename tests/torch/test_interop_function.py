"""tadiff.torch.function: one tadiff Function, run by tadiff's engine and by torch autograd."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tadiff as td  # noqa: E402
from tadiff._array import namespace  # noqa: E402
from tadiff.errors import AutogradError, DTypeError  # noqa: E402
from tadiff.torch import function  # noqa: E402

F64 = torch.float64


class Cube(td.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 3 * x * x


class SoftplusLinear(td.autograd.Function):
    """``y = log(1 + exp(x @ w)) * scale`` with a hand-written backward in ``xp`` ops."""

    @staticmethod
    def forward(ctx, x, w, scale):
        xp = namespace(x)
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        return xp.log1p(xp.exp(x @ w)) * scale

    @staticmethod
    def backward(ctx, grad):
        # z is recomputed, not saved: a forward intermediate would be a constant to the second
        # derivative (only saved inputs and outputs stay connected to the graph)
        x, w = ctx.saved_tensors
        z = x @ w
        xp = namespace(z)
        gz = grad * xp.sigmoid(z) * ctx.scale
        gx = gz @ w.mT if ctx.needs_input_grad[0] else None
        gw = x.mT @ gz if ctx.needs_input_grad[1] else None
        return gx, gw, None


class RowNormalize(td.autograd.Function):
    """Two outputs (normalised rows, norms) and a reduction with ``dim``/``keepdim``."""

    @staticmethod
    def forward(ctx, x):
        xp = namespace(x)
        norms = xp.sqrt((x * x).sum(dim=-1, keepdim=True))
        y = x / norms
        ctx.save_for_backward(y, norms)
        return y, norms

    @staticmethod
    def backward(ctx, gy, gn):
        y, norms = ctx.saved_tensors
        proj = (gy * y).sum(dim=-1, keepdim=True)
        return (gy - y * proj) / norms + gn * y


class DoubleOnce(td.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @td.autograd.once_differentiable
    def backward(ctx, grad):
        return grad * 2


def _rand(*shape, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=F64, generator=gen)


def test_cube_values_and_gradients_against_torch_native():
    TorchCube = function(Cube)
    x = _rand(5).requires_grad_(True)
    y = TorchCube.apply(x)
    assert y.grad_fn.name() == "CubeBackward"
    g = _rand(5, seed=1)
    (gx,) = torch.autograd.grad(y, x, g)
    xn = x.detach().clone().requires_grad_(True)
    (gn,) = torch.autograd.grad(xn**3, xn, g)
    torch.testing.assert_close(y, xn.detach() ** 3, atol=1e-14, rtol=0)
    torch.testing.assert_close(gx, gn, atol=1e-13, rtol=0)


def test_same_class_runs_in_tadiff_engine_with_equal_results():
    TorchFn = function(SoftplusLinear)
    xn, wn, gn = _rand(4, 3).numpy(), _rand(3, 2, seed=1).numpy(), _rand(4, 2, seed=2).numpy()
    xt = td.tensor(xn, requires_grad=True)
    wt = td.tensor(wn, requires_grad=True)
    yt = SoftplusLinear.apply(xt, wt, 1.5)
    (yt * td.tensor(gn)).sum().backward()
    x = torch.tensor(xn, requires_grad=True)
    w = torch.tensor(wn, requires_grad=True)
    y = TorchFn.apply(x, w, 1.5)
    (y * torch.tensor(gn)).sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.data, atol=1e-13, rtol=0)
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.data, atol=1e-13, rtol=0)
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.data, atol=1e-13, rtol=0)


def test_softplus_linear_matches_torch_autograd_of_native_expression():
    TorchFn = function(SoftplusLinear)
    x, w = _rand(4, 3).requires_grad_(True), _rand(3, 2, seed=1).requires_grad_(True)
    g = _rand(4, 2, seed=2)
    got = torch.autograd.grad(TorchFn.apply(x, w, 0.7), (x, w), g)
    want = torch.autograd.grad(torch.nn.functional.softplus(x @ w) * 0.7, (x, w), g)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-13, rtol=0)


@pytest.mark.parametrize("cls", [Cube, SoftplusLinear, RowNormalize])
def test_gradcheck_and_gradgradcheck(cls):
    TorchFn = function(cls)
    if cls is SoftplusLinear:
        args = (_rand(3, 4).requires_grad_(True), _rand(4, 2, seed=1).requires_grad_(True))

        def fn(x, w):
            return TorchFn.apply(x, w, 1.3)
    else:
        args = (_rand(3, 4).requires_grad_(True),)
        fn = TorchFn.apply
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-8, rtol=1e-6)
    assert torch.autograd.gradgradcheck(fn, args, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_create_graph_second_derivative_equals_native():
    TorchFn = function(SoftplusLinear)
    x, w = _rand(3, 4).requires_grad_(True), _rand(4, 2, seed=1).requires_grad_(True)
    (gx,) = torch.autograd.grad(TorchFn.apply(x, w, 1.0).sum(), x, create_graph=True)
    (hw,) = torch.autograd.grad((gx * gx).sum(), w)
    xn, wn = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
    (gxn,) = torch.autograd.grad(torch.nn.functional.softplus(xn @ wn).sum(), xn, create_graph=True)
    (hwn,) = torch.autograd.grad((gxn * gxn).sum(), wn)
    torch.testing.assert_close(hw, hwn, atol=1e-12, rtol=0)


def test_once_differentiable_backward_refuses_second_order():
    TorchFn = function(DoubleOnce)
    x = _rand(3).requires_grad_(True)
    assert torch.autograd.gradcheck(TorchFn.apply, (x,))
    y = TorchFn.apply(x)
    (g,) = torch.autograd.grad((y * y).sum(), x, create_graph=True)  # 8x, through the backward
    torch.testing.assert_close(g, 8 * x.detach())
    with pytest.raises(AutogradError, match="DoubleOnce: its backward is marked @once_diff"):
        g.sum().backward()
    # tadiff's engine keeps its own behaviour for the same class
    xt = td.tensor(x.detach().numpy(), requires_grad=True)
    yt = DoubleOnce.apply(xt)
    (gt,) = td.autograd.grad((yt * yt).sum(), xt, create_graph=True)
    with pytest.raises(AutogradError, match="once_differentiable"):
        td.autograd.grad(gt.sum(), xt)


def test_once_differentiable_refuses_second_order_wrt_saved_inputs():
    class CubeOnce(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        @td.autograd.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x

    TorchFn = function(CubeOnce)
    x = _rand(4).requires_grad_(True)
    assert torch.autograd.gradcheck(TorchFn.apply, (x,))
    # torch's own once_differentiable would report a zero d(grad)/dx here: a silent wrong answer
    with pytest.raises(AutogradError, match="CubeOnce: its backward is marked @once_diff"):
        torch.autograd.gradgradcheck(TorchFn.apply, (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_is_kept_in_values_and_gradients(dtype):
    TorchFn = function(RowNormalize)
    x = torch.randn(3, 5, dtype=dtype, requires_grad=True)
    y, n = TorchFn.apply(x)
    (y.sum() + n.sum()).backward()
    assert y.dtype == n.dtype == x.grad.dtype == dtype


def test_device_is_kept_on_meta_tensors():
    # no GPU here: the meta device stands in for "not the CPU" (shapes only, no data)
    TorchFn = function(SoftplusLinear)
    x = torch.empty(3, 4, device="meta", requires_grad=True)
    w = torch.empty(4, 2, device="meta", requires_grad=True)
    y = TorchFn.apply(x, w, 1.0)
    gx, gw = torch.autograd.grad(y, (x, w), torch.empty(3, 2, device="meta"))
    assert y.device.type == gx.device.type == gw.device.type == "meta"
    assert gx.shape == x.shape and gw.shape == w.shape


def test_decorator_form_keeps_tadiff_class_and_caches():
    @function
    class Square(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * grad * x

    assert issubclass(Square, torch.autograd.Function)
    assert function(Square.tadiff_function) is Square
    x = torch.tensor([3.0], dtype=F64, requires_grad=True)
    Square.apply(x).backward()
    xt = td.tensor(np.array([3.0]), requires_grad=True)
    Square.tadiff_function.apply(xt).backward()
    assert float(x.grad) == float(xt.grad.data[0]) == 6.0


def test_numpy_results_on_cpu_are_copied_into_tensors():
    class NumpyBackward(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        @td.autograd.once_differentiable
        def backward(ctx, grad):
            return np.asarray(grad) * 2  # raw NumPy: CPU only

    TorchFn = function(NumpyBackward)
    x = _rand(3).requires_grad_(True)
    TorchFn.apply(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))


def test_errors_name_the_function_and_position():
    with pytest.raises(DTypeError, match=r"subclass of tadiff.autograd.Function"):
        function(torch.autograd.Function)

    class ReturnsText(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, grad):
            return "oops"

    x = _rand(2).requires_grad_(True)
    with pytest.raises(AutogradError, match=r"ReturnsText: backward returned a str at position 0"):
        function(ReturnsText).apply(x).sum().backward()

    class NumpyForward(td.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return np.zeros(2)

        @staticmethod
        def backward(ctx, grad):
            return grad

    with pytest.raises(AutogradError, match=r"NumpyForward: forward returned a NumPy array"):
        function(NumpyForward).apply(torch.empty(2, device="meta", requires_grad=True))


def test_bridged_function_under_torch_compile_equals_eager():
    TorchFn = function(SoftplusLinear)
    x, w = _rand(3, 4).requires_grad_(True), _rand(4, 2, seed=1).requires_grad_(True)

    def loss(x, w):
        return TorchFn.apply(x, w, 0.5).square().sum()

    want = torch.autograd.grad(loss(x, w), (x, w))
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(loss, backend="aot_eager")(x, w), (x, w))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
