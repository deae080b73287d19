"""``Tensor._base`` and ``Tensor._is_view()``: which tensors are views, and of what, as in torch."""

import copy
import pickle

import numpy as np
import pytest

import tadiff as td
from tadiff.autograd.tensor import Tensor

# name -> how to make the tensor from x (a (3, 4) leaf) and y = x * 2 (made by an op)
CASES = {
    "select": lambda lib, x, y: x[0],
    "view of a view": lambda lib, x, y: x[0][1:],
    "transpose": lambda lib, x, y: x.T,
    "reshape without a copy": lambda lib, x, y: x.reshape(12),
    "reshape that copies": lambda lib, x, y: x.T.reshape(-1),
    "view": lambda lib, x, y: x.view(-1),
    "iteration": lambda lib, x, y: list(x)[1],
    "unbind": lambda lib, x, y: x.unbind()[0],
    "split": lambda lib, x, y: x.split(2)[1],
    "expand": lambda lib, x, y: x.expand(2, 3, 4),
    "unsqueeze": lambda lib, x, y: x.unsqueeze(0),
    "diagonal": lambda lib, x, y: x.diagonal(),
    "row of an op's result": lambda lib, x, y: y[1],
    "advanced indexing": lambda lib, x, y: x[[0, 1]],
    "detach": lambda lib, x, y: x.detach(),
    "clone": lambda lib, x, y: x.clone(),
}


def _which_base(lib, make, requires_grad):
    x = lib.zeros(3, 4, requires_grad=requires_grad)
    y = x * 2
    t = make(lib, x, y)
    names = {id(x): "x", id(y): "y"}
    return t._is_view(), None if t._base is None else names.get(id(t._base), "another tensor")


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("name", list(CASES))
def test_base_and_is_view_match_torch(name, requires_grad):
    torch = pytest.importorskip("torch")
    want = _which_base(torch, CASES[name], requires_grad)
    assert _which_base(td, CASES[name], requires_grad) == want


def test_a_view_made_under_no_grad_knows_its_base_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (td, torch):
        with lib.no_grad():
            w = lib.zeros(3, requires_grad=True)
            view = w[1:]
        assert view._is_view() and view._base is w, lib.__name__


def test_copies_of_a_view_are_not_views():
    x = td.arange(6.0).reshape(2, 3)
    view = x[1]
    for copied in (copy.deepcopy(view), pickle.loads(pickle.dumps(view))):
        assert copied._base is None and not copied._is_view()
        np.testing.assert_array_equal(copied.data, [3.0, 4.0, 5.0])
        copied.add_(1.0)  # memory of its own: the base is not touched
    np.testing.assert_array_equal(x.data[1], [3.0, 4.0, 5.0])
    shallow = copy.copy(view)  # shares the memory, as torch's does, but is no view either
    assert shallow._base is None and np.shares_memory(shallow.data, x.data)


def test_a_record_pickled_without_some_slots_gets_their_defaults():
    # the state of a tensor pickled by a version of tadiff without ``_base``
    t = Tensor.__new__(Tensor)
    t.__setstate__((None, {"data": np.ones(2), "_rg": True, "grad_fn": None, "_grad": None}))
    assert t._base is None and t.requires_grad and t.is_leaf and t._version == 0
    (t * 3).sum().backward()
    np.testing.assert_array_equal(t.grad.data, [3.0, 3.0])
