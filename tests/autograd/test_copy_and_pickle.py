"""``copy.deepcopy`` and ``pickle`` of tensors behave as torch's: a copy is a leaf of its own
(its gradients accumulate into it, never into the original), views and graphs are not carried,
and deepcopy refuses a tensor made by a recorded op. Values here are small integers: exact."""

import copy
import pickle

import numpy as np
import pytest

import tadiff as td
from tadiff import nn

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("lib", [td, torch], ids=["tadiff", "torch"])
def test_a_deep_copy_of_a_used_leaf_accumulates_into_itself(lib):
    x = lib.ones(3, requires_grad=True)
    (x * 2).sum().backward()  # x now has its gradient accumulator
    c = copy.deepcopy(x)
    (c * 3).sum().backward()
    np.testing.assert_array_equal(c.grad.numpy(), [5.0, 5.0, 5.0])  # the copied .grad, plus 3
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])  # untouched


@pytest.mark.parametrize("lib", [td, torch], ids=["tadiff", "torch"])
def test_a_copied_model_trains_on_its_own(lib):
    lib.manual_seed(0)
    model = lib.nn.Linear(3, 2) if lib is torch else nn.Linear(3, 2)
    x = lib.ones(4, 3)
    model(x).sum().backward()
    before = [p.grad.numpy().copy() for p in model.parameters()]
    clone = copy.deepcopy(model)
    clone(x).sum().backward()
    for p, q, g in zip(model.parameters(), clone.parameters(), before, strict=True):
        np.testing.assert_array_equal(p.grad.numpy(), g)
        np.testing.assert_array_equal(q.grad.numpy(), g)  # a copied Parameter has no .grad


def test_pickle_of_a_tensor_with_views_and_of_a_non_leaf_matches_torch():
    results = []
    for lib in (td, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        view = x[1:]  # x now has a view; pickling it failed on its weak references before
        y = x * 2
        (x * 3).sum().backward()  # pickle and copy.copy keep no .grad; deepcopy does
        back = [pickle.loads(pickle.dumps(t)) for t in (x, y, view)] + [copy.copy(x)]
        results.append([(t.detach().numpy().tolist(), t.requires_grad, t.is_leaf, t.grad is None)
                        for t in back])  # fmt: skip
    assert results[0] == results[1]


def test_deepcopy_refuses_a_non_leaf_as_torch_does():
    for lib in (td, torch):
        y = lib.ones(2, requires_grad=True) * 2
        with pytest.raises(RuntimeError, match="graph leaves"):
            copy.deepcopy(y)


def test_a_deep_copy_of_a_view_owns_its_memory():
    base = td.zeros(4)
    view = base[1:3]
    c = copy.deepcopy(view)
    c.add_(1.0)
    base.add_(10.0)  # neither write reaches the other
    np.testing.assert_array_equal(c.numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(view.numpy(), [10.0, 10.0])
    assert c._version == 1 and view._version == 1
