"""MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against PyTorch (float64,
same weights): outputs, attention weights and the gradients of every parameter and input, with
every kind of mask; gradcheck; initialisation; errors."""

import itertools

import numpy as np
import pytest

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(5)
E, HEADS, L, S, N = 8, 2, 4, 5, 3


def _randomize(ours):
    for p in ours.parameters():
        p.data[...] = RNG.uniform(-0.5, 0.5, p.shape)


def _copy(ours, theirs):
    theirs = theirs.double()
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    return theirs


def _bool_mask(shape):
    """True (masked out) at random places, never the first key, so no row is fully masked."""
    mask = RNG.random(shape) < 0.4
    mask[..., 0] = False
    return mask


def _as_torch(mask):
    return None if mask is None else torch.from_numpy(mask.copy())


def _masks(kind, batch):
    """``(attn_mask, key_padding_mask, is_causal)`` for a mask kind (numpy arrays)."""
    lead = (batch,) if batch else ()
    if kind == "none":
        return None, None, False
    if kind == "bool_attn":
        return _bool_mask((L, S)), None, False
    if kind == "float_attn":
        return RNG.standard_normal((L, S)), None, False
    if kind == "per_head_attn":
        return _bool_mask(((batch or 1) * HEADS, L, S)), None, False
    if kind == "bool_padding":
        return None, _bool_mask((*lead, S)), False
    if kind == "float_padding":
        return None, RNG.standard_normal((*lead, S)), False
    if kind == "both_bool":
        return _bool_mask((L, S)), _bool_mask((*lead, S)), False
    if kind == "both_float":
        return RNG.standard_normal((L, S)), RNG.standard_normal((*lead, S)), False
    if kind == "causal":
        return np.triu(np.ones((L, S), dtype=bool), 1), None, True
    raise AssertionError(kind)


def _compare(got, expected, inputs_ours, inputs_theirs, ours, theirs, rtol=1e-10):
    """Values of every returned tensor, then gradients of a random linear function of them."""
    total_ours, total_theirs = 0, 0
    for g, e in zip(got, expected, strict=True):
        if e is None:
            assert g is None
            continue
        assert g.shape == tuple(e.shape)
        np.testing.assert_allclose(g.data, e.detach().numpy(), rtol=1e-11, atol=1e-13)
        upstream = RNG.standard_normal(g.shape)
        total_ours = total_ours + (g * td.tensor(upstream)).sum()
        total_theirs = total_theirs + (e * torch.from_numpy(upstream)).sum()
    total_ours.backward()
    total_theirs.backward()
    for i, (o, t) in enumerate(zip(inputs_ours, inputs_theirs, strict=True)):
        np.testing.assert_allclose(o.grad.data, t.grad.numpy(), rtol=rtol, atol=1e-12,
                                   err_msg=f"input {i}")  # fmt: skip
    theirs_params = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(theirs_params)
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, theirs_params[name].grad.numpy(), rtol=rtol,
                                   atol=1e-12, err_msg=name)  # fmt: skip


MASKS = ["none", "bool_attn", "float_attn", "per_head_attn", "bool_padding", "float_padding",
         "both_bool", "both_float", "causal"]  # fmt: skip


@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize(
    "batch_first,kvdim,need_weights,average",
    [(False, None, True, True), (True, None, True, False), (False, (6, 7), False, True),
     (True, (6, 7), True, True), (False, None, False, False), (True, (6, 7), True, False)],
)  # fmt: skip
def test_multihead_attention_matches_torch(mask_kind, batch_first, kvdim, need_weights, average):
    kdim, vdim = kvdim or (E, E)
    ours = nn.MultiheadAttention(E, HEADS, kdim=kdim, vdim=vdim, batch_first=batch_first)
    ours = ours.double()
    _randomize(ours)
    theirs = _copy(ours, torch.nn.MultiheadAttention(E, HEADS, kdim=kdim, vdim=vdim,
                                                     batch_first=batch_first))  # fmt: skip
    layout = (lambda length: (N, length)) if batch_first else (lambda length: (length, N))
    arrays = [RNG.standard_normal((*layout(L), E)), RNG.standard_normal((*layout(S), kdim)),
              RNG.standard_normal((*layout(S), vdim))]  # fmt: skip
    ox = [td.tensor(a.copy(), requires_grad=True) for a in arrays]
    tx = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    attn, padding, causal = _masks(mask_kind, N)
    options = {"need_weights": need_weights, "average_attn_weights": average, "is_causal": causal}
    got = ours(*ox, key_padding_mask=padding, attn_mask=attn, **options)
    masks = {"key_padding_mask": _as_torch(padding), "attn_mask": _as_torch(attn)}
    expected = theirs(*tx, **masks, **options)
    _compare(got, expected, ox, tx, ours, theirs)


