"""group_norm/GroupNorm, normalize, cosine_similarity, pairwise_distance, one_hot, adaptive
average pooling and scaled_dot_product_attention against PyTorch (float64), with bad input."""

import numpy as np
import pytest
from _torch_compare import compare_with_torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(21)


@pytest.mark.parametrize("shape", [(2, 6), (3, 6, 4), (2, 6, 3, 2)])
@pytest.mark.parametrize("groups", [1, 2, 3, 6])
@pytest.mark.parametrize("affine", [False, True])
def test_group_norm_matches_torch(shape, groups, affine):
    arrays = [RNG.standard_normal(shape) * 3 + 1]
    if affine:
        arrays += [RNG.standard_normal(6), RNG.standard_normal(6)]
    compare_with_torch(
        torch,
        lambda x, *wb: F.group_norm(x, groups, *wb, eps=1e-4),
        lambda x, *wb: TF.group_norm(x, groups, *wb, eps=1e-4),
        arrays,
        atol=1e-11,
    )


def test_group_norm_module_matches_torch():
    ours = nn.GroupNorm(2, 4).double()
    for p in ours.parameters():
        p.data[...] = RNG.standard_normal(p.shape)
    theirs = torch.nn.GroupNorm(2, 4).double()
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    x = RNG.standard_normal((3, 4, 5))
    ox, tx = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    np.testing.assert_allclose(ours(ox).data, theirs(tx).detach().numpy(), rtol=1e-10, atol=1e-12)
    ours(ox).sum().backward()
    (theirs(tx) * 1.0).sum().backward()
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, dict(theirs.named_parameters())[name].grad.numpy())
    assert list(nn.GroupNorm(2, 4, affine=False).parameters()) == []


@pytest.mark.parametrize(("p", "dim"), [(2.0, 1), (1.0, 0), (3.0, -1), (np.inf, 1)])
def test_normalize_matches_torch(p, dim):
    x = RNG.standard_normal((3, 4, 2))
    x[0, :, 0] = 0.0  # a zero vector: divided by eps
    compare_with_torch(
        torch, lambda a: F.normalize(a, p, dim), lambda a: TF.normalize(a, p, dim), [x]
    )


@settings(max_examples=20, deadline=None)
@given(
    shapes=st.sampled_from([((4, 3), (4, 3)), ((4, 3), (1, 3)), ((2, 4, 3), (4, 3)), ((5,), (5,))]),
    dim=st.integers(-1, 0),
    eps=st.sampled_from([1e-8, 0.5]),
)
def test_cosine_similarity_matches_torch(shapes, dim, eps):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1]) * 0.3
    compare_with_torch(
        torch,
        lambda x, y: F.cosine_similarity(x, y, dim=dim, eps=eps),
        lambda x, y: TF.cosine_similarity(x, y, dim=dim, eps=eps),
        [a, b],
    )


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, np.inf])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shapes", [((4, 3), (4, 3)), ((4, 3), (3,)), ((5,), (5,))])
def test_pairwise_distance_matches_torch(p, keepdim, shapes):
    a, b = RNG.standard_normal(shapes[0]), RNG.standard_normal(shapes[1])
    compare_with_torch(
        torch,
        lambda x, y: F.pairwise_distance(x, y, p=p, keepdim=keepdim),
        lambda x, y: TF.pairwise_distance(x, y, p=p, keepdim=keepdim),
        [a, b],
    )


@pytest.mark.parametrize("num_classes", [-1, 7])
def test_one_hot_matches_torch(num_classes):
    idx = RNG.integers(0, 5, (3, 4))
    ours = F.one_hot(td.tensor(idx), num_classes)
    theirs = TF.one_hot(torch.tensor(idx), num_classes)
    assert ours.dtype == np.int64
    np.testing.assert_array_equal(ours.data, theirs.numpy())


@settings(max_examples=30, deadline=None)
@given(length=st.integers(1, 12), bins=st.integers(1, 12), batched=st.booleans())
def test_adaptive_avg_pool1d_matches_torch_for_any_bins(length, bins, batched):
    shape = (2, 3, length) if batched else (3, length)
    compare_with_torch(
        torch,
        lambda x: F.adaptive_avg_pool1d(x, bins),
        lambda x: TF.adaptive_avg_pool1d(x, bins),
        [RNG.standard_normal(shape)],
    )


