"""Autograd behaviours PyTorch's own tests check, run as one program against tadiff and torch:
what torch refuses tadiff refuses (catchable as the same class), what torch allows gives the same
result, and nodes carry torch's names."""

from __future__ import annotations

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import TadiffError

torch = pytest.importorskip("torch")


def _f64(m, values, **kw):
    return m.tensor(values, dtype=m.float64, **kw)


def _view_modified_after_base_requires_grad(m):
    a = m.zeros(3, dtype=m.float64)
    v = a[:2]  # a view made while its base did not require grad yet
    a.requires_grad_()
    v.add_(1)


def _detach_a_view_in_place(m):
    (_f64(m, [1.0, 2.0, 3.0], requires_grad=True) * 1)[:2].detach_()


def _detach_a_view_of_a_plain_tensor_in_place(m):
    _f64(m, [1.0, 2.0, 3.0])[1:].detach_()


def _assign_grad_of_wrong_shape(m):
    _f64(m, [1.0, 2.0, 3.0], requires_grad=True).grad = m.zeros(2, dtype=m.float64)


def _assign_grad_of_wrong_dtype(m):
    _f64(m, [1.0, 2.0, 3.0], requires_grad=True).grad = m.zeros(3, dtype=m.float32)


def _assign_grad_that_is_no_tensor(m):
    _f64(m, [1.0, 2.0, 3.0], requires_grad=True).grad = np.zeros(3)


def _twice(build):
    """Backward twice through ``build(m, b)`` without retain_graph."""

    def program(m):
        b = _f64(m, [1.0, 2.0, 3.0], requires_grad=True)
        out = build(m, b).sum()
        out.backward()
        out.backward()

    return program


def _index_put(m, b):
    c = m.zeros(3, dtype=m.float64)
    c[[1, 2]] = b[[1, 1]]
    return c


