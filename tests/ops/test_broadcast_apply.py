"""``tadiff._array.broadcast_apply``: binary ops on operands that broadcast across each other
give exactly the plain ufunc's result, and the faster order is taken where it pays."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff._array import (
    _broadcast_plan,
    _operand_to_expand,
    _tiles_per_run,
    broadcast_apply,
    broadcast_copy,
)

UFUNCS = [np.add, np.subtract, np.multiply, np.divide]


@st.composite
def _crossing_shapes(draw):
    """Two shapes of one rank, each with ones where the other is longer, big enough (in
    elements) for the fast path to be considered."""
    ndim = draw(st.integers(2, 4))
    full = draw(st.lists(st.integers(2, 12), min_size=ndim, max_size=ndim))
    xs, ys = [], []
    for n in full:
        side = draw(st.sampled_from(["both", "x", "y"]))
        xs.append(n if side in ("both", "x") else 1)
        ys.append(n if side in ("both", "y") else 1)
    scale = draw(st.integers(1, 40))  # stretch the first axis so the sizes pass the threshold
    xs[0] *= scale if xs[0] > 1 else 1
    ys[0] *= scale if ys[0] > 1 else 1
    drop = draw(st.integers(0, ndim - 1))  # leading ones may be left out of one shape
    if draw(st.booleans()) and all(n == 1 for n in ys[:drop]):
        ys = ys[drop:]
    return tuple(xs), tuple(ys)


def _values(rng, shape, dtype):
    """Normal values with zeros of both signs, infinities and NaN mixed in."""
    v = rng.standard_normal(shape).astype(dtype)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    mask = rng.random(shape) < 0.05
    v[mask] = rng.choice(specials, mask.sum())
    return v


def _assert_same_numbers(got, expected):
    """Equal values, NaN at the same places, zeros of the same sign. Exact equality holds:
    each element is one IEEE operation (correctly rounded) on the same two values, whichever
    loop runs it; NaN payloads are left out, as hardware may pick them differently."""
    np.testing.assert_array_equal(got, expected)
    numbers = ~np.isnan(expected)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(expected[numbers]))


@st.composite
def _block_shapes(draw):
    """A full shape and a short trailing block of it (leading ones, or fewer dims), in either
    order, with enough repeats of the block for tiling to be considered."""
    block = draw(st.lists(st.integers(1, 7), min_size=1, max_size=2))
    lead = draw(st.lists(st.integers(1, 60), min_size=1, max_size=3))
    lead[0] = max(lead[0], -(-2048 // max(1, int(np.prod(lead[1:])))))  # >= 2048 repeats
    full = tuple(lead + block)
    small = tuple(block) if draw(st.booleans()) else (1,) * len(lead) + tuple(block)
    return (full, small) if draw(st.booleans()) else (small, full)


@st.composite
def _column_shapes(draw):
    """An operand with a last axis of 1 and one that the result repeats 2 to 8 times along it:
    a small one (a colour ``(3,)``, a row ``(1, W, 3)``) or a full-size one, in either order,
    with enough rows for the column path to be considered; sometimes with a last axis of 9
    (NumPy's own loop) or a column without every row of the result."""
    lead = draw(st.lists(st.integers(1, 50), min_size=1, max_size=3))
    lead[0] = max(lead[0], -(-1100 // max(1, int(np.prod(lead[1:])))))  # >= 1024 rows
    columns = draw(st.integers(2, 9))
    column = (*lead, 1)
    kind = draw(st.sampled_from(["block", "row", "full", "fewer rows"]))
    if kind == "block":
        other = (columns,)
    elif kind == "row":
        other = (1, *lead[1:], columns)
    elif kind == "full":
        other = (*lead, columns)
    else:  # the other operand adds a leading axis: the column has not every row
        other = (2, *lead, columns)
    return (column, other) if draw(st.booleans()) else (other, column)


@settings(max_examples=250, deadline=None)
@given(
    st.one_of(_crossing_shapes(), _block_shapes(), _column_shapes()),
    st.sampled_from(UFUNCS),
    st.sampled_from([np.float64, np.float32]),
)
def test_broadcast_apply_is_the_ufunc_bit_for_bit(shapes, ufunc, dtype):
    """Crossed operands (written into the result first), a short block repeated along the
    leading axes (tiled) and a column repeated along a short last axis (by columns) give the
    plain ufunc's numbers."""
    rng = np.random.default_rng(abs(hash(shapes)) % 2**32)
    x, y = (_values(rng, s, dtype) for s in shapes)
    with np.errstate(all="ignore"):
        expected = ufunc(x, y)
        got = broadcast_apply(ufunc, x, y)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.flags.c_contiguous
    _assert_same_numbers(got, expected)


@pytest.mark.parametrize(
    ("xs", "ys", "expected"),
    [
        ((1000, 1, 8), (1, 20, 8), True),  # k-means: points against centroids
        ((1, 20, 8), (1000, 1, 8), False),
        ((1000, 1, 8), (20, 8), True),  # the mixture model: fewer dims on one side
        ((20, 8), (1000, 1, 8), False),
        ((256, 1, 1, 4), (1, 8, 8, 4), True),
        ((5000, 1), (1, 30), None),  # NumPy's loop already runs 30 long
        ((1000, 20, 8), (1, 20, 8), None),  # one-sided: the plain loop is long
        ((200, 1, 64), (1, 200, 64), None),  # a long common run
        ((3, 1, 8), (4, 20, 8), None),  # does not broadcast: left to NumPy's error
    ],
)
def test_the_faster_order_is_chosen_only_where_it_pays(xs, ys, expected):
    assert _operand_to_expand(xs, ys) is expected
    if expected is None:
        return
    rng = np.random.default_rng(1)
    x, y = _values(rng, xs, np.float64), _values(rng, ys, np.float64)
    for ufunc in UFUNCS:
        with np.errstate(all="ignore"):
            got, plain = broadcast_apply(ufunc, x, y), ufunc(x, y)
        _assert_same_numbers(got, plain)


@pytest.mark.parametrize(
    ("xs", "ys", "by_columns"),
    [
        ((48, 48, 1), (3,), True),  # a shading times a colour
        ((3,), (48, 48, 1), True),
        ((48, 48, 1), (48, 48, 3), True),  # a distance times directions: copied, then in place
        ((48, 48, 3), (48, 48, 1), True),
        ((48, 48, 1), (1, 48, 3), True),
        ((2048, 1), (2048, 8), True),
        ((48, 48, 1), (9,), False),  # NumPy's runs of 9 are long enough
        ((16, 16, 1), (3,), False),  # 256 rows: the checks would cost more than they save
        ((48, 1), (2, 48, 3), False),  # the column lacks a leading axis of the result
        ((48, 48, 1), (48, 48, 1), False),  # no repeated last axis
    ],
)
def test_a_column_is_applied_by_columns_only_where_it_pays(xs, ys, by_columns):
    kind = _broadcast_plan(xs, ys)[0]
    assert (kind in ("copied column", "by columns")) is by_columns
    rng = np.random.default_rng(2)
    x, y = _values(rng, xs, np.float64), _values(rng, ys, np.float64)
    for ufunc in UFUNCS:
        with np.errstate(all="ignore"):
            _assert_same_numbers(broadcast_apply(ufunc, x, y), ufunc(x, y))


@pytest.mark.parametrize(
    ("full", "block", "tiles"),
    [
        ((48, 48, 3), (3,), 24),  # points minus a point: 96 rows of 72
        ((48, 48, 3), (1, 1, 3), 24),
        ((2048, 2, 4), (2, 4), 8),  # a block of two axes
        ((1031, 3), (3,), 0),  # a prime number of repeats: no divisor fits
        ((48, 48, 3), (48, 1, 3), 0),  # broadcast inside the block too
        ((48, 48, 100), (100,), 0),  # NumPy's run is long already
    ],
)
def test_a_short_trailing_block_is_tiled_only_where_a_divisor_fits(full, block, tiles):
    assert _tiles_per_run(full, block) == tiles


@pytest.mark.parametrize(
    ("source", "shape"),
    [((48, 48, 1), (48, 48, 3)), ((48, 1), (48, 48, 3)), ((2048, 1), (2048, 8)),
     ((2048, 1), (2048, 9)), ((8, 1), (8, 3)), ((), (48, 48, 3)), ((1,), (2048, 3)),
     ((3,), (2048, 3))],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.bool_])
def test_a_broadcast_copy_is_numpys_broadcast(source, shape, dtype):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(source) * 3).astype(dtype)
    got = broadcast_copy(a, shape)
    assert got.flags.c_contiguous and got.flags.writeable and got.dtype == dtype
    np.testing.assert_array_equal(got, np.broadcast_to(a, shape))
    strided = np.repeat(a[..., None], 2, -1)[..., 0] if a.ndim else a  # not contiguous
    np.testing.assert_array_equal(broadcast_copy(strided, shape), np.broadcast_to(a, shape))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_sum_over_a_short_last_axis_has_torchs_gradient_through_a_product(dtype):
    """``(normal * light).sum(-1)``: the sum's gradient is copied back over the last axis of 3
    (not a broadcast view) and then multiplied; torch's values, to rounding."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    values = [rng.standard_normal(s) for s in ((48, 48, 3), (3,))]
    upstream = rng.standard_normal((48, 48))
    grads = []
    for m in (td, torch):
        x, w = (m.tensor(v, dtype=getattr(m, dtype), requires_grad=True) for v in values)
        ((x * w).sum(dim=-1) * m.tensor(upstream, dtype=getattr(m, dtype))).sum().backward()
        grads.append([np.asarray(t.grad.numpy(), np.float64) for t in (x, w)])
    # w's gradient sums 2 304 float32 terms of magnitude ~1: 1e-5 relative to their sum of
    # magnitudes bounds both libraries' rounding; x's is one product per element
    tol = 1e-12 if dtype == "float64" else 1e-5
    (gx, gw), (tx, tw) = grads
    np.testing.assert_allclose(gx, tx, rtol=tol, atol=tol)
    scale = np.abs(upstream[..., None] * values[0]).sum(axis=(0, 1))
    assert (np.abs(gw - tw) <= tol * scale).all()


def test_tensor_ops_keep_broadcasting_errors():
    with pytest.raises(RuntimeError, match="broadcast"):
        td.ones(3, 1, 8) - td.ones(4, 20, 8)
