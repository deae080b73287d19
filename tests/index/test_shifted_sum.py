"""Product first, then shifted sums (``tadiff.index.compile._shifted_sum``) against the
reference interpreter: convolutions and their derivatives in one and two dimensions, padded
and reversed indices, channels on one side or both, and definitions the form must refuse
(strides, dilations, sums narrower than the arrays)."""

import numpy as np
import pytest

from tadiff.errors import InputError
from tadiff.index import define
from tadiff.index.compile._shifted_sum import _unaliased_pitch, plan_shifted_sum

CONV1 = "y[b,o,t] = sum[c,k](x[b,c,t+k] * w[o,c,k])"
CONV2 = "y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])"
DEPTHWISE = "y[b,c,t] = sum[k](x[b,c,t+k] * w[c,k])"
CONV3 = "y[b,o,d,h,v] = sum[c,i,j,l](x[b,c,d+i,h+j,v+l] * w[o,c,i,j,l])"

# (definition or (definition, derivative), shapes): each takes the product-first form
TAKEN = [
    (CONV1, {"x": (2, 3, 9), "w": (4, 3, 3)}),
    ((CONV1, "x"), {"x": (2, 3, 9), "w": (4, 3, 3), "dy": (2, 4, 7)}),
    ((CONV2, "x"), {"x": (2, 3, 7, 6), "w": (5, 3, 3, 2), "dy": (2, 5, 5, 5)}),
    (CONV2, {"x": (1, 4, 6, 5), "w": (2, 4, 2, 3)}),
    ((DEPTHWISE, "x"), {"x": (2, 3, 10), "w": (3, 4), "dy": (2, 3, 7)}),
    ("y[b,o,t] = 0.5 * sum[c,k](x[b,c,t+k+1] * w[o,c,k])", {"x": (2, 3, 9), "w": (2, 3, 3)}),
    ("y[i] = sum[k](x[i - k + 2] * w[k])", {"x": (8,), "w": (3,)}),
    # a weight gradient: the window runs over the image (here short enough to unroll)
    ((CONV1, "w"), {"x": (2, 3, 9), "w": (4, 3, 3), "dy": (2, 4, 7)}),
    # output axes in another order than the product lays them out, and a group axis that both
    # operands share besides the contracted channels (the product's batch)
    ("y[o,t,b] = sum[c,k](x[b,c,t+k] * w[o,c,k])", {"x": (2, 3, 9), "w": (4, 3, 3)}),
    (
        ("y[g,b,o,t] = sum[c,k](x[g,b,c,t+k] * w[g,o,c,k])", "x"),
        {"x": (2, 3, 2, 8), "w": (2, 4, 2, 3), "dy": (2, 3, 4, 6)},
    ),
    # input gradients in the flat layout: a scale, channels last (the result transposed), a
    # group axis in two dimensions, three dimensions
    (
        ("y[b,o,h,v] = 0.5 * sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])", "x"),
        {"x": (2, 3, 7, 6), "w": (5, 3, 3, 2), "dy": (2, 5, 5, 5)},
    ),
    (
        ("y[b,t,o] = sum[c,k](x[b,t+k,c] * w[o,c,k])", "x"),
        {"x": (2, 9, 3), "w": (4, 3, 3), "dy": (2, 7, 4)},
    ),
    (
        ("y[g,b,o,h,v] = sum[c,i,j](x[g,b,c,h+i,v+j] * w[g,o,c,i,j])", "x"),
        {"x": (2, 2, 2, 6, 5), "w": (2, 3, 2, 2, 3), "dy": (2, 2, 3, 5, 3)},
    ),
    (
        (CONV3, "x"),
        {"x": (2, 2, 5, 6, 4), "w": (3, 2, 2, 3, 2), "dy": (2, 3, 4, 4, 3)},
    ),
]

