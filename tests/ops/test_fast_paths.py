"""The engine's fast kernels agree with the NumPy functions they stand in for: BLAS sums over
leading and short trailing axes, einsum as one batched matrix product, small stacks, the cross
product by ``take``; the short paths of ``squeeze``, ``zeros_like``, view detection,
``sigmoid`` and the masked-write gradient; 0-d arithmetic in Python floats. Different
summation orders: compared at 1e-13 relative (float64; sums of at most a few hundred terms of
size 1) and 1e-5 (float32), NaN and inf placed exactly; the same IEEE operation: bit for bit."""

import warnings

import numpy as np
import pytest

import tadiff as td
from tadiff._array import out_of_range, stack_arrays
from tadiff._sums import fast_sum, sum_leading
from tadiff.ops._dual import (
    _mul_sum_to,
    _stack,
    _sum_to,
    cross_array,
    einsum_array,
)

SHAPES_AND_DIMS = [
    ((20, 8), (1,)),
    ((20, 8), (0,)),
    ((5, 4, 3), (1, 2)),
    ((5, 4, 3), (2,)),
    ((5, 4, 3), (1,)),  # a middle axis: NumPy's path
    ((5, 4, 3), None),
    ((6, 200), (1,)),  # a trailing block of 200: BLAS rows
    ((6, 300), (1,)),  # too long for BLAS: NumPy's path
    ((16, 8, 8, 8), (0, 2, 3)),  # outer axes: BLAS rows of 64, then the batch
    ((5, 4, 3), (0, 2)),
    ((4, 3, 17, 17), (0, 2, 3)),  # rows of 289: NumPy's path
    ((3, 1), (1,)),
    ((0, 4), (1,)),
]


