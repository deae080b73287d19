"""The ops beyond the primitive table: edge cases against torch, integer-valued functions,
random factories and the errors they raise. (Differentiable cases are in ``op_cases.py``.)"""

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff.autograd import gradcheck, gradgradcheck
from tadiff.errors import AutogradError, DTypeError, InputError, ShapeError

torch = pytest.importorskip("torch")


def _grads(lib, fn, *arrays):
    make = td.tensor if lib is td else torch.tensor
    xs = [make(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]
    out = fn(lib, *xs)
    w = np.cos(np.arange(int(np.prod(out.shape)))).reshape(tuple(out.shape))
    (out * make(w)).sum().backward()
    value = out.detach().numpy() if lib is torch else out.data
    return value, [np.asarray(x.grad.numpy() if lib is torch else x.grad.data) for x in xs]


def _same_as_torch(fn, *arrays):
    (v1, g1), (v2, g2) = _grads(td, fn, *arrays), _grads(torch, fn, *arrays)
    np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "x",
    [
        [[2.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 1.0], [1.5, -2.0, 0.5, 0.0]],
        [[0.0, 1.0, 2.0], [3.0, 0.0, 0.0], [1.0, 2.0, 3.0]],
    ],
)
def test_cumprod_gradient_with_zeros_matches_torch(x):
    _same_as_torch(lambda m, t: m.cumprod(t, 1), x)
    _same_as_torch(lambda m, t: m.cumprod(t, 0), x)
    t = td.tensor(np.array(x), requires_grad=True)
    assert gradgradcheck(lambda a: td.cumprod(a, 1), [t])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-2, 2), min_size=1, max_size=7),
    st.booleans(),
)
def test_sort_is_stable_with_ties(values, descending):
    # at ties the oracle is Python's sorted, stable by definition (torch's stable=True promises
    # the same order: equal elements keep their input order, also when descending)
    x = np.array(values, dtype=np.float64)
    ours = td.sort(td.tensor(x), descending=descending, stable=True)
    order = sorted(range(len(values)), key=lambda i: -values[i] if descending else values[i])
    np.testing.assert_array_equal(ours.indices.data, order)
    np.testing.assert_array_equal(ours.values.data, x[order])


def test_sort_places_nan_like_torch():
    # torch's rule: NaN is the largest value; stable, so the two NaNs keep their order
    x = np.array([1.0, np.nan, -1.0, np.nan, 3.0])
    for descending, order in ((False, [2, 0, 4, 1, 3]), (True, [1, 3, 4, 0, 2])):
        ours = td.sort(td.tensor(x), descending=descending, stable=True)
        theirs = torch.sort(torch.tensor(x), descending=descending, stable=True)
        np.testing.assert_array_equal(ours.indices.data, order)
        np.testing.assert_array_equal(theirs.indices.numpy(), order)  # the rule is torch's


def test_nan_to_num_passes_gradient_only_where_finite():
    x = [1.0, np.nan, np.inf, -np.inf, -2.0]
    _same_as_torch(lambda m, t: m.nan_to_num(t, nan=0.5, posinf=9.0, neginf=-9.0), x)
    out = td.nan_to_num(td.tensor(np.array(x, dtype=np.float32)))
    assert out.data[2] == np.finfo(np.float32).max


def test_diagonal_is_a_writable_view():
    a = td.tensor(np.zeros((3, 3)))
    a.diagonal().add_(1.0)
    np.testing.assert_array_equal(a.data, np.eye(3))
    a.T.diagonal(1).add_(2.0)  # a view also of a transposed (non-contiguous) matrix
    t = torch.eye(3, dtype=torch.float64)
    t.T.diagonal(1).add_(2.0)
    np.testing.assert_array_equal(a.data, t.numpy())
    _same_as_torch(lambda m, x: _diag_mul(m, x), np.arange(24.0).reshape(2, 3, 4) / 7)
    w = td.tensor(np.ones(3), requires_grad=True)
    b = td.zeros(3, 3, dtype=td.float64)
    b.diagonal(1).add_(w[:2] * 2)  # through the in-place-on-view path
    b.sum().backward()
    np.testing.assert_array_equal(w.grad.data, [2.0, 2.0, 0.0])


def _diag_mul(m, x):
    y = x * 1
    y.diagonal(-1, 0, 2).mul_(3.0)  # in place on a strided diagonal of a 3-D tensor
    return y


