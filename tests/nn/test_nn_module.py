"""Module, Parameter, state_dict and .npz save/load."""

import numpy as np
import pytest

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 4)
        self.norm = nn.LayerNorm(4)
        self.scale = nn.Parameter(np.ones(4, dtype=np.float32))
        self.register_buffer("steps", td.tensor(np.zeros(1, dtype=np.float32)))
        self.register_buffer("scratch", td.tensor(np.zeros(2, dtype=np.float32)), persistent=False)

    def forward(self, x):
        return self.norm(self.proj(x)) * self.scale


def _model():
    return nn.Sequential(_Block(), nn.ReLU(), nn.Linear(4, 2))


def test_parameters_buffers_and_modules_are_registered_in_order():
    model = _model()
    assert [n for n, _ in model.named_parameters()] == [
        "0.scale",
        "0.proj.weight",
        "0.proj.bias",
        "0.norm.weight",
        "0.norm.bias",
        "2.weight",
        "2.bias",
    ]
    assert [n for n, _ in model.named_buffers()] == ["0.steps", "0.scratch"]
    assert [n for n, _ in model.named_modules()] == ["", "0", "0.proj", "0.norm", "1", "2"]
    assert [type(m).__name__ for m in model.children()] == ["_Block", "ReLU", "Linear"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in model.parameters())
    assert not isinstance(td.tensor([1.0]), nn.Parameter)
    assert isinstance(next(model.parameters()), td.Tensor)


def test_state_dict_keys_match_torch_for_the_same_tree():
    torch = pytest.importorskip("torch")
    ours = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4), nn.Embedding(5, 4), nn.Linear(4, 1))
    t = torch.nn
    theirs = t.Sequential(t.Linear(3, 4), t.LayerNorm(4), t.Embedding(5, 4), t.Linear(4, 1))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert {k: v.shape for k, v in ours.state_dict().items()} == {
        k: tuple(v.shape) for k, v in theirs.state_dict().items()
    }


def test_shared_parameters_appear_once():
    layer = nn.Linear(2, 2)
    model = nn.Sequential(layer, nn.Tanh(), layer)
    assert len(list(model.parameters())) == 2


def test_train_eval_reach_every_descendant():
    model = _model()
    model.eval()
    assert not any(m.training for m in model.modules())
    model.train()
    assert all(m.training for m in model.modules())


