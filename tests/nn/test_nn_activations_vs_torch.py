"""The activations added to ``td.nn.functional`` and ``td.nn`` against PyTorch (float64):
values and input gradients on random inputs (also far out in both tails and exactly at the
kinks), modules with their options, second derivatives through the engine, and bad arguments."""

import numpy as np
import pytest
from _torch_compare import compare_with_torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(11)

# name, our call, torch's call (same keyword options)
FUNCTIONS = [
    ("leaky_relu", lambda x: F.leaky_relu(x), lambda x: TF.leaky_relu(x)),
    ("leaky_relu-0.3", lambda x: F.leaky_relu(x, 0.3), lambda x: TF.leaky_relu(x, 0.3)),
    ("elu", lambda x: F.elu(x), lambda x: TF.elu(x)),
    ("elu-0.5", lambda x: F.elu(x, alpha=0.5), lambda x: TF.elu(x, alpha=0.5)),
    ("selu", F.selu, TF.selu),
    ("celu", lambda x: F.celu(x), lambda x: TF.celu(x)),
    ("celu-2", lambda x: F.celu(x, alpha=2.0), lambda x: TF.celu(x, alpha=2.0)),
    ("silu", F.silu, TF.silu),
    ("mish", F.mish, TF.mish),
    ("softplus", lambda x: F.softplus(x), lambda x: TF.softplus(x)),
    (
        "softplus-beta",
        lambda x: F.softplus(x, beta=2.5, threshold=3.0),
        lambda x: TF.softplus(x, beta=2.5, threshold=3.0),
    ),
    (
        "softplus-negbeta",
        lambda x: F.softplus(x, beta=-1.5, threshold=4.0),
        lambda x: TF.softplus(x, beta=-1.5, threshold=4.0),
    ),
    ("softsign", F.softsign, TF.softsign),
    ("hardtanh", lambda x: F.hardtanh(x), lambda x: TF.hardtanh(x)),
    ("hardtanh-2-3", lambda x: F.hardtanh(x, -2.0, 3.0), lambda x: TF.hardtanh(x, -2.0, 3.0)),
    ("relu6", F.relu6, TF.relu6),
    ("hardsigmoid", F.hardsigmoid, TF.hardsigmoid),
    ("hardswish", F.hardswish, TF.hardswish),
    ("logsigmoid", F.logsigmoid, TF.logsigmoid),
    ("glu", lambda x: F.glu(x), lambda x: TF.glu(x)),
    ("glu-0", lambda x: F.glu(x, 0), lambda x: TF.glu(x, 0)),
    ("softmin-1", lambda x: F.softmin(x, 1), lambda x: TF.softmin(x, 1)),
    ("softmin-0", lambda x: F.softmin(x, dim=0), lambda x: TF.softmin(x, dim=0)),
    # the kinks of these options are in SPECIAL (1, 2 and their negatives)
    ("threshold", lambda x: F.threshold(x, 1.0, -3.0), lambda x: TF.threshold(x, 1.0, -3.0)),
    ("hardshrink", lambda x: F.hardshrink(x), lambda x: TF.hardshrink(x)),
    ("hardshrink-1", lambda x: F.hardshrink(x, 1.0), lambda x: TF.hardshrink(x, 1.0)),
    ("softshrink", lambda x: F.softshrink(x), lambda x: TF.softshrink(x)),
    ("softshrink-2", lambda x: F.softshrink(x, 2.0), lambda x: TF.softshrink(x, 2.0)),
    ("tanhshrink", F.tanhshrink, TF.tanhshrink),
]
# the kinks and branch points of the piecewise functions, where the gradient is a convention
# torch's hardsigmoid backward multiplies by float32(1/6) even in float64 (relative error 3e-8);
# its exact gradient is checked against the closed form in test_hardsigmoid_gradient_is_exact
_GRAD_RTOL = {"hardsigmoid": 5e-8, "Hardsigmoid()": 5e-8}
SPECIAL = [0.0, -1.0, 1.0, -2.0, 2.0, 3.0, -3.0, 6.0, 8.0, -8.0, 1.6, 2.4, -30.0, 30.0, 800.0]