@pytest.mark.parametrize("mask_kind", ["none", "bool_attn", "per_head_attn", "bool_padding",
                                       "float_padding", "causal"])  # fmt: skip
@pytest.mark.parametrize("average", [True, False])
def test_unbatched_multihead_attention_matches_torch(mask_kind, average):
    ours = nn.MultiheadAttention(E, HEADS, bias=False).double()
    _randomize(ours)
    theirs = _copy(ours, torch.nn.MultiheadAttention(E, HEADS, bias=False))
    arrays = [RNG.standard_normal((L, E)), RNG.standard_normal((S, E)),
              RNG.standard_normal((S, E))]  # fmt: skip
    ox = [td.tensor(a.copy(), requires_grad=True) for a in arrays]
    tx = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    attn, padding, causal = _masks(mask_kind, None)
    got = ours(*ox, key_padding_mask=padding, attn_mask=attn, average_attn_weights=average,
               is_causal=causal)  # fmt: skip
    expected = theirs(*tx, key_padding_mask=_as_torch(padding), attn_mask=_as_torch(attn),
                      average_attn_weights=average, is_causal=causal)  # fmt: skip
    _compare(got, expected, ox, tx, ours, theirs)


def test_float_mask_tensors_get_torch_gradients():
    ours = nn.MultiheadAttention(E, HEADS, batch_first=True).double()
    _randomize(ours)
    theirs = _copy(ours, torch.nn.MultiheadAttention(E, HEADS, batch_first=True))
    arrays = [RNG.standard_normal((N, L, E)), RNG.standard_normal((N, S, E)),
              RNG.standard_normal((N, S, E)), RNG.standard_normal((N * HEADS, L, S)),
              RNG.standard_normal((N, S))]  # fmt: skip
    ox = [td.tensor(a.copy(), requires_grad=True) for a in arrays]
    tx = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    got = ours(*ox[:3], attn_mask=ox[3], key_padding_mask=ox[4], average_attn_weights=False)
    expected = theirs(*tx[:3], attn_mask=tx[3], key_padding_mask=tx[4], average_attn_weights=False)
    _compare(got, expected, ox, tx, ours, theirs)


def test_self_attention_with_one_tensor_matches_torch():
    ours = nn.MultiheadAttention(E, HEADS).double()
    _randomize(ours)
    theirs = _copy(ours, torch.nn.MultiheadAttention(E, HEADS))
    x = RNG.standard_normal((L, N, E))
    ox, tx = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    _compare(ours(ox, ox, ox), theirs(tx, tx, tx), [ox], [tx], ours, theirs)


@pytest.mark.parametrize("batched", [True, False])
def test_fully_masked_query_gets_zero_weights_as_torch_without_weights(batched):
    ours = nn.MultiheadAttention(E, HEADS).double()
    _randomize(ours)
    theirs = _copy(ours, torch.nn.MultiheadAttention(E, HEADS))
    lead = (N,) if batched else ()
    arrays = [RNG.standard_normal((L, *lead, E)), RNG.standard_normal((S, *lead, E)),
              RNG.standard_normal((S, *lead, E))]  # fmt: skip
    ox = [td.tensor(a.copy(), requires_grad=True) for a in arrays]
    tx = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    mask = _bool_mask((L, S))
    mask[1] = True  # query 1 may attend to no key
    got = ours(*ox, attn_mask=mask, need_weights=False)
    expected = theirs(*tx, attn_mask=_as_torch(mask), need_weights=False)
    _compare(got, expected, ox, tx, ours, theirs)
    weights = ours(*ox, attn_mask=mask)[1]
    np.testing.assert_array_equal(weights.data[..., 1, :], 0.0)


