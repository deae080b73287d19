"""ModuleDict, ParameterList, ParameterDict, Flatten, Unflatten and ``td.nn.utils``: registration
(parameters, state_dict keys as torch names them), behaviour against torch, and errors."""

import numpy as np
import pytest

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import Parameter
from tadiff.nn.utils import (
    clip_grad_norm_,
    clip_grad_value_,
    parameters_to_vector,
    vector_to_parameters,
)

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(3)


class _Heads(nn.Module):
    def __init__(self, container):
        super().__init__()
        self.heads = container


def test_module_dict_registers_like_torch():
    ours = _Heads(nn.ModuleDict({"b": nn.Linear(2, 3), "a": nn.Linear(2, 1)}))
    theirs = torch.nn.ModuleDict({"b": torch.nn.Linear(2, 3), "a": torch.nn.Linear(2, 1)})
    assert list(ours.state_dict()) == ["heads." + k for k in theirs.state_dict()]
    md = ours.heads
    assert list(md.keys()) == ["b", "a"] and len(md) == 2 and "a" in md
    md["c"] = nn.ReLU()
    md.update([("d", nn.Tanh())])
    assert list(md) == ["b", "a", "c", "d"]
    assert isinstance(md.pop("c"), nn.ReLU) and "c" not in md
    del md["d"]
    assert [k for k, _ in md.items()] == ["b", "a"]
    assert md["a"](td.ones(4, 2)).shape == (4, 1)
    with pytest.raises(InputError, match=r"no module named 'z'; keys: \['b', 'a'\]"):
        md["z"]
    with pytest.raises(DTypeError, match=r"ModuleDict\['x'\]: expected a Module, got int"):
        md["x"] = 3
    with pytest.raises(DTypeError, match="item 0 is 'ab'; expected a"):
        nn.ModuleDict(["ab"])
    md.clear()
    assert len(md) == 0 and list(ours.parameters()) == []


def test_parameter_list_and_dict_register_like_torch():
    arrays = [RNG.standard_normal((2, 3)), RNG.standard_normal(4)]
    ours = _Heads(nn.ParameterList([Parameter(a) for a in arrays]))
    theirs = torch.nn.ParameterList([torch.nn.Parameter(torch.tensor(a)) for a in arrays])
    assert list(ours.state_dict()) == ["heads." + k for k in theirs.state_dict()]
    plist = ours.heads
    plist.append(Parameter(np.zeros(1)))
    plist.extend([Parameter(np.ones(2))])
    assert len(plist) == 4 and plist[-1].shape == (2,)
    plist[0] = Parameter(np.full((2, 3), 7.0))
    assert float(ours.state_dict()["heads.0"].sum()) == 42.0
    assert len(list(ours.parameters())) == 4
    with pytest.raises(InputError, match="index 4 is out of range for 4 parameters"):
        plist[4]
    with pytest.raises(DTypeError, match=r"ParameterList\.append: expected a Parameter, got"):
        plist.append(td.ones(2))

    pdict = nn.ParameterDict({"scale": Parameter(np.ones(3))})
    pdict["shift"] = Parameter(np.zeros(3))
    pdict["scale"] = Parameter(np.full(3, 2.0))  # replace
    assert list(pdict.state_dict()) == ["scale", "shift"] and "shift" in pdict
    assert float(pdict["scale"].sum()) == 6.0
    assert pdict.pop("shift").shape == (3,) and list(pdict.keys()) == ["scale"]
    with pytest.raises(InputError, match="no parameter named 'bias'"):
        pdict["bias"]
    with pytest.raises(DTypeError, match=r"ParameterDict\['w'\]: expected a Parameter"):
        pdict["w"] = np.ones(2)


@pytest.mark.parametrize(("start", "end"), [(1, -1), (0, -1), (1, 2), (-2, -1), (2, 2)])
def test_flatten_matches_torch(start, end):
    x = RNG.standard_normal((2, 3, 4, 5))
    ours = nn.Flatten(start, end)(td.tensor(x))
    theirs = torch.nn.Flatten(start, end)(torch.tensor(x))
    np.testing.assert_array_equal(ours.data, theirs.numpy())


@pytest.mark.parametrize(("dim", "sizes"), [(1, (3, 4)), (-1, (2, -1)), (0, (2, 1)), (1, (-1,))])
def test_unflatten_matches_torch_and_backpropagates(dim, sizes):
    x = RNG.standard_normal((2, 12))
    ox = td.tensor(x, requires_grad=True)
    ours = nn.Unflatten(dim, sizes)(ox)
    theirs = torch.nn.Unflatten(dim, sizes)(torch.tensor(x))
    np.testing.assert_array_equal(ours.data, theirs.numpy())
    (ours * td.tensor(theirs.numpy())).sum().backward()
    np.testing.assert_array_equal(ox.grad.data, x)


def test_flatten_unflatten_errors():
    with pytest.raises(ShapeError, match=r"start_dim=2, end_dim=1 do not fit an input of shape"):
        nn.Flatten(2, 1)(td.ones(2, 3, 4))
    with pytest.raises(ShapeError, match=r"unflattened_size=\(5, 2\) does not fit size 12"):
        nn.Unflatten(1, (5, 2))(td.ones(2, 12))
    with pytest.raises(ShapeError, match=r"unflattened_size=\(-1, -1\) does not fit"):
        nn.Unflatten(1, (-1, -1))(td.ones(2, 12))
    with pytest.raises(InputError, match="expected a non-empty sequence of ints"):
        nn.Unflatten(1, ())


def test_parameters_to_vector_and_back_match_torch():
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    theirs.double().load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    vec = parameters_to_vector(ours.parameters())
    expected = torch.nn.utils.parameters_to_vector(theirs.parameters())
    np.testing.assert_array_equal(vec.data, expected.detach().numpy())
    # differentiable: d(sum(vec * c))/d(param) is c's slice
    c = RNG.standard_normal(vec.shape)
    (vec * td.tensor(c)).sum().backward()
    np.testing.assert_array_equal(ours[0].weight.grad.data, c[:12].reshape(4, 3))

    new = RNG.standard_normal(vec.shape)
    weight = ours[0].weight
    vector_to_parameters(td.tensor(new), ours.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs.parameters())
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        np.testing.assert_array_equal(p.data, q.detach().numpy(), err_msg=name)
    assert ours[0].weight is weight  # updated in place: optimizers keep tracking it


def test_vector_to_parameters_errors():
    params = list(nn.Linear(2, 2).parameters())
    with pytest.raises(ShapeError, match=r"vec of shape \(5,\); expected \(6,\)"):
        vector_to_parameters(td.ones(5), params)
    with pytest.raises(DTypeError, match="vec is a ndarray; expected a Tensor"):
        vector_to_parameters(np.ones(6), params)
    with pytest.raises(DTypeError, match="parameter 0 is a ndarray; expected a Tensor"):
        parameters_to_vector([np.ones(2)])


def test_clipping_is_the_optimizer_modules_function():
    from tadiff.optim import clip

    assert clip_grad_norm_ is clip.clip_grad_norm_ and clip_grad_value_ is clip.clip_grad_value_
    assert td.nn.utils.clip_grad_norm_ is clip.clip_grad_norm_