REFUSED = [
    ("y[b,o,t] = sum[c,k](x[b,c,2*t+k] * w[o,c,k])", {"x": (2, 3, 9), "w": (4, 3, 3)}),
    ("y[b,o,t] = sum[c,k](x[b,c,t+2*k] * w[o,c,k])", {"x": (2, 3, 9), "w": (4, 3, 3)}),
    ("y[i] = sum[k=0:2](x[i+k] * w[k])", {"x": (8,), "w": (3,)}),  # w[2] is never read
    ("z[i,j] = sum[k](x[i,k] * w[k,j])", {"x": (3, 4), "w": (4, 5)}),  # no window
    ("y[i] = sum[k](x[i+k] * x[k])", {"x": (8,)}),  # one array twice
    ("y[i] = sum[k](x[i+k] * w[k] * w[k])", {"x": (8,), "w": (3,)}),  # three factors
]


def _function(entry):
    if isinstance(entry, tuple):
        source, wrt = entry
        return define(source).grad(wrt)
    return define(entry)


@pytest.mark.parametrize(("entry", "shapes"), TAKEN, ids=[str(e) for e, _ in TAKEN])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["flat", "exact"])
def test_product_first_computes_what_the_interpreter_computes(entry, shapes, dtype, layout):
    f = _function(entry)
    shapes = {a: shapes[a] for a in f.args}
    out_shape = f.output_shape(**shapes)
    kernel = plan_shifted_sum(f, shapes, dtype, out_shape, only_if_smaller=False, layout=layout)
    assert kernel is not None, f"{f} should take the product-first form"
    assert layout == "flat" or "(exact layout)" in kernel.source
    rng = np.random.default_rng(0)
    arrays = {a: rng.standard_normal(s) for a, s in shapes.items()}
    got = kernel({a: v.astype(dtype) for a, v in arrays.items()})
    assert got.dtype == dtype and got.shape == tuple(out_shape)
    # float32: a few terms of size ~1 summed in another order (round-off ~1e-6 relative)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(got, f.reference(**arrays), rtol=tol, atol=tol)


@pytest.mark.parametrize(("entry", "shapes"), REFUSED, ids=[str(e) for e, _ in REFUSED])
def test_forms_the_shifted_views_cannot_express_are_refused(entry, shapes):
    f = _function(entry)
    shapes = {a: shapes[a] for a in f.args}
    out_shape = f.output_shape(**shapes)
    assert plan_shifted_sum(f, shapes, np.float64, out_shape, only_if_smaller=False) is None


def test_taken_only_where_the_product_is_smaller_than_im2col():
    # a convolution's input gradient with fewer input than output channels: taken; its
    # forward (more output channels): left to im2col
    f = define(CONV2)
    narrow_out = {"x": (2, 4, 10, 10), "w": (16, 4, 3, 3), "dy": (2, 16, 8, 8)}
    g = f.grad("x")
    assert plan_shifted_sum(g, narrow_out, np.float32, g.output_shape(**narrow_out)) is not None
    forward = {a: narrow_out[a] for a in f.args}
    assert plan_shifted_sum(f, forward, np.float32, f.output_shape(**forward)) is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", range(12))
