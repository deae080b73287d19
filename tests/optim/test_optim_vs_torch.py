"""Optimizers, clipping and schedules against PyTorch: same gradients in, same parameters out."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import Parameter
from tadiff.optim import SGD, Adam, AdamW, clip_grad_norm_, clip_grad_value_, lr_scheduler

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), ()]
STEPS = 6


def _pair(seed):
    """The same float64 parameters in tadiff and in torch."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    ours = [Parameter(a.copy()) for a in arrays]
    theirs = [torch.nn.Parameter(torch.tensor(a.copy())) for a in arrays]
    return ours, theirs, rng


def _run_both(ours_opt, theirs_opt, ours, theirs, rng, steps=STEPS, skip_grad_of=None):
    for step in range(steps):
        for i, (p, q) in enumerate(zip(ours, theirs, strict=True)):
            if skip_grad_of is not None and i == skip_grad_of and step % 2 == 0:
                p.grad, q.grad = None, None  # a parameter without a gradient is left alone
                continue
            g = rng.standard_normal(p.shape)
            p.grad = Tensor(g.copy())
            q.grad = torch.tensor(g.copy())
        ours_opt.step()
        theirs_opt.step()
        for i, (p, q) in enumerate(zip(ours, theirs, strict=True)):
            np.testing.assert_allclose(
                p.data, q.detach().numpy(), rtol=0, atol=1e-6, err_msg=f"param {i}, step {step}"
            )


SGD_OPTIONS = [
    dict(momentum=m, dampening=d, nesterov=n, weight_decay=w, maximize=x)
    for m, d, n, w, x in itertools.product(
        [0.0, 0.9], [0.0, 0.3], [False, True], [0.0, 0.1], [False, True]
    )
    if not (n and (m == 0 or d != 0))
]


@pytest.mark.parametrize("options", SGD_OPTIONS, ids=str)
def test_sgd_matches_torch_step_by_step(options):
    ours, theirs, rng = _pair(0)
    _run_both(
        SGD(ours, lr=0.05, **options),
        torch.optim.SGD(theirs, lr=0.05, **options),
        ours,
        theirs,
        rng,
        skip_grad_of=1,
    )


ADAM_OPTIONS = [
    dict(betas=b, eps=e, weight_decay=w, amsgrad=a, maximize=x)
    for b, e, w, a, x in itertools.product(
        [(0.9, 0.999), (0.5, 0.8)], [1e-8, 1e-3], [0.0, 0.1], [False, True], [False, True]
    )
]


@pytest.mark.parametrize("options", ADAM_OPTIONS, ids=str)
@pytest.mark.parametrize("kind", ["Adam", "AdamW", "Adam-decoupled"])
def test_adam_family_matches_torch_step_by_step(kind, options):
    ours, theirs, rng = _pair(1)
    if kind == "Adam":
        pair = Adam(ours, lr=0.01, **options), torch.optim.Adam(theirs, lr=0.01, **options)
    elif kind == "AdamW":
        pair = AdamW(ours, lr=0.01, **options), torch.optim.AdamW(theirs, lr=0.01, **options)
    else:
        pair = (
            Adam(ours, lr=0.01, decoupled_weight_decay=True, **options),
            torch.optim.Adam(theirs, lr=0.01, decoupled_weight_decay=True, **options),
        )
    _run_both(*pair, ours, theirs, rng, skip_grad_of=2)


def test_adamw_default_weight_decay_matches_torch():
    ours, theirs, rng = _pair(2)
    _run_both(AdamW(ours), torch.optim.AdamW(theirs), ours, theirs, rng)


def test_parameter_groups_use_their_own_hyperparameters():
    ours, theirs, rng = _pair(3)
    opt = SGD([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.5}], lr=0.01, momentum=0.9)
    ref = torch.optim.SGD(
        [{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.5}], lr=0.01, momentum=0.9
    )
    _run_both(opt, ref, ours, theirs, rng)


