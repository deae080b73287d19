"""In-place ops on views (PyTorch's CopySlices): gradients against torch as the oracle."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff.errors import AutogradError
from tadiff.ops._views import view_positions

torch = pytest.importorskip("torch")


def _both(fn, *arrays):
    """Run ``fn(lib, *tensors)`` in tadiff and torch on float64 copies of ``arrays`` (all
    requiring grad); return ((value, grads) for tadiff, (value, grads) for torch)."""
    out = []
    for lib, make in ((td, td.tensor), (torch, torch.tensor)):
        inputs = [make(np.array(a), requires_grad=True) for a in arrays]
        loss = fn(lib, *inputs)
        loss.backward()
        grads = [np.asarray(t.grad.detach() if lib is torch else t.grad.data) for t in inputs]
        value = float(loss.detach()) if lib is torch else float(loss.data)
        out.append((value, grads))
    return out


def _assert_same(fn, *arrays):
    (v1, g1), (v2, g2) = _both(fn, *arrays)
    np.testing.assert_allclose(v1, v2, rtol=1e-12)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _weights(lib, shape):
    data = np.cos(np.arange(int(np.prod(shape)), dtype=np.float64)).reshape(shape)
    return lib.tensor(data)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
W = RNG.standard_normal(3)


def _column_add(lib, x, w):
    y = x * 2
    y[:, 0] += w
    return (y * _weights(lib, (3, 4))).sum()


def _row_mul_through_method(lib, x, w):
    y = x * 1
    y[1:].mul_(w[:2, None])
    return (y * y).sum()


def _transposed_view(lib, x, w):
    y = x.sin()  # saves x, not its result
    y.T[1:, :].add_(w)  # a (3, 3) block of y's transpose
    return (y * _weights(lib, (3, 4))).sum()


def _view_of_a_view(lib, x, w):
    y = x * 3
    v = y[1]  # (4,)
    v[::2].mul_(w[:2])
    return (y**2).sum() + (v * _weights(lib, (4,))).sum()


def _sibling_views_follow(lib, x, w):
    y = x * 1
    a = y[0]
    b = y[0, 1:3]  # overlaps a; made before the in-place op, used after
    a.mul_(w[0])
    return (b * _weights(lib, (2,))).sum() + (y * y).sum()


def _base_modified_while_views_live(lib, x, w):
    y = x + 0
    v = y[:, 1:]
    y.mul_(w[:, None])
    return (v * _weights(lib, (3, 3))).sum()


def _zero_and_fill_views(lib, x, w):
    y = x * w[0]
    y[0].zero_()
    y[:, -1].fill_(2.0)
    y[2, 2] = w[1] * w[2]
    return (y * _weights(lib, (3, 4))).sum()


def _reshape_view(lib, x, w):
    y = x * 1
    flat = y.reshape(12)
    flat[3:6].mul_(w)
    return (y * _weights(lib, (3, 4))).sum()


def _scalar_view_augmented(lib, x, w):
    y = x * x
    y[1, 2] += w[0]
    y[2, 0] *= w[1]
    return (y * _weights(lib, (3, 4))).sum()


PROGRAMS = [
    _column_add,
    _row_mul_through_method,
    _transposed_view,
    _view_of_a_view,
    _sibling_views_follow,
    _base_modified_while_views_live,
    _zero_and_fill_views,
    _reshape_view,
    _scalar_view_augmented,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda f: f.__name__)
def test_inplace_on_views_matches_torch(program):
    _assert_same(program, X, W)


def test_modifying_a_saved_result_through_a_view_raises_like_torch():
    def program(lib, x, w):
        y = x.exp()  # saves its result
        y[0].mul_(w[0])
        return y.sum()

    for lib, err in ((td, AutogradError), (torch, RuntimeError)):
        x, w = lib.tensor(X, requires_grad=True), lib.tensor(W, requires_grad=True)
        with pytest.raises(err, match="modified by an inplace operation"):
            program(lib, x, w).backward()


def test_base_without_grad_becomes_part_of_the_graph():
    def build(lib, w):
        out = lib.zeros(3, 4, dtype=lib.float64)
        out[:, 1] += w  # the view and the base did not require grad before
        out[0] *= 2
        return (out * _weights(lib, (3, 4))).sum()

    _assert_same(build, W)
    out = td.zeros(2, 3)
    col = out[:, 0]
    col.add_(td.ones(2, requires_grad=True))
    assert out.requires_grad and out.grad_fn.name() == "CopySlices"
    assert col.grad_fn.name() == "AsStridedBackward0"


def test_second_derivatives_through_copy_slices():
    def grads(lib, x, w):
        y = x * x
        y[0] *= w
        loss = (y**2).sum()
        (gx,) = lib.autograd.grad(loss, [x], create_graph=True)
        return (gx * gx).sum()

    _assert_same(grads, X, W[[0, 1, 2, 0]])


def test_strided_view_of_a_permuted_view_against_central_differences():
    def f(x):
        y = x * 1
        y.permute(1, 0)[::2, 1:].mul_(x[1, :2, None])
        return y

    x = td.tensor(X.copy(), requires_grad=True)
    assert td.autograd.gradcheck(f, (x,))


def test_errors_name_the_forbidden_cases():
    leaf = td.tensor(X.copy(), requires_grad=True)
    with pytest.raises(AutogradError, match=r"view of a leaf Variable .* \(mul_\)"):
        leaf[0].mul_(2)
    y = leaf * 1
    with td.no_grad():
        v = y[0]
    with pytest.raises(AutogradError, match="created in no_grad mode"):
        v.add_(1)
    with td.no_grad():  # allowed where nothing is recorded
        v.add_(1)
        leaf[0].mul_(2)


def test_views_made_under_no_grad_are_not_reattached():
    x = td.tensor(X.copy(), requires_grad=True)
    y = x * 1
    with td.no_grad():
        quiet = y[0]
    y[1].mul_(2)
    assert quiet.grad_fn is None and not quiet.requires_grad


def test_a_base_remembers_few_dead_views():
    w = td.tensor(X.copy(), requires_grad=True)
    for _ in range(1000):
        w.T  # noqa: B018 (made and dropped, as in a training loop)
    assert len(w._meta.views) < 128


def test_copies_are_not_views():
    y = td.arange(4.0) * 1
    pieces = y.unbind(0)
    pieces[1].add_(10)  # a 0-d view: writes through
    assert y.data[1] == 11.0
    z = y[2]
    z += 1
    assert y.data[2] == 3.0


@st.composite
def _view_chain(draw, shape):
    """Steps ("slice", axis, start, step) / ("int", axis, i) / ("t", a, b) valid in torch too."""
    steps = []
    shape = list(shape)
    for _ in range(draw(st.integers(0, 3))):
        if not shape:
            break
        kind = draw(st.sampled_from(["slice", "int", "t"]))
        axis = draw(st.integers(0, len(shape) - 1))
        if kind == "slice":
            start, step = draw(st.integers(0, shape[axis] - 1)), draw(st.integers(1, 3))
            steps.append(("slice", axis, start, step))
            shape[axis] = len(range(start, shape[axis], step))
        elif kind == "int":
            steps.append(("int", axis, draw(st.integers(0, shape[axis] - 1))))
            del shape[axis]
        elif len(shape) >= 2:
            other = draw(st.integers(0, len(shape) - 1))
            steps.append(("t", axis, other))
            shape[axis], shape[other] = shape[other], shape[axis]
    return steps, tuple(shape)


def _apply_chain(t, steps):
    for step in steps:
        if step[0] == "t":
            t = t.transpose(step[1], step[2])
            continue
        key = [slice(None)] * t.ndim
        key[step[1]] = slice(step[2], None, step[3]) if step[0] == "slice" else step[2]
        t = t[tuple(key)]
    return t


@st.composite
def _inplace_program(draw):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    target, target_shape = draw(_view_chain(shape))
    sibling, _ = draw(_view_chain(shape))
    op = draw(st.sampled_from(["add_", "mul_", "setitem", "zero_", "base_mul_"]))
    return shape, target, target_shape, sibling, op


@settings(max_examples=60, deadline=None)
@given(_inplace_program())
def test_random_view_chains_and_inplace_ops_match_torch(program):
    shape, target, target_shape, sibling, op = program
    rng = np.random.default_rng(len(target) * 7 + len(sibling))
    x0 = rng.standard_normal(shape)
    w0 = rng.standard_normal(target_shape)

    def run(lib, x, w):
        y = x * 1.5
        s = _apply_chain(y, sibling)  # made before the op, used after
        v = _apply_chain(y, target)
        if op == "add_":
            v.add_(w)
        elif op == "mul_":
            v.mul_(w)
        elif op == "setitem":
            v[...] = w * 2
        elif op == "zero_":
            v.zero_()
        else:
            y.mul_(w.sum())  # the base itself, while both views live
        weights = [_weights(lib, t.shape) for t in (y, s, v)]
        return sum((t * c).sum() for t, c in zip((y, s, v), weights, strict=True)) + 0 * w.sum()

    _assert_same(run, x0, w0)


# -- view_positions -------------------------------------------------------------------------


@st.composite
def _strided_pair(draw):
    """A base array with unique values and any layout, and a random chain of views of it."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    if draw(st.booleans()):
        base = np.asfortranarray(base)
    if draw(st.booleans()):  # a strided or flipped base
        axis = draw(st.integers(0, base.ndim - 1))
        key = [slice(None)] * base.ndim
        key[axis] = slice(None, None, draw(st.sampled_from([-1, 2, -2])))
        base = base[tuple(key)]
    view = base
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["slice", "int", "transpose", "flat"]))
        if view.ndim == 0:
            break
        axis = draw(st.integers(0, view.ndim - 1))
        n = view.shape[axis]
        key = [slice(None)] * view.ndim
        if kind == "slice":
            start = draw(st.integers(0, n - 1))
            key[axis] = slice(start, None, draw(st.sampled_from([1, 2, -1, 3])))
            view = view[tuple(key)]
        elif kind == "int":
            key[axis] = draw(st.integers(0, n - 1))
            view = view[(*key, Ellipsis)]
        elif kind == "transpose":
            view = view.T
        else:
            flat = view.reshape(-1)
            if np.shares_memory(flat, base):
                view = flat
    return base, view


