"""The margin and embedding losses (``tadiff.nn.margin_losses``) and the Poisson and Gaussian
negative log-likelihoods against PyTorch, float64:
values and gradients for every reduction and option, at the hinges' kinks, far out in the
logistic tails, the modules, second derivatives through the engine, and bad arguments."""

import numpy as np
import pytest
from _torch_compare import compare_with_torch

import tadiff as td
from tadiff import nn
from tadiff.errors import InputError, ShapeError
from tadiff.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(5)
X1, X2, X3 = (RNG.standard_normal((6, 4)) for _ in range(3))
SIGNS = np.sign(RNG.standard_normal((6, 4)))
ROW_SIGNS = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
ZERO_ONE = (RNG.random((6, 4)) > 0.5).astype(np.float64)
WEIGHT = RNG.random(4)
REDUCTIONS = ["mean", "sum", "none"]

# name -> (our call, torch's call, differentiated inputs); labels are constants, bound here
CASES = {
    "margin_ranking": (
        lambda r: lambda a, b: F.margin_ranking_loss(a, b, td.tensor(SIGNS), 0.3, r),
        lambda r: lambda a, b: TF.margin_ranking_loss(a, b, torch.tensor(SIGNS), 0.3, reduction=r),
        [X1, X2],
    ),
    "hinge_embedding": (
        lambda r: lambda a: F.hinge_embedding_loss(a, td.tensor(SIGNS), 0.7, r),
        lambda r: lambda a: TF.hinge_embedding_loss(a, torch.tensor(SIGNS), 0.7, reduction=r),
        [np.abs(X1)],
    ),
    "soft_margin": (
        lambda r: lambda a: F.soft_margin_loss(a, td.tensor(SIGNS), r),
        lambda r: lambda a: TF.soft_margin_loss(a, torch.tensor(SIGNS), reduction=r),
        [X1 * 40],  # far out: log(1 + exp(-yx)) must neither overflow nor round to 0 early
    ),
    "cosine_embedding": (
        lambda r: lambda a, b: F.cosine_embedding_loss(a, b, td.tensor(ROW_SIGNS), 0.2, r),
        lambda r: (
            lambda a, b: TF.cosine_embedding_loss(a, b, torch.tensor(ROW_SIGNS), 0.2, reduction=r)
        ),
        [X1, X2],
    ),
    "triplet": (
        lambda r: lambda a, p, n: F.triplet_margin_loss(a, p, n, 0.5, reduction=r),
        lambda r: lambda a, p, n: TF.triplet_margin_loss(a, p, n, 0.5, reduction=r),
        [X1, X2, X3],
    ),
    "triplet-swap-p1": (
        lambda r: lambda a, p, n: F.triplet_margin_loss(a, p, n, 2.0, 1.0, 1e-3, True, r),
        lambda r: (
            lambda a, p, n: TF.triplet_margin_loss(a, p, n, 2.0, 1.0, 1e-3, True, reduction=r)
        ),
        [X1, X2, X3],
    ),
    "multilabel_soft_margin": (
        lambda r: lambda a: F.multilabel_soft_margin_loss(a, td.tensor(ZERO_ONE), None, r),
        lambda r: lambda a: TF.multilabel_soft_margin_loss(a, torch.tensor(ZERO_ONE), reduction=r),
        [X1 * 30],
    ),
    "multilabel_soft_margin-weight": (
        lambda r: (
            lambda a: F.multilabel_soft_margin_loss(a, td.tensor(ZERO_ONE), td.tensor(WEIGHT), r)
        ),
        lambda r: (
            lambda a: TF.multilabel_soft_margin_loss(
                a, torch.tensor(ZERO_ONE), torch.tensor(WEIGHT), reduction=r
            )
        ),
        [X1],
    ),
}


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_losses_match_torch(name, reduction):
    ours, theirs, arrays = CASES[name]
    # the same formulas on the same numbers: agreement to rounding (sums in another order)
    compare_with_torch(torch, ours(reduction), theirs(reduction), arrays, rtol=1e-12, atol=1e-14)