def test_float32_parameters_stay_float32():
    p = Parameter(np.ones(4, dtype=np.float32))
    opt = Adam([p], lr=0.1, weight_decay=0.1, amsgrad=True)
    for _ in range(3):
        p.grad = Tensor(np.full(4, 0.5, dtype=np.float32))
        opt.step()
    assert p.data.dtype == np.float32


@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps)])
def test_optimizer_state_dict_resumes_exactly(make):
    rng = np.random.default_rng(4)
    grads = [[rng.standard_normal(s) for s in SHAPES] for _ in range(4)]
    start = [rng.standard_normal(s) for s in SHAPES]

    def train(params, opt, steps):
        for gs in steps:
            for p, g in zip(params, gs, strict=True):
                p.grad = Tensor(g.copy())
            opt.step()

    straight = [Parameter(a.copy()) for a in start]
    train(straight, make(straight), grads)

    first = [Parameter(a.copy()) for a in start]
    opt = make(first)
    train(first, opt, grads[:2])
    saved = opt.state_dict()
    resumed = [Parameter(p.data.copy()) for p in first]
    opt2 = make(resumed)
    opt2.load_state_dict(saved)
    train(resumed, opt2, grads[2:])
    for a, b in zip(straight, resumed, strict=True):
        np.testing.assert_array_equal(a.data, b.data)


def test_zero_grad_clears_or_zeroes():
    p = Parameter(np.ones(3))
    opt = SGD([p], lr=0.1)
    p.grad = Tensor(np.ones(3))
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(p.grad.data, np.zeros(3))
    opt.zero_grad()
    assert p.grad is None


@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.5, math.inf])
@pytest.mark.parametrize("max_norm", [0.1, 1e3])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    ours, theirs, rng = _pair(5)
    for p, q in zip(ours, theirs, strict=True):
        g = rng.standard_normal(p.shape)
        p.grad, q.grad = Tensor(g.copy()), torch.tensor(g.copy())
    total = clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert float(total) == pytest.approx(float(expected), rel=1e-12)
    for p, q in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(p.grad.data, q.grad.numpy(), rtol=1e-12, atol=0)


def test_clip_grad_value_matches_torch():
    ours, theirs, rng = _pair(6)
    for p, q in zip(ours, theirs, strict=True):
        g = rng.standard_normal(p.shape)
        p.grad, q.grad = Tensor(g.copy()), torch.tensor(g.copy())
    clip_grad_value_(ours, 0.3)
    torch.nn.utils.clip_grad_value_(theirs, 0.3)
    for p, q in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(p.grad.data, q.grad.numpy())


def test_clip_grad_norm_nonfinite_raises_when_asked():
    p = Parameter(np.ones(2))
    p.grad = Tensor(np.array([np.inf, 1.0]))
    with pytest.raises(InputError, match="norm of the gradients is inf"):
        clip_grad_norm_([p], 1.0, error_if_nonfinite=True)


SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=5, eta_min=0.01)),
    ("CosineAnnealingLR", dict(T_max=7)),
]


@pytest.mark.parametrize(("name", "kwargs"), SCHEDULES, ids=str)
def test_lr_schedules_match_torch(name, kwargs):
    ours = SGD([Parameter(np.ones(2)), Parameter(np.ones(1))], lr=0.2)
    ours.param_groups[0]["lr"] = 0.2
    theirs = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.2)
    a = getattr(lr_scheduler, name)(ours, **kwargs)
    b = getattr(torch.optim.lr_scheduler, name)(theirs, **kwargs)
    for epoch in range(20):
        assert a.get_last_lr()[0] == pytest.approx(b.get_last_lr()[0], rel=1e-9, abs=1e-15), epoch
        theirs.step()
        a.step()
        b.step()