@settings(max_examples=200, deadline=None)
@given(_strided_pair())
def test_view_positions_find_every_element(pair):
    base, view = pair
    pos = view_positions(base, view)
    assert pos.shape == view.shape and pos.dtype == np.int64
    np.testing.assert_array_equal(base.reshape(-1)[pos], view)


def test_view_positions_refuse_foreign_memory():
    base = np.zeros((3, 4))
    with pytest.raises(AutogradError, match="not elements of its base"):
        view_positions(base[:, :2], base[:, 2:])


@pytest.mark.parametrize("view", [slice(6, 8), slice(0, 2), slice(7, 1, -2)])
def test_view_positions_refuse_memory_beside_a_row_major_base(view):
    """A row-major base's positions are the view's offsets: each one must still be inside."""
    memory = np.zeros(10)
    base = memory[2:6]
    assert base.flags.c_contiguous
    with pytest.raises(AutogradError, match="not elements of its base"):
        view_positions(base, memory[view])


def test_a_loop_of_row_writes_matches_torch():
    def run(lib, x, w):
        h = x * 1
        for t in range(1, h.shape[0]):
            h[t] = lib.tanh(h[t - 1].clone() @ w) + h[t]
        h[0, :2] = w[0, :2] * 3  # a write of a value that requires grad
        return (h * _weights(lib, (5, 3))).sum()

    _assert_same(run, RNG.standard_normal((5, 3)), RNG.standard_normal((3, 3)) * 0.5)


