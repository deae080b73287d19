"""cross_entropy, nll_loss and mse_loss against PyTorch (values and input gradients, float64),
plus gradcheck and stability with extreme logits."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _both(fn_ours, fn_theirs, logits, *args, **kwargs):
    """Loss value and input gradient from tadiff and torch for the same arguments."""
    x = td.tensor(logits.copy(), requires_grad=True)
    t = torch.from_numpy(logits.copy()).requires_grad_(True)
    ours, theirs = fn_ours(x, *args[0], **kwargs), fn_theirs(t, *args[1], **kwargs)
    upstream = np.random.default_rng(0).standard_normal(theirs.shape)
    (ours * td.tensor(upstream)).sum().backward()
    (theirs * torch.from_numpy(upstream)).sum().backward()
    return ours.data, theirs.detach().numpy(), x.grad.data, t.grad.numpy()


def _assert_same(result):
    value, expected, grad, expected_grad = result
    np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-12)


SHAPES = [((5, 4), (5,)), ((4,), ()), ((3, 4, 2, 2), (3, 2, 2))]
CASES = list(
    itertools.product(SHAPES, [False, True], [False, True], [0.0, 0.2], ["mean", "sum", "none"])
)


@pytest.mark.parametrize(("shapes", "weighted", "ignore", "smoothing", "reduction"), CASES)
def test_cross_entropy_index_targets(shapes, weighted, ignore, smoothing, reduction):
    rng = np.random.default_rng(1)
    input_shape, target_shape = shapes
    classes = input_shape[0] if len(input_shape) == 1 else input_shape[1]
    logits = rng.standard_normal(input_shape) * 2
    target = rng.integers(0, classes, target_shape)
    if ignore and target.ndim:
        target.flat[1] = -100
    weight = rng.uniform(0.5, 2.0, classes) if weighted else None
    kwargs = dict(reduction=reduction, label_smoothing=smoothing)
    ours_args = (td.tensor(target), None if weight is None else td.tensor(weight))
    theirs_args = (torch.from_numpy(target), None if weight is None else torch.from_numpy(weight))
    _assert_same(_both(F.cross_entropy, TF.cross_entropy, logits, ours_args, theirs_args, **kwargs))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("smoothing", [0.0, 0.3])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets(weighted, smoothing, reduction):
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((6, 3))
    probs = rng.dirichlet(np.ones(3), size=6)
    weight = rng.uniform(0.5, 2.0, 3) if weighted else None
    ours_args = (td.tensor(probs), None if weight is None else td.tensor(weight))
    theirs_args = (torch.from_numpy(probs), None if weight is None else torch.from_numpy(weight))
    kwargs = dict(reduction=reduction, label_smoothing=smoothing)
    _assert_same(_both(F.cross_entropy, TF.cross_entropy, logits, ours_args, theirs_args, **kwargs))


def test_cross_entropy_ignore_index_other_value_and_all_ignored():
    logits = np.random.default_rng(3).standard_normal((4, 3))
    target = np.array([0, 7, 2, 7])
    _assert_same(
        _both(
            F.cross_entropy,
            TF.cross_entropy,
            logits,
            (td.tensor(target),),
            (torch.from_numpy(target),),
            ignore_index=7,
        )
    )
    for ignore_index in (1, 0):  # an ignored value that is also a class index
        _assert_same(
            _both(
                F.cross_entropy,
                TF.cross_entropy,
                logits,
                (td.tensor(np.array([0, 1, 2, 1])),),
                (torch.from_numpy(np.array([0, 1, 2, 1])),),
                ignore_index=ignore_index,
            )
        )
    for smoothing in (0.0, 0.1):  # the class-index fast path and the weighted form
        x = td.tensor(logits, requires_grad=True)
        all_ignored = F.cross_entropy(x, td.tensor(np.full(4, -100)), label_smoothing=smoothing)
        all_ignored.backward()
        t = torch.from_numpy(logits).requires_grad_(True)
        expected = TF.cross_entropy(t, torch.full((4,), -100), label_smoothing=smoothing)
        expected.backward()
        assert np.isnan(all_ignored.data) and np.isnan(expected.item())  # 0 / 0
        np.testing.assert_array_equal(x.grad.data, t.grad.numpy())  # zeros in both


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_matches_torch(reduction):
    rng = np.random.default_rng(4)
    logp = np.log(rng.dirichlet(np.ones(5), size=4))
    target = np.array([1, -100, 4, 0])
    weight = rng.uniform(0.5, 2.0, 5)
    _assert_same(
        _both(
            F.nll_loss,
            TF.nll_loss,
            logp,
            (td.tensor(target), td.tensor(weight)),
            (torch.from_numpy(target), torch.from_numpy(weight)),
            reduction=reduction,
        )
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss_matches_torch(reduction):
    rng = np.random.default_rng(5)
    pred, target = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    _assert_same(
        _both(
            F.mse_loss,
            TF.mse_loss,
            pred,
            (td.tensor(target),),
            (torch.from_numpy(target),),
            reduction=reduction,
        )
    )


def test_loss_modules_match_functions():
    rng = np.random.default_rng(6)
    x = td.tensor(rng.standard_normal((4, 3)))
    y = td.tensor(np.array([0, 2, 1, 2]))
    module = nn.CrossEntropyLoss(label_smoothing=0.1, reduction="sum")
    assert float(module(x, y)) == float(F.cross_entropy(x, y, reduction="sum", label_smoothing=0.1))
    assert float(nn.MSELoss()(x, x * 2)) == float(F.mse_loss(x, x * 2))


def test_cross_entropy_gradcheck_with_smoothing_and_weights():
    rng = np.random.default_rng(8)
    x = td.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    target = td.tensor(np.array([3, 0, -100]))
    weight = td.tensor(rng.uniform(0.5, 2, 4))
    assert td.autograd.gradcheck(
        lambda t: F.cross_entropy(t, target, weight, label_smoothing=0.1), (x,)
    )
    assert td.autograd.gradgradcheck(lambda t: F.cross_entropy(t, target, weight), (x,))
    # class indices without weights or smoothing take the direct (no one-hot) path
    for reduction in ("mean", "none"):
        loss = lambda t, r=reduction: F.cross_entropy(t, target, reduction=r)  # noqa: E731
        assert td.autograd.gradcheck(loss, (x,))
        assert td.autograd.gradgradcheck(loss, (x,))


def test_cross_entropy_keeps_float32_and_matches_torch():
    rng = np.random.default_rng(9)
    logits = rng.standard_normal((128, 10)).astype(np.float32)
    target = rng.integers(0, 10, 128)
    x = td.tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, td.tensor(target))
    loss.backward()
    t = torch.from_numpy(logits).requires_grad_(True)
    expected = TF.cross_entropy(t, torch.from_numpy(target))
    expected.backward()
    assert loss.dtype == np.float32 and x.grad.dtype == np.float32
    np.testing.assert_allclose(loss.data, expected.item(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.data, t.grad.numpy(), rtol=1e-5, atol=1e-8)


@settings(max_examples=25, deadline=None)
@given(
    scale=st.floats(1.0, 1e4),
    shift=st.floats(-1e4, 1e4),
    seed=st.integers(0, 2**16),
    smoothing=st.sampled_from([0.0, 0.1]),
)
def test_cross_entropy_is_stable_for_extreme_logits(scale, shift, seed, smoothing):
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((4, 5)) * scale + shift).astype(np.float32)
    target = rng.integers(0, 5, 4)
    value = F.cross_entropy(td.tensor(logits), td.tensor(target), label_smoothing=smoothing)
    expected = TF.cross_entropy(
        torch.from_numpy(logits), torch.from_numpy(target), label_smoothing=smoothing
    )
    assert np.isfinite(value.data)
    np.testing.assert_allclose(value.data, expected.numpy(), rtol=1e-5, atol=1e-3)


def test_loss_errors_name_what_is_wrong():
    x = td.tensor(np.zeros((2, 3)))
    with pytest.raises(InputError, match=r"target 3 at position \(1,\) is not a class index"):
        F.cross_entropy(x, td.tensor(np.array([0, 3])))
    with pytest.raises(ShapeError, match=r"target of shape \(3,\) does not fit input of shape"):
        F.cross_entropy(x, td.tensor(np.array([0, 1, 2])))
    with pytest.raises(ShapeError, match=r"probability target of shape \(2, 2\)"):
        F.cross_entropy(x, td.tensor(np.ones((2, 2))))
    with pytest.raises(ShapeError, match=r"weight has shape \(2,\); expected \(3,\)"):
        F.cross_entropy(x, td.tensor(np.array([0, 1])), weight=np.ones(2))
    with pytest.raises(DTypeError, match="target dtype bool"):
        F.cross_entropy(x, np.array([True, False]))
    with pytest.raises(InputError, match="reduction='avg'"):
        F.cross_entropy(x, np.array([0, 1]), reduction="avg")
    with pytest.raises(InputError, match=r"label_smoothing=1.5 is not in \[0, 1\]"):
        F.cross_entropy(x, np.array([0, 1]), label_smoothing=1.5)
    with pytest.raises(ShapeError, match=r"input shape \(2, 3\) and target shape \(2, 1\) differ"):
        F.mse_loss(x, td.tensor(np.zeros((2, 1))))