@pytest.mark.parametrize(
    "norm_first,activation,batch_first,masked",
    list(itertools.product([False, True], ["relu", "gelu"], [False, True], [False, True])),
)
def test_encoder_layer_matches_torch(norm_first, activation, batch_first, masked):
    kwargs = dict(dim_feedforward=16, dropout=0.0, activation=activation,
                  batch_first=batch_first, norm_first=norm_first, layer_norm_eps=1e-4)  # fmt: skip
    ours = nn.TransformerEncoderLayer(E, HEADS, **kwargs).double()
    _randomize(ours)
    theirs = _copy(ours, torch.nn.TransformerEncoderLayer(E, HEADS, **kwargs))
    x = RNG.standard_normal((N, L, E) if batch_first else (L, N, E))
    mask, padding = (_bool_mask((L, L)), _bool_mask((N, L))) if masked else (None, None)
    ox, tx = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    got = ours(ox, src_mask=mask, src_key_padding_mask=padding)
    expected = theirs(tx, src_mask=_as_torch(mask), src_key_padding_mask=_as_torch(padding))
    _compare([got], [expected], [ox], [tx], ours, theirs, rtol=1e-9)


@pytest.mark.parametrize("with_norm", [False, True])
def test_encoder_stack_matches_torch_with_a_causal_mask(with_norm):
    layer = nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16, dropout=0.0, norm_first=True)
    ours = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E) if with_norm else None).double()
    _randomize(ours)
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight
    t_layer = torch.nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16, dropout=0.0,
                                               norm_first=True)  # fmt: skip
    theirs = _copy(ours, torch.nn.TransformerEncoder(
        t_layer, 2, norm=torch.nn.LayerNorm(E) if with_norm else None, enable_nested_tensor=False
    ))  # fmt: skip
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    x = RNG.standard_normal((L, N, E))
    ox, tx = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    got = ours(ox, mask=causal, is_causal=True)
    expected = theirs(tx, mask=torch.from_numpy(causal), is_causal=True)
    _compare([got], [expected], [ox], [tx], ours, theirs, rtol=1e-9)


def test_encoder_layer_in_eval_mode_with_default_dropout_matches_torch():
    ours = nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16).double().eval()
    _randomize(ours)
    theirs = _copy(ours, torch.nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16)).eval()
    x = RNG.standard_normal((L, N, E))
    ox, tx = td.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    _compare([ours(ox)], [theirs(tx)], [ox], [tx], ours, theirs, rtol=1e-9)


def test_attention_dropout_is_applied_in_training_only():
    mha = nn.MultiheadAttention(E, HEADS, dropout=1.0).double()
    x = td.tensor(RNG.standard_normal((L, N, E)))
    out, weights = mha(x, x, x)
    # every attention weight dropped: the output is out_proj of zeros, i.e. its bias (zeros)
    np.testing.assert_array_equal(weights.data, 0.0)
    np.testing.assert_array_equal(out.data, 0.0)
    mha.eval()
    out, weights = mha(x, x, x)
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-12)


def test_multihead_attention_gradcheck():
    mha = nn.MultiheadAttention(4, 2, kdim=3, vdim=2).double()
    _randomize(mha)
    q = td.tensor(RNG.standard_normal((3, 2, 4)), requires_grad=True)
    k = td.tensor(RNG.standard_normal((2, 2, 3)), requires_grad=True)
    v = td.tensor(RNG.standard_normal((2, 2, 2)), requires_grad=True)
    padding = np.array([[False, True], [False, False]])

    def run(q, k, v, *_params):  # gradcheck perturbs the parameters in place
        return mha(q, k, v, key_padding_mask=padding, average_attn_weights=False)

    assert td.autograd.gradcheck(run, (q, k, v, *mha.parameters()))


def test_multihead_attention_parameters_and_initialisation():
    e = 64
    mha = nn.MultiheadAttention(e, 4)
    theirs = torch.nn.MultiheadAttention(e, 4)
    assert {k: v.shape for k, v in mha.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()
    }
    np.testing.assert_array_equal(mha.in_proj_bias.data, 0.0)
    np.testing.assert_array_equal(mha.out_proj.bias.data, 0.0)
    bound = np.sqrt(6.0 / (e + 3 * e))  # Xavier uniform of the (3E, E) in_proj_weight
    w = mha.in_proj_weight.data
    assert np.abs(w).max() <= bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.03 * bound
    separate = nn.MultiheadAttention(e, 4, kdim=10, vdim=20)
    assert separate.in_proj_weight is None
    assert separate.k_proj_weight.shape == (e, 10)
    assert np.abs(separate.k_proj_weight.data).max() <= np.sqrt(6.0 / (e + 10))