def test_writing_into_read_only_memory_is_refused():
    b = td.broadcast_to(td.tensor([1.0, 2.0]), (3, 2))
    with pytest.raises(AutogradError, match="__setitem__: cannot write into this tensor's memory"):
        b[0] = 5.0


# A write through ``base[key] = value`` leaves the graph of a view apart from the written
# memory as it is (its values did not change) and rewrites the graph of a view that may overlap
# it: both must give torch's gradients. (view of the base, key written, value's shape)
_VIEW_THEN_WRITE = {
    "disjoint rows": (lambda y: y[0], (2,), (4,)),
    "same row": (lambda y: y[2], (2,), (4,)),
    "overlapping slices": (lambda y: y[0:2], (slice(1, 3),), (2, 4)),
    "column view, row write": (lambda y: y[:, 1], (0,), (4,)),
    "one element of the view": (lambda y: y[1, 1:3], (1, 2), ()),
    "element next to the view": (lambda y: y[1, 1:3], (1, 3), ()),
    "interleaved rows": (lambda y: y[::2], (slice(1, None, 2),), (1, 4)),
    "strided write into a column": (lambda y: y[:, 0], (slice(None), 0), (3,)),
}


@pytest.mark.parametrize("case", sorted(_VIEW_THEN_WRITE))
def test_views_before_a_write_into_their_base(case):
    take, key, shape = _VIEW_THEN_WRITE[case]

    def program(lib, x, w):
        y = x * 1.5
        view = take(y)
        y[key] = (w[: int(np.prod(shape))] * 3).reshape(shape)
        # the view is used after the write: its gradient must follow its current values
        return (view * view).sum() + (y * _weights(lib, y.shape)).sum()

    _assert_same(program, X, np.arange(1.0, 9.0))


def test_a_view_apart_from_a_write_keeps_its_values_and_graph():
    y = td.tensor(X, requires_grad=True) * 1.0
    row, column = y[0], y[:, 1]
    y[2] = td.ones(4, requires_grad=True) * 2
    assert row.grad_fn.name() == "SelectBackward0"  # not rewritten: row 2 lies apart from it
    assert column.grad_fn.name() == "AsStridedBackward0"  # it holds y[2, 1]
    np.testing.assert_array_equal(row.data, X[0])
    np.testing.assert_array_equal(column.data, [X[0, 1], X[1, 1], 2.0])
