"""The regression, binary and KL losses against PyTorch (float64): every reduction and option,
gradients for input and target, stability for large logits, modules, and bad input."""

import itertools

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
RNG = np.random.default_rng(5)
REDUCTIONS = ["mean", "sum", "none"]


def _regression_pair(shape=(4, 5)):
    x = RNG.standard_normal(shape) * 2
    t = RNG.standard_normal(shape) * 2
    t.flat[0] = x.flat[0] + 0.25  # inside the quadratic zone of every beta/delta below
    return x, t


REGRESSION = [
    ("l1", {}, F.l1_loss, TF.l1_loss),
    ("smooth_l1", {}, F.smooth_l1_loss, TF.smooth_l1_loss),
    ("smooth_l1-beta", {"beta": 0.5}, F.smooth_l1_loss, TF.smooth_l1_loss),
    ("smooth_l1-beta0", {"beta": 0.0}, F.smooth_l1_loss, TF.smooth_l1_loss),
    ("huber", {}, F.huber_loss, TF.huber_loss),
    ("huber-delta", {"delta": 2.5}, F.huber_loss, TF.huber_loss),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    ("name", "kw", "ours", "theirs"), REGRESSION, ids=[r[0] for r in REGRESSION]
)
def test_regression_losses_match_torch(name, kw, ours, theirs, reduction):
    compare_with_torch(
        torch,
        lambda x, t: ours(x, t, reduction=reduction, **kw),
        lambda x, t: theirs(x, t, reduction=reduction, **kw),
        list(_regression_pair()),
    )


@settings(max_examples=25, deadline=None)
@given(
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
    index=st.integers(0, len(REGRESSION) - 1),
    reduction=st.sampled_from(REDUCTIONS),
)
def test_regression_losses_any_shape(shape, index, reduction):
    _, kw, ours, theirs = REGRESSION[index]
    compare_with_torch(
        torch,
        lambda x, t: ours(x, t, reduction=reduction, **kw),
        lambda x, t: theirs(x, t, reduction=reduction, **kw),
        list(_regression_pair(shape)),
    )


def test_regression_losses_at_the_branch_points_match_torch():
    # |d| exactly 0, beta/delta, and just around them: the gradient conventions
    d = np.array([0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-9, 3.0])
    x, t = d + 1.0, np.ones_like(d)
    for _name, kw, ours, theirs in REGRESSION:
        compare_with_torch(
            torch,
            lambda a, b, ours=ours, kw=kw: ours(a, b, reduction="sum", **kw),
            lambda a, b, theirs=theirs, kw=kw: theirs(a, b, reduction="sum", **kw),
            [x, t],
            rtol=1e-12,
            atol=1e-15,
        )


def _probabilities(shape):
    return RNG.uniform(0.02, 0.98, shape)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weight_shape", [None, (4, 3), (3,), (1, 3)])
def test_binary_cross_entropy_matches_torch(reduction, weight_shape):
    arrays = [_probabilities((4, 3)), RNG.uniform(0, 1, (4, 3))]
    if weight_shape is None:
        compare_with_torch(
            torch,
            lambda x, t: F.binary_cross_entropy(x, t, reduction=reduction),
            lambda x, t: TF.binary_cross_entropy(x, t, reduction=reduction),
            arrays,
        )
    else:
        arrays.append(RNG.uniform(0.5, 2.0, weight_shape))
        compare_with_torch(
            torch,
            lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction=reduction),
            lambda x, t, w: TF.binary_cross_entropy(x, t, w, reduction=reduction),
            arrays,
            grad=[True, True, False],  # torch does not differentiate BCE's weight
        )


def test_binary_cross_entropy_clamps_its_logs_at_minus_100_like_torch():
    x = np.array([0.0, 1.0, 0.0, 1.0, 1e-50])
    t = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    compare_with_torch(
        torch,
        lambda a, b: F.binary_cross_entropy(a, b, reduction="none"),
        lambda a, b: TF.binary_cross_entropy(a, b, reduction="none"),
        [x, t],
        grad=[False, False],
    )