@pytest.mark.parametrize(("shape", "dims"), SHAPES_AND_DIMS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("keepdims", [False, True])
def test_fast_sum_equals_numpy(shape, dims, dtype, keepdims):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    if a.size > 3:
        a.flat[1], a.flat[2] = np.inf, np.nan
    got, want = fast_sum(a, dims, keepdims), a.sum(axis=dims, keepdims=keepdims)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == want.dtype
    rtol = 1e-13 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


SUM_TO = [
    ((32, 16, 8, 8), (16, 1, 1)),  # a convolution's bias gradient: BLAS rows, then the batch
    ((32, 16, 8, 8), (1, 16, 1, 1)),
    ((4, 6, 10), (6, 1)),
    ((2, 3, 4, 5), (3, 4, 1)),  # two kept axes in the middle
    ((32, 8, 16, 16), (8, 1, 1)),  # rows of 256: BLAS rows, then the batch
    ((8, 4, 17, 17), (4, 1, 1)),  # rows of 289: NumPy's reduction
    ((5, 4, 3), (4, 3)),  # leading axes only
    ((5, 4, 3), (1, 4, 1)),
    ((5, 4, 3), (5, 1, 3)),  # a middle axis: NumPy's reduction
    ((48, 48, 3), (48, 48, 1)),  # a short last axis alone: BLAS rows
    ((64, 4, 3), (64, 1, 1)),  # a trailing block of two axes alone
    ((4, 3), (4, 1)),  # a few short rows: NumPy's reduction
    ((180, 2), (180, 1)),  # the cloth's springs: BLAS rows from 64 of them
    ((64, 2), (64, 1)),
    ((63, 2), (63, 1)),  # one row fewer: NumPy's reduction
]


@pytest.mark.parametrize(("shape", "to"), SUM_TO)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("contiguous", [True, False])
def test_gradient_sums_to_a_broadcast_input_equal_numpy(shape, to, dtype, contiguous):
    g = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    if not contiguous:  # a transposed gradient: never read as rows
        g = np.ascontiguousarray(np.swapaxes(g, 0, -1)).swapaxes(0, -1)
    got = _sum_to(g, to)
    axes = tuple(range(len(shape) - len(to))) + tuple(
        i + len(shape) - len(to)
        for i, n in enumerate(to)
        if n == 1 and shape[i + len(shape) - len(to)] != 1
    )
    want = g.astype(np.float64).sum(axis=axes, keepdims=True).reshape(to)
    assert got.shape == to and got.dtype == dtype
    # sums of at most 2048 standard normals: float32 rounding of the partial sums stays well
    # within 1e-5 of the sum of magnitudes, float64's within 1e-13
    scale = np.abs(g.astype(np.float64)).sum(axis=axes, keepdims=True).reshape(to)
    bound = (1e-13 if dtype == np.float64 else 1e-5) * scale
    assert (np.abs(got - want) <= bound).all()


MUL_SUM_TO = [
    ((48, 48, 3), (3,), (48, 48, 1)),  # a colour's factor: rows times the colour (BLAS)
    ((48, 48, 3), (48, 48, 1), (3,)),  # the colour: the shading times the rows (BLAS)
    ((6, 48, 48, 3), (6, 48, 48, 1), (1, 3)),  # a leading block of three axes
    ((32, 100), (100,), (32, 1)),
    ((48, 48, 3), (48, 48, 3), (48, 48, 1)),  # both full: the product, then BLAS rows
    ((48, 48, 3), (48, 1, 3), (1, 48, 1)),  # a middle axis kept: the product and NumPy
    ((40, 200), (200,), (40, 1)),  # rows of 200: rows times the vector (BLAS)
    ((40, 300), (300,), (40, 1)),  # rows too long for BLAS: the product and NumPy
    ((4, 3), (3,), (4, 1)),  # small: the product and NumPy
    ((180, 2), (180, 2), (180, 1)),  # small, but 180 rows: the product, then BLAS rows
    ((2048,), (2048,), ()),  # every element: the product and NumPy's pairwise sum
    ((48, 48, 3), (), (48, 48, 1)),  # a 0-d factor
]


@pytest.mark.parametrize(("shape", "other", "to"), MUL_SUM_TO)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("contiguous", [True, False])
def test_a_broadcast_factors_gradient_equals_the_sum_of_the_product(shape, other, to, dtype,
                                                                    contiguous):  # fmt: skip
    rng = np.random.default_rng(2)
    g = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(other).astype(dtype)
    if not contiguous and g.ndim > 1:  # a transposed gradient: never read as rows
        g = np.ascontiguousarray(np.swapaxes(g, 0, -1)).swapaxes(0, -1)
    got = _mul_sum_to(g, b, to)
    product = g.astype(np.float64) * b.astype(np.float64)
    lead = len(shape) - len(to)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(to) if n == 1)
    want = product.sum(axis=axes, keepdims=True).reshape(to)
    assert got.shape == to and got.dtype == dtype
    # at most 13 824 terms: float32 rounding of the partial sums stays well within 1e-5 of the
    # sum of magnitudes (a sequential sum's bound is n·2^-24 ≈ 8e-4 of it; the typical error
    # grows as its square root), float64's within 1e-13
    scale = np.abs(product).sum(axis=axes, keepdims=True).reshape(to)
    bound = (1e-13 if dtype == np.float64 else 1e-5) * scale
    assert (np.abs(got - want) <= bound).all()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize(("sa", "sb"), [((48, 48, 1), (3,)), ((48, 48, 3), (3,)),
                                        ((48, 48, 1), (48, 48, 3)), ((64,), (32, 64))])  # fmt: skip
