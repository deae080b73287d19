"""``householder.cached()``: one block build per ``V`` inside the context, never a stale one.

Oracles: the same calls without the cache (bit-identical results, since the kernels are the same)
and, for gradients, autograd through the sequential loop.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff.structured import householder as hh

torch = pytest.importorskip("torch")
from tadiff.torch import householder as thh  # noqa: E402


@pytest.fixture
def builds(monkeypatch):
    """Counts the block builds (the work the cache saves)."""
    calls = []
    real = hh._build_blocks

    def counting(xp, V, b):
        calls.append((tuple(V.shape), b))
        return real(xp, V, b)

    monkeypatch.setattr(hh, "_build_blocks", counting)
    return calls


def _rng_arrays(k, d, m, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((k, d)), rng.standard_normal((d, m))


def test_numpy_repeated_calls_build_once_and_match(builds):
    V, X = _rng_arrays(10, 12, 3)
    expected = [hh.householder_apply(V, X, block=4, transpose=t) for t in (False, True)]
    builds.clear()
    with hh.cached():
        for _ in range(3):
            for t, want in zip((False, True), expected, strict=True):
                np.testing.assert_array_equal(
                    hh.householder_apply(V, X, block=4, transpose=t), want
                )
        assert len(builds) == 2  # one per orientation
        hh.householder_apply(V, X, block=3)
        assert len(builds) == 3  # another block size is another entry
    hh.householder_apply(V, X, block=4)
    assert len(builds) == 4  # the context freed its blocks


def test_nested_contexts_share_and_threads_do_not(builds):
    V, X = _rng_arrays(6, 6, 2)
    seen_in_thread = []
    with hh.cached():
        hh.householder_apply(V, X)
        with hh.cached():
            hh.householder_apply(V, X)
        hh.householder_apply(V, X)
        assert len(builds) == 1

        def other_thread():
            hh.householder_apply(V, X)
            seen_in_thread.append(len(builds))

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert seen_in_thread == [2]  # a new thread starts outside the context


def test_a_new_array_is_a_new_entry(builds):
    V, X = _rng_arrays(6, 6, 2)
    with hh.cached():
        a = hh.householder_apply(V, X)
        W = V.copy()
        W[0] = np.arange(6.0) + 1.0  # a different reflector (a rescaled row would be the same)
        b = hh.householder_apply(W, X)
    assert len(builds) == 2
    np.testing.assert_array_equal(b, hh.householder_apply(W, X))
    assert not np.allclose(a, b)


def test_vjp_uses_the_cache(builds):
    V, X = _rng_arrays(7, 9, 2)
    G = np.ones_like(X)
    want = hh.householder_vjp(V, X, G, block=3)
    builds.clear()
    with hh.cached():
        got = [hh.householder_vjp(V, X, G, block=3) for _ in range(2)]
    assert len(builds) == 1
    for dV, dX in got:
        np.testing.assert_array_equal(dV, want[0])
        np.testing.assert_array_equal(dX, want[1])


def _rnn(apply, V, h, xs):
    for x in xs:
        h = (apply(V, h) + x).tanh()
    return h


@pytest.mark.parametrize("transpose", [False, True])
def test_torch_rnn_gradients_match_the_sequential_loop(builds, transpose):
    torch.manual_seed(0)
    d, k, m, steps = 9, 7, 3, 5
    V = torch.randn(k, d, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(d, m, dtype=torch.float64, requires_grad=True)
    xs = torch.randn(steps, d, m, dtype=torch.float64)

    def fasth(V, h):
        return thh.householder_apply(V, h, block=3, transpose=transpose)

    def seq(V, h):
        return hh.householder_sequential(V, h, transpose=transpose)

    with hh.cached():
        out = _rnn(fasth, V, h0, xs)
    assert len(builds) == 1  # five steps, one build
    grads = torch.autograd.grad(out.square().sum(), (V, h0))
    ref = torch.autograd.grad(_rnn(seq, V, h0, xs).square().sum(), (V, h0))
    torch.testing.assert_close(out, _rnn(seq, V, h0, xs), rtol=0, atol=1e-12)
    for got, want in zip(grads, ref, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-9)


def test_torch_in_place_update_inside_the_context_rebuilds(builds):
    torch.manual_seed(1)
    layer = thh.Orthogonal(8, dtype=torch.float64, init="random")
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    x = torch.randn(4, 8, dtype=torch.float64)
    target = torch.randn(4, 8, dtype=torch.float64)  # |U x|² alone would not depend on V
    with hh.cached():
        for _ in range(3):
            y = layer(x)
            torch.testing.assert_close(layer.inverse(y), x, rtol=0, atol=1e-12)
            opt.zero_grad()
            (y - target).square().sum().backward()
            opt.step()  # in place: bumps V's version
            with torch.no_grad():
                fresh = thh.householder_apply(layer.V.clone(), x.mT).mT
            after = layer(x)
            # A stale entry would give y back, which the step moved by more than 1e-3; the fresh
            # result comes from another code path (no recording, another V object), so the two
            # agree to rounding only: 1e-12 is 1e3 times the float64 error of 8 reflections.
            assert (after - y).abs().max() > 1e-3
            torch.testing.assert_close(after, fresh, rtol=0, atol=1e-12)
    # the first forward, then per step: the inverse (other orientation), the clone, and the
    # forward after the update; the next step's forward finds that last entry
    assert len(builds) == 1 + 3 * 3


def test_engine_rnn_and_in_place_update(builds):
    rng = np.random.default_rng(3)
    V = td.tensor(rng.standard_normal((6, 6)), requires_grad=True)
    h0 = td.tensor(rng.standard_normal((6, 2)))
    xs = [td.tensor(rng.standard_normal((6, 2))) for _ in range(4)]
    with hh.cached():
        out = _rnn(hh.householder_apply, V, h0, xs)
        assert len(builds) == 1
        out.sum().backward()
        ref_V = td.tensor(V.data.copy(), requires_grad=True)
        _rnn(hh.householder_sequential, ref_V, h0, xs).sum().backward()
        np.testing.assert_allclose(V.grad.data, ref_V.grad.data, rtol=0, atol=1e-9)
        with td.no_grad():
            V.mul_(1.5)  # same object, new version
        scaled = hh.householder_apply(V, h0)
    assert len(builds) == 2
    np.testing.assert_array_equal(scaled.data, hh.householder_apply(V, h0).data)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["apply", "apply_t", "update"]), st.integers(1, 5)),
        min_size=1,
        max_size=8,
    )
)
def test_cached_calls_equal_uncached_ones_whatever_the_sequence(actions):
    torch.manual_seed(2)
    V = torch.randn(5, 6, dtype=torch.float64)
    X = torch.randn(6, 2, dtype=torch.float64)
    with hh.cached():
        for action, block in actions:
            if action == "update":
                V.mul_(-0.5).add_(0.1)
                continue
            transpose = action == "apply_t"
            got = thh.householder_apply(V, X, block=block, transpose=transpose)
            with _no_cache():
                want = thh.householder_apply(V, X, block=block, transpose=transpose)
            torch.testing.assert_close(got, want, rtol=0, atol=0)


class _no_cache:
    """Run a block of code outside any ``cached()`` context (the oracle)."""

    def __enter__(self):
        self.token = hh._CACHE.set(None)

    def __exit__(self, *exc):
        hh._CACHE.reset(self.token)
