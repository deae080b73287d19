"""The kernel cache: derivation and compilation once per (definition, shapes, dtype, backend)."""

from __future__ import annotations

import numpy as np

import tadiff as td
from tadiff.index import define
from tadiff.index.compile import clear_cache, kernel, stats

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