def test_multihead_attention_loads_a_torch_state_dict():
    theirs = torch.nn.MultiheadAttention(E, HEADS, kdim=5, vdim=6, batch_first=True)
    ours = nn.MultiheadAttention(E, HEADS, kdim=5, vdim=6, batch_first=True)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    q = RNG.standard_normal((N, L, E)).astype(np.float32)
    k = RNG.standard_normal((N, S, 5)).astype(np.float32)
    v = RNG.standard_normal((N, S, 6)).astype(np.float32)
    got = ours(td.tensor(q), td.tensor(k), td.tensor(v))
    expected = theirs(*(torch.from_numpy(a) for a in (q, k, v)))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.data, e.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_errors_name_the_argument():
    with pytest.raises(InputError, match="embed_dim=10 is not divisible by num_heads=3"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(InputError, match="add_bias_kv"):
        nn.MultiheadAttention(E, HEADS, add_bias_kv=True)
    with pytest.raises(InputError, match="activation='tanh'"):
        nn.TransformerEncoderLayer(E, HEADS, activation="tanh")
    with pytest.raises(InputError, match="num_layers=0"):
        nn.TransformerEncoder(nn.TransformerEncoderLayer(E, HEADS, 16), 0)
    mha = nn.MultiheadAttention(E, HEADS, kdim=6).double()
    q = td.tensor(RNG.standard_normal((L, N, E)))
    k = td.tensor(RNG.standard_normal((S, N, 6)))
    v = td.tensor(RNG.standard_normal((S, N, E)))
    with pytest.raises(ShapeError, match=r"key of shape .* has 8 features; expected kdim=6"):
        mha(q, v, v)
    with pytest.raises(ShapeError, match=r"query of shape .* expected embed_dim=8"):
        mha(k, k, v)
    with pytest.raises(ShapeError, match="all 3-D"):
        mha(q[:, 0], k, v)
    with pytest.raises(ShapeError, match="differ in length"):
        mha(q, k, v[:2])
    with pytest.raises(ShapeError, match="different batch sizes"):
        mha(q[:, :2], k, v)
    with pytest.raises(ShapeError, match=r"attn_mask of shape \(5, 4\); expected \(4, 5\)"):
        mha(q, k, v, attn_mask=np.zeros((S, L), dtype=bool))
    with pytest.raises(ShapeError, match=r"key_padding_mask of shape \(5, 3\); expected \(3, 5\)"):
        mha(q, k, v, key_padding_mask=np.zeros((S, N), dtype=bool))
    with pytest.raises(DTypeError, match="attn_mask dtype int64"):
        mha(q, k, v, attn_mask=np.zeros((L, S), dtype=np.int64))
    with pytest.raises(InputError, match=r"is_causal=True .* pass attn_mask"):
        mha(q, k, v, is_causal=True)
    with pytest.raises(DTypeError, match="query dtype float32 differs"):
        nn.MultiheadAttention(E, HEADS).double()(q.float(), q.float(), q.float())


def test_encoder_loads_a_torch_state_dict():
    t_layer = torch.nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16, activation="gelu",
                                               norm_first=True)  # fmt: skip
    theirs = torch.nn.TransformerEncoder(t_layer, 2, norm=torch.nn.LayerNorm(E),
                                         enable_nested_tensor=False).eval()  # fmt: skip
    layer = nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16, activation="gelu",
                                       norm_first=True)  # fmt: skip
    ours = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E)).eval()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((L, N, E)).astype(np.float32)
    with torch.no_grad():
        expected = theirs(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours(td.tensor(x)).data, expected, rtol=1e-4, atol=1e-5)


def test_encoder_layer_trains_with_dropout():
    td.manual_seed(3)
    layer = nn.TransformerEncoderLayer(E, HEADS, dim_feedforward=16, dropout=0.3).double()
    x = td.tensor(RNG.standard_normal((L, N, E)), requires_grad=True)
    layer.eval()
    reference = layer(x).data
    layer.train()
    out = layer(x)
    assert not np.allclose(out.data, reference)  # the dropouts are active in training
    out.sum().backward()
    assert all(np.isfinite(p.grad.data).all() for p in layer.parameters())
    assert np.isfinite(x.grad.data).all()