REFUSED = {
    "in-place op on a view of a leaf that was set to require grad": _view_modified_after_base_requires_grad,  # noqa: E501
    "detach_() of a view": _detach_a_view_in_place,
    "detach_() of a view that needs no grad": _detach_a_view_of_a_plain_tensor_in_place,
    ".grad of the wrong shape": _assign_grad_of_wrong_shape,
    ".grad of the wrong dtype": _assign_grad_of_wrong_dtype,
    ".grad that is no tensor": _assign_grad_that_is_no_tensor,
    "second backward through c[[1, 2]] = b[[1, 1]]": _twice(_index_put),
    "second backward through advanced indexing": _twice(lambda m, b: b[[1, 1]]),
    "second backward through gather": _twice(lambda m, b: m.gather(b, 0, m.tensor([0, 0]))),
    "second backward through where": _twice(lambda m, b: m.where(b > 1, b, 0.0)),
    "second backward through max(dim)": _twice(lambda m, b: b.max(0).values),
    "second backward through masked_fill": _twice(lambda m, b: b.masked_fill(b > 1, 0.0)),
    "second backward through scatter_add": _twice(lambda m, b: m.zeros(3, dtype=m.float64).scatter_add(0, m.tensor([0, 0, 1]), b)),  # noqa: E501
    "second backward through sort": _twice(lambda m, b: m.sort(b).values),
    "second backward through nan_to_num": _twice(lambda m, b: m.nan_to_num(b)),
    "second backward through a product with a number": _twice(lambda m, b: b * 2),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_like_torch(name):
    with pytest.raises(Exception) as theirs:
        REFUSED[name](torch)
    caught = next(c for c in type(theirs.value).__mro__ if c.__module__ == "builtins")
    with pytest.raises(TadiffError) as ours:
        REFUSED[name](td)
    assert isinstance(ours.value, caught), (type(ours.value), caught)


ALLOWED = {  # still fine in both: the grad of a slice or a sum needs nothing that was freed
    "second backward through a slice": _twice(lambda m, b: b[1:]),
    "second backward through cat": _twice(lambda m, b: m.cat([b, b])),
    "second backward through an addition": _twice(lambda m, b: b + 1),
}


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_allowed_like_torch(name):
    ALLOWED[name](torch)
    ALLOWED[name](td)


def test_grad_assignment_that_fits_is_kept_and_none_clears_it():
    for m in (td, torch):
        t = _f64(m, [1.0, 2.0], requires_grad=True)
        t.grad = _f64(m, [3.0, 4.0])
        (t * 2).sum().backward()
        np.testing.assert_array_equal(np.asarray(t.grad.tolist()), [5.0, 6.0])  # accumulated
        t.grad = None
        assert t.grad is None


def _modified_under_no_grad(m):
    a = m.zeros(3, dtype=m.float64)
    v = a[:2]
    a.requires_grad_()
    with m.no_grad():  # an optimizer-style update: allowed
        v.add_(1)
    return a


def test_view_of_a_base_set_to_require_grad_may_change_under_no_grad():
    np.testing.assert_array_equal(
        _modified_under_no_grad(td).data, _modified_under_no_grad(torch).detach().numpy()
    )


def _decorated_generators(m):
    x = m.ones(2, requires_grad=True)

    @m.no_grad()
    def without():
        for _ in range(2):
            yield (x * 2).requires_grad, m.is_grad_enabled()

    @m.enable_grad()
    def within():
        value = yield (x * 2).requires_grad
        yield (x * value).requires_grad

    seen = []
    steps = without()
    seen.append(next(steps))
    seen.append(m.is_grad_enabled())  # the caller's mode between the steps
    seen.append(next(steps))
    with m.no_grad():
        inner = within()
        seen.append(next(inner))
        seen.append(inner.send(3.0))
        seen.append((x * 2).requires_grad)
    return seen


def test_grad_mode_decorators_apply_to_each_step_of_a_generator():
    assert _decorated_generators(td) == _decorated_generators(torch)
    assert _decorated_generators(td) == [(False, False), True, (False, False), True, True, False]


NAMES = {
    "sum()": lambda m, x: x.sum(),
    "sum(dim)": lambda m, x: x.sum(1),
    "sum over every dim by name": lambda m, x: x.sum((0, 1)),
    "mean()": lambda m, x: x.mean(),
    "mean(dim)": lambda m, x: x.mean(0),
    "prod()": lambda m, x: x.prod(),
    "prod(dim)": lambda m, x: x.prod(1),
    "max()": lambda m, x: x.max(),
    "min()": lambda m, x: x.min(),
    "max(dim)": lambda m, x: x.max(1).values,
    "amax()": lambda m, x: x.amax(),
    "t() of a matrix": lambda m, x: x.t(),
    "t() of a vector": lambda m, x: x[0].t(),
    ".T": lambda m, x: x.T,
    ".mT": lambda m, x: x.mT,
    "norm": lambda m, x: m.norm(x),
    "linalg.vector_norm": lambda m, x: m.linalg.vector_norm(x, dim=1),
    "Frobenius matrix_norm": lambda m, x: m.linalg.matrix_norm(x),
    "fmod by a number": lambda m, x: m.fmod(x, 2.0),
    "fmod by a tensor": lambda m, x: m.fmod(x, x + 3),
    "% by a number": lambda m, x: x % 2.0,
    "% by a tensor": lambda m, x: x % (x + 3),
    "clamp": lambda m, x: m.clamp(x, 0, 1),
    "clamp(min=)": lambda m, x: m.clamp(x, min=0),
    "clamp_min": lambda m, x: m.clamp_min(x, 0),
    "clamp_max": lambda m, x: m.clamp_max(x, 0),
    "cumprod of a 0-d tensor": lambda m, x: m.cumprod(x[0, 0], 0),
    "pow by a number": lambda m, x: x**2,
    "pow by a tensor": lambda m, x: x**x,
    "number ** tensor": lambda m, x: 2**x,
    "2 - x": lambda m, x: 2 - x,
    "x * 2": lambda m, x: x * 2,
    "var()": lambda m, x: x.var(),
    "std(dim)": lambda m, x: x.std(1),
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_node_names_are_torch_names(name):
    x = np.arange(1.0, 7.0).reshape(2, 3) / 7
    ours = NAMES[name](td, td.tensor(x, requires_grad=True))
    theirs = NAMES[name](torch, torch.tensor(x, requires_grad=True))
    assert ours.grad_fn.name() == theirs.grad_fn.name()


@pytest.mark.parametrize("create_graph", [False, True])
# torch warns that backward(create_graph=True) ties parameters and gradients in a cycle
@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True:UserWarning")
def test_a_leaf_that_stopped_requiring_grad_gets_no_gradient_like_torch(create_graph):
    # the graph was recorded while w required grad; torch's AccumulateGrad then does nothing
    # (create_graph takes the engine's general path through AccumulateGrad itself)
    torch = pytest.importorskip("torch")
    grads = []
    for lib in (td, torch):
        w = lib.ones(2, requires_grad=True)
        v = lib.ones(2, requires_grad=True)
        y = (w * 3 + v).sum()
        w.requires_grad_(False)
        y.backward(create_graph=create_graph)
        grads.append((w.grad, v.grad.detach().numpy().tolist()))
    assert grads[0][0] is None and grads[1][0] is None
    assert grads[0][1] == grads[1][1] == [1.0, 1.0]
