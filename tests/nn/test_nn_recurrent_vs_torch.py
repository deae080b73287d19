"""RNN, LSTM, GRU and their cells against PyTorch (float64, same weights): outputs, final
states and the gradients of every parameter, the input and the initial states, for every
option combination; gradcheck; initialisation; errors."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(11)
STEPS, BATCH, IN, HIDDEN = 4, 3, 3, 5

# (tadiff class, torch class, extra constructor arguments, is LSTM)
KINDS = {
    "rnn_tanh": ("RNN", {"nonlinearity": "tanh"}),
    "rnn_relu": ("RNN", {"nonlinearity": "relu"}),
    "lstm": ("LSTM", {}),
    "gru": ("GRU", {}),
}


def _pair(kind, **kwargs):
    """A tadiff layer with random float64 weights and a torch layer holding the same values."""
    name, extra = KINDS[kind]
    ours = getattr(nn, name)(IN, HIDDEN, **extra, **kwargs).double()
    for p in ours.parameters():
        p.data[...] = RNG.uniform(-0.6, 0.6, p.shape)
    theirs = getattr(torch.nn, name)(IN, HIDDEN, **extra, **kwargs).double()
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    return ours, theirs


def _leaves(arrays):
    ours = [td.tensor(a.copy(), requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in arrays]
    return ours, theirs


def _flatten(result):
    """``(output, h_n)`` or ``(output, (h_n, c_n))`` as a flat list."""
    output, state = result
    return [output, *state] if isinstance(state, tuple) else [output, state]


def _check_against_torch(ours, theirs, x, states, is_lstm):
    """Forward values and the gradients of a random linear function of every result."""
    (ox, *ostates), (tx, *tstates) = _leaves([x, *states])
    ohx = tuple(ostates) if is_lstm else (ostates[0] if ostates else None)
    thx = tuple(tstates) if is_lstm else (tstates[0] if tstates else None)
    if not states:
        ohx = thx = None
    got, expected = _flatten(ours(ox, ohx)), _flatten(theirs(tx, thx))
    assert len(got) == len(expected)
    total_ours, total_theirs = 0, 0
    for g, e in zip(got, expected, strict=True):
        assert g.shape == tuple(e.shape)
        np.testing.assert_allclose(g.data, e.detach().numpy(), rtol=1e-11, atol=1e-13)
        upstream = RNG.standard_normal(g.shape)
        total_ours = total_ours + (g * td.tensor(upstream)).sum()
        total_theirs = total_theirs + (e * torch.from_numpy(upstream)).sum()
    total_ours.backward()
    total_theirs.backward()
    for i, (o, t) in enumerate(zip([ox, *ostates], [tx, *tstates], strict=True)):
        np.testing.assert_allclose(o.grad.data, t.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"input/state {i}")  # fmt: skip
    theirs_params = dict(theirs.named_parameters())
    names = [name for name, _ in ours.named_parameters()]
    assert names == list(theirs_params)  # same names in torch's registration order
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, theirs_params[name].grad.numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=name)  # fmt: skip


def _states(kind, layers, bidirectional, batch):
    shape = (layers * (2 if bidirectional else 1),) + ((batch,) if batch else ()) + (HIDDEN,)
    count = 2 if kind == "lstm" else 1
    return [RNG.standard_normal(shape) * 0.5 for _ in range(count)]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(
    "layers,bidirectional,batch_first,bias,with_state",
    list(itertools.product([1, 2], [False, True], [False, True], [True, False], [False, True])),
)
def test_batched_layers_match_torch(kind, layers, bidirectional, batch_first, bias, with_state):
    ours, theirs = _pair(kind, num_layers=layers, bidirectional=bidirectional,
                         batch_first=batch_first, bias=bias)  # fmt: skip
    x = RNG.standard_normal((BATCH, STEPS, IN) if batch_first else (STEPS, BATCH, IN))
    states = _states(kind, layers, bidirectional, BATCH) if with_state else []
    _check_against_torch(ours, theirs, x, states, kind == "lstm")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize(
    "layers,bidirectional,bias,with_state",
    list(itertools.product([1, 2], [False, True], [True, False], [False, True])),
)
def test_unbatched_layers_match_torch(kind, layers, bidirectional, bias, with_state):
    # batch_first does not apply to an unbatched (time, features) input, in torch either
    ours, theirs = _pair(kind, num_layers=layers, bidirectional=bidirectional, bias=bias,
                         batch_first=True)  # fmt: skip
    states = _states(kind, layers, bidirectional, None) if with_state else []
    _check_against_torch(ours, theirs, RNG.standard_normal((STEPS, IN)), states, kind == "lstm")


@settings(max_examples=20, deadline=None)
@given(
    kind=st.sampled_from(list(KINDS)),
    steps=st.integers(1, 6),
    batch=st.integers(1, 4),
    input_size=st.integers(1, 4),
    hidden=st.integers(1, 4),
    bidirectional=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_sizes_match_torch(kind, steps, batch, input_size, hidden, bidirectional, seed):
    rng = np.random.default_rng(seed)
    name, extra = KINDS[kind]
    kwargs = dict(num_layers=2, bidirectional=bidirectional, **extra)
    ours = getattr(nn, name)(input_size, hidden, **kwargs).double()
    for p in ours.parameters():
        p.data[...] = rng.uniform(-1, 1, p.shape)
    theirs = getattr(torch.nn, name)(input_size, hidden, **kwargs).double()
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    x = rng.standard_normal((steps, batch, input_size))
    h_shape = (2 * (2 if bidirectional else 1), batch, hidden)
    states = [rng.standard_normal(h_shape) for _ in range(2 if kind == "lstm" else 1)]
    _check_against_torch(ours, theirs, x, states, kind == "lstm")


@pytest.mark.parametrize(
    "layers,bidirectional,batch_first,with_state,batched",
    [(1, False, False, False, True), (2, True, True, True, True), (2, False, False, True, True),
     (1, True, True, False, True), (2, True, False, True, False)],
)  # fmt: skip
def test_lstm_with_projection_matches_torch(layers, bidirectional, batch_first, with_state,
                                            batched):  # fmt: skip
    proj = 3
    ours, theirs = _pair("lstm", num_layers=layers, bidirectional=bidirectional,
                         batch_first=batch_first, proj_size=proj)  # fmt: skip
    assert ours.weight_hr_l0.shape == (proj, HIDDEN)
    assert ours.weight_hh_l0.shape == (4 * HIDDEN, proj)
    lead = (layers * (2 if bidirectional else 1),) + ((BATCH,) if batched else ())
    states = [RNG.standard_normal((*lead, proj)), RNG.standard_normal((*lead, HIDDEN))]
    if not batched:
        x = RNG.standard_normal((STEPS, IN))
    else:
        x = RNG.standard_normal((BATCH, STEPS, IN) if batch_first else (STEPS, BATCH, IN))
    _check_against_torch(ours, theirs, x, states if with_state else [], True)


@pytest.mark.parametrize("kind", list(KINDS))
def test_dropout_between_layers(kind):
    # p = 1 zeroes every dropped element in both libraries, so training mode is deterministic:
    # the second layer sees only zeros, while the last layer's output is not dropped
    ours, theirs = _pair(kind, num_layers=2, dropout=1.0)
    ours.train()
    theirs.train()
    _check_against_torch(ours, theirs, RNG.standard_normal((STEPS, BATCH, IN)), [], kind == "lstm")
    # in eval mode dropout is off and the layers agree with torch as usual
    ours.eval()
    theirs.eval()
    _check_against_torch(ours, theirs, RNG.standard_normal((STEPS, BATCH, IN)), [], kind == "lstm")


def test_dropout_with_half_probability_changes_training_output_only():
    lstm = nn.LSTM(IN, HIDDEN, num_layers=2, dropout=0.5).double()
    x = td.tensor(RNG.standard_normal((STEPS, BATCH, IN)))
    lstm.eval()
    reference = lstm(x)[0].data
    np.testing.assert_array_equal(lstm(x)[0].data, reference)
    lstm.train()
    td.manual_seed(0)
    assert not np.allclose(lstm(x)[0].data, reference)


CELLS = {
    "rnn_tanh": ("RNNCell", {"nonlinearity": "tanh"}),
    "rnn_relu": ("RNNCell", {"nonlinearity": "relu"}),
    "lstm": ("LSTMCell", {}),
    "gru": ("GRUCell", {}),
}


@pytest.mark.parametrize("kind", list(CELLS))
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_match_torch(kind, bias, with_state, batched):
    name, extra = CELLS[kind]
    ours = getattr(nn, name)(IN, HIDDEN, bias=bias, **extra).double()
    for p in ours.parameters():
        p.data[...] = RNG.uniform(-0.6, 0.6, p.shape)
    theirs = getattr(torch.nn, name)(IN, HIDDEN, bias=bias, **extra).double()
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    lead = (BATCH,) if batched else ()
    count = 2 if kind == "lstm" else 1
    arrays = [RNG.standard_normal((*lead, IN))]
    if with_state:
        arrays += [RNG.standard_normal((*lead, HIDDEN)) for _ in range(count)]
    (ox, *os), (tx, *ts) = _leaves(arrays)
    if kind == "lstm":
        got = ours(ox, tuple(os) if os else None)
        expected = theirs(tx, tuple(ts) if ts else None)
    else:
        got, expected = [ours(ox, *os)], [theirs(tx, *ts)]
    total_ours, total_theirs = 0, 0
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.data, e.detach().numpy(), rtol=1e-12, atol=1e-14)
        upstream = RNG.standard_normal(g.shape)
        total_ours = total_ours + (g * td.tensor(upstream)).sum()
        total_theirs = total_theirs + (e * torch.from_numpy(upstream)).sum()
    total_ours.backward()
    total_theirs.backward()
    for o, t in zip([ox, *os], [tx, *ts], strict=True):
        np.testing.assert_allclose(o.grad.data, t.grad.numpy(), rtol=1e-10, atol=1e-13)
    theirs_params = dict(theirs.named_parameters())
    for pname, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.data, theirs_params[pname].grad.numpy(), rtol=1e-10,
                                   atol=1e-13, err_msg=pname)  # fmt: skip


def test_lstm_gradcheck_covers_input_states_and_every_parameter():
    lstm = nn.LSTM(2, 3, num_layers=2, bidirectional=True).double()
    x = td.tensor(RNG.standard_normal((3, 2, 2)), requires_grad=True)
    h0 = td.tensor(RNG.standard_normal((4, 2, 3)) * 0.5, requires_grad=True)
    c0 = td.tensor(RNG.standard_normal((4, 2, 3)) * 0.5, requires_grad=True)
    params = tuple(lstm.parameters())

    def run(x, h0, c0, *_params):  # the parameters are perturbed in place by gradcheck
        output, (h_n, c_n) = lstm(x, (h0, c0))
        return output, h_n, c_n

    assert td.autograd.gradcheck(run, (x, h0, c0, *params))


def test_gru_and_relu_rnn_gradcheck():
    for layer in (nn.GRU(2, 3, batch_first=True).double(),
                  nn.RNN(2, 3, nonlinearity="relu", num_layers=2).double()):  # fmt: skip
        x = td.tensor(RNG.standard_normal((2, 3, 2)), requires_grad=True)
        params = tuple(layer.parameters())
        assert td.autograd.gradcheck(lambda x, *_p, layer=layer: layer(x), (x, *params))


@pytest.mark.parametrize("name,gates", [("RNN", 1), ("LSTM", 4), ("GRU", 3)])
def test_parameter_shapes_and_initial_distribution(name, gates):
    hidden = 64
    layer = getattr(nn, name)(10, hidden, num_layers=2, bidirectional=True)
    theirs = getattr(torch.nn, name)(10, hidden, num_layers=2, bidirectional=True)
    ours_shapes = {k: v.shape for k, v in layer.state_dict().items()}
    assert ours_shapes == {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert ours_shapes["weight_ih_l1_reverse"] == (gates * hidden, 2 * hidden)
    bound = 1 / np.sqrt(hidden)
    values = np.concatenate([p.data.ravel() for p in layer.parameters()])
    assert values.dtype == np.float32
    assert np.abs(values).max() <= bound
    # U(-b, b) has standard deviation b / sqrt(3); tens of thousands of draws pin it to ~1%
    assert abs(values.std() - bound / np.sqrt(3)) < 0.02 * bound
    assert abs(values.mean()) < 0.02 * bound


def test_loads_a_torch_state_dict():
    theirs = torch.nn.LSTM(IN, HIDDEN, num_layers=2, bidirectional=True)
    ours = nn.LSTM(IN, HIDDEN, num_layers=2, bidirectional=True)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((STEPS, BATCH, IN)).astype(np.float32)
    (out, (h, c)), (tout, (th, tc)) = ours(td.tensor(x)), theirs(torch.from_numpy(x))
    for g, e in ((out, tout), (h, th), (c, tc)):
        np.testing.assert_allclose(g.data, e.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_errors_name_the_argument():
    lstm = nn.LSTM(IN, HIDDEN, num_layers=2).double()
    x = td.tensor(RNG.standard_normal((STEPS, BATCH, IN)))
    with pytest.raises(ShapeError, match="input_size=3"):
        lstm(td.tensor(RNG.standard_normal((STEPS, BATCH, 4))))
    with pytest.raises(ShapeError, match="expected 3 dims"):
        lstm(td.tensor(RNG.standard_normal((1, STEPS, BATCH, IN))))
    with pytest.raises(ShapeError, match="no time steps"):
        lstm(td.tensor(np.zeros((0, BATCH, IN))))
    h = td.zeros(2, BATCH, HIDDEN, dtype=np.float64)
    with pytest.raises(ShapeError, match=r"h_0 of shape \(1, 3, 5\); expected \(2, 3, 5\)"):
        lstm(x, (td.zeros(1, BATCH, HIDDEN, dtype=np.float64), h))
    with pytest.raises(ShapeError, match=r"c_0 of shape \(2, 3, 4\)"):
        lstm(x, (h, td.zeros(2, BATCH, 4, dtype=np.float64)))
    with pytest.raises(InputError, match="pair"):
        lstm(x, h)
    with pytest.raises(DTypeError, match="h_0 dtype float32"):
        lstm(x, (td.zeros(2, BATCH, HIDDEN), h))
    with pytest.raises(DTypeError, match="input dtype float32 differs"):
        lstm(td.tensor(RNG.standard_normal((STEPS, BATCH, IN)).astype(np.float32)))
    with pytest.raises(ShapeError, match=r"h_0 of shape \(2, 3, 5\); expected \(2, 5\)"):
        nn.GRU(IN, HIDDEN, num_layers=2).double()(x[:, 0], h)
    with pytest.raises(InputError, match="proj_size=5; expected less than hidden_size=5"):
        nn.LSTM(IN, HIDDEN, proj_size=5)
    with pytest.raises(ShapeError, match=r"h_0 of shape \(2, 3, 5\); expected \(2, 3, 2\)"):
        nn.LSTM(IN, HIDDEN, num_layers=2, proj_size=2).double()(x, (h, h))
    with pytest.raises(InputError, match="nonlinearity='sigmoid'"):
        nn.RNN(IN, HIDDEN, nonlinearity="sigmoid")
    with pytest.raises(InputError, match="hidden_size=0"):
        nn.GRU(IN, 0)
    with pytest.raises(InputError, match=r"num_layers=1\.5"):
        nn.RNN(IN, HIDDEN, num_layers=1.5)
    with pytest.raises(InputError, match=r"dropout=1\.5"):
        nn.LSTM(IN, HIDDEN, dropout=1.5)


def test_cell_errors_name_the_argument():
    cell = nn.LSTMCell(IN, HIDDEN).double()
    x = td.tensor(RNG.standard_normal((BATCH, IN)))
    with pytest.raises(ShapeError, match="input_size=3"):
        cell(td.tensor(RNG.standard_normal((BATCH, 2))))
    with pytest.raises(ShapeError, match=r"cx of shape \(3, 4\); expected \(3, 5\)"):
        cell(x, (td.zeros(BATCH, HIDDEN, dtype=np.float64), td.zeros(BATCH, 4, dtype=np.float64)))
    with pytest.raises(InputError, match="pair"):
        cell(x, td.zeros(BATCH, HIDDEN, dtype=np.float64))
    with pytest.raises(ShapeError, match=r"hx of shape \(5,\); expected \(3, 5\)"):
        nn.GRUCell(IN, HIDDEN).double()(x, td.zeros(HIDDEN, dtype=np.float64))
    with pytest.raises(DTypeError, match="input dtype float64 differs"):
        nn.RNNCell(IN, HIDDEN)(x)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_second_derivatives_through_the_fused_cells(kind):
    td.manual_seed(0)
    layer = getattr(td.nn, kind)(2, 3).double()
    rng = np.random.default_rng(3)
    x = td.tensor(rng.standard_normal((4, 1, 2)), requires_grad=True)
    h0 = td.tensor(rng.standard_normal((1, 1, 3)), requires_grad=True)
    c0 = td.tensor(rng.standard_normal((1, 1, 3)), requires_grad=True)
    state = (h0, c0) if kind == "LSTM" else h0
    inputs = [x, h0, c0] if kind == "LSTM" else [x, h0]

    def run(a, *states):
        return layer(a, tuple(states) if kind == "LSTM" else states[0])

    assert td.autograd.gradgradcheck(lambda *args: run(*args)[0], inputs)
    # the graph-building backward gives the plain backward's first derivatives
    out = layer(x, state)[0].sum()
    plain = td.autograd.grad(out, inputs, retain_graph=True)
    built = td.autograd.grad(out, inputs, create_graph=True)
    for a, b in zip(plain, built, strict=True):
        np.testing.assert_allclose(a.data, b.data, rtol=1e-12, atol=1e-14)
