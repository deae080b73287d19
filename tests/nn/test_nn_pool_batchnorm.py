"""Pooling and batch normalization against PyTorch (float64): values, gradients, running
statistics, train/eval, second derivatives and errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff import nn
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F
from tadiff.nn import pooling
from tadiff.ops import batchnorm_passes, fast_loops

torch = pytest.importorskip("torch")
TF = torch.nn.functional


@pytest.fixture(params=["numpy", "fused"])
def batchnorm_path(request, monkeypatch):
    """Run a batch-norm test once with NumPy's passes and once with the compiled loops (forced
    for every size; skipped without Numba)."""
    if request.param == "fused":
        pytest.importorskip("numba")
    fused_from = 0 if request.param == "fused" else 1 << 62
    monkeypatch.setattr(batchnorm_passes, "FUSED_MIN_SIZE", fused_from)
    return request.param


@pytest.fixture(params=["numpy", "compiled"])
def pool_path(request, monkeypatch):
    """Run a max-pooling test once with NumPy's passes and once with the compiled loop for
    windows that tile the input (forced for every size; skipped without Numba)."""
    if request.param == "compiled":
        pytest.importorskip("numba")
    compiled_from = 0 if request.param == "compiled" else 1 << 62
    monkeypatch.setattr(fast_loops, "FAST_LOOP_MIN_SIZE", compiled_from)
    return request.param


def _grad_pair(ours_fn, theirs_fn, x, seed=0):
    ours_x = td.tensor(x.copy(), requires_grad=True)
    theirs_x = torch.from_numpy(x.copy()).requires_grad_(True)
    ours, theirs = ours_fn(ours_x), theirs_fn(theirs_x)
    upstream = np.random.default_rng(seed).standard_normal(tuple(theirs.shape))
    (ours * td.tensor(upstream)).sum().backward()
    (theirs * torch.from_numpy(upstream)).sum().backward()
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours_x.grad.data, theirs_x.grad.numpy(), rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    dims=st.sampled_from([1, 2]),
    kind=st.sampled_from(["max", "avg"]),
)
def test_pooling_matches_torch_on_random_geometries(data, dims, kind):
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(dims))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(dims))
    padding = tuple(data.draw(st.integers(0, k // 2)) for k in kernel)
    size = tuple(data.draw(st.integers(k, 8)) for k in kernel)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    # distinct values, so every window has one maximum (ties have their own test)
    x = rng.permutation(np.arange(2 * 3 * int(np.prod(size)), dtype=np.float64))
    x = x.reshape(2, 3, *size) / 7.0
    ours = getattr(F, f"{kind}_pool{dims}d")
    theirs = getattr(TF, f"{kind}_pool{dims}d")
    args = dict(kernel_size=kernel, stride=stride, padding=padding)
    _grad_pair(lambda t: ours(t, **args), lambda t: theirs(t, **args), x)


def _brute_force_max_pool(x, kernel, stride):
    """Max pooling by loops over windows (no padding); at ties the first element of the window
    in row-major order wins (torch's documented choice). Returns the pooled values and, per
    output element, the input element it took."""
    counts = [(n - k) // s + 1 for n, k, s in zip(x.shape[2:], kernel, stride, strict=True)]
    out, winners = np.empty((*x.shape[:2], *counts)), {}
    cells = list(np.ndindex(*kernel))
    for o in np.ndindex(*out.shape):
        lead, starts = o[:2], [i * s for i, s in zip(o[2:], stride, strict=True)]
        inputs = [(*lead, *(a + c for a, c in zip(starts, cell, strict=True))) for cell in cells]
        best = int(np.argmax([x[i] for i in inputs]))  # the first maximum
        out[o], winners[o] = x[inputs[best]], inputs[best]
    return out, winners


@pytest.mark.parametrize(
    ("x", "kernel", "stride"),
    [
        # one 1 in four overlapping 2x2 windows (stride 1); the other five windows are all ties
        (np.pad(np.ones((1, 1, 1, 1)), ((0, 0), (0, 0), (1, 2), (1, 2))), (2, 2), (1, 1)),
        (np.ones((1, 2, 4)), (2,), (2,)),  # every window all ties
        (np.array([[[0.0, 1.0, 1.0, 0.0, 1.0]]]), (3,), (1,)),  # ties with overlaps
        # windows that tile the input (their own path): random ties, a NaN (the maximum of its
        # window, as in NumPy's argmax), -inf
        (np.random.default_rng(3).integers(0, 2, (2, 3, 4, 6)).astype(float), (2, 3), (2, 3)),
        (
            np.array([[[[1.0, np.nan, 2.0, np.nan], [np.nan, 0.0, -np.inf, -np.inf]]]]),
            (2, 2),
            (2, 2),
        ),
        # a window without an equal element (NaN) beside one with two: as many matches as
        # windows, which alone would pass for one maximum each
        (np.array([[[[np.nan, 0.0, 3.0, 3.0], [1.0, 1.0, 0.0, 0.0]]]]), (2, 2), (2, 2)),
    ],
)
def test_max_pool_ties_and_overlaps_route_the_gradient_to_the_first_maximum(
    x, kernel, stride, pool_path
):
    # ties are where a library's choice is not an oracle: the expectation is built by loops
    want, winners = _brute_force_max_pool(x, kernel, stride)
    upstream = np.random.default_rng(0).standard_normal(want.shape)
    want_grad = np.zeros_like(x)
    for o, i in winners.items():
        want_grad[i] += upstream[o]
    pool = F.max_pool2d if len(kernel) == 2 else F.max_pool1d
    t = td.tensor(x.copy(), requires_grad=True)
    out = pool(t, kernel, stride=stride)
    (out * td.tensor(upstream)).sum().backward()
    np.testing.assert_array_equal(out.data, want)  # selection: no arithmetic
    # up to four upstream values meet in one input element, summed in either order
    np.testing.assert_allclose(t.grad.data, want_grad, rtol=0, atol=1e-14)


def _first_maxima_oracle(x, kernel):
    """Windows that tile ``x``: each one's maximum and the flat position in ``x`` of its first
    maximum (row-major; the first NaN where there is one), by NumPy's ``argmax`` over the window
    values laid out on an axis of their own, an independent route to the same choice."""
    dims = len(kernel)
    out = [n // k for n, k in zip(x.shape[2:], kernel, strict=True)]
    tiled = x.reshape(*x.shape[:2], *(v for o, k in zip(out, kernel, strict=True) for v in (o, k)))
    # (n, c, out..., window...) with the window's positions flattened row-major
    order = [0, 1, *range(2, 2 + 2 * dims, 2), *range(3, 3 + 2 * dims, 2)]
    windows = tiled.transpose(order).reshape(*x.shape[:2], *out, -1)
    inside = windows.argmax(axis=-1)
    offsets = np.unravel_index(inside, kernel)
    grids = np.indices(inside.shape)
    index = (grids[0], grids[1], *(grids[2 + d] * kernel[d] + offsets[d] for d in range(dims)))
    return x[index], np.ravel_multi_index(index, x.shape)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    ("shape", "kernel"),
    [
        ((16, 8, 16, 16), (2, 2)),
        ((8, 4, 24, 18), (3, 3)),
        ((8, 4, 24, 18), (2, 3)),
        ((8, 8, 160), (2,)),
        ((8, 8, 159), (3,)),
    ],
)
def test_max_pool_over_tiling_windows_of_large_inputs_matches_an_argmax_oracle(
    shape, kernel, dtype, pool_path
):
    # at least FAST_LOOP_MIN_SIZE values, so the default threshold takes the compiled loop too;
    # values from {-inf, -1, -0.0, 0, 1} (ties everywhere, zeros of both signs) and a few NaNs
    rng = np.random.default_rng(len(shape) * 10 + kernel[-1])
    x = rng.choice(np.array([-np.inf, -1.0, -0.0, 0.0, 1.0]), size=shape).astype(dtype)
    x.reshape(-1)[rng.choice(x.size, x.size // 200, replace=False)] = np.nan
    want, positions = _first_maxima_oracle(x, kernel)
    t = td.tensor(x, requires_grad=True)
    out = (F.max_pool2d if len(kernel) == 2 else F.max_pool1d)(t, kernel)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out.data, want)  # a selection: exact, NaN where NaN
    upstream = rng.standard_normal(want.shape).astype(dtype)
    out.backward(td.tensor(upstream))  # not through a sum, which would meet inf - inf
    want_grad = np.zeros(x.size, dtype)
    want_grad[positions.reshape(-1)] = upstream.reshape(-1)  # each input at most once: exact
    np.testing.assert_array_equal(t.grad.data.reshape(-1), want_grad)
    if pool_path == "compiled":
        assert pooling._compiled_max_pool(x, kernel) is not None  # the loop ran
        # the loop returns the value at the first maximum: a tie of -0.0 and 0.0 keeps the
        # first one's sign, as torch does
        np.testing.assert_array_equal(np.signbit(out.data), np.signbit(want))


def test_compiled_max_pool_leaves_strided_3d_and_integer_inputs_to_numpy(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(fast_loops, "FAST_LOOP_MIN_SIZE", 0)
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8))
    assert pooling._compiled_max_pool(x, (2, 2)) is not None
    assert pooling._compiled_max_pool(x.transpose(0, 1, 3, 2), (2, 2)) is None
    assert pooling._compiled_max_pool(x.reshape(2, 3, 4, 4, 4), (2, 2, 2)) is None
    assert pooling._compiled_max_pool(x.astype(np.int64), (2, 2)) is None
    assert pooling._compiled_max_pool(np.zeros((2, 3, 0, 8)), (2, 2)) is None
    # a transposed input still pools as the NumPy passes do
    t = td.tensor(x).transpose(2, 3)
    np.testing.assert_array_equal(
        F.max_pool2d(t, 2).data, _first_maxima_oracle(np.ascontiguousarray(t.data), (2, 2))[0]
    )


def test_pooling_layers_unbatched_and_second_order():
    x = td.tensor(np.random.default_rng(1).standard_normal((3, 6, 6)), requires_grad=True)
    assert nn.MaxPool2d(2)(x).shape == (3, 3, 3) and nn.AvgPool2d(3, 1, 1)(x).shape == (3, 6, 6)
    assert nn.AvgPool1d(2)(td.ones(2, 5)).shape == (2, 2)
    assert td.autograd.gradgradcheck(lambda t: F.avg_pool2d(t, 2, 1) ** 2, (x,))
    assert td.autograd.gradgradcheck(lambda t: F.max_pool2d(t, 2) ** 2, (x,))
    assert "kernel_size=(2, 2)" in repr(nn.MaxPool2d(2))


def _torch_bn(ours, cls):
    theirs = cls(ours.num_features, eps=ours.eps, momentum=ours.momentum).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.data))
        theirs.bias.copy_(torch.from_numpy(ours.bias.data))
    return theirs


@pytest.mark.parametrize(
    ("ours_cls", "theirs_cls", "shape"),
    [
        (nn.BatchNorm1d, torch.nn.BatchNorm1d, (6, 4)),
        (nn.BatchNorm1d, torch.nn.BatchNorm1d, (5, 4, 3)),
        (nn.BatchNorm2d, torch.nn.BatchNorm2d, (3, 4, 5, 2)),
    ],
)
def test_batch_norm_matches_torch_in_train_and_eval(ours_cls, theirs_cls, shape, batchnorm_path):
    rng = np.random.default_rng(2)
    ours = ours_cls(4, momentum=0.3, dtype=np.float64)
    ours.weight.data[:] = rng.uniform(0.5, 2, 4)
    ours.bias.data[:] = rng.standard_normal(4)
    theirs = _torch_bn(ours, theirs_cls)
    for step in range(3):  # running statistics follow torch's over several batches
        x = rng.standard_normal(shape) * 3 + step
        _grad_pair(ours, theirs, x, seed=step)
        for p, q in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
            np.testing.assert_allclose(p.grad.data, q.grad.numpy(), rtol=1e-10, atol=1e-12)
            p.grad, q.grad = None, None
        np.testing.assert_allclose(ours.running_mean.data, theirs.running_mean.numpy(), rtol=1e-12)
        np.testing.assert_allclose(ours.running_var.data, theirs.running_var.numpy(), rtol=1e-12)
    ours.eval(), theirs.eval()
    _grad_pair(ours, theirs, rng.standard_normal(shape))
    assert list(ours.state_dict()) == list(theirs.state_dict())  # num_batches_tracked too


def test_batch_norm_on_strided_float32_input_and_evaluated_without_grad_matches_torch(
    batchnorm_path,
):
    # training on a transposed (non-contiguous) float32 input, values and all three gradients,
    # then the evaluation-mode path that folds the running statistics, weight and bias into one
    # scale and shift per channel (taken when nothing needs a gradient); float32 tolerances:
    # both libraries sum 120 terms per channel in float32, in different orders
    rng = np.random.default_rng(5)
    ours = nn.BatchNorm2d(3, momentum=0.5)
    ours.weight.data[:] = rng.uniform(0.5, 2, 3).astype(np.float32)
    ours.bias.data[:] = rng.standard_normal(3).astype(np.float32)
    theirs = torch.nn.BatchNorm2d(3, momentum=0.5)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.data))
        theirs.bias.copy_(torch.from_numpy(ours.bias.data))
    x = (rng.standard_normal((4, 5, 3, 2)) * 2 + 1).astype(np.float32)
    ours_x = td.tensor(x, requires_grad=True)
    theirs_x = torch.from_numpy(x).requires_grad_(True)
    upstream = rng.standard_normal((4, 3, 5, 2)).astype(np.float32)
    out = ours(ours_x.transpose(1, 2))
    expected = theirs(theirs_x.transpose(1, 2))
    (out * td.tensor(upstream)).sum().backward()
    (expected * torch.from_numpy(upstream)).sum().backward()
    close = {"rtol": 1e-5, "atol": 1e-5}
    np.testing.assert_allclose(out.data, expected.detach().numpy(), **close)
    np.testing.assert_allclose(ours_x.grad.data, theirs_x.grad.numpy(), **close)
    np.testing.assert_allclose(ours.weight.grad.data, theirs.weight.grad.numpy(), **close)
    np.testing.assert_allclose(ours.bias.grad.data, theirs.bias.grad.numpy(), **close)
    ours.eval(), theirs.eval()
    with td.no_grad(), torch.no_grad():
        y = ours(td.tensor(x).transpose(1, 2))
        np.testing.assert_allclose(y.data, theirs(torch.from_numpy(x).transpose(1, 2)), **close)
    assert y.dtype == td.float32


def test_batch_norm_without_running_stats_or_affine_and_twice_differentiable(batchnorm_path):
    rng = np.random.default_rng(3)
    ours = nn.BatchNorm2d(2, affine=False, track_running_stats=False, dtype=np.float64).eval()
    theirs = torch.nn.BatchNorm2d(2, affine=False, track_running_stats=False).double().eval()
    _grad_pair(ours, theirs, rng.standard_normal((3, 2, 2, 2)))
    x = td.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    w = td.tensor(rng.uniform(0.5, 2, 3), requires_grad=True)
    fn = lambda x, w: F.batch_norm(x, None, None, w, None, training=True)  # noqa: E731
    assert td.autograd.gradcheck(fn, (x, w))
    assert td.autograd.gradgradcheck(fn, (x, w))


def test_batch_norm_in_training_is_one_node_twice_differentiable_in_every_input(batchnorm_path):
    # the fused node's formulas against central differences (float64), first and second order
    rng = np.random.default_rng(4)
    x = td.tensor(rng.standard_normal((3, 2, 2, 3)), requires_grad=True)
    w = td.tensor(rng.uniform(0.5, 2, 2), requires_grad=True)
    b = td.tensor(rng.standard_normal(2), requires_grad=True)
    fn = lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    assert fn(x, w, b).grad_fn.name() == "NativeBatchNormBackward0"
    assert td.autograd.gradcheck(fn, (x, w, b))
    assert td.autograd.gradgradcheck(fn, (x, w, b))
    # a subset of the inputs, against torch
    upstream = rng.standard_normal((3, 2, 2, 3))
    ours = F.batch_norm(x.detach(), None, None, w, None, training=True)
    (ours * td.tensor(upstream)).sum().backward()
    tw = torch.tensor(w.data, requires_grad=True)
    theirs = TF.batch_norm(torch.tensor(x.data), None, None, tw, None, training=True)
    (theirs * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(w.grad.data, tw.grad.numpy(), rtol=1e-10, atol=1e-12)
    # the input saved for the backward, changed in place: refused as torch refuses
    z = x * 1.0
    y = fn(z, w, b)
    z.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def _batch_norm_in_float64(x, w, b, upstream, eps):
    """The oracle: training-mode batch norm and its three gradients by the textbook formulas,
    in float64 NumPy (``x (N, C, H, W)``)."""
    x, upstream = x.astype(np.float64), upstream.astype(np.float64)
    w, b = w.astype(np.float64)[:, None, None], b.astype(np.float64)[:, None, None]
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True) + eps)
    xhat = (x - mean) * inv
    g_hat = upstream * w
    dx = inv * (
        g_hat
        - g_hat.mean(axis=(0, 2, 3), keepdims=True)
        - xhat * (g_hat * xhat).mean(axis=(0, 2, 3), keepdims=True)
    )
    dw = (upstream * xhat).sum(axis=(0, 2, 3))
    return xhat * w + b, dx, dw, upstream.sum(axis=(0, 2, 3))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_on_a_large_offset_batch_matches_a_float64_oracle(batchnorm_path, dtype):
    # a batch far from zero (mean 100, standard deviation 0.5) with 32 768 values per channel:
    # the variance must be summed around the mean (in float32, E[x^2] - mean^2 fails this).
    # float32 tolerances: the input itself is rounded to 6e-8 relative, about 1.2e-5 of one
    # standard deviation, which the normalization carries to the output and gradients
    rng = np.random.default_rng(11)
    x = (100 + 0.5 * rng.standard_normal((32, 3, 32, 32))).astype(dtype)
    w, b = rng.uniform(0.5, 2, 3).astype(dtype), rng.standard_normal(3).astype(dtype)
    upstream = rng.standard_normal(x.shape).astype(dtype)
    tx, tw, tb = (td.tensor(a, requires_grad=True) for a in (x, w, b))
    out = F.batch_norm(tx, None, None, tw, tb, training=True, eps=1e-5)
    (out * td.tensor(upstream)).sum().backward()
    want, dx, dw, db = _batch_norm_in_float64(x, w, b, upstream, 1e-5)
    tight = dtype == np.float64
    close = {"rtol": 1e-9, "atol": 1e-9} if tight else {"rtol": 2e-4, "atol": 2e-4}
    assert out.dtype == tx.grad.dtype == tw.grad.dtype == tb.grad.dtype == td.tensor(x).dtype
    np.testing.assert_allclose(out.data, want, **close)
    # dx is of the size of upstream / (std sqrt(n)): scale its tolerance by its spread
    scale = np.abs(dx).max()
    np.testing.assert_allclose(tx.grad.data / scale, dx / scale, **close)
    # dw and db sum 32 768 terms: relative to their sums of magnitudes
    np.testing.assert_allclose(tw.grad.data, dw, rtol=close["rtol"], atol=close["atol"] * 200)
    np.testing.assert_allclose(tb.grad.data, db, rtol=close["rtol"], atol=close["atol"] * 200)


def test_the_compiled_loops_take_contiguous_float32_and_float64_batches_only(monkeypatch):
    pytest.importorskip("numba")
    monkeypatch.setattr(batchnorm_passes, "FUSED_MIN_SIZE", 64)
    rows = np.zeros((4, 2, 8))
    assert batchnorm_passes.fused_loops(rows) is not None
    assert batchnorm_passes.fused_loops(rows.astype(np.float32)) is not None
    assert batchnorm_passes.fused_loops(rows[:, :, ::2].copy()) is None  # too small
    assert batchnorm_passes.fused_loops(np.zeros((4, 8, 2)).transpose(0, 2, 1)) is None
    assert batchnorm_passes.fused_loops(rows.astype(np.float16)) is None
    assert batchnorm_passes.fused_loops(rows, rows.astype(np.float32)) is None


def test_pool_and_batch_norm_errors():
    with pytest.raises(ShapeError, match=r"spatial size \(2, 2\) is smaller than the kernel"):
        F.max_pool2d(td.ones(1, 1, 2, 2), 3)
    with pytest.raises(InputError, match="at most half the kernel size"):
        F.avg_pool2d(td.ones(1, 1, 6, 6), 2, padding=2)
    with pytest.raises(ShapeError, match=r"input of shape \(6, 6\); expected 4 dims"):
        F.max_pool2d(td.ones(6, 6), 2)
    with pytest.raises(DTypeError, match="expected a floating dtype"):
        F.max_pool1d(td.tensor(np.ones((1, 1, 4), dtype=np.int64)), 2)
    with pytest.raises(ShapeError, match=r"BatchNorm2d: input of shape \(2, 3\); expected 4 dims"):
        nn.BatchNorm2d(3)(td.ones(2, 3))
    with pytest.raises(ShapeError, match=r"weight of shape \(2,\); expected \(3,\)"):
        F.batch_norm(td.ones(4, 3), None, None, td.ones(2), training=True)
    with pytest.raises(ShapeError, match="more than one value per channel"):
        nn.BatchNorm1d(3)(td.ones(1, 3))
    with pytest.raises(InputError, match="needs running_mean and running_var"):
        F.batch_norm(td.ones(4, 3), None, None)
    with pytest.raises(InputError, match="momentum=2"):
        nn.BatchNorm1d(3, momentum=2)


def test_a_state_dict_saved_before_batches_were_counted_still_loads():
    # states saved before BatchNorm had num_batches_tracked (as torch's version-1 states)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    old = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    old["1.running_mean"] = np.full(4, 0.5, dtype=np.float32)
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    assert fresh.load_state_dict(old) == ([], [])
    np.testing.assert_array_equal(fresh[1].running_mean.data, old["1.running_mean"])
    assert int(fresh[1].num_batches_tracked.data) == 0  # kept
    del old["1.running_var"]
    with pytest.raises(InputError, match=r"missing keys \['1.running_var'\]"):
        fresh.load_state_dict(old)
