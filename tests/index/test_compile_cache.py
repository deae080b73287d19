"""The kernel cache: derivation and compilation once per (definition, shapes, dtype, backend)."""

from __future__ import annotations

import numpy as np
import pytest

import tadiff as td
from tadiff.errors import InputError
from tadiff.index import define
from tadiff.index.compile import clear_cache, kernel, set_cache_limit, stats

CONV2D = "y[b,o,h,v] = sum[c,i,j](x[b,c,2*h+i,2*v+j] * w[o,c,i,j])"


def _train_step(f, x, w):
    xt, wt = td.tensor(x, requires_grad=True), td.tensor(w, requires_grad=True)
    f(x=xt, w=wt).sum().backward()
    return xt.grad, wt.grad


def test_conv2d_derives_and_compiles_once_then_only_hits_the_cache():
    clear_cache()
    f = define(CONV2D)
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(2, 3, 9, 9)), rng.normal(size=(4, 3, 3, 3))
    _train_step(f, x, w)
    first = stats()
    assert first["derivations"] == 2  # d/dx and d/dw
    assert first["compilations"] == 3  # forward and both gradients
    assert first["by_backend"] == {"numpy": 3}
    assert first["derivation_seconds"] > 0 and first["compile_seconds"] > 0
    for _ in range(3):
        _train_step(f, x, w)
    again = stats()
    assert again["derivations"] == 2 and again["compilations"] == 3
    assert again["compile_seconds"] == first["compile_seconds"]
    assert again["cache_hits"] == first["cache_hits"] + 9
    # the same text defined again shares the kernels (the body is hash-consed)
    _train_step(define(CONV2D), x, w)
    assert stats()["compilations"] == 3


def test_new_shape_or_dtype_compiles_but_does_not_derive_again():
    clear_cache()
    f = define(CONV2D)
    rng = np.random.default_rng(1)
    w = rng.normal(size=(4, 3, 3, 3))
    _train_step(f, rng.normal(size=(1, 3, 7, 7)), w)
    _train_step(f, rng.normal(size=(1, 3, 11, 11)), w)
    s = stats()
    assert s["derivations"] == 2 and s["compilations"] == 6
    _train_step(f, rng.normal(size=(1, 3, 7, 7)).astype(np.float32), w.astype(np.float32))
    assert stats()["compilations"] == 9 and stats()["derivations"] == 2


def test_backends_are_separate_cache_entries():
    clear_cache()
    f = define("y[i] = sum[k=0:3](x[3*i+k]) / 3")
    a = kernel(f, {"x": (9,)}, np.float64, "numpy")
    b = kernel(f, {"x": (9,)}, np.float64, "auto")
    assert a is not b and stats()["compilations"] == 2 and stats()["kernels"] == 2
    assert kernel(f, {"x": (9,)}, np.float64, "numpy") is a
    clear_cache()
    assert stats()["kernels"] == 0 and stats()["compilations"] == 0


def test_cache_keeps_the_most_recently_used_kernels_up_to_its_limit():
    clear_cache()
    f = define("y[i] = sum[k=0:3](x[i+k])")
    previous = set_cache_limit(3)
    try:
        kernels = {n: kernel(f, {"x": (n,)}) for n in (5, 6, 7)}
        assert kernel(f, {"x": (5,)}) is kernels[5]  # a hit makes 5 the most recent
        kernel(f, {"x": (8,)})  # a fourth shape drops the least recently used: 6
        s = stats()
        assert s["kernels"] == 3 and s["evictions"] == 1 and s["limit"] == 3
        assert kernel(f, {"x": (5,)}) is kernels[5] and kernel(f, {"x": (7,)}) is kernels[7]
        again = kernel(f, {"x": (6,)})  # compiled again, and still right
        assert again is not kernels[6] and stats()["compilations"] == 5
        np.testing.assert_allclose(again({"x": np.arange(6.0)}), [3.0, 6.0, 9.0, 12.0])
        set_cache_limit(1)  # lowering the limit drops the oldest at once
        assert stats()["kernels"] == 1
    finally:
        set_cache_limit(previous)


def test_cache_limit_rejects_nonsense(monkeypatch):
    with pytest.raises(InputError, match=r"set_cache_limit\(0\): expected a positive int"):
        set_cache_limit(0)
    with pytest.raises(InputError, match="expected a positive int"):
        set_cache_limit(2.5)
    from tadiff.index.compile import cache

    monkeypatch.setenv("TADIFF_KERNEL_CACHE", "lots")
    with pytest.raises(InputError, match="TADIFF_KERNEL_CACHE='lots'"):
        cache._limit_from_environment()
    monkeypatch.setenv("TADIFF_KERNEL_CACHE", "0")
    with pytest.raises(InputError, match="at least 1 kernel"):
        cache._limit_from_environment()
    monkeypatch.setenv("TADIFF_KERNEL_CACHE", "32")
    assert cache._limit_from_environment() == 32