def test_broadcast_product_gradients_match_torch_also_when_recorded(dtype, sa, sb):
    """A product's gradients, first order and (``create_graph``) second order, against torch's
    on the shapes the contraction takes."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    values = [rng.standard_normal(s) for s in (sa, sb)]
    weights = rng.standard_normal(np.broadcast_shapes(sa, sb))
    results = []
    for m in (td, torch):
        a, b = (m.tensor(v, dtype=getattr(m, dtype), requires_grad=True) for v in values)
        w = m.tensor(weights, dtype=getattr(m, dtype))
        loss = (a * b * w).sum()
        ga, gb = m.autograd.grad(loss, (a, b), create_graph=True)
        (gga,) = m.autograd.grad((ga * ga).sum() + (gb * gb).sum(), (a,))
        results.append([np.asarray(t.detach().numpy(), np.float64) for t in (ga, gb, gga)])
    # the two libraries sum in different orders: float32 sums of up to 2 304 terms of
    # magnitude ~1 agree to ~1e-4 relative; float64 to 1e-12
    tol = 1e-12 if dtype == "float64" else 2e-4
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=tol, atol=tol * np.abs(theirs).max())


EQUATIONS = [
    ("kij,nkj->nki", (25, 10, 10), (40, 25, 10)),  # batched linear maps (BLAS path)
    ("nki,nkj->kij", (40, 25, 10), (40, 25, 10)),
    ("bij,vj->vbi", (22, 4, 4), (60, 4)),
    ("ij,jk->ik", (50, 60), (60, 70)),
    ("ij,kj->ki", (50, 60), (70, 60)),
    ("abc,cd->dab", (6, 7, 8), (8, 9)),
    ("i,j->ij", (80,), (90,)),  # an outer product
    ("ij,ij->i", (100, 3), (100, 3)),  # small: NumPy's einsum
    ("ii,i->i", (30, 30), (30,)),  # a repeated letter: NumPy's einsum
    ("ij,jk->i", (40, 50), (50, 60)),  # k summed in one operand only: NumPy's einsum
    ("bij,bjk->bik", (1, 30, 40), (7, 40, 30)),  # a broadcast batch: NumPy's einsum
]


@pytest.mark.parametrize(("equation", "sa", "sb"), EQUATIONS)
def test_einsum_as_one_matrix_product_equals_numpy(equation, sa, sb):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    got = einsum_array(equation, a, b)
    want = np.einsum(equation, a, b)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    got32 = einsum_array(equation, a32, b32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, np.einsum(equation, a32, b32), rtol=1e-4, atol=1e-4)
    ints = einsum_array(equation, a.astype(np.int64), b.astype(np.int64))  # NumPy's path
    np.testing.assert_array_equal(ints, np.einsum(equation, a.astype(np.int64), b.astype(np.int64)))


@pytest.mark.parametrize("ax", [0, 1, 2])
def test_small_stacks_equal_numpy(ax):
    arrays = [np.arange(6.0).reshape(2, 3) + k for k in range(4)]
    np.testing.assert_array_equal(stack_arrays(arrays, ax), np.stack(arrays, ax))
    mixed = [arrays[0], arrays[1].astype(np.float32)]
    assert stack_arrays(mixed, ax).dtype == np.stack(mixed, ax).dtype
    scalars = [np.array(1.5), np.array(2.5)]
    np.testing.assert_array_equal(stack_arrays(scalars, 0), [1.5, 2.5])


def test_gradient_stacks_equal_numpy():
    # unbind's backward stacks one gradient per slice: NumPy scalars of the slices' dtype
    # (the copies path), 0-d arrays, arrays along a negative axis; another shape or a Python
    # number goes to np.stack, which raises NumPy's error for shapes that do not match
    scalars = [np.float32(k) * 1.5 for k in range(14)]
    got = _stack(scalars, 0)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.stack(scalars, 0))
    rows = [np.arange(3.0) + k for k in range(4)]
    for axis in (0, 1, -1, -2):
        np.testing.assert_array_equal(_stack(rows, axis), np.stack(rows, axis))
    np.testing.assert_array_equal(_stack([1.0, np.float64(2.0)], 0), [1.0, 2.0])
    with pytest.raises(ValueError):
        _stack([np.zeros(3), np.zeros(1)], 1)


def test_cross_by_take_equals_numpy():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((4, 3, 5)), rng.standard_normal((1, 3, 5))
    np.testing.assert_allclose(cross_array(a, b, 1), np.cross(a, b, axis=1), rtol=1e-14)


def test_cross_of_two_double_3_vectors_is_numpys_arithmetic_bit_for_bit():
    # Python floats against NumPy's element-wise formula (the general path, run on (1, 3)
    # rows): the same IEEE products and differences (no fused multiply-add in either), so equal
    # bits, also at inf, -0.0 and overflow, and NaN at the same places (a NaN's payload bits
    # may depend on the order of the operands, which IEEE leaves open); the general path's
    # dtype and shape
    rng = np.random.default_rng(3)
    special = [np.inf, -np.inf, np.nan, -0.0, 0.0, 1e308, -1e-320]
    for _ in range(200):
        a, b = rng.standard_normal(3) * 10.0 ** rng.integers(-5, 5), rng.standard_normal(3)
        a[rng.random(3) < 0.2] = rng.choice(special)
        b[rng.random(3) < 0.2] = rng.choice(special)
        with np.errstate(all="ignore"):
            expected = cross_array(a[None], b[None], 1)[0]
        got = cross_array(a, b, 0)
        assert got.dtype == np.float64 and got.shape == (3,)
        nan = np.isnan(expected)
        np.testing.assert_array_equal(np.isnan(got), nan)
        np.testing.assert_array_equal(got[~nan].view(np.int64), expected[~nan].view(np.int64))


SQUEEZE_SHAPES = [(3, 1, 2), (1,), (2, 1), (1, 1), (4, 5)]


@pytest.mark.parametrize("shape", SQUEEZE_SHAPES)
def test_squeeze_of_one_dim_matches_torch(shape):
    torch = pytest.importorskip("torch")
    x = td.zeros(shape, requires_grad=True)
    for dim in range(-len(shape), len(shape)):
        got = x.squeeze(dim)
        assert got.shape == tuple(torch.zeros(shape).squeeze(dim).shape), (shape, dim)
        assert got.grad_fn is not None and got._base is x  # a view in the graph
    with pytest.raises(IndexError):  # a dim out of range still goes through the checks
        x.squeeze(len(shape))


def test_zeros_and_ones_like_of_a_tensor_in_the_graph_are_new_constants():
    torch = pytest.importorskip("torch")
    for dtype in (td.float32, td.float64):
        x = td.randn(3, 2, dtype=dtype, requires_grad=True) * 2.0
        for ours, theirs in ((td.zeros_like, torch.zeros_like), (td.ones_like, torch.ones_like)):
            got = ours(x)
            want = theirs(torch.from_numpy(x.data.copy()))
            np.testing.assert_array_equal(got.data, want.numpy())
            assert got.dtype == x.dtype and not got.requires_grad and got.grad_fn is None
            before = x.data.copy()
            got.add_(1.0)  # its own writable memory: the source is untouched
            np.testing.assert_array_equal(x.data, before)
    assert td.zeros_like(x, requires_grad=True).requires_grad  # the general path keeps options


def test_reshape_is_a_view_exactly_when_numpy_shares_memory():
    x = td.arange(6.0).reshape(2, 3)
    shared = x.reshape(3, 2)  # NumPy makes a view: in-place writes reach x
    shared.add_(1.0)
    assert x._version == shared._version == 1 and x.data[0, 0] == 1.0
    copied = x.T.reshape(-1)  # NumPy copies: a tensor of its own
    copied.add_(1.0)
    assert x._version == 1 and x.data[0, 0] == 1.0 and copied._version == 1
    assert copied._base is None


@pytest.mark.parametrize(
    ("dtype", "far"), [(np.float64, [-1000.0, -710.0]), (np.float32, [-100.0, -89.0])]
)
def test_sigmoid_where_exp_overflows_is_zero_without_a_warning(dtype, far):
    torch = pytest.importorskip("torch")
    x = np.array([*far, -30.0, 0.0, 5.0, np.nan, np.inf, -np.inf], dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = td.sigmoid(td.tensor(x)).data
    want = torch.sigmoid(torch.from_numpy(x)).numpy()
    assert got.dtype == dtype
    np.testing.assert_array_equal(got[: len(far)], 0.0)  # 1 / (1 + inf), exactly as torch
    # the same formula; torch's vectorized exp may round one unit in the last place differently
    np.testing.assert_allclose(got, want, rtol=4 * np.finfo(dtype).eps, atol=0)


def test_overwritten_entries_get_no_gradient_even_from_nan():
    x = td.tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    mask = td.tensor([True, False, True, False])
    y = x * 1.0
    y[mask] = 0.0
    upstream = np.full((4, 2), np.nan)
    upstream[1] = upstream[3] = [1.0, 2.0]
    y.backward(td.tensor(upstream))
    expected = np.where(mask.data[:, None], 0.0, upstream)  # exact: a copy with zeros written
    np.testing.assert_array_equal(x.grad.data, expected)


@pytest.mark.parametrize("value", [0.0, -2, 1.5, float("nan")])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_number_written_through_a_mask_matches_torch(value, dtype):
    torch = pytest.importorskip("torch")
    start = np.arange(12.0).reshape(6, 2)
    mask = np.array([True, False, False, True, False, True])
    upstream = np.linspace(-1.0, 1.0, 12).reshape(6, 2)
    results = []
    for m in (td, torch):
        x = m.tensor(start, dtype=getattr(m, dtype), requires_grad=True)
        y = x * 2.0
        y[m.tensor(mask)] = value  # a Python number: written without a tensor for it
        y.backward(m.tensor(upstream, dtype=getattr(m, dtype)))
        results.append((y.detach().numpy(), x.grad.numpy(), type(y.grad_fn).__name__))
    (ours, our_grad, our_node), (theirs, their_grad, their_node) = results
    assert ours.dtype == theirs.dtype and our_node == their_node == "IndexPutBackward0"
    # one multiplication by 2 and one write: exact in both libraries
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(our_grad, their_grad)


@pytest.mark.parametrize("index_dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_index_add_checks_every_integer_width_for_out_of_range_indices(index_dtype):
    x = td.zeros(5, 2)
    source = td.ones(3, 2)
    good = np.array([0, 4, 0], dtype=index_dtype)
    np.testing.assert_array_equal(
        x.index_add(0, td.tensor(good), source).numpy(),
        np.array([[2.0, 2.0], [0, 0], [0, 0], [0, 0], [1.0, 1.0]]),  # exact: sums of ones
    )
    bad_values = ([0, 5, 1], [0, 255, 1]) if index_dtype == np.uint8 else ([0, -1, 1], [0, 5, 1])
    for bad in bad_values:
        with pytest.raises(IndexError, match="index out of range"):
            x.index_add_(0, td.tensor(np.array(bad, dtype=index_dtype)), source)
        np.testing.assert_array_equal(x.numpy(), 0.0)  # refused before anything was written


@pytest.mark.parametrize("size", [1, 180, 65_535, 65_536, 70_000])  # both sides of argmax's
@pytest.mark.parametrize("index_dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_out_of_range_is_any_entry_outside_zero_to_n(size, index_dtype):
    """Against the plain comparison, for 1-d, 2-d and strided index arrays, with the one bad
    entry first, last or in the middle, negative or too large."""
    info = np.iinfo(index_dtype)
    n = min(100, int(info.max))
    rng = np.random.default_rng(size)
    base = rng.integers(0, n, size, dtype=index_dtype)
    bad_values = [n, int(info.max)] + ([-1, int(info.min)] if info.min < 0 else [])
    for at in {0, size // 2, size - 1}:
        for bad in bad_values:
            idx = base.copy()
            idx[at] = bad
            for view in (idx, idx.reshape(1, -1), np.repeat(idx, 2)[::2]):
                expected = bool(((view < 0) | (view >= n)).any())
                assert expected and out_of_range(view, n)
    for view in (base, base.reshape(1, -1), np.repeat(base, 2)[::2]):
        assert not out_of_range(view, n)
        assert out_of_range(view, int(base.max()))  # the largest entry is then too large
    assert not out_of_range(base[:0], 0)


@pytest.mark.parametrize(("shape", "k"), [((100_000,), 1), ((100_000, 1), 1), ((50_000, 2, 1), 2)])
def test_a_sum_down_to_one_number_is_pairwise(shape, k):
    a = np.full(shape, 0.1, np.float32)
    exact = float(np.float32(0.1)) * a.size  # every term is the same float32
    got = sum_leading(a, k)
    assert type(got) is np.ndarray and got.shape == shape[k:] and got.dtype == np.float32
    # pairwise summation errs by about log2(n) roundings (1e-6 relative here); a sequential
    # sum of 1e5 terms drifts by ~1e-3, and OpenBLAS's product with ones by 3e-5
    assert abs(float(got.reshape(())) - exact) <= 1e-5 * exact


def test_sibling_views_keep_their_own_hooks_and_retained_grads_like_torch():
    torch = pytest.importorskip("torch")
    start = np.arange(6.0).reshape(3, 2)
    results = []
    for m in (td, torch):
        w = m.tensor(start, requires_grad=True)
        first, second, third = (w * 1.0).unbind(0)  # one op, three views sharing their state
        seen = []
        first.register_hook(lambda g, seen=seen: seen.append(g.numpy().copy()) or g * 10)
        second.retain_grad()
        (first * 2 + second * 3 + third * 4).sum().backward()
        flags = [t.retains_grad for t in (first, second, third)]
        results.append((w.grad.numpy(), seen, second.grad.numpy(), flags))
    ours, theirs = results
    # small integers times 2, 3, 4 and 10: exact in both libraries
    for mine, torchs in zip(ours[:3], theirs[:3], strict=True):
        np.testing.assert_array_equal(mine, torchs)
    assert ours[3] == theirs[3] == [False, True, False]  # only `second` retains its gradient


def test_iterated_views_made_without_grad_become_separate_leaves():
    torch = pytest.importorskip("torch")
    results = []
    for m in (td, torch):
        base = m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        rows = list(base)  # views of one base, made by one op
        rows[0].requires_grad_()
        rows[1].requires_grad_()  # a leaf of its own: its own gradient accumulator
        (rows[0] * rows[1] * 2 + rows[1]).sum().backward()
        results.append([r.grad.numpy() if r.grad is not None else None for r in rows])
    ours, theirs = results
    np.testing.assert_array_equal(ours[0], theirs[0])  # small integers: exact
    np.testing.assert_array_equal(ours[1], theirs[1])
    assert ours[2] is None and theirs[2] is None


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32", "int64", "bool", "float32"])
@pytest.mark.parametrize("dim", [None, 0])
def test_sum_of_every_dtype_has_torchs_dtype_and_value(dtype, dim):
    torch = pytest.importorskip("torch")
    values = (np.arange(12).reshape(4, 3) * 37 % 256).astype(dtype)  # uint8 sums pass 255
    ours = td.tensor(values).sum(dim) if dim is not None else td.tensor(values).sum()
    theirs = torch.tensor(values).sum(dim) if dim is not None else torch.tensor(values).sum()
    assert str(ours.dtype).replace("torch.", "") == str(theirs.dtype).replace("torch.", "")
    # sums of whole numbers below 2^24: exact in every dtype
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_stack_checks_shapes_and_records_like_torch():
    torch = pytest.importorskip("torch")
    for m in (td, torch):
        with pytest.raises(RuntimeError, match="stack expects each tensor to be equal size"):
            m.stack([m.zeros(3), m.zeros(3), m.zeros(2)])
    with pytest.raises(RuntimeError, match=r"got \[3\] at entry 0 and \[2\] at entry 2"):
        td.stack([td.zeros(3), td.zeros(3), td.zeros(2)])
    results = []
    for m in (td, torch):
        w = m.tensor([1.0, 2.0], requires_grad=True)
        rows = m.stack([w * 2, m.ones(2), w[0] * m.ones(2)], dim=1)  # constants among them
        (rows * m.tensor([[1.0, 10.0, 100.0]])).sum().backward()
        results.append((rows.detach().numpy(), w.grad.numpy(), type(rows.grad_fn).__name__))
    (ours, our_grad, our_node), (theirs, their_grad, their_node) = results
    np.testing.assert_array_equal(ours, theirs)  # products of small integers: exact
    np.testing.assert_array_equal(our_grad, their_grad)
    assert our_node == their_node == "StackBackward0"
    with td.no_grad():
        assert td.stack([td.tensor([1.0], requires_grad=True)]).grad_fn is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_relu_keeps_torchs_signed_zero_nan_and_dtype(dtype):
    torch = pytest.importorskip("torch")
    if np.dtype(dtype).kind == "f":
        x = np.array([np.nan, -np.inf, -0.0, 0.0, -1.5, 2.5, np.inf], dtype=dtype)
    else:
        x = np.array([-3, 0, 4], dtype=dtype)
    ours = td.relu(td.tensor(x)).data
    theirs = torch.relu(torch.from_numpy(x)).numpy()
    assert ours.dtype == theirs.dtype
    # selection, no arithmetic: the same bits, the sign of -0.0 included
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))


@pytest.mark.parametrize(
    ("low", "high"), [(0, None), (None, 0), (-0.0, None), (None, -0.0), (-1, 1)]
)
def test_clamp_to_number_bounds_keeps_torchs_signed_zeros(low, high):
    torch = pytest.importorskip("torch")
    x = np.array([-0.0, 0.0, -1.0, 1.0, np.nan, -np.inf, np.inf])
    ours = td.clamp(td.tensor(x), low, high).data
    theirs = torch.clamp(torch.from_numpy(x), low, high).numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))


@pytest.mark.parametrize(
    ("shape", "rows"),
    [
        ((6, 2), [0, 5, -1, 2, 2]),  # negative and repeated rows: their gradients add
        ((6,), [[1, -2], [3, 1]]),  # a 2-d index: the result has its shape
        ((5, 3, 2), [4, 0, 0]),
        ((6, 2), []),
    ],
)
@pytest.mark.parametrize("form", ["tensor", "ndarray", "int32 tensor", "reversed axes"])
def test_rows_picked_by_an_integer_index_match_torch(shape, rows, form):
    # x[index] goes through np.take: values and gradients as torch's, exactly (copies, and
    # gradients that are the weights or sums of two of them: one rounding in any order)
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    reverse = tuple(range(len(shape)))[::-1]
    start = rng.standard_normal(shape[::-1] if form == "reversed axes" else shape)
    index = np.array(rows, dtype=np.int32 if form == "int32 tensor" else np.int64)
    weights = rng.standard_normal(index.shape + shape[1:])
    results = []
    for lib in (td, torch):
        x = lib.tensor(start, requires_grad=True)
        used = x.permute(reverse) if form == "reversed axes" else x
        picked = used[index if (form == "ndarray" and lib is td) else lib.tensor(index)]
        (picked * lib.tensor(weights)).sum().backward()
        results.append((picked.detach().numpy(), x.grad.numpy(), type(picked.grad_fn).__name__))
    (ours, our_grad, our_node), (theirs, their_grad, their_node) = results
    assert ours.shape == theirs.shape and our_node == their_node == "IndexBackward0"
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(our_grad, their_grad)


def test_a_row_index_out_of_range_is_torchs_index_error():
    x = td.zeros(4, 2)
    for bad in (4, -5):
        with pytest.raises(IndexError, match=rf"index {bad} is out of bounds .* shape \(4, 2\)"):
            x[td.tensor([0, bad])]


def _zero_d_operands(dtype, rng):
    """Pairs of values for 0-d arithmetic: random magnitudes over the dtype's whole exponent
    range (sums whose exponents lie far apart, products that overflow or go subnormal) and the
    special values."""
    info = np.finfo(dtype)
    exponents = rng.uniform(np.log2(info.smallest_subnormal), np.log2(info.max), (400, 2))
    values = (np.exp2(exponents) * rng.choice([-1.0, 1.0], (400, 2))).astype(dtype)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, info.max, info.tiny], dtype)
    grid = np.stack(np.meshgrid(specials, specials), -1).reshape(-1, 2)
    return np.concatenate([values, grid, values[:, ::-1]])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_zero_d_add_sub_mul_neg_equal_numpy_bit_for_bit(dtype):
    # 0-d operands are computed as Python floats: the same correctly rounded IEEE operations as
    # NumPy's (float32 ones too, computed in double and rounded once more), so the results are
    # equal bit for bit on any machine; compared as bit patterns (NaN by NaN, -0.0 by -0.0)
    rng = np.random.default_rng(7)
    pairs = _zero_d_operands(dtype, rng)
    bits = np.int64 if dtype == np.float64 else np.int32
    for op, name in ((np.add, "add"), (np.subtract, "sub"), (np.multiply, "mul")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # overflow, inf - inf: both warn
            got = np.array([getattr(td, name)(td.tensor(a), td.tensor(b)).data for a, b in pairs])
            want = np.array([op(np.asarray(a), np.asarray(b)) for a, b in pairs], dtype)
        assert got.dtype == dtype
        same = got.view(bits) == want.view(bits)
        both_nan = np.isnan(got) & np.isnan(want)
        assert (same | both_nan).all(), (name, pairs[~(same | both_nan)][:3])
    got = np.array([td.neg(td.tensor(a)).data for a in pairs[:, 0]])
    want = np.array([np.negative(np.asarray(a)) for a in pairs[:, 0]], dtype)
    assert got.dtype == dtype and (got.view(bits) == want.view(bits)).all()  # NaN's sign too


def test_zero_d_arithmetic_keeps_the_graph_and_the_dtype():
    torch = pytest.importorskip("torch")
    for dtype in ("float32", "float64"):
        ours = [td.tensor(v, dtype=getattr(td, dtype), requires_grad=True) for v in (1.5, -2.25)]
        theirs = [torch.tensor(v, dtype=getattr(torch, dtype), requires_grad=True)
                  for v in (1.5, -2.25)]  # fmt: skip
        for a, b in (ours, theirs):
            out = (a * b + a) - b * b
            out.backward()
        for o, t in zip(ours, theirs, strict=True):
            assert o.grad.dtype == o.dtype and o.grad.shape == ()
            # a few operations on dyadic values: within float32's rounding either way
            np.testing.assert_allclose(o.grad.data, t.grad.numpy(), rtol=1e-6)
        out = ours[0] + ours[1]
        assert type(out.data) is np.ndarray and out.grad_fn.name() == "AddBackward0"
    ints = td.tensor(3) * td.tensor(4)  # integers keep NumPy's path
    assert ints.dtype == td.int64 and ints.item() == 12