@settings(max_examples=30, deadline=None)
@given(
    size=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    out=st.tuples(st.integers(1, 9), st.integers(1, 9) | st.none()),
    batched=st.booleans(),
)
def test_adaptive_avg_pool2d_matches_torch_for_any_bins(size, out, batched):
    shape = (2, 3, *size) if batched else (3, *size)
    compare_with_torch(
        torch,
        lambda x: F.adaptive_avg_pool2d(x, out),
        lambda x: TF.adaptive_avg_pool2d(x, out),
        [RNG.standard_normal(shape)],
    )


def test_adaptive_pool_modules_match_torch():
    x = RNG.standard_normal((2, 3, 7, 5))
    compare_with_torch(torch, nn.AdaptiveAvgPool2d(1), torch.nn.AdaptiveAvgPool2d(1), [x])
    compare_with_torch(torch, nn.AdaptiveAvgPool2d((3, 2)), torch.nn.AdaptiveAvgPool2d((3, 2)), [x])
    x1 = RNG.standard_normal((2, 3, 10))
    compare_with_torch(torch, nn.AdaptiveAvgPool1d(4), torch.nn.AdaptiveAvgPool1d(4), [x1])
    assert repr(nn.AdaptiveAvgPool1d(4)) == "AdaptiveAvgPool1d(output_size=4)"


def _attention_inputs(batch=(2, 3), length=4, keys=5, features=6, value_features=3):
    return [
        RNG.standard_normal((*batch, length, features)),
        RNG.standard_normal((*batch, keys, features)),
        RNG.standard_normal((*batch, keys, value_features)),
    ]


@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("keys", [4, 6, 3])
def test_attention_matches_torch(scale, is_causal, keys):
    compare_with_torch(
        torch,
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale),
        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale),
        _attention_inputs(keys=keys),
    )


@pytest.mark.parametrize("mask_shape", [(4, 5), (3, 4, 5), (2, 1, 1, 5)])
def test_attention_with_masks_matches_torch(mask_shape):
    bool_mask = RNG.uniform(size=mask_shape) > 0.3
    bool_mask[..., 0] = True  # every query sees a key
    float_mask = RNG.standard_normal(mask_shape)
    float_mask[~bool_mask] = -np.inf
    for mask in (bool_mask, float_mask):
        compare_with_torch(
            torch,
            lambda q, k, v, mask=mask: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
            lambda q, k, v, mask=mask: TF.scaled_dot_product_attention(
                q, k, v, attn_mask=torch.tensor(mask)
            ),
            _attention_inputs(),
        )


def test_attention_rows_with_every_key_masked_are_zero_like_torch():
    mask = RNG.uniform(size=(4, 5)) > 0.3
    mask[2] = False  # query 2 sees nothing
    compare_with_torch(
        torch,
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(mask)),
        _attention_inputs(),
    )


def test_attention_unbatched_and_float_mask_tensor_gradient():
    q, k, v = _attention_inputs(batch=())
    bias = RNG.standard_normal((4, 5))
    compare_with_torch(
        torch,
        lambda q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b),
        lambda q, k, v, b: TF.scaled_dot_product_attention(q, k, v, attn_mask=b),
        [q, k, v, bias],
    )


def test_second_order_through_group_norm_and_attention():
    x = td.tensor(RNG.standard_normal((2, 4, 3)), requires_grad=True)
    assert td.autograd.gradgradcheck(lambda t: F.group_norm(t, 2), (x,))
    q = td.tensor(RNG.standard_normal((3, 2)), requires_grad=True)
    k = td.tensor(RNG.standard_normal((4, 2)), requires_grad=True)
    assert td.autograd.gradgradcheck(
        lambda a, b: F.scaled_dot_product_attention(a, b, b, is_causal=True), (q, k)
    )