def test_hinges_at_their_kinks_match_torch():
    # z = 0 exactly: torch's clamp_min passes the gradient there
    a = np.array([1.0, 2.0, 0.5])
    b = np.array([0.7, 2.0, 0.5])
    y = np.array([1.0, -1.0, 1.0])
    compare_with_torch(
        torch,
        lambda s, t: F.margin_ranking_loss(s, t, td.tensor(y), 0.3, "sum"),
        lambda s, t: TF.margin_ranking_loss(s, t, torch.tensor(y), 0.3, reduction="sum"),
        [a, b],
        rtol=0,
        atol=1e-15,
    )
    compare_with_torch(
        torch,
        lambda s: F.hinge_embedding_loss(s, td.tensor([-1.0, -1.0, 1.0]), 1.0, "sum"),
        lambda s: TF.hinge_embedding_loss(s, torch.tensor([-1.0, -1.0, 1.0]), 1.0, reduction="sum"),
        [np.array([1.0, 0.25, 1.0])],
        rtol=0,
        atol=1e-15,
    )


def test_one_dim_inputs_and_labels_other_than_plus_minus_one_match_torch():
    compare_with_torch(
        torch,
        lambda a, b: F.cosine_embedding_loss(a, b, td.tensor(-1.0), 0.1, "sum"),
        lambda a, b: TF.cosine_embedding_loss(a, b, torch.tensor(-1.0), 0.1, reduction="sum"),
        [X1[0], X2[0]],
    )
    zeros = np.zeros((6, 4))  # torch counts both terms of a label that is neither 1 nor -1
    compare_with_torch(
        torch,
        lambda a: F.hinge_embedding_loss(a, td.tensor(zeros)),
        lambda a: TF.hinge_embedding_loss(a, torch.tensor(zeros)),
        [X1],
    )


MODULES = [
    (nn.MarginRankingLoss(0.2), torch.nn.MarginRankingLoss(0.2), 2, SIGNS),
    (nn.HingeEmbeddingLoss(0.5, "sum"), torch.nn.HingeEmbeddingLoss(0.5, reduction="sum"), 1,
     SIGNS),
    (nn.SoftMarginLoss(), torch.nn.SoftMarginLoss(), 1, SIGNS),
    (nn.CosineEmbeddingLoss(0.1), torch.nn.CosineEmbeddingLoss(0.1), 2, ROW_SIGNS),
    (nn.TripletMarginLoss(swap=True), torch.nn.TripletMarginLoss(swap=True), 3, None),
    (
        nn.MultiLabelSoftMarginLoss(td.tensor(WEIGHT)),
        torch.nn.MultiLabelSoftMarginLoss(torch.tensor(WEIGHT)),
        1,
        ZERO_ONE,
    ),
]  # fmt: skip


@pytest.mark.parametrize(("ours", "theirs", "inputs", "labels"), MODULES, ids=lambda m: repr(m))
def test_modules_match_torch(ours, theirs, inputs, labels):
    extra_ours = () if labels is None else (td.tensor(labels),)
    extra_theirs = () if labels is None else (torch.tensor(labels),)
    compare_with_torch(
        torch,
        lambda *xs: ours(*xs, *extra_ours),
        lambda *xs: theirs(*xs, *extra_theirs),
        [X1, X2, X3][:inputs],
        rtol=1e-12,
        atol=1e-14,
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: F.soft_margin_loss(a * b, td.tensor(SIGNS)),
        lambda a, b: F.cosine_embedding_loss(a, b, td.tensor(ROW_SIGNS), -1.0),
        lambda a, b: F.multilabel_soft_margin_loss(a * b, td.tensor(ZERO_ONE)),
    ],
    ids=["soft_margin", "cosine_embedding", "multilabel_soft_margin"],
)
def test_smooth_losses_are_differentiable_twice(fn):
    a = td.tensor(X1, requires_grad=True)
    b = td.tensor(X2, requires_grad=True)
    assert td.autograd.gradgradcheck(fn, (a, b))


