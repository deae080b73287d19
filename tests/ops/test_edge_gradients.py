"""Gradients at the edges, against PyTorch: every unary and binary op of the VJP table
(``tadiff.ops.derivatives``), on inputs drawn from zeros, ±0, ±1, ±inf, ties, constant tensors
and empty tensors.

Values and gradients must equal torch's, NaN where torch's is NaN and ±inf where torch's is ±inf,
and the backward pass must not emit a NumPy ``RuntimeWarning``. At ties the compared rules are
torch's documented conventions (``maximum`` splits the gradient equally, ``amax``/``max()``
share it among tied elements, ``max(dim)`` gives it to the first maximum), not an algorithm's
accident. Hypothesis keeps the inputs small and the examples few, so the file runs in seconds.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tadiff as td
from tadiff.ops import derivatives

torch = pytest.importorskip("torch")

INF = math.inf
EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.0, 3.0, INF, -INF]
_SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _values(shape):
    """Arrays of ``shape`` over the edge values: small alphabets give ties and constant
    tensors often; a few ordinary numbers keep the smooth case in the mix."""
    alphabet = st.lists(st.sampled_from(EDGES), min_size=1, max_size=4, unique=True).map(sorted)
    plain = st.floats(-3, 3, allow_nan=False).map(lambda v: round(v, 3))
    return alphabet.flatmap(
        lambda letters: hnp.arrays(
            np.float64, shape, elements=st.one_of(st.sampled_from(letters), plain)
        )
    )


# ---- the ops, written once against a module m (tadiff or torch) -----------------------------

UNARY = {
    "neg": lambda m, x: -x,
    "exp": lambda m, x: m.exp(x),
    "log": lambda m, x: m.log(x),
    "log1p": lambda m, x: m.log1p(x),
    "expm1": lambda m, x: m.expm1(x),
    "sin": lambda m, x: m.sin(x),
    "cos": lambda m, x: m.cos(x),
    "tan": lambda m, x: m.tan(x),
    "tanh": lambda m, x: m.tanh(x),
    "erf": lambda m, x: m.erf(x),
    "erfc": lambda m, x: m.erfc(x),
    "lgamma": lambda m, x: m.lgamma(x),
    "digamma": lambda m, x: m.digamma(x),
    "polygamma1": lambda m, x: m.polygamma(1, x),
    "sigmoid": lambda m, x: m.sigmoid(x),
    "relu": lambda m, x: m.relu(x),
    "sqrt": lambda m, x: m.sqrt(x),
    "abs": lambda m, x: m.abs(x),
    "sign": lambda m, x: m.sign(x),
    "asin": lambda m, x: m.asin(x),
    "acos": lambda m, x: m.acos(x),
    "atan": lambda m, x: m.atan(x),
    "sinh": lambda m, x: m.sinh(x),
    "cosh": lambda m, x: m.cosh(x),
    "asinh": lambda m, x: m.asinh(x),
    "acosh": lambda m, x: m.acosh(x),
    "atanh": lambda m, x: m.atanh(x),
    "log2": lambda m, x: m.log2(x),
    "log10": lambda m, x: m.log10(x),
    "exp2": lambda m, x: m.exp2(x),
    "reciprocal": lambda m, x: m.reciprocal(x),
    "rsqrt": lambda m, x: m.rsqrt(x),
    "floor": lambda m, x: m.floor(x),
    "ceil": lambda m, x: m.ceil(x),
    "trunc": lambda m, x: m.trunc(x),
    "round": lambda m, x: m.round(x),
    "frac": lambda m, x: m.frac(x),
    "nan_to_num": lambda m, x: m.nan_to_num(x, posinf=5.0, neginf=-5.0),
    "clamp": lambda m, x: m.clamp(x, -1.0, 0.5),
    "clamp_point": lambda m, x: m.clamp(x, 0.5, 0.5),
    "clamp_min": lambda m, x: m.clamp_min(x, 0.5),
    "clamp_max": lambda m, x: m.clamp_max(x, -1.0),
    "fmod_number": lambda m, x: m.fmod(x, 1.5),
    "remainder_number": lambda m, x: x % -1.5,
    "clone": lambda m, x: x.clone(),
    "to_float32": lambda m, x: x.to(m.float32),
    "pow_0": lambda m, x: x**0,
    "pow_half": lambda m, x: x**0.5,
    "pow_2": lambda m, x: x**2,
    "pow_3": lambda m, x: x**3,
    "pow_-1": lambda m, x: x**-1,
    "pow_-1.5": lambda m, x: x**-1.5,
    "rpow_0": lambda m, x: 0.0**x,
    "rpow_2": lambda m, x: 2.0**x,
    "rpow_-2": lambda m, x: (-2.0) ** x,
    "rsub": lambda m, x: 2.0 - x,
    "rdiv": lambda m, x: 2.0 / x,
    "mul_scalar": lambda m, x: x * -3.0,
    "div_scalar": lambda m, x: x / 4.0,
    "div_by_zero": lambda m, x: x / 0.0,
    "add_scalar": lambda m, x: x + 1.0,
    "sub_scalar": lambda m, x: x - 1.0,
    # torch.special
    "erfinv": lambda m, x: m.special.erfinv(x),
    "erfcx": lambda m, x: m.special.erfcx(x),
    "ndtr": lambda m, x: m.special.ndtr(x),
    "ndtri": lambda m, x: m.special.ndtri(x),
    "log_ndtr": lambda m, x: m.special.log_ndtr(x),
    "i0": lambda m, x: m.special.i0(x),
    "i0e": lambda m, x: m.special.i0e(x),
    "i1": lambda m, x: m.special.i1(x),
    "i1e": lambda m, x: m.special.i1e(x),
    "sinc": lambda m, x: m.special.sinc(x),
    "entr": lambda m, x: m.special.entr(x),
    "logit": lambda m, x: m.special.logit(x),
    "logit_eps": lambda m, x: m.special.logit(x, 0.25),
}

# reductions and normalizations over a dim (drawn) or over everything
REDUCTIONS = {
    "sum": lambda m, x, d: x.sum(d),
    "sum_all": lambda m, x, d: x.sum(),
    "mean": lambda m, x, d: x.mean(d),
    "mean_all": lambda m, x, d: x.mean(),
    "var": lambda m, x, d: x.var(d),
    "var_all": lambda m, x, d: x.var(),
    "var_biased": lambda m, x, d: m.var(x, d, correction=0),
    "var_correction_2": lambda m, x, d: m.var(x, d, correction=2),
    "var_all_correction_2": lambda m, x, d: m.var(x, correction=2),
    "std": lambda m, x, d: x.std(d),
    "std_all": lambda m, x, d: x.std(),
    "std_biased": lambda m, x, d: m.std(x, d, correction=0),
    "std_correction_2": lambda m, x, d: m.std(x, d, correction=2),
    "std_all_correction_2": lambda m, x, d: m.std(x, correction=2),
    "prod": lambda m, x, d: x.prod(d),
    "prod_all": lambda m, x, d: x.prod(),
    "amax": lambda m, x, d: m.amax(x, d),
    "amin": lambda m, x, d: m.amin(x, d),
    "max_all": lambda m, x, d: x.max(),
    "min_all": lambda m, x, d: x.min(),
    "max_dim": lambda m, x, d: x.max(d).values,
    "min_dim": lambda m, x, d: x.min(d).values,
    "logsumexp": lambda m, x, d: m.logsumexp(x, d),
    "norm": lambda m, x, d: m.norm(x, dim=d),
    "norm_all": lambda m, x, d: m.norm(x),
    "vector_norm_1": lambda m, x, d: m.linalg.vector_norm(x, 1, dim=d),
    "softmax": lambda m, x, d: m.softmax(x, d),
    "log_softmax": lambda m, x, d: m.log_softmax(x, d),
    "cumsum": lambda m, x, d: m.cumsum(x, d),
    "cumprod": lambda m, x, d: m.cumprod(x, d),
    "matrix_norm_fro": lambda m, x, d: m.linalg.matrix_norm(x.reshape(1, -1) * x.reshape(-1, 1)),
}

BINARY = {
    "add": lambda m, a, b: a + b,
    "sub": lambda m, a, b: a - b,
    "mul": lambda m, a, b: a * b,
    "div": lambda m, a, b: a / b,
    "pow": lambda m, a, b: a**b,
    "maximum": lambda m, a, b: m.maximum(a, b),
    "minimum": lambda m, a, b: m.minimum(a, b),
    "atan2": lambda m, a, b: m.atan2(a, b),
    "logaddexp": lambda m, a, b: m.logaddexp(a, b),
    "remainder": lambda m, a, b: m.remainder(a, b),
    "fmod": lambda m, a, b: m.fmod(a, b),
    "where": lambda m, a, b: m.where(a > b, a, b),
    "clamp_tensor_min": lambda m, a, b: m.clamp(a, min=b),
    "clamp_tensor_max": lambda m, a, b: m.clamp(a, max=b),
    "clamp_min_tensor": lambda m, a, b: m.clamp_min(a, b),
    "clamp_max_tensor": lambda m, a, b: m.clamp_max(a, b),
    "xlogy": lambda m, a, b: m.special.xlogy(a, b),
    "xlog1py": lambda m, a, b: m.special.xlog1py(a, b),
}

# Nodes of the VJP table this file does not drive, and why.
NOT_HERE = {
    # shapes, views and indexing: no arithmetic, tested on every shape in test_op_table.py
    "ViewBackward0", "SqueezeBackward1", "UnsqueezeBackward0", "TransposeBackward0", "TBackward0",
    "PermuteBackward0", "ExpandBackward0", "FlipBackward0", "CatBackward0", "StackBackward0",
    "UnbindBackward0", "SplitBackward0", "SplitWithSizesBackward0", "IndexBackward0",
    "SliceBackward0", "SelectBackward0", "SliceOneBackward0", "SelectOneBackward0",
    "DiagonalBackward0", "IndexScatterBackward0",
    "ConstantPadNdBackward0", "IndexPutBackward0", "CopySlices", "AsStridedBackward0",
    "GatherBackward0", "ScatterAddBackward0", "IndexAddBackward0",
    # pooling: ties, NaN and -inf against a brute-force oracle in tests/nn/test_nn_pool_batchnorm.py
    "MaxPoolTiledBackward0",
    # products of several operands and decompositions: test_op_table.py and test_linalg.py
    "MmBackward0", "AddmmBackward0", "BmmBackward0", "MvBackward0", "DotBackward0",
    "EinsumBackward0", "LinalgCrossBackward0", "LinalgInvBackward0", "LinalgDetBackward0",
    "LinalgSlogdetBackward0",
    "LinalgSolveBackward0", "LinalgSolveTriangularBackward0", "LinalgCholeskyBackward0",
    "LinalgEighBackward0", "LinalgSvdBackward0", "LinalgQrBackward0",
}  # fmt: skip


# ---- running one case on both libraries ------------------------------------------------------


def _run(lib, fn, arrays, upstream):
    """(value, gradients, exception) of ``fn`` on ``arrays`` under ``lib``; the backward of tadiff
    runs with NumPy warnings turned into errors."""
    make = td.tensor if lib is td else torch.tensor
    xs = [make(a, requires_grad=True) for a in arrays]
    try:
        with warnings.catch_warnings():
            # forward: NumPy's RuntimeWarning at domain edges (a documented difference) and the
            # UserWarning both libraries give for var() without degrees of freedom
            warnings.simplefilter("ignore")
            out = fn(lib, *xs)
    except Exception as exc:  # the forward refused: the other library must refuse as well
        return None, None, exc
    value = out.detach().numpy() if lib is torch else out.data
    g = make(np.broadcast_to(upstream, value.shape).astype(value.dtype))
    if lib is td:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            grads = td.autograd.grad(out, xs, g, allow_unused=True)
    else:
        grads = torch.autograd.grad(out, xs, g, allow_unused=True)
    arrays_out = [
        np.zeros(a.shape) if gr is None else np.asarray(gr.numpy() if lib is torch else gr.data)
        for gr, a in zip(grads, arrays, strict=True)
    ]
    return np.asarray(value), arrays_out, None


# torch's trigamma (the value of polygamma(1, x), the gradient of digamma) is off by up to 5e-10
# relative; tadiff's is within 1e-14 of mpmath (test_gamma.py)
RTOL = {"polygamma1": 1e-9, "digamma": 1e-9}


def _negative_integers(x):
    return (x < 0) & (x == np.floor(x)) & np.isfinite(x)


# Deliberate differences, as fixes to torch's answer: (op, "value" or input number) ->
# fix(torch's array, x, upstream). trigamma (polygamma(1, x), digamma's derivative) is +inf at the
# poles 0, -1, -2, ...: torch returns a large finite number at the negative integers (its series'
# rounding). polygamma(n, x) tends to 0 as x -> +inf and has no limit at -inf: torch's
# polygamma(2, ±inf) is NaN and -inf.
TORCH_FIXES = {
    ("polygamma1", "value"): lambda v, x, g: np.where(_negative_integers(x), np.inf, v),
    # i0 and i1 are ±inf at ±inf (torch: NaN); erfcx' tends to 0 at +inf (torch: 2·inf·0 = NaN)
    ("i0", "value"): lambda v, x, g: np.where(np.isinf(x), np.inf, v),
    ("i1", "value"): lambda v, x, g: np.where(np.isinf(x), x, v),
    ("erfcx", 0): lambda v, x, g: np.where(x == np.inf, 0.0, v),
    ("i0", 0): lambda v, x, g: np.where(np.isinf(x), g * x, v),
    ("log_ndtr", 0): lambda v, x, g: np.where(x == -np.inf, g * np.inf, v),  # tends to -x
    # logit' is +inf at 0 (times g's sign): torch's scalar loop says so, its vectorized loop
    # gives 1/-0 = -inf at -0 (so torch's answer there depends on the tensor's length)
    ("logit", 0): lambda v, x, g: np.where(x == 0, g * np.inf, v),
    ("digamma", 0): lambda v, x, g: np.where(_negative_integers(x), g * np.inf, v),
    ("polygamma1", 0): lambda v, x, g: np.where(np.isinf(x), np.where(x > 0, 0.0, np.nan), v),
}


def _compare(name, fn, arrays, upstream):
    v1, g1, e1 = _run(td, fn, arrays, upstream)
    v2, g2, e2 = _run(torch, fn, arrays, upstream)
    if e2 is not None or e1 is not None:
        assert e1 is not None and e2 is not None, f"{name}: tadiff {e1!r}, torch {e2!r}"
        return
    fix = TORCH_FIXES.get((name, "value"))
    v2 = v2 if fix is None else fix(v2, arrays[0], upstream)
    g2 = [
        b if (name, i) not in TORCH_FIXES else TORCH_FIXES[name, i](b, arrays[0], upstream)
        for i, b in enumerate(g2)
    ]
    # Values and gradients come from different libm code paths: a few ulps apart (rtol), and
    # terms that cancel (softmax's g − Σ g·r) leave rounding of the terms' size (atol); the
    # positions of NaN and of ±inf must agree exactly.
    rtol = RTOL.get(name, 1e-10)
    np.testing.assert_allclose(v1, v2, rtol=rtol, atol=1e-13, err_msg=f"{name}: value")
    for i, (a, b) in enumerate(zip(g1, g2, strict=True)):
        assert a.shape == b.shape, f"{name}: gradient {i} shape"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-13, err_msg=f"{name}: gradient {i}")


def _upstream(draw, shape):
    return draw(hnp.arrays(np.float64, shape, elements=st.sampled_from([1.0, -0.5, 2.0, 0.0])))


_SHAPES = hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3)


@pytest.mark.parametrize("name", sorted(UNARY))
@_SETTINGS
@given(data=st.data())
def test_unary_op_at_edges_matches_torch(name, data):
    x = data.draw(_SHAPES.flatmap(_values), label="x")
    _compare(name, UNARY[name], [x], data.draw(st.sampled_from([1.0, -0.5, 2.0])))


# A deliberate difference: the gradients of prod and cumprod multiply the *other* elements,
# which is right at infinite entries too; torch divides the result by the entry there (inf / inf
# = NaN). Against torch on finite input here, against brute force with infinities below.
FINITE_ONLY = {"prod", "prod_all", "cumprod"}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@_SETTINGS
@given(data=st.data())
def test_reduction_at_edges_matches_torch(name, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
    x = data.draw(_values(shape), label="x")
    if name in FINITE_ONLY:
        x = np.where(np.isfinite(x), x, 2.0)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    _compare(name, lambda m, t: REDUCTIONS[name](m, t, dim), [x], 1.5)


@pytest.mark.parametrize("name", sorted(BINARY))
@_SETTINGS
@given(data=st.data())
def test_binary_op_at_edges_matches_torch(name, data):
    shapes = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3)
    )
    a = data.draw(_values(shapes.input_shapes[0]), label="a")
    b = data.draw(_values(shapes.input_shapes[1]), label="b")
    _compare(name, BINARY[name], [a, b], data.draw(st.sampled_from([1.0, -0.5])))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy in the forward, at inf · 0
@_SETTINGS
@given(x=_values((4,)), dim_first=st.booleans())
def test_prod_gradient_is_the_product_of_the_other_elements(x, dim_first):
    # brute force: each entry's partial derivative multiplies the other entries, in Python
    want = np.array([math.prod(np.delete(x, i).tolist()) for i in range(4)])  # Python floats
    t = td.tensor(x, requires_grad=True)
    (t.reshape(2, 2).prod(0).prod() if dim_first else t.prod()).backward()
    np.testing.assert_allclose(t.grad.data, want, rtol=1e-15, atol=0)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy in the forward, at inf · 0
@_SETTINGS
@given(x=_values((4,)), g=hnp.arrays(np.float64, 4, elements=st.sampled_from([1.0, -0.5, 2.0])))
def test_cumprod_gradient_multiplies_the_other_elements(x, g):
    # brute force: d/dx_i Σ_j g_j Π_{k≤j} x_k = Σ_{j≥i} g_j Π_{k≤j, k≠i} x_k, where that is a
    # well-defined extended real (no inf·0 in a term, not inf − inf in the sum)
    want = []
    for i in range(4):
        terms = [float(g[j]) * math.prod(np.delete(x[: j + 1], i).tolist()) for j in range(i, 4)]
        assume(not any(map(math.isnan, terms)) and not {INF, -INF} <= set(terms))
        want.append(INF if INF in terms else -INF if -INF in terms else math.fsum(terms))
    t = td.tensor(x, requires_grad=True)
    td.cumprod(t, 0).backward(td.tensor(g))
    np.testing.assert_allclose(t.grad.data, want, rtol=1e-14, atol=1e-15)


# NaN inputs and infinite or NaN upstream gradients, against torch: where the result is NaN,
# which elements a zero factor keeps at exactly 0 (torch's where/masked_fill/zeros_like) and
# which it turns into NaN (torch's multiplications). The deliberate differences at NaN:
NAN_DIFFERENCES = {
    # the product of the other elements, exact (see FINITE_ONLY); torch divides: NaN everywhere
    "prod", "prod_all", "cumprod",
    # NaN at a NaN input; torch's small-argument branch gives the derivative at 0 (0.5)
    "i1", "i1e",
}  # fmt: skip
NAN_INPUTS = [
    np.array([1.0, math.nan, -2.0, 0.5]),
    np.array([[math.nan, 1.0], [2.0, 3.0]]),
    np.array([math.nan, math.nan]),
    np.array(math.nan),
]
NAN_CASES = [
    *(("unary", name) for name in UNARY),
    *(("reduction", name) for name in REDUCTIONS),
    *(("binary", name) for name in BINARY),
]


@pytest.mark.parametrize(("group", "name"), NAN_CASES, ids=[f"{g}-{n}" for g, n in NAN_CASES])
def test_nan_inputs_and_nonfinite_upstream_gradients_match_torch(group, name):
    if name in NAN_DIFFERENCES:
        fn = UNARY.get(name) or (lambda m, t: REDUCTIONS[name](m, t, -1))
        x = NAN_INPUTS[0]  # NaN at position 1
        got = _run(td, fn, [x], 1.0)[1][0][1]
        if name in FINITE_ONLY:
            # multilinear in each element: the derivative at position 1 does not depend on
            # x[1], so torch's on any finite value there is the oracle
            want = _run(torch, fn, [np.where(np.isnan(x), 7.0, x)], 1.0)[1][0][1]
            assert got == want, f"{name}: {got} at the NaN input, {want} without it"
        else:
            assert np.isnan(got), f"{name}: {got} at the NaN input"
        return
    for upstream in (1.0, math.nan, math.inf):
        if group == "binary":
            pairs = [
                (np.array([1.0, math.nan, 2.0]), np.array([math.nan, 1.0, 2.0])),
                (np.array([math.nan, 3.0]), np.array(2.0)),  # broadcast
            ]
            for a, b in pairs:
                _compare(name, BINARY[name], [a, b], upstream)
            continue
        for x in NAN_INPUTS:
            if group == "reduction":
                if x.ndim == 0:
                    continue
                _compare(name, lambda m, t: REDUCTIONS[name](m, t, -1), [x], upstream)
            else:
                _compare(name, UNARY[name], [x], upstream)


NAMED_EDGES = {
    "std of a constant": (lambda m, x: x.std(), [[2.0, 2.0, 2.0]]),
    "std per row, one row constant": (lambda m, x: x.std(dim=1), [[[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]]),  # noqa: E501
    "pow at 0 ** 0": (lambda m, x, e: x**e, [[0.0, 1.0], [0.0, 0.0]]),
    "0.0 ** b": (lambda m, b: 0.0**b, [[0.0, 1.0, 2.5]]),
    "Frobenius norm of a zero matrix": (lambda m, x: m.linalg.matrix_norm(x), [np.zeros((2, 2))]),
    "norm of a zero vector": (lambda m, x: m.linalg.vector_norm(x), [np.zeros(3)]),
    "var with one element": (lambda m, x: x.var(), [[2.0]]),
    "std with one element": (lambda m, x: x.std(), [[2.0]]),
    "var with as many elements as the correction": (lambda m, x: m.var(x, correction=2), [[1.0, 3.0]]),  # noqa: E501
    "std over a dim of the correction's size": (lambda m, x: m.std(x, dim=1, correction=2), [[[1.0, 3.0], [2.0, 2.0]]]),  # noqa: E501
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NAMED_EDGES))
def test_named_edge_points_match_torch_and_do_not_warn(name):
    fn, values = NAMED_EDGES[name]
    arrays = [np.array(v, dtype=np.float64) for v in values]
    upstream = 1.0
    v1, g1, _ = _run(td, fn, arrays, upstream)
    v2, g2, _ = _run(torch, fn, arrays, upstream)
    np.testing.assert_allclose(v1, v2, rtol=1e-12, atol=0)
    for a, b in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=0)
    # and nothing from NumPy on the way, forward or backward (torch's own UserWarning for a
    # variance without degrees of freedom is given by tadiff too)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xs = [td.tensor(a, requires_grad=True) for a in arrays]
        td.autograd.grad(fn(td, *xs).sum(), xs)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], caught
    if "correction" in name or "one element" in name:
        assert any("degrees of freedom is <= 0" in str(w.message) for w in caught)


def _nodes_of(out):
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(n for n, _ in node.next_functions)
    return {type(n) for n in seen}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(-1) & co. in the forward
def test_every_unary_and_binary_node_of_the_vjp_table_is_driven_here():
    bases = (derivatives.OpNode, derivatives.IndexedOpNode, derivatives.MultiOpNode)
    table = {
        name: cls
        for name, cls in vars(derivatives).items()
        if isinstance(cls, type) and issubclass(cls, bases) and cls not in bases
    }
    x = td.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], dtype=td.float64, requires_grad=True)
    y = td.tensor([[1.5, 2.0, 0.5], [-1.0, 1.25, 2.5]], dtype=td.float64, requires_grad=True)
    reached = set()
    for fn in UNARY.values():
        reached |= _nodes_of(fn(td, x))
    for fn in REDUCTIONS.values():
        reached |= _nodes_of(fn(td, x, 1))
    for fn in BINARY.values():
        reached |= _nodes_of(fn(td, x, y))
    missing = {name for name, cls in table.items() if cls not in reached} - NOT_HERE
    assert not missing, f"nodes of the VJP table without an edge-case test: {sorted(missing)}"
