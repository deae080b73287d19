"""tadiff.torch.define: index-notation ops on torch tensors against torch's own ops."""

import pytest

torch = pytest.importorskip("torch")

import tadiff.torch as tdt  # noqa: E402
from tadiff.errors import DTypeError, InputError, ParseError, ShapeError  # noqa: E402

F64 = torch.float64


def _leaf(*shape, seed=0, dtype=F64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=gen).requires_grad_(True)


CONV = "y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])"


def test_strided_conv_matches_torch_conv1d_values_and_gradients():
    conv = tdt.define(CONV)
    x, w = _leaf(2, 3, 11), _leaf(4, 3, 3, seed=1)
    y = conv(x=x, w=w)
    g = torch.randn(y.shape, dtype=F64)
    gx, gw = torch.autograd.grad(y, (x, w), g)
    want = torch.nn.functional.conv1d(x, w, stride=2)
    wx, ww = torch.autograd.grad(want, (x, w), g)
    torch.testing.assert_close(y, want, atol=1e-12, rtol=0)
    torch.testing.assert_close(gx, wx, atol=1e-12, rtol=0)
    torch.testing.assert_close(gw, ww, atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    ("source", "shapes"),
    [
        (CONV, {"x": (2, 2, 9), "w": (3, 2, 3)}),
        ("z[i,j] = sum[k](x[i,k] * w[k,j])", {"x": (3, 4), "w": (4, 2)}),
        ("y[i] = tanh(x[i]) * exp(x[i] * w[i])", {"x": (5,), "w": (5,)}),
    ],
)
def test_gradcheck_and_gradgradcheck_by_rederivation(source, shapes):
    f = tdt.define(source)
    args = tuple(_leaf(*s, seed=i) for i, s in enumerate(shapes.values()))

    def fn(*tensors):
        return f(**dict(zip(shapes, tensors, strict=True)))

    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-8, rtol=1e-6)
    assert torch.autograd.gradgradcheck(fn, args, eps=1e-6, atol=1e-7, rtol=1e-5)


def test_second_derivative_equals_torch_native():
    f = tdt.define("y[i] = tanh(x[i]) * exp(x[i] * w[i])")
    x, w = _leaf(6), _leaf(6, seed=1)
    (gx,) = torch.autograd.grad(f(x=x, w=w).sum(), x, create_graph=True)
    (hw,) = torch.autograd.grad((gx * gx).sum(), w)
    xn, wn = x.detach().requires_grad_(True), w.detach().requires_grad_(True)
    (gxn,) = torch.autograd.grad((torch.tanh(xn) * torch.exp(xn * wn)).sum(), xn, create_graph=True)
    (hwn,) = torch.autograd.grad((gxn * gxn).sum(), wn)
    torch.testing.assert_close(hw, hwn, atol=1e-12, rtol=0)


def test_float32_stays_float32_and_backends_agree():
    x, w = _leaf(2, 3, 9, dtype=torch.float32), _leaf(4, 3, 3, seed=1, dtype=torch.float32)
    results = []
    for backend in ("auto", "numpy"):
        y = tdt.define(CONV, backend=backend)(x=x, w=w)
        (gw,) = torch.autograd.grad(y.square().sum(), w)
        assert y.dtype == gw.dtype == torch.float32
        results.append((y.detach(), gw))
    torch.testing.assert_close(results[0][0], results[1][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(results[0][1], results[1][1], atol=1e-4, rtol=1e-5)


def test_trains_inside_a_torch_module():
    conv = tdt.define("y[b,o,t] = sum[c,k](x[b,c,t+k] * w[o,c,k])")
    torch.manual_seed(0)
    x = torch.randn(8, 2, 20, dtype=F64)
    w_true = torch.randn(3, 2, 4, dtype=F64)
    target = torch.nn.functional.conv1d(x, w_true)
    w = torch.nn.Parameter(torch.zeros(3, 2, 4, dtype=F64))
    opt = torch.optim.Adam([w], lr=0.05)
    for _ in range(300):
        opt.zero_grad()
        loss = ((conv(x=x, w=w) - target) ** 2).mean()
        loss.backward()
        opt.step()
    torch.testing.assert_close(w.detach(), w_true, atol=1e-3, rtol=0)


def test_errors_name_the_argument():
    conv = tdt.define(CONV)
    with pytest.raises(InputError, match="takes the arguments x, w; missing w"):
        conv(x=torch.ones(1, 1, 5))
    with pytest.raises(InputError, match="unknown v"):
        conv(x=torch.ones(1, 1, 5), w=torch.ones(1, 1, 3), v=torch.ones(1))
    with pytest.raises(DTypeError, match="argument w must be a torch tensor, got list"):
        conv(x=torch.ones(1, 1, 5), w=[1.0])
    with pytest.raises(InputError, match=r"arguments are on meta; .* CPU .* and CUDA"):
        conv(x=torch.ones(1, 1, 5, device="meta"), w=torch.ones(1, 1, 3, device="meta"))
    with pytest.raises(InputError, match=r"different devices .*x on meta, w on cpu"):
        conv(x=torch.ones(1, 1, 5, device="meta"), w=torch.ones(1, 1, 3))
    with pytest.raises(ParseError):
        tdt.define("y[i] = x[i")
    with pytest.raises(ShapeError):
        conv(x=torch.ones(1, 2, 5), w=torch.ones(1, 3, 3))  # channels 2 vs 3


_TRITON_SCRIPT = """
import torch
import tadiff.torch as tdt
conv = tdt.define("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])", backend="triton")
gen = torch.Generator().manual_seed(0)
x = torch.randn(2, 2, 9, dtype=torch.float64, generator=gen, requires_grad=True)
w = torch.randn(3, 2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
y = conv(x=x, w=w)
g = torch.randn(y.shape, dtype=torch.float64, generator=gen)
got = torch.autograd.grad(y, (x, w), g)
ref = torch.nn.functional.conv1d(x, w, stride=2)
want = torch.autograd.grad(ref, (x, w), g)
torch.testing.assert_close(y, ref, atol=1e-12, rtol=0)
for a, b in zip(got, want):
    torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
fn = lambda x, w: conv(x=x, w=w)
assert torch.autograd.gradgradcheck(fn, (x, w), eps=1e-6, atol=1e-7, rtol=1e-5)
x32, w32 = x.detach().float().requires_grad_(True), w.detach().float().requires_grad_(True)
y32 = conv(x=x32, w=w32)
(gw32,) = torch.autograd.grad(y32.square().sum(), w32)
assert y32.dtype == gw32.dtype == torch.float32
print("triton ok")
"""


def test_triton_kernels_under_the_interpreter():
    # The path CUDA tensors take, run on CPU by Triton's interpreter in a fresh process (the
    # variable must be set before triton is imported).
    pytest.importorskip("triton")
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _TRITON_SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0 and "triton ok" in proc.stdout, proc.stderr[-3000:]


def test_graph_break_safe_under_torch_compile():
    conv = tdt.define(CONV)
    x, w = _leaf(2, 3, 11), _leaf(4, 3, 3, seed=1)

    def loss(x, w):
        return (conv(x=x, w=w).tanh() * 2).sum()

    want = torch.autograd.grad(loss(x, w), (x, w))
    torch._dynamo.reset()
    got = torch.autograd.grad(torch.compile(loss, backend="aot_eager")(x, w), (x, w))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)