@pytest.mark.parametrize(("name", "ours", "theirs"), FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_random_inputs_match_torch(name, ours, theirs):
    x = RNG.standard_normal((4, 6)) * 4
    compare_with_torch(torch, ours, theirs, [x], grad_rtol=_GRAD_RTOL.get(name))


@pytest.mark.parametrize(("name", "ours", "theirs"), FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_kinks_and_tails_match_torch(name, ours, theirs):
    # values and the gradient's convention at every branch point, and no overflow far out
    x = np.array([SPECIAL, [-v for v in SPECIAL]]).T.copy()  # (15, 2)
    x = np.concatenate([x, x[:1]])  # 16 rows: even, for glu along dim 0
    compare_with_torch(
        torch, ours, theirs, [x], rtol=1e-12, atol=1e-14, grad_rtol=_GRAD_RTOL.get(name)
    )
    out = ours(td.tensor(x, requires_grad=True))
    assert np.isfinite(out.data).all()


@settings(max_examples=25, deadline=None)
@given(
    x=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4).map(
            lambda s: (*s[:-1], 2 * s[-1])
        ),
        elements=st.floats(-50, 50),
    ),
    index=st.integers(0, len(FUNCTIONS) - 1),
)
def test_any_shape_matches_torch(x, index):
    name, ours, theirs = FUNCTIONS[index]
    if name == "softmin-1" and x.ndim < 2:
        x = x[None]
    if name == "glu-0" and x.shape[0] % 2:  # glu halves dim 0: it must be even (torch too)
        x = np.concatenate([x, x[:1]])
    compare_with_torch(torch, ours, theirs, [x], grad_rtol=_GRAD_RTOL.get(name))


SECOND_ORDER = [F.elu, F.selu, F.celu, F.silu, F.mish, F.softplus, F.softsign, F.logsigmoid]


@pytest.mark.parametrize("fn", SECOND_ORDER, ids=lambda f: f.__name__)
def test_second_derivatives_through_the_engine(fn):
    x = td.tensor(RNG.standard_normal(6) * 2 + 0.1, requires_grad=True)
    assert td.autograd.gradcheck(fn, (x,))
    assert td.autograd.gradgradcheck(fn, (x,))


def test_glu_and_leaky_relu_second_derivatives():
    x = td.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    assert td.autograd.gradgradcheck(lambda t: F.glu(t, dim=1), (x,))
    assert td.autograd.gradgradcheck(lambda t: F.leaky_relu(t, 0.2) * t, (x,))


def test_softplus_and_logsigmoid_derivatives_far_out():
    # first derivative against torch, second against the closed form +-s(x)s(-x) (torch
    # rounds the tiny tails of that one to 0)
    x = np.array([-40.0, -5.0, 0.0, 5.0, 40.0])
    s_times_1ms = 1 / (1 + np.exp(-x)) / (1 + np.exp(x))
    for ours, theirs, sign in [(F.logsigmoid, TF.logsigmoid, -1), (F.softplus, TF.softplus, 1)]:
        ox = td.tensor(x, requires_grad=True)
        tx = torch.tensor(x, requires_grad=True)
        (g,) = td.autograd.grad(ours(ox).sum(), ox, create_graph=True)
        (h,) = td.autograd.grad(g.sum(), ox)
        (tg,) = torch.autograd.grad(theirs(tx).sum(), tx)
        np.testing.assert_allclose(g.data, tg.numpy(), rtol=1e-12, atol=1e-300)
        # softplus is linear above its threshold (20): second derivative 0 there, as torch
        expected = sign * np.where((sign > 0) & (x > 20), 0.0, s_times_1ms)
        np.testing.assert_allclose(h.data, expected, rtol=1e-9, atol=1e-300)


MODULES = [
    (nn.LeakyReLU(), torch.nn.LeakyReLU()),
    (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
    (nn.ELU(0.7), torch.nn.ELU(0.7)),
    (nn.SELU(), torch.nn.SELU()),
    (nn.CELU(1.5), torch.nn.CELU(1.5)),
    (nn.SiLU(), torch.nn.SiLU()),
    (nn.Mish(), torch.nn.Mish()),
    (nn.Softplus(), torch.nn.Softplus()),
    (nn.Softplus(beta=2, threshold=5), torch.nn.Softplus(beta=2, threshold=5)),
    (nn.Hardtanh(-0.5, 2.0), torch.nn.Hardtanh(-0.5, 2.0)),
    (nn.ReLU6(), torch.nn.ReLU6()),
    (nn.Softsign(), torch.nn.Softsign()),
    (nn.Hardswish(), torch.nn.Hardswish()),
    (nn.Hardsigmoid(), torch.nn.Hardsigmoid()),
    (nn.LogSigmoid(), torch.nn.LogSigmoid()),
    (nn.GLU(), torch.nn.GLU()),
    (nn.GLU(dim=0), torch.nn.GLU(dim=0)),
    (nn.Softmin(1), torch.nn.Softmin(1)),
    (nn.Threshold(0.5, 2.0), torch.nn.Threshold(0.5, 2.0)),
    (nn.Hardshrink(1.5), torch.nn.Hardshrink(1.5)),
    (nn.Softshrink(1.5), torch.nn.Softshrink(1.5)),
    (nn.Tanhshrink(), torch.nn.Tanhshrink()),
]


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (lambda x: F.threshold(x, 0.5, 9.0), lambda x: TF.threshold(x, 0.5, 9.0)),
        (F.hardshrink, TF.hardshrink),
        (lambda x: F.hardshrink(x, -1.0), lambda x: TF.hardshrink(x, -1.0)),
        (F.softshrink, TF.softshrink),
    ],
    ids=["threshold", "hardshrink", "hardshrink-negative", "softshrink"],
)
def test_shrinks_at_nan_and_their_bounds_match_torch(ours, theirs):
    # which side a NaN falls on, and the closed interval [-lambd, lambd] (gradient 0 at its
    # ends); exact, as these are selections and one subtraction of the same numbers
    x = np.array([np.nan, 0.5, -0.5, 0.25, 0.75, -0.75, 0.0])
    values, grads = [], []
    for lib, fn in ((td, ours), (torch, theirs)):
        t = lib.tensor(x, requires_grad=True)
        out = fn(t)
        out.backward(lib.ones_like(out))
        values.append(np.asarray(out.detach().numpy() if lib is torch else out.data))
        grads.append(np.asarray(t.grad.numpy() if lib is torch else t.grad.data))
    np.testing.assert_array_equal(values[0], values[1])
    np.testing.assert_array_equal(grads[0], grads[1])