def test_predicates_and_counting_match_torch():
    x = np.array([[0.0, 1.5, np.nan], [np.inf, -np.inf, -2.0]])
    for name in ("isnan", "isinf", "isfinite", "isposinf", "isneginf"):
        np.testing.assert_array_equal(
            getattr(td, name)(td.tensor(x)).data, getattr(torch, name)(torch.tensor(x)).numpy()
        )
    y = np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]])
    a, b = y > 0, y < 2
    for name in ("logical_and", "logical_or", "logical_xor"):
        np.testing.assert_array_equal(
            getattr(td, name)(td.tensor(a), td.tensor(b)).data,
            getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy(),
        )
    for dim in (None, 0, 1):
        kw = {} if dim is None else {"dim": dim}
        np.testing.assert_array_equal(
            td.all(td.tensor(y), **kw).data, torch.all(torch.tensor(y), **kw).numpy()
        )
        np.testing.assert_array_equal(
            td.any(td.tensor(y), **kw).data, torch.any(torch.tensor(y), **kw).numpy()
        )
        np.testing.assert_array_equal(
            td.count_nonzero(td.tensor(y), **kw).data,
            torch.count_nonzero(torch.tensor(y), **kw).numpy(),
        )
    np.testing.assert_array_equal(
        td.nonzero(td.tensor(y)).data, torch.nonzero(torch.tensor(y)).numpy()
    )
    for ours, theirs in zip(
        td.nonzero(td.tensor(y), as_tuple=True),
        torch.nonzero(torch.tensor(y), as_tuple=True),
        strict=True,
    ):
        np.testing.assert_array_equal(ours.data, theirs.numpy())
    assert tuple(td.nonzero(td.tensor(3.0)).shape) == tuple(torch.nonzero(torch.tensor(3.0)).shape)
    close = np.array([1.0, 1.0 + 1e-9, np.nan])
    np.testing.assert_array_equal(
        td.isclose(td.tensor(close), td.tensor(np.ones(3)), equal_nan=True).data,
        torch.isclose(
            torch.tensor(close), torch.ones(3, dtype=torch.float64), equal_nan=True
        ).numpy(),
    )
    assert td.allclose(td.tensor([1.0, 2.0]), td.tensor([1.0, 2.0 + 1e-9])) is True
    assert td.equal(td.tensor([1.0, 2.0]), td.tensor([1.0, 2.0])) is True
    assert td.equal(td.tensor([1.0, 2.0]), td.tensor([[1.0, 2.0]])) is False


def test_integer_valued_functions_match_torch():
    x = np.array([3, 1, 2, 3, 3, 0, 1])
    values, inverse, counts = td.unique(td.tensor(x), return_inverse=True, return_counts=True)
    tv, ti, tc = torch.unique(torch.tensor(x), return_inverse=True, return_counts=True)
    for a, b in ((values, tv), (inverse, ti), (counts, tc)):
        np.testing.assert_array_equal(a.data, b.numpy())
    np.testing.assert_array_equal(
        td.bincount(td.tensor(x), minlength=6).data,
        torch.bincount(torch.tensor(x), minlength=6).numpy(),
    )
    w = np.linspace(0.5, 2.0, 7)
    np.testing.assert_allclose(
        td.bincount(td.tensor(x), td.tensor(w)).data,
        torch.bincount(torch.tensor(x), torch.tensor(w)).numpy(),
    )
    seq = np.array([[1.0, 3.0, 5.0, 7.0], [2.0, 4.0, 6.0, 8.0]])
    q = np.array([[3.0, 6.0, 9.0], [1.0, 4.0, 8.0]])
    for right in (False, True):
        np.testing.assert_array_equal(
            td.searchsorted(td.tensor(seq), td.tensor(q), right=right).data,
            torch.searchsorted(torch.tensor(seq), torch.tensor(q), right=right).numpy(),
        )
        np.testing.assert_array_equal(
            td.bucketize(td.tensor(q), td.tensor(seq[0]), right=right).data,
            torch.bucketize(torch.tensor(q), torch.tensor(seq[0]), right=right).numpy(),
        )
    h = np.array([0.1, 0.5, 0.9, 1.0, 2.5, -1.0])
    np.testing.assert_array_equal(
        td.histc(td.tensor(h), bins=4, min=0, max=1).data,
        torch.histc(torch.tensor(h), bins=4, min=0, max=1).numpy(),
    )
    np.testing.assert_array_equal(
        td.argsort(td.tensor(h)).data, torch.argsort(torch.tensor(h), stable=True).numpy()
    )