def test_lambda_lr_matches_torch():
    ours = SGD([Parameter(np.ones(2))], lr=0.3)
    theirs = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.3)

    def warmup(epoch):
        return min(1.0, (epoch + 1) / 4)

    a = lr_scheduler.LambdaLR(ours, warmup)
    b = torch.optim.lr_scheduler.LambdaLR(theirs, warmup)
    for _ in range(8):
        assert a.get_last_lr() == pytest.approx(b.get_last_lr(), rel=1e-12)
        theirs.step()
        a.step()
        b.step()


def test_bad_hyperparameters_raise_clear_errors():
    p = Parameter(np.ones(2))
    with pytest.raises(InputError, match=r"invalid lr: -0.1 \(expected >= 0"):
        SGD([p], lr=-0.1)
    with pytest.raises(InputError, match="nesterov=True needs momentum > 0"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(InputError, match=r"invalid beta2: 1.0 \(expected in \[0.0, 1.0\)"):
        Adam([p], betas=(0.9, 1.0))
    with pytest.raises(InputError, match="empty parameter list"):
        Adam([])
    with pytest.raises(InputError, match="appears more than once"):
        SGD([p, p], lr=0.1)
    with pytest.raises(InputError, match=r"unknown hyperparameter\(s\) \['momentun'\]"):
        SGD([{"params": [p], "momentun": 0.9}], lr=0.1)
    with pytest.raises(DTypeError, match="expected a tadiff Tensor or Parameter, got ndarray"):
        SGD([np.ones(2)], lr=0.1)
    with pytest.raises(InputError, match="does not require gradients"):
        SGD([Tensor(np.ones(2))], lr=0.1)
    with pytest.raises(InputError, match="step_size must be a positive int"):
        lr_scheduler.StepLR(SGD([p], lr=0.1), step_size=0)


def test_gradient_of_wrong_shape_is_named():
    p = Parameter(np.ones((2, 3)))
    opt = SGD([p], lr=0.1)
    with pytest.raises(ShapeError, match=r"size '\[3\]' to a tensor of size '\[2, 3\]'"):
        p.grad = Tensor(np.ones(3))  # refused when assigned, as in torch
    p.grad = Tensor(np.ones((2, 3)))
    p.grad.data = np.ones(3)  # behind the check's back
    with pytest.raises(ShapeError, match=r"gradient of shape \(3,\) for a parameter of shape"):
        opt.step()


_RATES = st.floats(1e-4, 0.5)


@settings(max_examples=30, deadline=None)
@given(
    lr=_RATES,
    momentum=st.floats(0.0, 0.99),
    dampening=st.floats(0.0, 0.9),
    weight_decay=st.floats(0.0, 0.3),
    nesterov=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_sgd_random_hyperparameters_match_torch(
    lr, momentum, dampening, weight_decay, nesterov, seed
):
    if nesterov:
        momentum, dampening = max(momentum, 0.1), 0.0
    options = dict(
        lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov
    )
    ours, theirs, rng = _pair(seed)
    _run_both(SGD(ours, **options), torch.optim.SGD(theirs, **options), ours, theirs, rng)


@settings(max_examples=30, deadline=None)
@given(
    lr=_RATES,
    beta1=st.floats(0.0, 0.99),
    beta2=st.floats(0.0, 0.9999),
    eps=st.floats(1e-10, 1e-2),
    weight_decay=st.floats(0.0, 0.3),
    amsgrad=st.booleans(),
    decoupled=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_adam_random_hyperparameters_match_torch(
    lr, beta1, beta2, eps, weight_decay, amsgrad, decoupled, seed
):
    options = dict(
        lr=lr,
        betas=(beta1, beta2),
        eps=eps,
        weight_decay=weight_decay,
        amsgrad=amsgrad,
        decoupled_weight_decay=decoupled,
    )
    ours, theirs, rng = _pair(seed)
    _run_both(Adam(ours, **options), torch.optim.Adam(theirs, **options), ours, theirs, rng)