@pytest.mark.parametrize(("ours", "theirs"), MODULES, ids=lambda m: repr(m))
def test_modules_match_torch(ours, theirs):
    x = RNG.standard_normal((4, 6)) * 4
    compare_with_torch(torch, ours, theirs, [x], grad_rtol=_GRAD_RTOL.get(repr(ours)))


def test_hardsigmoid_gradient_is_exact():
    x = np.array([-4.0, -3.0, -2.5, 0.0, 1.0, 2.9, 3.0, 5.0])
    ox = td.tensor(x, requires_grad=True)
    F.hardsigmoid(ox).sum().backward()
    np.testing.assert_array_equal(ox.grad.data, np.where(np.abs(x) < 3, 1 / 6, 0.0))


def test_module_reprs_show_options():
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn.Softplus(2.0, 10.0)) == "Softplus(beta=2.0, threshold=10.0)"
    assert repr(nn.GLU()) == "GLU(dim=-1)"
    assert repr(nn.SiLU()) == "SiLU()"


def test_float32_stays_float32():
    x = td.tensor(RNG.standard_normal(5).astype(np.float32))
    for fn in [F.elu, F.selu, F.silu, F.mish, F.softplus, F.hardswish, F.logsigmoid, F.relu6]:
        assert fn(x).dtype == np.float32, fn.__name__


def test_bad_arguments_raise_named_errors():
    x = td.ones(3, 5)
    with pytest.raises(ShapeError, match=r"glu: input of shape \(3, 5\) has odd size 5"):
        F.glu(x)
    with pytest.raises(ShapeError, match="glu: dim=2 is out of range"):
        F.glu(x, dim=2)
    with pytest.raises(InputError, match=r"hardtanh: max_val=-2\.0 is below min_val=-1\.0"):
        F.hardtanh(x, -1.0, -2.0)
    with pytest.raises(InputError, match=r"Hardtanh: max_val=0\.0 is below min_val=1\.0"):
        nn.Hardtanh(1.0, 0.0)
    with pytest.raises(InputError, match="celu: alpha=0"):
        F.celu(x, alpha=0.0)
    with pytest.raises(InputError, match="softplus: beta=0"):
        F.softplus(x, beta=0)
    with pytest.raises(DTypeError, match="leaky_relu: expected a Tensor, got list"):
        F.leaky_relu([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"softshrink: lambd=-1\.0; expected lambd >= 0"):
        F.softshrink(x, -1.0)  # torch's RuntimeError too
    with pytest.raises(InputError, match=r"softshrink: lambd=-1\.0"):
        nn.Softshrink(-1.0)(x)


@pytest.mark.parametrize(
    "fn",
    [F.leaky_relu, F.elu, F.selu, F.celu, F.silu, F.mish, F.hardtanh, F.relu6, F.hardsigmoid,
     F.hardswish],
    ids=lambda f: f.__name__,
)  # fmt: skip
def test_inplace_is_refused_not_ignored(fn):
    with pytest.raises(InputError, match=f"{fn.__name__}: inplace=True is not supported"):
        fn(td.ones(3), inplace=True)


@pytest.mark.parametrize(
    "cls",
    [nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.SiLU, nn.Mish, nn.Hardtanh, nn.ReLU6,
     nn.Hardswish, nn.Hardsigmoid],
    ids=lambda c: c.__name__,
)  # fmt: skip
def test_modules_refuse_inplace(cls):
    with pytest.raises(InputError, match=f"{cls.__name__}: inplace=True is not supported"):
        cls(inplace=True)