@pytest.mark.parametrize(
    ("reduction", "weight", "pos_weight"),
    list(itertools.product(REDUCTIONS, [False, True], [False, True])),
)
def test_bce_with_logits_matches_torch(reduction, weight, pos_weight):
    x = RNG.standard_normal((5, 3)) * 3
    t = RNG.uniform(0, 1, (5, 3))
    arrays, names = [x, t], []
    if weight:
        arrays.append(RNG.uniform(0.5, 2.0, (5, 1)))
        names.append("weight")
    if pos_weight:
        arrays.append(RNG.uniform(0.5, 3.0, (3,)))
        names.append("pos_weight")

    def call(fn):
        return lambda x, t, *rest: fn(
            x, t, reduction=reduction, **dict(zip(names, rest, strict=True))
        )

    compare_with_torch(
        torch,
        call(F.binary_cross_entropy_with_logits),
        call(TF.binary_cross_entropy_with_logits),
        arrays,
        grad=[True, True] + [False] * len(names),  # torch: weights are not differentiable
    )


def test_bce_with_logits_is_stable_for_huge_logits():
    x = np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0, 800.0, -800.0])
    t = np.array([1.0, 1.0, 0.5, 0.0, 0.0, 1.0, 0.0])
    pw = np.array([2.0])
    compare_with_torch(
        torch,
        lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none", pos_weight=pw),
        lambda a, b: TF.binary_cross_entropy_with_logits(
            a, b, reduction="none", pos_weight=torch.tensor(pw)
        ),
        [x, t],
        rtol=1e-12,
        atol=1e-15,
    )
    out = F.binary_cross_entropy_with_logits(td.tensor(x), td.tensor(t), reduction="none")
    assert np.isfinite(out.data).all()


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides:UserWarning")  # torch's notice
@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(reduction, log_target):
    x = np.log(RNG.dirichlet(np.ones(5), size=4))
    target = RNG.dirichlet(np.ones(5), size=4)
    if log_target:
        target = np.log(target)
    for zero_target in [False, True]:
        if zero_target and not log_target:
            target[0, 1] = 0.0  # 0 log 0 = 0; the target's gradient diverges there (see docs)
        compare_with_torch(
            torch,
            lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
            lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
            [x, target],
            grad=[True, not zero_target],
        )


def test_kl_div_batchmean_is_the_per_sample_divergence():
    p = RNG.dirichlet(np.ones(4), size=3)
    q = RNG.dirichlet(np.ones(4), size=3)
    expected = np.mean(np.sum(p * np.log(p / q), axis=1))  # mean over samples of KL(p || q)
    got = F.kl_div(td.tensor(np.log(q)), td.tensor(p), reduction="batchmean")
    assert float(got) == pytest.approx(expected, rel=1e-12)


def test_bce_twice_differentiable():
    x = td.tensor(RNG.standard_normal(5), requires_grad=True)
    t = td.tensor(RNG.uniform(0, 1, 5))
    assert td.autograd.gradgradcheck(lambda a: F.binary_cross_entropy_with_logits(a, t), (x,))
    p = td.tensor(_probabilities(5), requires_grad=True)
    assert td.autograd.gradgradcheck(lambda a: F.binary_cross_entropy(a, t), (p,))


MODULES = [
    (nn.L1Loss(), torch.nn.L1Loss()),
    (nn.L1Loss("sum"), torch.nn.L1Loss(reduction="sum")),
    (nn.SmoothL1Loss(beta=0.3), torch.nn.SmoothL1Loss(beta=0.3)),
    (nn.HuberLoss("none", delta=0.7), torch.nn.HuberLoss("none", delta=0.7)),
    (nn.KLDivLoss("batchmean"), torch.nn.KLDivLoss(reduction="batchmean")),
    (nn.KLDivLoss("sum", log_target=True), torch.nn.KLDivLoss(reduction="sum", log_target=True)),
]