def test_median_is_the_lower_median_like_torch():
    x = np.array([[4.0, 1.0, 3.0, 2.0], [0.5, 0.25, 1.0, 2.0]])
    m = td.median(td.tensor(x), dim=1)
    tm = torch.median(torch.tensor(x), dim=1)
    np.testing.assert_array_equal(m.values.data, tm.values.numpy())
    np.testing.assert_array_equal(m.indices.data, tm.indices.numpy())
    assert float(td.median(td.tensor(x)).data) == float(torch.median(torch.tensor(x)))


def test_floor_divide_and_remainder_operators_match_torch():
    a, b = np.array([-3.5, 2.0, 7.25]), np.array([2.0, -0.75, 3.0])
    np.testing.assert_array_equal(
        (td.tensor(a) // td.tensor(b)).data, (torch.tensor(a) // torch.tensor(b)).numpy()
    )
    np.testing.assert_allclose((td.tensor(a) % 2).data, (torch.tensor(a) % 2).numpy())
    np.testing.assert_allclose((5.0 % td.tensor(b)).data, (5.0 % torch.tensor(b)).numpy())


def test_new_tensors_and_conversions():
    x = td.randn(2, 3, dtype=td.float64)
    assert x.new_zeros(4).dtype == np.float64 and x.new_ones((2, 2)).data.sum() == 4
    assert x.new_full((2,), 7.0).data.tolist() == [7.0, 7.0]
    assert x.new_tensor([1, 2]).dtype == np.float64
    assert x.long().dtype == np.int64 and x.bool().dtype == np.bool_ and x.int().dtype == np.int32
    assert td.long is td.int64 and td.double is td.float64


def test_masked_fill_in_place_records_the_graph():
    x = td.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
    y = x * 2
    y.masked_fill_(y < 0, 0.0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 0.0, 2.0])


def test_random_factories_are_seeded_and_in_range():
    td.manual_seed(3)
    a = (td.randint(0, 10, (50,)), td.randperm(6), td.normal(1.0, 2.0, (4,)))
    td.manual_seed(3)
    b = (td.randint(0, 10, (50,)), td.randperm(6), td.normal(1.0, 2.0, (4,)))
    for s, t in zip(a, b, strict=True):
        np.testing.assert_array_equal(s.data, t.data)
    assert a[0].dtype == np.int64 and a[0].data.min() >= 0 and a[0].data.max() < 10
    assert sorted(a[1].data.tolist()) == list(range(6))
    assert td.randint(5, (2, 3)).shape == (2, 3)
    p = td.tensor([0.0, 1.0, 0.5])
    s = td.bernoulli(p)
    assert s.data[0] == 0 and s.data[1] == 1 and s.dtype == np.float32
    draws = td.multinomial(td.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]]), 2)
    assert draws.shape == (2, 2) and draws.dtype == np.int64
    assert set(draws.data[0].tolist()) == {1, 2} and set(draws.data[1].tolist()) == {0, 1}
    again = td.multinomial(td.tensor([0.0, 0.0, 3.0]), 4, replacement=True)
    assert again.data.tolist() == [2, 2, 2, 2]
    m = td.normal(td.zeros(20000, dtype=td.float64), 2.0)
    assert m.dtype == np.float64 and abs(float(m.data.std()) - 2.0) < 0.1