def test_input_gradients_of_random_convolutions_take_the_flat_layout(seed, dtype):
    # geometries drawn at random: 1 to 3 dimensions, kernels of 1 to 4, images from the
    # kernel's size up, 1 to 17 images and channels (odd and power-of-two rows alike)
    rng = np.random.default_rng(seed)
    dims = int(rng.integers(1, 4))
    kernel = tuple(int(k) for k in rng.integers(1, 5, dims))
    image = tuple(k + int(rng.integers(0, 7)) for k in kernel)
    batch, c_in, c_out = (int(n) for n in rng.integers(1, 18, 3))
    names, window = "dhv"[:dims], "ijl"[:dims]
    reads = ",".join(f"{a}+{k}" for a, k in zip(names, window, strict=True))
    f = define(
        f"y[b,o,{','.join(names)}] = sum[c,{','.join(window)}]"
        f"(x[b,c,{reads}] * w[o,c,{','.join(window)}])"
    ).grad("x")
    out = tuple(n - k + 1 for n, k in zip(image, kernel, strict=True))
    shapes = {"x": (batch, c_in, *image), "w": (c_out, c_in, *kernel), "dy": (batch, c_out, *out)}
    shapes = {a: shapes[a] for a in f.args}
    out_shape = f.output_shape(**shapes)
    kernel_fn = plan_shifted_sum(f, shapes, dtype, out_shape, False, layout="flat")
    assert "flat layout" in kernel_fn.source
    arrays = {a: rng.standard_normal(s) for a, s in shapes.items()}
    got = kernel_fn({a: v.astype(dtype) for a, v in arrays.items()})
    # float32: sums of up to 17 * 64 products of size ~1 in another order than the oracle
    tol = 1e-12 if dtype == np.float64 else 5e-5
    np.testing.assert_allclose(got, _input_gradient(arrays["dy"], arrays["w"]), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("seed", range(8))
def test_input_gradients_of_zero_padded_convolutions_take_the_flat_layout(seed, dtype):
    # padding written as clipped sum ranges (the window offsets that read inside x): the input
    # gradient's offsets then reach before and past its output, so the grid is longer than the
    # output and the result a window of it; padding before and after drawn independently
    rng = np.random.default_rng(100 + seed)
    dims = int(rng.integers(1, 3))
    kernel = tuple(int(k) for k in rng.integers(2, 5, dims))
    pads = [tuple(int(p) for p in rng.integers(0, k, 2)) for k in kernel]
    image = tuple(k + int(rng.integers(0, 5)) for k in kernel)
    batch, c_in, c_out = (int(n) for n in rng.integers(1, 6, 3))
    names, window = "hv"[:dims], "ij"[:dims]
    outs, sums, reads = [], [], []
    for a, (h, k, (lo, hi)) in enumerate(zip(names, window, pads, strict=True), start=2):
        outs.append(f"{h}:x.shape[{a}] + {lo + hi + 1} - w.shape[{a}]")
        sums.append(f"{k}=max(0, {lo} - {h}):min(w.shape[{a}], x.shape[{a}] + {lo} - {h})")
        reads.append(f"{h} + {k} - {lo}")
    f = define(
        f"y[b,o,{','.join(outs)}] = sum[c,{','.join(sums)}]"
        f"(x[b,c,{','.join(reads)}] * w[o,c,{','.join(window)}])"
    ).grad("x")
    out = tuple(n + lo + hi - k + 1 for n, k, (lo, hi) in zip(image, kernel, pads, strict=True))
    shapes = {"x": (batch, c_in, *image), "w": (c_out, c_in, *kernel), "dy": (batch, c_out, *out)}
    shapes = {a: shapes[a] for a in f.args}
    kernel_fn = plan_shifted_sum(f, shapes, dtype, f.output_shape(**shapes), False, "flat")
    assert kernel_fn is not None and "flat layout" in kernel_fn.source
    arrays = {a: rng.standard_normal(s) for a, s in shapes.items()}
    got = kernel_fn({a: v.astype(dtype) for a, v in arrays.items()})
    # the oracle: the unpadded input gradient of the padded input, cropped to the input
    crop = tuple(slice(lo, lo + n) for (lo, _), n in zip(pads, image, strict=True))
    expected = _input_gradient(arrays["dy"], arrays["w"])[(slice(None), slice(None), *crop)]
    assert got.shape == expected.shape == shapes["x"]
    # float32: sums of up to 5 * 16 products of size ~1 in another order than the oracle
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


def _input_gradient(dy, w):
    """The input gradient of a stride-1 convolution by its definition, one window offset at
    a time (each adds its channel product into the input positions that offset reads)."""
    batch, _, *out = dy.shape
    kernel = w.shape[2:]
    dx = np.zeros((batch, w.shape[1], *(n + k - 1 for n, k in zip(out, kernel, strict=True))))
    for at in np.ndindex(*kernel):
        reads = tuple(slice(a, a + n) for a, n in zip(at, out, strict=True))
        dx[(slice(None), slice(None), *reads)] += np.einsum(
            "bo...,oc->bc...", dy, w[(slice(None), slice(None), *at)]
        )
    return dx


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_a_non_finite_weight_adds_only_the_terms_the_definition_has(bad):
    # the flat layout pads the image gradient with zeros that meet every weight: 0 * inf would
    # put NaN on outputs whose terms never read the bad weight; such calls take the exact one
    f = define(CONV2).grad("x")
    shapes = {"x": (3, 2, 7, 6), "w": (4, 2, 3, 3), "dy": (3, 4, 5, 4)}
    kernel_fn = plan_shifted_sum(f, shapes, np.float64, f.output_shape(**shapes), False, "flat")
    assert "flat layout" in kernel_fn.source
    rng = np.random.default_rng(1)
    arrays = {a: rng.standard_normal(s) for a, s in shapes.items()}
    arrays["w"][1, 0, 2, 2] = bad
    got = kernel_fn(arrays)
    expected = f.reference(**arrays)
    assert np.isfinite(expected).any() and not np.isfinite(expected).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_planes_a_multiple_of_4_kib_apart_are_laid_out_at_a_longer_pitch(dtype):
    # 16 images of 8 x 8: the product's rows would be 16 * 64 values apart, a multiple of
    # 4 KiB in both dtypes; the planes get a longer pitch, cropped off at the end
    itemsize = np.dtype(dtype).itemsize
    assert 16 * 64 * itemsize % 4096 == 0
    pitch = _unaliased_pitch(64, 16, itemsize)
    assert pitch > 64 and 256 <= 16 * pitch * itemsize % 4096 <= 4096 - 256
    assert _unaliased_pitch(100, 32, itemsize) == 100  # 12.5 KiB or 25 KiB apart: kept
    f = define(CONV2).grad("x")
    shapes = {"x": (16, 2, 8, 8), "w": (3, 2, 3, 3), "dy": (16, 3, 6, 6)}
    kernel_fn = plan_shifted_sum(f, shapes, dtype, f.output_shape(**shapes), False, "flat")
    rng = np.random.default_rng(2)
    arrays = {a: rng.standard_normal(s) for a, s in shapes.items()}
    got = kernel_fn({a: v.astype(dtype) for a, v in arrays.items()})
    tol = 1e-12 if dtype == np.float64 else 2e-5  # float32: sums of 27 products of size ~1
    np.testing.assert_allclose(got, _input_gradient(arrays["dy"], arrays["w"]), rtol=tol, atol=tol)


def test_an_unknown_layout_is_an_input_error():
    f = define(CONV1)
    shapes = {"x": (2, 3, 9), "w": (4, 3, 3)}
    with pytest.raises(InputError, match="layout='fast'"):
        plan_shifted_sum(f, shapes, np.float64, f.output_shape(**shapes), layout="fast")


@pytest.mark.parametrize(
    ("image", "kernel", "dtype", "taken"),
    [
        (8, 3, np.float64, "flat"),  # 9 offsets over a grid 1.56x the image: 5.1 extra passes
        (8, 3, np.float32, "flat"),
        (28, 5, np.float64, "exact"),  # 25 offsets, 1.31x: 7.7 passes, over float64's 6
        (28, 5, np.float32, "flat"),  # under float32's 20
        (28, 7, np.float32, "exact"),  # 49 offsets, 1.47x: 23 passes
    ],
)
def test_the_flat_layout_is_taken_where_its_margin_is_cheap(image, kernel, dtype, taken):
    f = define(CONV2).grad("x")
    side = image + kernel - 1
    shapes = {"x": (2, 2, side, side), "w": (3, 2, kernel, kernel), "dy": (2, 3, image, image)}
    auto = plan_shifted_sum(f, shapes, dtype, f.output_shape(**shapes), False)
    assert f"({taken} layout)" in auto.source