@pytest.mark.parametrize(("ours", "theirs"), MODULES, ids=lambda m: type(m).__name__)
def test_loss_modules_match_torch(ours, theirs):
    x = RNG.standard_normal((4, 3))
    t = RNG.uniform(0.1, 1.0, (4, 3))
    compare_with_torch(torch, ours, theirs, [x, t])


def test_bce_modules_match_torch():
    w, pw = RNG.uniform(0.5, 2, (3,)), RNG.uniform(0.5, 2, (3,))
    x, t = _probabilities((4, 3)), RNG.uniform(0, 1, (4, 3))
    compare_with_torch(
        torch, nn.BCELoss(w, "sum"), torch.nn.BCELoss(torch.tensor(w), reduction="sum"), [x, t]
    )
    ours = nn.BCEWithLogitsLoss(w, pos_weight=pw)
    theirs = torch.nn.BCEWithLogitsLoss(torch.tensor(w), pos_weight=torch.tensor(pw))
    compare_with_torch(torch, ours, theirs, [x * 4 - 2, t])
    assert sorted(ours.state_dict()) == ["pos_weight", "weight"]


def test_float32_losses_stay_float32_with_float64_weights():
    x = td.tensor(RNG.uniform(0.1, 0.9, (2, 3)).astype(np.float32))
    t = td.tensor(np.ones((2, 3), np.float32))
    assert (
        nn.BCEWithLogitsLoss([1.0, 2.0, 3.0], pos_weight=[2.0, 1.0, 1.0])(x, t).dtype == np.float32
    )
    assert nn.BCELoss(td.tensor(np.ones(3)))(x, t).dtype == np.float32
    for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.kl_div):
        assert fn(x, t).dtype == np.float32, fn.__name__


def test_bad_input_raises_named_errors():
    x, t = td.ones(4, 3), td.ones(4, 3)
    for fn in (F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.binary_cross_entropy, F.kl_div):
        with pytest.raises(ShapeError, match=r"input shape \(4, 3\) and target shape \(4,\)"):
            fn(x, td.ones(4))
        with pytest.raises(InputError, match="reduction='avg'; expected one of"):
            fn(x, t, reduction="avg")
    with pytest.raises(InputError, match="reduction='batchmean'"):
        F.l1_loss(x, t, reduction="batchmean")  # only kl_div knows batchmean
    with pytest.raises(InputError, match=r"smooth_l1_loss: beta=-1\.0; expected beta >= 0"):
        F.smooth_l1_loss(x, t, beta=-1.0)
    with pytest.raises(InputError, match=r"huber_loss: delta=0\.0; expected delta > 0"):
        F.huber_loss(x, t, delta=0.0)
    probs = np.full((2, 3), 0.5)
    probs[1, 2] = -0.25
    with pytest.raises(InputError, match=r"input -0\.25 at position \(1, 2\) is not a probability"):
        F.binary_cross_entropy(td.tensor(probs), td.zeros(2, 3, dtype=np.float64))
    probs[1, 2] = np.nan
    with pytest.raises(InputError, match=r"input nan at position \(1, 2\)"):
        F.binary_cross_entropy(td.tensor(probs), td.zeros(2, 3, dtype=np.float64))
    with pytest.raises(ShapeError, match=r"pos_weight of shape \(2,\) does not broadcast"):
        F.binary_cross_entropy_with_logits(x, t, pos_weight=td.ones(2))
    with pytest.raises(ShapeError, match=r"weight of shape \(5,\) does not broadcast"):
        F.binary_cross_entropy(td.full((4, 3), 0.5), t, weight=td.ones(5))
    with pytest.raises(DTypeError, match="l1_loss input: expected a Tensor, got list"):
        F.l1_loss([1.0], t)
