"""RMSprop, Adagrad and the MultiStepLR / LinearLR / OneCycleLR / ReduceLROnPlateau schedules
against PyTorch: same gradients in, same parameters and rates out, step by step; state_dict
round trips resume exactly; bad hyperparameters raise named errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError
from tadiff.nn import Parameter
from tadiff.optim import SGD, Adagrad, Adam, RMSprop, lr_scheduler

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), ()]


def _pair(seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in SHAPES]
    ours = [Parameter(a.copy()) for a in arrays]
    theirs = [torch.nn.Parameter(torch.tensor(a.copy())) for a in arrays]
    return ours, theirs, rng


def _run_both(ours_opt, theirs_opt, ours, theirs, rng, steps=6, skip_grad_of=None):
    for step in range(steps):
        for i, (p, q) in enumerate(zip(ours, theirs, strict=True)):
            if i == skip_grad_of and step % 2 == 0:
                p.grad, q.grad = None, None
                continue
            g = rng.standard_normal(p.shape)
            p.grad, q.grad = Tensor(g.copy()), torch.tensor(g.copy())
        ours_opt.step()
        theirs_opt.step()
        for i, (p, q) in enumerate(zip(ours, theirs, strict=True)):
            np.testing.assert_allclose(
                p.data, q.detach().numpy(), rtol=1e-12, atol=1e-12, err_msg=f"param {i} step {step}"
            )


RMSPROP_OPTIONS = [
    dict(alpha=a, eps=e, weight_decay=w, momentum=m, centered=c, maximize=x)
    for a, e, w, m, c, x in itertools.product(
        [0.99, 0.5], [1e-8, 1e-2], [0.0, 0.1], [0.0, 0.9], [False, True], [False, True]
    )
]


@pytest.mark.parametrize("options", RMSPROP_OPTIONS, ids=str)
def test_rmsprop_matches_torch_step_by_step(options):
    ours, theirs, rng = _pair(0)
    _run_both(
        RMSprop(ours, lr=0.01, **options),
        torch.optim.RMSprop(theirs, lr=0.01, **options),
        ours,
        theirs,
        rng,
        skip_grad_of=1,
    )


ADAGRAD_OPTIONS = [
    dict(lr_decay=d, weight_decay=w, initial_accumulator_value=v, eps=e, maximize=x)
    for d, w, v, e, x in itertools.product(
        [0.0, 0.05], [0.0, 0.1], [0.0, 0.3], [1e-10, 1e-3], [False, True]
    )
]


@pytest.mark.parametrize("options", ADAGRAD_OPTIONS, ids=str)
def test_adagrad_matches_torch_step_by_step(options):
    ours, theirs, rng = _pair(1)
    _run_both(
        Adagrad(ours, lr=0.1, **options),
        torch.optim.Adagrad(theirs, lr=0.1, **options),
        ours,
        theirs,
        rng,
        skip_grad_of=2,
    )


def test_defaults_match_torch():
    ours, theirs, rng = _pair(2)
    _run_both(RMSprop(ours), torch.optim.RMSprop(theirs), ours, theirs, rng)
    ours, theirs, rng = _pair(3)
    _run_both(Adagrad(ours), torch.optim.Adagrad(theirs), ours, theirs, rng)
    for ours_cls, theirs_cls in [(RMSprop, torch.optim.RMSprop), (Adagrad, torch.optim.Adagrad)]:
        mine = ours_cls([Parameter(np.ones(1))]).defaults
        ref = theirs_cls([torch.nn.Parameter(torch.ones(1))]).defaults
        assert {k: ref[k] for k in mine} == mine


@settings(max_examples=25, deadline=None)
@given(
    lr=st.floats(1e-4, 0.5),
    alpha=st.floats(0.05, 0.999),  # alpha=0 centered: v - m**2 rounds below 0, torch nan
    eps=st.floats(1e-10, 1e-2),
    weight_decay=st.floats(0.0, 0.3),
    momentum=st.floats(0.0, 0.99),
    centered=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_rmsprop_random_hyperparameters_match_torch(
    lr, alpha, eps, weight_decay, momentum, centered, seed
):
    options = dict(
        lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered
    )
    ours, theirs, rng = _pair(seed)
    _run_both(RMSprop(ours, **options), torch.optim.RMSprop(theirs, **options), ours, theirs, rng)


@settings(max_examples=25, deadline=None)
@given(
    lr=st.floats(1e-4, 0.5),
    lr_decay=st.floats(0.0, 0.5),
    weight_decay=st.floats(0.0, 0.3),
    initial=st.floats(0.0, 1.0),
    eps=st.floats(1e-10, 1e-2),
    seed=st.integers(0, 2**16),
)
def test_adagrad_random_hyperparameters_match_torch(lr, lr_decay, weight_decay, initial, eps, seed):
    options = dict(
        lr=lr,
        lr_decay=lr_decay,
        weight_decay=weight_decay,
        initial_accumulator_value=initial,
        eps=eps,
    )
    ours, theirs, rng = _pair(seed)
    _run_both(Adagrad(ours, **options), torch.optim.Adagrad(theirs, **options), ours, theirs, rng)


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: RMSprop(ps, lr=0.01, momentum=0.9, centered=True, weight_decay=0.1),
        lambda ps: Adagrad(ps, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.2),
    ],
    ids=["RMSprop", "Adagrad"],
)
def test_state_dict_resumes_exactly(make):
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


def test_float32_parameters_stay_float32():
    for make in (lambda ps: RMSprop(ps, momentum=0.5, centered=True), Adagrad):
        p = Parameter(np.ones(4, dtype=np.float32))
        opt = make([p])
        for _ in range(3):
            p.grad = Tensor(np.full(4, 0.5, dtype=np.float32))
            opt.step()
        assert p.data.dtype == np.float32


# -- schedules ------------------------------------------------------------------------------


def _optimizers(kind="SGD", lrs=(0.2, 0.05)):
    ours_params = [Parameter(np.ones(2)) for _ in lrs]
    theirs_params = [torch.nn.Parameter(torch.ones(2)) for _ in lrs]
    if kind == "SGD":
        ours = SGD([{"params": [p], "lr": lr} for p, lr in zip(ours_params, lrs, strict=True)],
                   lr=0.1, momentum=0.9)  # fmt: skip
        theirs = torch.optim.SGD(
            [{"params": [p], "lr": lr} for p, lr in zip(theirs_params, lrs, strict=True)],
            lr=0.1,
            momentum=0.9,
        )
    else:
        ours = Adam([{"params": [p], "lr": lr} for p, lr in zip(ours_params, lrs, strict=True)])
        theirs = torch.optim.Adam(
            [{"params": [p], "lr": lr} for p, lr in zip(theirs_params, lrs, strict=True)]
        )
    return ours, theirs


def _assert_same_rates(ours_sched, theirs_sched, ours_opt, theirs_opt, steps, metrics=None):
    for step in range(steps):
        assert ours_sched.get_last_lr() == pytest.approx(
            theirs_sched.get_last_lr(), rel=1e-12, abs=1e-18
        ), step
        for key in ("momentum", "betas"):
            if key in theirs_opt.param_groups[0]:
                for a, b in zip(ours_opt.param_groups, theirs_opt.param_groups, strict=True):
                    assert np.allclose(a[key], b[key], rtol=1e-12, atol=0), (step, key)
        theirs_opt.step()
        if metrics is None:
            ours_sched.step()
            theirs_sched.step()
        else:
            ours_sched.step(metrics[step])
            theirs_sched.step(metrics[step])


@pytest.mark.parametrize(
    ("milestones", "gamma"), [([2, 5, 9], 0.5), ([3, 3, 7], 0.1), ([0, 4], 0.3)]
)
def test_multistep_lr_matches_torch(milestones, gamma):
    ours_opt, theirs_opt = _optimizers()
    _assert_same_rates(
        lr_scheduler.MultiStepLR(ours_opt, milestones, gamma),
        torch.optim.lr_scheduler.MultiStepLR(theirs_opt, milestones, gamma),
        ours_opt,
        theirs_opt,
        14,
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        dict(start_factor=0.1, total_iters=4),
        dict(start_factor=1.0, end_factor=0.2, total_iters=6),
    ],
    ids=str,
)
def test_linear_lr_matches_torch(kwargs):
    ours_opt, theirs_opt = _optimizers()
    _assert_same_rates(
        lr_scheduler.LinearLR(ours_opt, **kwargs),
        torch.optim.lr_scheduler.LinearLR(theirs_opt, **kwargs),
        ours_opt,
        theirs_opt,
        10,
    )


ONE_CYCLE = [
    dict(max_lr=0.5, total_steps=20),
    dict(max_lr=[0.5, 0.1], epochs=3, steps_per_epoch=5, pct_start=0.4),
    dict(max_lr=1.0, total_steps=17, anneal_strategy="linear", div_factor=10.0),
    dict(max_lr=1.0, total_steps=25, three_phase=True, final_div_factor=100.0),
    dict(max_lr=0.3, total_steps=12, cycle_momentum=False),
    dict(max_lr=0.3, total_steps=12, base_momentum=[0.8, 0.7], max_momentum=0.9),
]


@pytest.mark.parametrize("kwargs", ONE_CYCLE, ids=str)
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
def test_one_cycle_lr_matches_torch(kwargs, kind):
    ours_opt, theirs_opt = _optimizers(kind)
    ours = lr_scheduler.OneCycleLR(ours_opt, **kwargs)
    theirs = torch.optim.lr_scheduler.OneCycleLR(theirs_opt, **kwargs)
    total = ours.total_steps
    _assert_same_rates(ours, theirs, ours_opt, theirs_opt, total)
    with pytest.raises(InputError, match=f"stepped {total + 1} times, but the cycle has"):
        ours.step()


def test_one_cycle_state_dict_resumes():
    ours_opt, _ = _optimizers("Adam")
    sched = lr_scheduler.OneCycleLR(ours_opt, max_lr=0.4, total_steps=15)
    for _ in range(6):
        sched.step()
    saved, groups = sched.state_dict(), ours_opt.state_dict()
    expected = []
    for _ in range(5):
        sched.step()
        expected.append(sched.get_last_lr())
    other_opt, _ = _optimizers("Adam")
    other_opt.load_state_dict(groups)
    resumed = lr_scheduler.OneCycleLR(other_opt, max_lr=0.4, total_steps=15, last_epoch=5)
    resumed.load_state_dict(saved)
    for rates in expected:
        resumed.step()
        assert resumed.get_last_lr() == rates


PLATEAU = [
    dict(),
    dict(mode="max", factor=0.5, patience=1),
    dict(patience=2, threshold=0.1, threshold_mode="abs", cooldown=2),
    dict(patience=0, min_lr=[0.01, 0.04], factor=0.3),
    dict(mode="max", patience=1, threshold=0.05, cooldown=1, eps=0.05),
]


@pytest.mark.parametrize("kwargs", PLATEAU, ids=str)
def test_reduce_lr_on_plateau_matches_torch(kwargs):
    rng = np.random.default_rng(9)
    # a noisy plateau: improvements early, then flat with noise of varying size
    metrics = list(np.concatenate([np.linspace(1.0, 0.5, 5), 0.5 + rng.normal(0, 0.03, 35)]))
    ours_opt, theirs_opt = _optimizers()
    ours = lr_scheduler.ReduceLROnPlateau(ours_opt, **kwargs)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(theirs_opt, **kwargs)
    _assert_same_rates(ours, theirs, ours_opt, theirs_opt, len(metrics), metrics)
    assert ours.get_last_lr() == pytest.approx(theirs.get_last_lr(), rel=1e-12)
    assert ours.num_bad_epochs == theirs.num_bad_epochs and ours.best == theirs.best


def test_reduce_lr_on_plateau_state_dict_round_trip():
    ours_opt, _ = _optimizers()
    sched = lr_scheduler.ReduceLROnPlateau(ours_opt, patience=1, cooldown=1)
    for value in [1.0, 0.9, 0.95, 0.96]:
        sched.step(value)
    saved = sched.state_dict()
    other = lr_scheduler.ReduceLROnPlateau(ours_opt, patience=1, cooldown=1)
    other.load_state_dict(saved)
    assert (other.best, other.num_bad_epochs, other.cooldown_counter, other.last_epoch) == (
        0.9,
        sched.num_bad_epochs,
        sched.cooldown_counter,
        4,
    )


def test_bad_hyperparameters_raise_named_errors():
    p = Parameter(np.ones(2))
    with pytest.raises(InputError, match=r"invalid alpha: -0\.1 \(expected >= 0"):
        RMSprop([p], alpha=-0.1)
    with pytest.raises(InputError, match=r"invalid momentum: -1"):
        RMSprop([p], momentum=-1)
    with pytest.raises(InputError, match=r"invalid lr_decay: -0\.5"):
        Adagrad([p], lr_decay=-0.5)
    with pytest.raises(InputError, match=r"invalid initial_accumulator_value: -1"):
        Adagrad([p], initial_accumulator_value=-1)
    opt = SGD([p], lr=0.1)
    with pytest.raises(InputError, match=r"LinearLR: start_factor=0; expected 0 < value <= 1"):
        lr_scheduler.LinearLR(opt, start_factor=0)
    with pytest.raises(InputError, match=r"LinearLR: end_factor=1\.5"):
        lr_scheduler.LinearLR(opt, end_factor=1.5)
    with pytest.raises(InputError, match="MultiStepLR: milestones="):
        lr_scheduler.MultiStepLR(opt, [1.5])
    with pytest.raises(InputError, match="positive int total_steps, or positive int epochs"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1)
    with pytest.raises(InputError, match=r"pct_start=1\.5; expected a float in \[0, 1\]"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10, pct_start=1.5)
    with pytest.raises(InputError, match="anneal_strategy='exp'"):
        lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=10, anneal_strategy="exp")
    with pytest.raises(InputError, match="max_lr has 2 values for 1 parameter groups"):
        lr_scheduler.OneCycleLR(opt, max_lr=[0.1, 0.2], total_steps=10)
    with pytest.raises(InputError, match="cycle_momentum=True needs an optimizer with"):
        lr_scheduler.OneCycleLR(Adagrad([p]), max_lr=0.1, total_steps=10)
    with pytest.raises(InputError, match=r"ReduceLROnPlateau: factor=1\.0; expected a factor < 1"):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(InputError, match="mode='up'; expected 'min' or 'max'"):
        lr_scheduler.ReduceLROnPlateau(opt, mode="up")
    with pytest.raises(InputError, match="threshold_mode='pct'"):
        lr_scheduler.ReduceLROnPlateau(opt, threshold_mode="pct")
    with pytest.raises(InputError, match="min_lr has 3 values for 1 parameter groups"):
        lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0, 0, 0])
    with pytest.raises(InputError, match="expected a tadiff optimizer, got"):
        lr_scheduler.ReduceLROnPlateau(torch.optim.SGD([torch.nn.Parameter(torch.ones(1))]))