def test_bad_input_raises_named_errors():
    x = td.ones(2, 6, 3)
    with pytest.raises(InputError, match="num_groups=4 does not divide the 6 channels"):
        F.group_norm(x, 4)
    with pytest.raises(ShapeError, match=r"group_norm: weight of shape \(4,\); expected \(6,\)"):
        F.group_norm(x, 2, weight=td.ones(4))
    with pytest.raises(InputError, match="GroupNorm: num_groups=4 does not divide num_channels=6"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ShapeError, match="normalize: dim=3 is out of range"):
        F.normalize(x, dim=3)
    with pytest.raises(ShapeError, match=r"x1 of shape \(2, 3\) and x2 of shape \(4,\) do not"):
        F.cosine_similarity(td.ones(2, 3), td.ones(4))
    with pytest.raises(InputError, match=r"one_hot: class index 5 at position \(1,\) is not in"):
        F.one_hot(td.tensor([1, 5]), 3)
    with pytest.raises(InputError, match=r"class index -1 at position \(0,\)"):
        F.one_hot(td.tensor([-1, 0]))
    with pytest.raises(DTypeError, match="one_hot: expected integer class indices"):
        F.one_hot(td.tensor([1.0]))
    with pytest.raises(InputError, match=r"output_size=\(2, 2\); expected an int or 1 ints"):
        F.adaptive_avg_pool1d(x, (2, 2))
    with pytest.raises(InputError, match="output_size=0; expected positive sizes"):
        F.adaptive_avg_pool2d(td.ones(1, 2, 3, 3), 0)
    with pytest.raises(ShapeError, match=r"adaptive_avg_pool2d: input of shape \(3, 3\)"):
        F.adaptive_avg_pool2d(td.ones(3, 3), 1)
    q, k, v = (td.tensor(a) for a in _attention_inputs())
    with pytest.raises(InputError, match=r"dropout_p=0\.1; attention dropout is not implemented"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(InputError, match="either attn_mask or is_causal=True, not both"):
        F.scaled_dot_product_attention(q, k, v, np.ones((4, 5), bool), is_causal=True)
    with pytest.raises(ShapeError, match="query features 6 and key features 3 differ"):
        F.scaled_dot_product_attention(q, v, v)
    with pytest.raises(ShapeError, match="key length 5 and value length 4 differ"):
        F.scaled_dot_product_attention(q, k, q)
    with pytest.raises(ShapeError, match=r"attn_mask of shape \(4, 4\) does not broadcast"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((4, 4), bool))
    with pytest.raises(DTypeError, match="attn_mask dtype int64; expected bool or floating"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=np.ones((4, 5), np.int64))


# -- BatchNorm's num_batches_tracked, and state dicts in both directions ----------------------


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_counts_batches_and_moves_running_stats_as_torch(momentum):
    # momentum=None: the running statistics are the cumulative average of every batch
    ours = nn.BatchNorm2d(3, momentum=momentum).double()
    theirs = torch.nn.BatchNorm2d(3, momentum=momentum).double()
    for _ in range(4):
        x = RNG.standard_normal((4, 3, 5, 5)) * 2 + 1
        ours(td.tensor(x))
        theirs(torch.from_numpy(x))
    ours.eval()
    ours(td.tensor(x))  # evaluation does not count
    state = theirs.state_dict()
    assert list(ours.state_dict()) == list(state)
    assert int(ours.num_batches_tracked.data) == int(state["num_batches_tracked"]) == 4
    assert ours.num_batches_tracked.dtype == np.int64
    for key in ("running_mean", "running_var"):  # float64: a few roundings apart
        np.testing.assert_allclose(ours.state_dict()[key], state[key].numpy(), rtol=1e-12)
    ours.reset_running_stats()
    assert int(ours.num_batches_tracked.data) == 0


def test_a_torch_state_dict_with_batchnorm_loads_and_the_other_way_round():
    def ours_model():
        return nn.Sequential(
            nn.Conv2d(2, 3, 3),
            nn.BatchNorm2d(3),
            nn.ReLU(),
            nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
        )

    theirs = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
        torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
    )  # fmt: skip
    x = RNG.standard_normal((4, 2, 6, 6)).astype(np.float32)
    for _ in range(3):
        theirs(torch.from_numpy(x))  # running statistics and a batch count to carry over
    theirs.eval()
    ours = ours_model()
    assert ours.load_state_dict(theirs.state_dict()) == ([], [])
    ours.eval()
    expected = theirs(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours(td.tensor(x)).data, expected, rtol=1e-5, atol=1e-5)
    assert int(ours.state_dict()["1.num_batches_tracked"]) == 3

    back = torch.nn.Sequential(
        torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
        torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
    ).eval()  # fmt: skip
    back.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in ours.state_dict().items()})
    np.testing.assert_allclose(back(torch.from_numpy(x)).detach().numpy(), expected, rtol=1e-6)