def test_zero_grad_and_requires_grad_():
    model = _model()
    model(td.randn(5, 3)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad(set_to_none=False)
    assert all(not p.grad.data.any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.requires_grad_(False)
    assert not any(p.requires_grad for p in model.parameters())


def test_state_dict_round_trip_restores_outputs():
    td.manual_seed(0)
    model = _model()
    x = td.randn(6, 3)
    before = model(x).data.copy()
    saved = model.state_dict()
    assert "0.scratch" not in saved and "0.steps" in saved
    other = _model()  # different random init
    assert not np.allclose(other(x).data, before)
    assert other.load_state_dict(saved) == nn.IncompatibleKeys([], [])
    np.testing.assert_array_equal(other(x).data, before)
    # state_dict holds copies: later training does not change it
    for p in model.parameters():
        p.data += 1.0
    np.testing.assert_array_equal(saved["2.bias"], other.state_dict()["2.bias"])


def test_load_state_dict_keeps_parameter_identity_for_optimizers():
    model = _model()
    params = list(model.parameters())
    model.load_state_dict(_model().state_dict())
    assert all(p is q for p, q in zip(params, model.parameters(), strict=True))


def test_load_state_dict_missing_and_unexpected_keys():
    model = _model()
    state = model.state_dict()
    del state["2.bias"]
    state["2.bais"] = np.zeros(2, dtype=np.float32)
    expected = r"missing keys \['2.bias'\]; unexpected keys \['2.bais'\]"
    with pytest.raises(InputError, match=expected):
        model.load_state_dict(state)
    before = model.state_dict()
    result = model.load_state_dict(state, strict=False)
    assert result.missing_keys == ["2.bias"] and result.unexpected_keys == ["2.bais"]
    np.testing.assert_array_equal(model.state_dict()["2.bias"], before["2.bias"])


def test_load_state_dict_shape_and_type_errors_change_nothing():
    model = _model()
    before = model.state_dict()
    state = {k: np.full_like(v, 7.0) for k, v in before.items()}
    state["0.proj.weight"] = np.zeros((3, 4), dtype=np.float32)
    with pytest.raises(ShapeError, match=r"'0.proj.weight' has shape \(3, 4\).*\(4, 3\)"):
        model.load_state_dict(state)
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[key])
    state["0.proj.weight"] = np.array([["x"] * 3] * 4)
    with pytest.raises(DTypeError, match=r"'0\.proj\.weight' has dtype <U1"):
        model.load_state_dict(state)
    with pytest.raises(DTypeError, match="expected a mapping"):
        model.load_state_dict([1, 2])


def test_load_torch_state_dict_gives_torch_outputs():
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    ours.load_state_dict(theirs.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)
    expected = theirs(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours(td.tensor(x)).data, expected, rtol=1e-6, atol=1e-6)


def test_npz_save_load_round_trip(tmp_path):
    model = _model()
    path = nn.save(model, tmp_path / "weights")  # no suffix: written exactly there
    assert path == tmp_path / "weights" and path.exists()
    loaded = nn.load(path)
    assert list(loaded) == list(model.state_dict())
    for key, value in model.state_dict().items():
        np.testing.assert_array_equal(loaded[key], value)
        assert loaded[key].dtype == value.dtype
    fresh = _model()
    fresh.load_state_dict(loaded)
    x = td.randn(2, 3)
    np.testing.assert_array_equal(fresh(x).data, model(x).data)


def test_registration_errors_are_clear():
    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.ones(2))

    with pytest.raises(InputError, match=r"call super\(\).__init__\(\)"):
        Early()
    layer = nn.Linear(2, 2)
    with pytest.raises(DTypeError, match="cannot assign ndarray to parameter 'weight' of Linear"):
        layer.weight = np.ones((2, 2))
    model = nn.Sequential(layer)
    with pytest.raises(DTypeError, match="cannot assign int to submodule '0' of Sequential"):
        setattr(model, "0", 3)
    with pytest.raises(InputError, match="is not a valid name"):
        layer.register_parameter("a.b", None)
    with pytest.raises(DTypeError, match="data must have a floating dtype"):
        nn.Parameter(np.arange(3))
    with pytest.raises(DTypeError, match="argument 1 is a int, expected a Module"):
        nn.Sequential(nn.ReLU(), 3)
    with pytest.raises(InputError, match="index 5 is out of range for 2 modules"):
        nn.Sequential(nn.ReLU(), nn.Tanh())[5]
    with pytest.raises(NotImplementedError, match="Module does not define forward"):
        nn.Module()(1)


def test_to_converts_dtype_in_place_and_repr_reads_like_torch():
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    weight = model[0].weight
    model.double()
    assert model[0].weight is weight and weight.dtype == np.float64
    assert repr(model) == (
        "Sequential(\n  (0): Linear(in_features=2, out_features=3, bias=True)\n  (1): ReLU()\n)"
    )
    with pytest.raises(DTypeError, match="expected a floating dtype"):
        model.to(np.int32)


def test_deepcopy_and_pickle_keep_parameters_registered():
    import copy
    import pickle

    model = _model()
    x = td.randn(2, 3)
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        params = list(clone.parameters())
        assert len(params) == 7 and all(isinstance(p, nn.Parameter) for p in params)
        assert not any(p is q for p, q in zip(params, model.parameters(), strict=True))
        np.testing.assert_array_equal(clone(x).data, model(x).data)
        clone[2].weight = params[-2]  # re-assigning a copied parameter still registers it
        assert clone[2].weight is params[-2]


def test_containers_index_slice_and_append():
    a, b, c = nn.Linear(2, 2), nn.Tanh(), nn.Identity()
    seq = nn.Sequential(a, b)
    seq.append(c)
    assert len(seq) == 3 and seq[-1] is c and list(seq) == [a, b, c]
    assert list(seq[1:]) == [b, c] and isinstance(seq[1:], nn.Sequential)
    blocks = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(blocks) == 3 and blocks[-1] is list(blocks)[2]
    assert [n for n, _ in blocks.named_parameters()][:2] == ["0.weight", "0.bias"]
    x = td.randn(4, 2)
    np.testing.assert_array_equal(c(x).data, x.data)
    with pytest.raises(DTypeError, match="expected a Module, got int"):
        blocks.append(3)
