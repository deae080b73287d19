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


@pytest.mark.parametrize("chunk", [None, 64], ids=["one pass", "in chunks"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("form", list(_keys((37, 8), np.random.default_rng(0))))
def test_add_at_sums_like_np_add_at(form, dtype, chunk, monkeypatch):
    if chunk:  # many bincount calls, each of at least out.size values
        monkeypatch.setattr(tadiff._array, "_CHUNK", chunk)
    rng = np.random.default_rng(0)
    key, value_shape = _keys((37, 8), rng)[form]
    start = rng.standard_normal((37, 8)).astype(dtype)
    values = rng.standard_normal(value_shape).astype(dtype)
    out = start.copy()
    handed_on = _scatter_form(out.shape, key) is None
    assert handed_on == ("np.add.at" in form)
    add_at(out, key, values)
    assert out.dtype == dtype
    if handed_on:  # the same call in the same dtype: the same sums in the same order
        expected = start.copy()
        np.add.at(expected, key, values)
        np.testing.assert_array_equal(out, expected)
        return
    # against float64 sums: a float64 out differs by the order of about 40 terms (a few ulps);
    # a float32 out is summed in float64 and rounded once (half an ulp of float32)
    expected = start.astype(np.float64)
    np.add.at(expected, key, values.astype(np.float64))
    tol = 1e-12 if dtype == np.float64 else 2e-6
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.abs(expected).max())


def test_add_at_keeps_integer_arrays_exact():
    rng = np.random.default_rng(1)
    out = np.zeros(5, np.int64)
    key = (rng.integers(0, 5, N),)
    add_at(out, key, np.full(N, 2**40, np.int64))
    assert out.sum() == N * 2**40


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
    with pytest.raises(IndexError, match="out of range"):
        add_at(np.zeros((37, 2)), key, values)


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
