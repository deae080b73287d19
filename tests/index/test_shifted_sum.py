"""Product first, then shifted sums (``tadiff.index.compile._shifted_sum``) against the
reference interpreter: convolutions and their derivatives in one and two dimensions, padded
and reversed indices, channels on one side or both, and definitions the form must refuse
(strides, dilations, sums narrower than the arrays)."""

import numpy as np
import pytest

from tadiff.index import define
from tadiff.index.compile._shifted_sum import plan_shifted_sum

CONV1 = "y[b,o,t] = sum[c,k](x[b,c,t+k] * w[o,c,k])"
CONV2 = "y[b,o,h,v] = sum[c,i,j](x[b,c,h+i,v+j] * w[o,c,i,j])"
DEPTHWISE = "y[b,c,t] = sum[k](x[b,c,t+k] * w[c,k])"

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
def test_product_first_computes_what_the_interpreter_computes(entry, shapes, dtype):
    f = _function(entry)
    shapes = {a: shapes[a] for a in f.args}
    out_shape = f.output_shape(**shapes)
    kernel = plan_shifted_sum(f, shapes, dtype, out_shape, only_if_smaller=False)
    assert kernel is not None, f"{f} should take the product-first form"
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