def test_gradcheck_of_composites_with_repeated_indices():
    x = td.tensor(np.random.default_rng(1).standard_normal((3, 2)), requires_grad=True)
    assert gradcheck(lambda a: td.repeat_interleave(a, td.tensor([2, 0, 1]), dim=0) ** 2, [x])
    assert gradcheck(lambda a: td.index_select(a, 0, [2, 2, 0]) ** 2, [x])


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: td.mm(td.ones(2), td.ones(2, 2)),
            ShapeError,
            r"mm: self must be a 2-D tensor, got shape \(2,\)",
        ),
        (lambda: td.bmm(td.ones(2, 1, 3), td.ones(3, 3, 1)), ShapeError, "batch sizes differ"),
        (lambda: td.dot(td.ones(2), td.ones(3)), ShapeError, "differ in size: 2 and 3"),
        (lambda: td.masked_fill(td.ones(2), td.tensor([1, 0]), 0.0), DTypeError, "boolean masks"),
        (lambda: td.masked_fill(td.ones(2), td.ones(3) > 0, 0.0), ShapeError, "must broadcast"),
        (lambda: td.narrow(td.ones(4), 0, 3, 2), InputError, "exceeds dimension size"),
        (lambda: td.ones(2, 3).repeat(2), ShapeError, "can not be smaller"),
        (lambda: td.topk(td.ones(3), 4), InputError, r"k \(4\) must be an int in \[0, 3\]"),
        (lambda: td.kthvalue(td.ones(3), 0), InputError, r"k \(0\) must be an int in \[1, 3\]"),
        (lambda: td.diagonal(td.ones(2, 2), 0, 1, 1), InputError, "cannot be the same dim"),
        (lambda: td.diagonal(td.ones(3)), ShapeError, "at least 2 dims"),
        (lambda: td.cross(td.ones(2, 2), td.ones(2, 2)), ShapeError, "must have size 3"),
        (
            lambda: td.tensordot(td.ones(2, 3), td.ones(2, 3), 1),
            ShapeError,
            "contracted dims differ",
        ),
        (lambda: td.index_select(td.ones(3), 0, [0.5]), DTypeError, "integer tensor"),
        (
            lambda: td.repeat_interleave(td.ones(3), td.tensor([1, 2])),
            ShapeError,
            "3 non-negative ints",
        ),
        (lambda: td.roll(td.ones(3), (1, 2)), InputError, "shifts must be one int"),
        (lambda: td.t(td.ones(2, 2, 2)), ShapeError, "<= 2 dimensions"),
        (lambda: td.randint(3, 3, (2,)), InputError, "expected low < high"),
        (lambda: td.multinomial(td.tensor([1.0, 0.0]), 2), InputError, "without replacement"),
        (lambda: td.bincount(td.tensor([1.0])), DTypeError, "1-D integer tensor"),
        (
            lambda: td.searchsorted(td.ones(2), td.ones(2), side="middle"),
            InputError,
            "'left' or 'right'",
        ),
        (
            lambda: td.addmm(td.ones(3), td.ones(2, 2), td.ones(2, 2)),
            ShapeError,
            "does not broadcast",
        ),
    ],
)
def test_errors_name_what_is_wrong(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_nan_reductions_skip_nans_like_torch():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 2.0]])
    _same_as_torch(lambda m, t: m.nansum(t, 1) + m.nanmean(t, 1), x)


def test_random_fills_and_tensor_properties():
    td.manual_seed(4)
    t = td.zeros(20000, dtype=td.float64)
    t.uniform_(-2.0, 3.0)
    assert t.data.min() >= -2 and t.data.max() < 3 and abs(t.data.mean() - 0.5) < 0.05
    t.normal_(1.0, 2.0)
    assert abs(t.data.mean() - 1.0) < 0.05 and abs(t.data.std() - 2.0) < 0.05
    t.bernoulli_(0.25)
    assert set(np.unique(t.data)) == {0.0, 1.0} and abs(t.data.mean() - 0.25) < 0.02
    leaf = td.zeros(3, requires_grad=True)
    with pytest.raises(AutogradError, match="leaf Variable that requires grad"):
        leaf.normal_()
    with td.no_grad():
        leaf.normal_()
    x = td.zeros(3, 4)
    assert x.stride() == (4, 1) and x.T.stride() == (1, 4) and x.stride(0) == 4
    assert x.is_contiguous() and not x.T.is_contiguous() and x.element_size() == 4
    assert x.nelement() == 12 and x.ndimension() == 2 and x.is_floating_point()
    assert x.view_as(td.zeros(12)).shape == (12,) and x.H.shape == (4, 3)


def test_indexed_write_errors():
    with pytest.raises(InputError, match="exactly one of src and value"):
        td.scatter(td.zeros(2, 2), 0, td.tensor([[0, 1]]))
    with pytest.raises(ShapeError, match=r"source must have shape \(2, 2\)"):
        td.index_add(td.zeros(3, 2), 0, td.tensor([0, 1]), td.ones(3, 2))
    with pytest.raises(DTypeError, match="mask must be boolean"):
        td.masked_select(td.zeros(2), td.tensor([1, 0]))


def test_zero_dim_integer_tensor_index_selects_a_view_like_torch():
    torch = pytest.importorskip("torch")
    for m in (td, torch):
        base = m.zeros(3, 2)
        row = base[m.tensor(1)]
        row[0] = 5.0  # a view: the write reaches the base
        assert base[1, 0].item() == 5.0
        x = m.zeros(3, 2, requires_grad=True)
        assert type(x[m.tensor(-1)].grad_fn).__name__ == "SelectBackward0"
    with pytest.raises(IndexError):
        td.zeros(3)[td.tensor(3)]


def test_index_add_refuses_indices_out_of_range_like_torch():
    torch = pytest.importorskip("torch")
    for m in (td, torch):
        for bad in ([-1], [3]):
            with pytest.raises(IndexError, match="index out of range"):
                m.zeros(3).index_add(0, m.tensor(bad), m.ones(1))


