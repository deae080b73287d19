"""``tadiff._array.add_at``: the scatter-add behind indexing gradients, ``index_add`` and
``scatter_add``, against ``np.add.at`` (the element-by-element oracle)."""

import numpy as np
import pytest

import tadiff as td
import tadiff._array
from tadiff._array import _BINCOUNT_FROM, _scatter_form, add_at
from tadiff.ops._dual import _full_index

N = 2 * _BINCOUNT_FROM  # values in each scatter: above the size where bincount takes over


def _keys(shape, rng):
    """Scatter keys of every form add_at knows, and forms it must hand to np.add.at."""
    n0, n1 = shape
    rows = rng.integers(-n0, n0, N // n1)  # negative indices count from the end
    cols = rng.integers(0, n1, N // n0)
    return {
        "rows": ((rows,), (len(rows), n1)),
        "rows, then a full slice": ((rows, slice(None)), (len(rows), n1)),
        "columns": ((slice(None), cols), (n0, len(cols))),
        "one array per axis": (_full_index(rng.integers(0, n0, (N // n1, n1)), 0), (N // n1, n1)),
        "broadcast arrays": ((rows[:, None], rng.integers(0, n1, (1, 3))), (len(rows), 3)),
        "a partial slice (np.add.at)": ((rows, slice(1, None)), (len(rows), n1 - 1)),
        "a 2-d index (np.add.at)": ((rows.reshape(-1, 2),), (len(rows) // 2, 2, n1)),
    }


@pytest.mark.parametrize("shape", [(37, 8), (37, 32), (6, 40)])
@pytest.mark.parametrize("chunk", [None, 64], ids=["one pass", "in chunks"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("form", list(_keys((37, 8), np.random.default_rng(0))))
def test_add_at_sums_like_np_add_at(form, dtype, chunk, shape, monkeypatch):
    # (37, 8): rows go line by line (8 lines), columns by bincount; (37, 32): both by bincount;
    # (6, 40): rows by bincount, columns line by line (6 lines)
    if chunk:  # many bincount calls, each of at least out.size values
        monkeypatch.setattr(tadiff._array, "_CHUNK", chunk)
    lines = []
    by_lines = tadiff._array._add_by_lines
    monkeypatch.setattr(tadiff._array, "_add_by_lines", lambda *a: (lines.append(a), by_lines(*a)))
    rng = np.random.default_rng(0)
    key, value_shape = _keys(shape, rng)[form]
    start = rng.standard_normal(shape).astype(dtype)
    values = rng.standard_normal(value_shape).astype(dtype)
    out = start.copy()
    handed_on = _scatter_form(out.shape, key) is None
    assert handed_on == ("np.add.at" in form)
    add_at(out, key, values)
    assert out.dtype == dtype
    line_by_line = (shape, form) in {
        ((37, 8), "rows"),
        ((37, 8), "rows, then a full slice"),
        ((6, 40), "columns"),
    }
    assert bool(lines) == line_by_line
    if handed_on or lines:  # np.add.at, on the whole key or line by line: its sums, its order
        expected = start.copy()
        np.add.at(expected, key, values)
        tol = 1e-12 if dtype == np.float64 else 1e-5  # equal sums; the margin is a few ulps
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.abs(expected).max())
        return
    # against float64 sums: a float64 out differs by the order of about 40 terms (a few ulps);
    # a float32 out is summed in float64 and rounded once (half an ulp of float32)
    expected = start.astype(np.float64)
    np.add.at(expected, key, values.astype(np.float64))
    tol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.parametrize(
    ("shape", "axis", "count", "by_lines"),
    [
        ((100, 2), 0, 180, True),  # a cloth's spring forces into its masses: two lines
        ((7,), 0, 50, False),  # one dimension: np.add.at as it is (its own fast path)
        ((10, 16), 0, 600, True),
        ((10, 17), 0, 600, False),  # too many lines: bincount would beat them
        ((10, 16), 0, 300, False),  # too short for 16 lines: np.add.at's rows
        ((3, 50, 4), 1, 600, True),
        ((2, 50, 1), 1, 10, True),
        ((5, 3), 1, 0, False),
    ],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
def test_small_scatters_along_one_axis_sum_like_np_add_at(
    shape, axis, count, by_lines, dtype, monkeypatch
):
    lines = []
    add_lines = tadiff._array._add_by_lines
    monkeypatch.setattr(tadiff._array, "_add_by_lines", lambda *a: (lines.append(a), add_lines(*a)))
    add_pairs = tadiff._array._add_pairs  # rows of two floats: one line of complex numbers
    monkeypatch.setattr(
        tadiff._array, "_add_pairs", lambda *a: add_pairs(*a) and (lines.append(a) or True)
    )
    rng = np.random.default_rng(3)
    index = rng.integers(-shape[axis], shape[axis], count)
    key = (*[slice(None)] * axis, index)
    value_shape = (*shape[:axis], count, *shape[axis + 1 :])
    values = (rng.standard_normal(value_shape) * 100).astype(dtype)
    start = (rng.standard_normal(shape) * 100).astype(dtype)
    out, expected = start.copy(), start.copy()
    add_at(out, key, values)
    np.add.at(expected, key, values)
    assert bool(lines) == by_lines
    if dtype == np.int64:
        np.testing.assert_array_equal(out, expected)
    else:  # the same sums in the same order; the margin is a few ulps
        tol = 1e-12 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.abs(expected).max())


@pytest.mark.parametrize(
    ("form", "index"),
    [("rows", 37), ("rows", -38), ("columns", 2), ("columns", -3), ("per axis", 2)],
)
def test_add_at_refuses_indices_out_of_range(form, index):
    """Also past the end of the second axis, where a flat position would be in the next row."""
    bad = np.zeros(N, np.int64)
    bad[-1] = index
    key, values = {
        "rows": ((bad,), np.ones((N, 2))),
        "columns": ((slice(None), bad), np.ones((37, N))),
        "per axis": ((np.zeros(N, np.int64), bad), np.ones(N)),
    }[form]
    with pytest.raises(IndexError):
        np.add.at(np.zeros((37, 2)), key, values)  # the oracle refuses it too
    out = np.zeros((37, 2))
    with pytest.raises(IndexError, match=r"out of (range|bounds)"):
        add_at(out, key, values)
    assert not out.any()  # refused before anything is written


def test_large_index_add_and_gather_gradient_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    index = rng.integers(0, 50, 3000)
    x0, src0 = rng.standard_normal((50, 4)), rng.standard_normal((3000, 4))
    results = []
    for lib in (td, torch):
        x = lib.tensor(x0, requires_grad=True)
        src = lib.tensor(src0, requires_grad=True)
        out = x.index_add(0, lib.tensor(index), src)
        gathered = out[lib.tensor(index)]  # its gradient scatters 12 000 values back
        (gathered * lib.tensor(src0)).sum().backward()
        results.append([np.asarray(t.detach().numpy()) for t in (out, x.grad, src.grad)])
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_values_that_overlap_the_output_are_read_before_adding():
    # np.add.at copies values that share memory with out; line by line must too
    out = np.arange(6.0).reshape(2, 3)
    expected = out.copy()
    key = (slice(None), np.array([0, 1, 2]))
    np.add.at(expected, key, expected[::-1])
    add_at(out, key, out[::-1])
    np.testing.assert_array_equal(out, expected)  # small integers: exact in any order


def _wide(a, dtype):
    """``a`` inside a wider array: rows of two that are not contiguous with each other."""
    wide = np.zeros((a.shape[0], 3), dtype)
    wide[:, 1:] = a
    return wide[:, 1:]


def _shifted(a, dtype):
    """``a`` one element into a buffer: its pairs are not aligned as complex numbers are."""
    flat = np.zeros(a.size + 1, dtype)
    flat[1:] = a.ravel()
    return flat[1:].reshape(a.shape)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["contiguous", "wide rows", "shifted"])
@pytest.mark.parametrize(
    "values_layout", ["contiguous", "columns (Fortran)", "broadcast row", "other dtype"]
)
def test_rows_of_two_sum_column_by_column_bit_for_bit(dtype, layout, values_layout):
    # the pair path (rows read as complex numbers) against np.add.at one column at a time: the
    # same IEEE additions in the same order, so the same bits (NaN compared by position: its
    # payload is not specified)
    rng = np.random.default_rng(5)
    index = rng.integers(-40, 40, 300)
    start = (rng.standard_normal((40, 2)) * 100).astype(dtype)
    values = (rng.standard_normal((300, 2)) * 100).astype(dtype)
    for array in (start, values):
        array.ravel()[rng.integers(0, array.size, 12)] = rng.choice(
            [np.inf, -np.inf, np.nan, -0.0, 0.0], 12
        )
    out = {"contiguous": start.copy, "wide rows": lambda: _wide(start, dtype),
           "shifted": lambda: _shifted(start, dtype)}[layout]()  # fmt: skip
    values = {
        "contiguous": values,
        "columns (Fortran)": np.asfortranarray(values),
        "broadcast row": np.broadcast_to(values[:1], values.shape),
        "other dtype": values.astype(np.float64 if dtype == np.float32 else np.float32),
    }[values_layout]
    expected = start.copy()
    with np.errstate(invalid="ignore"):  # inf + -inf
        for j in range(2):
            np.add.at(expected[:, j], index, values[:, j])
        add_at(out, (index,), values)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(out), nan)
    bits = np.int64 if dtype == np.float64 else np.int32
    np.testing.assert_array_equal(
        np.where(nan, 0, out).view(bits), np.where(nan, 0, expected).view(bits)
    )


@pytest.mark.parametrize("overlap", ["the output itself", "its rows reversed", "a view of it"])
def test_rows_of_two_that_overlap_the_output_are_read_before_adding(overlap):
    # the pair path is one np.add.at call, which reads values in out's memory before adding
    # (index 1 twice: a sequential loop would read the first sum back)
    start = np.arange(8.0).reshape(4, 2)
    index = np.array([1, 1, 3, 0])
    out = start.copy()
    values = {"the output itself": out, "its rows reversed": out[::-1],
              "a view of it": out.reshape(2, 4).reshape(4, 2)}[overlap]  # fmt: skip
    expected = start.copy()
    np.add.at(expected, (index,), start[::-1] if overlap == "its rows reversed" else start)
    add_at(out, (index,), values)
    np.testing.assert_array_equal(out, expected)  # small integers: exact in any order