def test_bad_arguments_raise_named_errors():
    x = td.ones(3, 4)
    with pytest.raises(InputError, match="margin_ranking_loss: reduction='avg'"):
        F.margin_ranking_loss(x, x, x, reduction="avg")
    with pytest.raises(ShapeError, match=r"margin_ranking_loss: input1 .* different numbers"):
        F.margin_ranking_loss(x, x, td.ones(3))
    with pytest.raises(ShapeError, match=r"cosine_embedding_loss: inputs of shapes \(3, 4\)"):
        F.cosine_embedding_loss(x, td.ones(3, 5), td.ones(3))
    with pytest.raises(ShapeError, match=r"triplet_margin_loss: anchor .* different numbers"):
        F.triplet_margin_loss(x, x, td.ones(4))
    with pytest.raises(ShapeError, match="multilabel_soft_margin_loss: input shape"):
        F.multilabel_soft_margin_loss(x, td.ones(3))


POSITIVE = np.abs(X2) + 0.1
COUNTS = np.floor(np.abs(X3) * 3)  # 0, 1 and larger counts: Stirling's term where t > 1


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(("log_input", "full"), [(True, False), (True, True), (False, True)])
def test_poisson_nll_loss_matches_torch(log_input, full, reduction):
    x = X1 if log_input else POSITIVE
    compare_with_torch(
        torch,
        lambda a: F.poisson_nll_loss(a, td.tensor(COUNTS), log_input, full, reduction=reduction),
        lambda a: TF.poisson_nll_loss(
            a, torch.tensor(COUNTS), log_input, full, reduction=reduction
        ),
        [x],
        rtol=1e-12,
        atol=1e-14,
    )


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize(
    "var",
    [POSITIVE, POSITIVE[:, 0], POSITIVE[:, :1], POSITIVE[:1], np.where(POSITIVE > 1, 1e-9, 1.0)],
    ids=["same", "one-short", "last-dim-1", "first-dim-1", "below-eps"],
)
def test_gaussian_nll_loss_matches_torch(var, reduction):
    # var below eps: clamped for the value, its gradient that of var itself (torch's no_grad)
    compare_with_torch(
        torch,
        lambda a, t, v: F.gaussian_nll_loss(a, t, v, True, reduction=reduction),
        lambda a, t, v: TF.gaussian_nll_loss(a, t, v, True, reduction=reduction),
        [X1, X2, var],
        rtol=1e-10,
        atol=1e-12,
    )


def test_nll_losses_modules_and_errors():
    compare_with_torch(
        torch,
        lambda a: nn.PoissonNLLLoss(full=True)(a, td.tensor(COUNTS)),
        lambda a: torch.nn.PoissonNLLLoss(full=True)(a, torch.tensor(COUNTS)),
        [X1],
    )
    compare_with_torch(
        torch,
        lambda a: nn.GaussianNLLLoss(eps=1e-3)(a, td.tensor(X2), 0.5),
        lambda a: torch.nn.GaussianNLLLoss(eps=1e-3)(a, torch.tensor(X2), 0.5),
        [X1],
    )
    x = td.tensor(X1)
    with pytest.raises(InputError, match="gaussian_nll_loss: var has negative entries"):
        F.gaussian_nll_loss(x, x, td.tensor(-POSITIVE))
    with pytest.raises(ValueError, match=r"gaussian_nll_loss: var=-1\.0 is negative"):
        F.gaussian_nll_loss(x, x, -1.0)  # torch's ValueError too
    with pytest.raises(ShapeError, match=r"gaussian_nll_loss: var of shape \(6, 2\)"):
        F.gaussian_nll_loss(x, x, td.ones(6, 2))