@pytest.mark.parametrize("mode", ["no grad needed", "under no_grad"])
def test_index_add_in_place_without_recording_matches_torch(mode):
    """Adds straight into the tensor's memory: a view's base sees it, the version counter moves
    (a graph that saved the tensor refuses to run), and bad indices are refused in place too."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    x0, src0 = rng.standard_normal((4, 3, 2)), rng.standard_normal((4, 5, 2))
    index = np.array([0, 2, 2, 1, 0])
    results = []
    for m in (td, torch):
        leaf = m.tensor(x0, requires_grad=mode == "under no_grad")
        base = leaf.detach().clone()
        view = base[1:]  # index_add_ on a view must reach its base
        saved = m.tensor(x0[1:], requires_grad=True)
        product = view * saved  # MulBackward0 saves view
        with m.no_grad() if mode == "under no_grad" else contextlib.nullcontext():
            out = view.index_add_(1, m.tensor(index), m.tensor(src0[1:]), alpha=0.5)
            if mode == "under no_grad":
                leaf.index_add_(0, m.tensor([3, 3]), m.tensor(src0[:2, :3]))
        assert out is view
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            product.sum().backward()
        with m.no_grad():
            leaf_view = leaf[0] if mode == "under no_grad" else None
        if leaf_view is not None:  # made under no_grad from a leaf requiring grad
            with pytest.raises(RuntimeError, match="no_grad mode"):
                leaf_view.index_add_(0, m.tensor([0]), m.ones(1, 2, dtype=m.float64))
        with pytest.raises(IndexError, match="index out of range"):
            view.index_add_(1, m.tensor([3]), m.ones(3, 1, 2, dtype=m.float64))
        results.append((base.numpy().copy(), leaf.detach().numpy().copy()))
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-15, atol=1e-15)


def test_recorded_index_add_in_place_matches_torch():
    """Recorded, into a tensor that is not a view: the sum goes into its memory and one node
    takes its history and the source (the cloth's force scatter). Against torch: the
    gradients of both, a view taken before the write that follows it, a node that saved the
    tensor refusing to run, and a leaf that requires grad refused."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x0, src0 = rng.standard_normal((5, 2)), rng.standard_normal((7, 2))
    index = np.array([0, 4, 4, 1, 0, 2, 4])
    upstream = rng.standard_normal((5, 2))
    grads = []
    for m in (td, torch):
        x = m.tensor(x0, requires_grad=True)
        src = m.tensor(src0, requires_grad=True)
        forces = x * 2.0  # a tensor with a history, not a leaf
        row = forces[1:3]  # a live view made before the write
        saved = forces * forces  # saves forces: must refuse after the write
        out = forces.index_add_(0, m.tensor(index), src, alpha=0.5)
        assert out is forces
        assert type(forces.grad_fn).__name__ == "IndexAddBackward0"
        ((forces * m.tensor(upstream)).sum() + (row * row).sum()).backward()
        grads.append((x.grad.numpy().copy(), src.grad.numpy().copy(), row.detach().numpy().copy()))
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            saved.sum().backward()
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            m.zeros(5, 2, dtype=m.float64, requires_grad=True).index_add_(0, m.tensor([0]), src[:1])
    for ours, theirs in zip(*grads, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("base_shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("exponent", ["number", "0-d tensor", "1-element tensor"])
# NumPy warns of sqrt(-inf); forward ops may warn at domain edges (docs/autograd.md)
@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")
def test_pow_one_half_at_minus_infinity_and_minus_zero_matches_torch(base_shape, exponent):
    """torch takes ``sqrt`` for the number 0.5 (NaN at -inf, -0 at -0) and C's ``pow`` for a
    tensor exponent (+inf, +0); NumPy would take ``sqrt`` for any 0-d exponent."""
    torch = pytest.importorskip("torch")
    values = np.resize([-np.inf, -0.0, 4.0], base_shape) if base_shape else np.array(-np.inf)
    results = []
    for m in (td, torch):
        base = m.tensor(values, dtype=m.float64)
        power = {
            "number": 0.5,
            "0-d tensor": m.tensor(0.5, dtype=m.float64),
            "1-element tensor": m.tensor([0.5], dtype=m.float64),
        }[exponent]
        results.append(np.asarray(m.pow(base, power).numpy()))
    ours, theirs = results
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)  # NaN where torch has NaN
    numbers = ~np.isnan(theirs)  # a NaN's sign bit carries no meaning (x86 sets it)
    np.testing.assert_array_equal(np.signbit(ours[numbers]), np.signbit(theirs[numbers]))
