"""The VJP table: every primitive op's backward node, and its gradient formula per input.

Read it like PyTorch's ``derivatives.yaml``: one entry per backward node, named as PyTorch names
it, with one formula per op input. A formula is called as ``vjp(F, g, *saved, *args)``:

- ``F``: the namespace the formula computes with (``tadiff.ops._dual``): NumPy on raw arrays in a
  plain backward pass, differentiable tadiff ops under ``create_graph`` — so each formula is also
  its own second derivative's forward.
- ``g``: the gradient of the op's output.
- ``saved``: what the forward op saved, in order (input tensors, then the result if saved).
- ``args``: the op's plain parameters (shapes, axes, exponents).

Formulas must keep the gradient's dtype: only Python scalars (NumPy treats them as weak) and
arrays of ``g``'s dtype enter them. Broadcasting inputs are reduced back with ``F.sum_to``.
Piecewise ops fix a subgradient convention: ``abs``/``relu`` use 0 at 0, ``clamp`` passes the
gradient on the closed interval, ``maximum``/``minimum`` split ties equally (as torch does),
``amax``/``max()`` share the gradient equally among tied maxima, ``max(dim)`` gives it to the
returned index.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tadiff.autograd.graph import MultiOutputNode, Node
from tadiff.ops._dual import ARRAY, GRAPH, NOT_BROADCAST, channel_rows, keepdim_shape
from tadiff.ops.batchnorm_passes import training_backward

VJP = Callable[..., Any]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_HALF_SQRT_PI = 0.5 * math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / _SQRT_2PI
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)


class OpNode(Node):
    """A primitive op's backward node: applies the formula of each input that needs a gradient."""

    __slots__ = ()
    vjps: tuple[VJP | None, ...] = ()

    def _apply(self, g: Any, create_graph: bool) -> list[Any]:
        F = GRAPH if create_graph else ARRAY
        values = (*self._unpack(create_graph), *self._args) if self._saved else self._args
        producers = self._next
        n = len(producers)
        if n == 1:  # the common cases, without the loop machinery
            return [self.vjps[0](F, g, *values)]
        if n == 2:
            f0, f1 = self.vjps
            return [
                None if f0 is None or producers[0] is None else f0(F, g, *values),
                None if f1 is None or producers[1] is None else f1(F, g, *values),
            ]
        return [
            None if nxt is None or fn is None else fn(F, g, *values)
            for fn, nxt in zip(self.vjps, producers, strict=True)
        ]


class IndexedOpNode(Node):
    """A node over a variable number of inputs (``cat``, ``stack``, ``einsum``): one formula
    ``vjp(F, g, i, *saved, *args)`` that takes the input's position ``i``."""

    __slots__ = ()
    vjp: VJP

    def _apply(self, g: Any, create_graph: bool) -> list[Any]:
        F = GRAPH if create_graph else ARRAY
        values = self._unpack(create_graph) if self._saved else ()
        args = self._args
        vjp = type(self).vjp
        return [
            None if nxt is None else vjp(F, g, i, *values, *args)
            for i, nxt in enumerate(self._next)
        ]


class MultiOpNode(MultiOutputNode):
    """A node of a one-input op with several outputs (``unbind``, ``split``, ``eigh``):
    ``vjp(F, grads, *saved, *args)`` gets one gradient per output, zeros filled in for outputs
    that received none."""

    __slots__ = ()
    vjp: VJP

    def _apply(self, grads: list[Any], create_graph: bool) -> list[Any]:
        F = GRAPH if create_graph else ARRAY
        slots = grads if self._n_outputs != 1 else [grads]  # one piece: the engine sends it bare
        filled = self._zeros_for_missing(slots, create_graph)
        values = (*self._unpack(create_graph), *self._args) if self._saved else self._args
        return [type(self).vjp(F, filled, *values)]


class NativeBatchNormBackward0(Node):
    """Training-mode batch normalization of ``x`` with optional ``weight`` and ``bias``: the
    gradients of all three from two sums over the batch (as torch's fused kernel), instead of
    a backward pass through the ten ops that compute the batch statistics.

    Saved: ``x``, ``weight`` (or None). Args: the reduced ``dims``, the per-channel ``shape``
    ``(1, C, 1, ...)``, ``eps``, and the forward's ``mean`` and ``1/sqrt(var + eps)`` arrays
    (a plain backward uses them; under ``create_graph`` they are recomputed from ``x`` with
    differentiable ops, so the formula is its own second derivative's forward).
    """

    __slots__ = ()
    _frees_args = True

    def _apply(self, g: Any, create_graph: bool) -> list[Any]:
        x, weight = self._unpack(create_graph)
        dims, shape, eps, mean, inv = self._args
        if not create_graph:
            return self._arrays(g, x, weight, shape, mean, inv)
        F = GRAPH
        n = math.prod(x.shape[d] for d in dims)
        centered = x - F.sum(x, dims, True) / n
        inv = 1.0 / F.sqrt(F.sum(centered * centered, dims, True) / n + eps)
        xhat = centered * inv
        sum_g = F.sum(g, dims, True)
        sum_gx = F.sum(g * xhat, dims, True)
        producers = self._next
        dx = dw = db = None
        if producers[0] is not None:
            scale = inv * (1.0 / n) if weight is None else F.reshape(weight, shape) * inv / n
            dx = scale * (g * n - sum_g - xhat * sum_gx)
        if producers[1] is not None:
            dw = F.reshape(sum_gx, (shape[1],))
        if producers[2] is not None:
            db = F.reshape(sum_g, (shape[1],))
        return [dx, dw, db]

    def _arrays(self, g, x, weight, shape, mean, inv) -> list[Any]:
        """The plain backward: two sums over the batch, then ``dx`` in one formula
        (:func:`tadiff.ops.batchnorm_passes.training_backward`)."""
        channels = shape[1]
        producers = self._next
        dx, dot, total = training_backward(
            channel_rows(np.asarray(g)),
            channel_rows(x),
            mean.reshape(channels),
            inv.reshape(channels),
            weight,
            input_gradient=producers[0] is not None,
        )
        dw = inv.reshape(channels) * dot if producers[1] is not None else None
        db = total if producers[2] is not None else None
        return [None if dx is None else dx.reshape(x.shape), dw, db]


def _node(
    name: str, *vjps: VJP | None, frees_args: bool = False, apply: VJP | None = None
) -> type[OpNode]:
    """A node class; ``frees_args``: its parameters are data torch saves as tensors (released
    after a backward pass without ``retain_graph``, see ``Node._frees_args``); ``apply``: an
    ``_apply`` of its own, for a shortcut before the formulas."""
    attrs = {"__slots__": (), "vjps": vjps, "__module__": __name__, "_frees_args": frees_args}
    if apply is not None:
        attrs["_apply"] = apply
    return type(name, (OpNode,), attrs)


# Addition and subtraction of equal shapes (the op recorded NOT_BROADCAST): the gradient goes to
# each input as it is (negated for the subtrahend), without the formulas' calls. In a program
# that adds 0-d tensors in Python loops (``sum(t)``, a loss accumulated step by step) four nodes
# in ten are these.


def _add_apply(self: OpNode, g: Any, create_graph: bool) -> list[Any]:
    if self._args is NOT_BROADCAST:
        return [g, g]
    return OpNode._apply(self, g, create_graph)


def _sub_apply(self: OpNode, g: Any, create_graph: bool) -> list[Any]:
    if self._args is NOT_BROADCAST:
        return [g, None if self._next[1] is None else -g]
    return OpNode._apply(self, g, create_graph)


def _mul_apply(self: OpNode, g: Any, create_graph: bool) -> list[Any]:
    # a plain pass: the two formulas inline (the product's most frequent node)
    if create_graph:
        return OpNode._apply(self, g, create_graph)
    a, b = self._unpack(False)
    producers = self._next
    mul_sum_to = ARRAY.mul_sum_to
    return [
        None if producers[0] is None else mul_sum_to(g, b, a.shape),
        None if producers[1] is None else mul_sum_to(g, a, b.shape),
    ]


def _div_apply(self: OpNode, g: Any, create_graph: bool) -> list[Any]:
    # a plain pass: both gradients from one quotient q = g / b (a's is q, b's is -q a / b),
    # four array passes instead of five and no formula calls
    if create_graph:
        return OpNode._apply(self, g, create_graph)
    a, b = self._unpack(False)
    producers = self._next
    q = g / b
    grad_b = None
    if producers[1] is not None:
        grad_b = q * a  # a new array of the output's shape: the rest in place
        if type(grad_b) is np.ndarray:
            np.divide(grad_b, b, grad_b)
            np.negative(grad_b, grad_b)
        else:  # a NumPy scalar (0-d operands)
            grad_b = -(grad_b / b)
        grad_b = ARRAY.sum_to(grad_b, b.shape)
    return [None if producers[0] is None else ARRAY.sum_to(q, a.shape), grad_b]


def _indexed(name: str, vjp: VJP, apply: VJP | None = None) -> type[IndexedOpNode]:
    attrs = {"__slots__": (), "vjp": staticmethod(vjp)}
    if apply is not None:  # as _node's
        attrs["_apply"] = apply
    return type(name, (IndexedOpNode,), attrs)


def _multi(name: str, vjp: VJP) -> type[MultiOpNode]:
    return type(name, (MultiOpNode,), {"__slots__": (), "vjp": staticmethod(vjp)})


# ---- helpers used by several formulas --------------------------------------------------------


def _masked(F: Any, keep: Any, g: Any) -> Any:
    """``g`` where the boolean array ``keep`` holds, 0 elsewhere."""
    return F.masked(keep, g)


def _max_weights(F: Any, x: Any, result: Any, dims: Any, keepdim: bool) -> Any:
    """Equal shares of the gradient for every element tied at the max/min (a constant array)."""
    xd = F.data(x)
    hit = xd == ARRAY.unreduce(F.data(result), xd.shape, dims, keepdim)
    return hit / hit.sum(axis=dims, keepdims=True).astype(xd.dtype)


def _evenly_shared(F: Any, g: Any, x: Any, result: Any, dims: Any, keepdim: bool) -> Any:
    """``max()``/``min()`` without ``dim``: ``g`` split equally among the elements equal to the
    result (the NaNs where the result is NaN), exactly 0 elsewhere, even where ``g`` is NaN or
    infinite: torch's rule on the CPU. (``amax``/``amin`` scale ``g`` by a mask instead:
    there a NaN ``g`` or input reaches every element, as in torch.)"""
    xd = F.data(x)
    r = F.data(result)
    hit = np.isnan(xd) if np.isnan(r) else xd == r
    share = g / np.count_nonzero(hit)
    if F is ARRAY:  # zeros, with the share written at the ties: one pass over the mask
        out = np.zeros(xd.shape, dtype=xd.dtype)
        out[hit] = share
        return out
    return F.masked(hit, F.unreduce(share, xd.shape, dims, keepdim))


def _matmul_a(F: Any, g: Any, a: Any, b: Any) -> Any:
    sa, sb = a.shape, b.shape
    if len(sa) == 1 and len(sb) == 1:
        return g * b
    if len(sb) == 1:  # (..., n, k) @ (k,) -> (..., n)
        return F.sum_to(F.reshape(g, (*g.shape, 1)) * b, sa)
    if len(sa) == 1:  # (k,) @ (..., k, m) -> (..., m)
        ga = b @ F.reshape(g, (*g.shape, 1))
        return F.sum_to(F.reshape(ga, ga.shape[:-1]), sa)
    return F.sum_to(g @ F.swapaxes(b, -1, -2), sa)


def _linear_input(F: Any, g: Any, x: Any, w: Any) -> Any:
    if type(x) is np.ndarray and x.ndim == 2 and not x.flags.c_contiguous:
        # in the input's (column-major) layout, as ``F.linear`` makes its outputs: elementwise
        # backward steps then combine arrays of one layout (mixed layouts run 2-3x slower)
        return (w.T @ g.T).T
    return g @ w


def _linear_weight(F: Any, g: Any, x: Any, w: Any) -> Any:
    # formed in the weight's own (out, in) layout: no transpose of the result afterwards
    out_features, in_features = w.shape
    rows = F.reshape(g, (-1, out_features))
    return F.swapaxes(rows, 0, 1) @ F.reshape(x, (-1, in_features))


def _linear_bias(F: Any, g: Any, x: Any, w: Any) -> Any:
    return F.sum(F.reshape(g, (-1, w.shape[0])), (0,), False)


def _matmul_b(F: Any, g: Any, a: Any, b: Any) -> Any:
    sa, sb = a.shape, b.shape
    if len(sa) == 1 and len(sb) == 1:
        return g * a
    if len(sb) == 1:  # g: (..., n); a: (..., n, k)
        gb = F.swapaxes(a, -1, -2) @ F.reshape(g, (*g.shape, 1))
        return F.sum_to(F.reshape(gb, gb.shape[:-1]), sb)
    if len(sa) == 1:  # g: (..., m); a: (k,)
        return F.sum_to(
            F.reshape(a, (sa[0], 1)) * F.reshape(g, (*g.shape[:-1], 1, g.shape[-1])), sb
        )
    return F.sum_to(F.swapaxes(a, -1, -2) @ g, sb)


def _pow_exponent(F: Any, g: Any, a: Any, b: Any, result: Any) -> Any:
    # d(a**b)/db = a**b log a; defined as 0 where a == 0 and b >= 0 (the limit torch uses)
    ad, bd = F.data(a), F.data(b)
    limit = (ad == 0) & (bd >= 0)
    return F.sum_to(_masked(F, ~limit, g * result * F.log(F.where(limit, 1, a))), b.shape)


def _pow_base(F: Any, g: Any, a: Any, b: Any, r: Any) -> Any:
    # d(a**b)/da = b a**(b-1); exactly 0 where b == 0 (torch), also at a == 0 where a**-1 is inf
    keep = F.data(b) != 0
    return F.sum_to(_masked(F, keep, g * b * a ** F.where(keep, b - 1, 0)), a.shape)


def _power(F: Any, x: Any, e: float) -> Any:
    """``x ** e``, through ``sqrt`` for ``e = ±0.5`` as torch computes it (the sign of an
    infinite result at ``-0.0`` follows: ``1 / sqrt(-0.0)`` is ``-inf``)."""
    if e == 0.5:
        return F.sqrt(x)
    if e == -0.5:
        return 1 / F.sqrt(x)
    return x**e


def _pow_scalar_base(F: Any, g: Any, x: Any, p: float) -> Any:
    # d(x**p)/dx = p x**(p-1), and 0 for p == 0 (also at x == 0, where x**-1 is inf)
    return g * p * _power(F, x, p - 1) if p != 0 else F.zeros_like(g)


def _atan2_scale(F: Any, a: Any, b: Any) -> Any:
    """``1 / (a² + b²)``, and 0 where that is infinite: torch's gradient of atan2 at (0, 0)."""
    denom = a * a + b * b
    infinite = np.isinf(1 / F.data(denom))
    return _masked(F, ~infinite, 1 / F.where(infinite, 1, denom))


def _pow_scalar_exponent(F: Any, g: Any, result: Any, base: float) -> Any:
    # d(base**b)/db = base**b log(base): NaN for a negative base; for base 0 torch takes the
    # limit 0 where b >= 0, i.e. where the result is 0 or 1, and result·log 0 below
    if base > 0:
        return g * result * math.log(base)
    if base < 0:
        return g * result * math.nan
    # (torch multiplies g by that derivative: an infinite or NaN g gives NaN where it is 0)
    return g * F.where(F.data(result) <= 1, 0.0, result * -math.inf)


def _norm2(F: Any, g: Any, x: Any, result: Any, dims: Any, keepdim: bool) -> Any:
    rd = F.data(result)
    if F is ARRAY and rd.all():  # no norm is 0 (the usual case): the quotient as it is
        return F.unreduce(g / rd, x.shape, dims, keepdim) * x
    safe = F.where(rd == 0, 1, result)
    scale = _masked(F, rd != 0, g / safe)
    return F.unreduce(scale, x.shape, dims, keepdim) * x


def _variance(F: Any, g: Any, x: Any, dims: Any, keepdim: bool, correction: float, n: int) -> Any:
    """``2 (x − mean) / (n − correction)``, with torch's values where no degrees of freedom
    remain: over all dims inf (NaN where ``x`` equals its mean), over given dims ``2 / 0 = inf``
    times ``x − mean``."""
    dof = n - correction
    if dims is None and dof <= 0:
        xd = F.data(x)
        return g * np.where(xd == xd.sum() / n, np.nan, np.inf).astype(xd.dtype)
    centered = x - F.sum(x, dims, True) / n  # not mean(): no NumPy warning for an empty x
    return F.unreduce(g, x.shape, dims, keepdim) * centered * (2.0 / dof if dof else math.inf)


def _std(F: Any, g: Any, x: Any, result: Any, dims: Any, keepdim: bool, c: float, n: int) -> Any:
    # d std = d var / (2 std), and 0 where std is 0 (a constant input: torch's convention)
    rd = F.data(result)
    g_var = _masked(F, rd != 0, g / (F.where(rd == 0, 1, result) * 2))
    return _variance(F, g_var, x, dims, keepdim, c, n)


def _cat_piece(F: Any, g: Any, i: int, axis: int, offsets: tuple[int, ...]) -> Any:
    key = (slice(None),) * axis + (slice(offsets[i], offsets[i + 1]),)
    return g[key]


def _einsum_operand(F: Any, g: Any, i: int, *rest: Any) -> Any:
    *operands, plan = rest
    spec, others, constants, shape = plan[i]
    picked = [operands[j] for j in others]
    return F.sum_to(F.einsum(spec, g, *picked, *constants), shape)


def _maximum_a(F: Any, g: Any, a: Any, b: Any) -> Any:
    ad, bd = F.data(a), F.data(b)
    return F.sum_to(_masked(F, ~(ad < bd), _tie_halved(F, g, ad, bd)), a.shape)


def _tie_halved(F: Any, g: Any, ad: np.ndarray, bd: np.ndarray) -> Any:
    """``g``, halved where the operands tie: torch's share of ``maximum``/``minimum`` before
    the losing side is zeroed. Where one operand is NaN neither side loses, and both get
    ``g`` (torch's rule)."""
    return F.where(ad == bd, g / 2, g)


def _maximum_b(F: Any, g: Any, a: Any, b: Any) -> Any:
    ad, bd = F.data(a), F.data(b)
    return F.sum_to(_masked(F, ~(ad > bd), _tie_halved(F, g, ad, bd)), b.shape)


def _minimum_a(F: Any, g: Any, a: Any, b: Any) -> Any:
    ad, bd = F.data(a), F.data(b)
    return F.sum_to(_masked(F, ~(ad > bd), _tie_halved(F, g, ad, bd)), a.shape)


def _minimum_b(F: Any, g: Any, a: Any, b: Any) -> Any:
    ad, bd = F.data(a), F.data(b)
    return F.sum_to(_masked(F, ~(ad < bd), _tie_halved(F, g, ad, bd)), b.shape)


def _reverse_cumsum(F: Any, a: Any, ax: int) -> Any:
    return F.flip(F.cumsum(F.flip(a, ax), ax), ax)


def _cumprod_input(F: Any, g: Any, x: Any, r: Any, ax: int) -> Any:
    """d cumprod: ``Σ_{j≥i} g_j r_j / x_i``. With zeros or infinities in ``x`` that quotient is
    undefined (torch's NaN at infinite entries), so the gradient is built without division:
    ``(Π_{k<i} x_k) · S_i`` with the reverse recurrence ``S_i = g_i + x_{i+1} S_{i+1}`` (a loop
    along ``ax``), exact to every order."""
    if math.prod(x.shape) <= 1 or x.shape[ax] == 1:
        return g  # torch's shortcuts (cumprod is the identity), exact also at x = inf
    xd = F.data(x)
    if np.isfinite(xd).all() and not (xd == 0).any():
        return _reverse_cumsum(F, g * r, ax) / x
    n = x.shape[ax]

    def part(a: Any, i: Any) -> Any:
        return a[(slice(None),) * ax + (i,)]

    s = [part(g, n - 1)]
    for i in range(n - 2, -1, -1):
        s.append(part(g, i) + part(x, i + 1) * s[-1])
    one = np.ones(part(xd, slice(0, 1)).shape, xd.dtype)  # not x * 0 + 1: NaN at x = inf
    before = F.cumprod(F.cat([one, part(x, slice(0, n - 1))], ax), ax)  # Π_{k<i} x_k
    return before * F.stack(s[::-1], ax)


def _mT(F: Any, x: Any) -> Any:
    return F.swapaxes(x, -1, -2)


def _diag_embed(F: Any, v: Any) -> Any:
    """(..., n) -> (..., n, n) with ``v`` on the diagonal."""
    return F.reshape(v, (*v.shape, 1)) * np.eye(v.shape[-1], dtype=v.dtype)


def _det_input(F: Any, g: Any, a: Any, r: Any) -> Any:
    """d det A = det A · A⁻ᵀ; in a plain pass by the cofactor matrix from the SVD,
    ``det U det V · U diag(Π_{j≠i} s_j) Vᵀ``, which stays right for singular ``A``."""
    if F is ARRAY:
        u, s, vh = np.linalg.svd(a)
        signs = np.linalg.det(u) * np.linalg.det(vh)
        cof = (u * ARRAY.prod_others(s, (s.ndim - 1,))[..., None, :]) @ vh
        return (g * signs)[..., None, None] * cof
    return F.reshape(g * r, (*g.shape, 1, 1)) * _mT(F, F.inv(a))


def _slogdet_input(F: Any, grads: list[Any], a: Any) -> Any:
    _, g = grads
    return F.reshape(g, (*g.shape, 1, 1)) * _mT(F, F.inv(a))


def _solve_rhs_grad(F: Any, g: Any, a: Any, vector: bool) -> Any:
    if vector:
        return F.solve(_mT(F, a), F.reshape(g, (*g.shape, 1)))[..., 0]
    return F.solve(_mT(F, a), g)


def _solve_a(F: Any, g: Any, a: Any, x: Any, vector: bool, b_shape: Any) -> Any:
    gb = _solve_rhs_grad(F, g, a, vector)
    if vector:
        ga = -(F.reshape(gb, (*gb.shape, 1)) * F.reshape(x, (*x.shape[:-1], 1, x.shape[-1])))
    else:
        ga = -(gb @ _mT(F, x))
    return F.sum_to(ga, a.shape)


def _solve_b(F: Any, g: Any, a: Any, x: Any, vector: bool, b_shape: Any) -> Any:
    return F.sum_to(_solve_rhs_grad(F, g, a, vector), b_shape)


def _tri_mask(F: Any, m: Any, upper: bool, unit: bool) -> Any:
    k = (1 if unit else 0) if upper else (-1 if unit else 0)
    return F.triu(m, k) if upper else F.tril(m, k)


def _solve_tri_a(F: Any, g: Any, a: Any, x: Any, upper: bool, unit: bool) -> Any:
    gb = F.solve_triangular(_mT(F, a), g, not upper, unit)
    return F.sum_to(_tri_mask(F, -(gb @ _mT(F, x)), upper, unit), a.shape)


def _solve_tri_b(F: Any, g: Any, a: Any, x: Any, upper: bool, unit: bool) -> Any:
    return F.solve_triangular(_mT(F, a), g, not upper, unit)


def _cholesky_input(F: Any, g: Any, lo: Any) -> Any:
    """A = L Lᵀ: ``S = L⁻ᵀ Φ(Lᵀ tril(Ḡ)) L⁻¹`` (Φ: lower triangle, diagonal halved), made
    symmetric (the input is read as symmetric)."""
    p = F.tril(_mT(F, lo) @ F.tril(g))
    p = p - 0.5 * (p * np.eye(p.shape[-1], dtype=p.dtype))
    left = F.solve_triangular(_mT(F, lo), p, True, False)  # L⁻ᵀ P
    s = _mT(F, F.solve_triangular(_mT(F, lo), _mT(F, left), True, False))  # (L⁻ᵀ (L⁻ᵀP)ᵀ)ᵀ
    return 0.5 * (s + _mT(F, s))


def _eigh_input(F: Any, grads: list[Any], w: Any, v: Any) -> Any:
    """A = V diag(w) Vᵀ: ``V (diag(w̄) + skew(Vᵀ V̄) / E) Vᵀ``, ``E_ij = w_j − w_i``,
    ``skew(M) = (M − Mᵀ)/2`` (torch's formula; distinct eigenvalues)."""
    gw, gv = grads
    n = v.shape[-1]
    eye = np.eye(n, dtype=bool)
    m = _mT(F, v) @ gv
    skew = 0.5 * (m - _mT(F, m))
    e = F.reshape(w, (*w.shape[:-1], 1, n)) - F.reshape(w, (*w.shape, 1))
    inner = F.where(eye, 0.0, skew / F.where(eye, 1.0, e)) + _diag_embed(F, gw)
    return v @ inner @ _mT(F, v)


def _svd_input(F: Any, grads: list[Any], u: Any, s: Any, vh: Any) -> Any:
    """A = U diag(S) Vᴴ (reduced): torch's formula with ``skew(M) = M − Mᵀ``,
    ``E_jk = S_k² − S_j²`` and the two projections for non-square inputs."""
    gu, gs, gvh = grads
    m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
    eye = np.eye(k, dtype=bool)
    v, gv = _mT(F, vh), _mT(F, gvh)
    uhgu = _mT(F, u) @ gu
    vhgv = vh @ gv
    uhgu = uhgu - _mT(F, uhgu)
    vhgv = vhgv - _mT(F, vhgv)
    row = F.reshape(s, (*s.shape[:-1], 1, k))  # S_k along columns
    col = F.reshape(s, (*s.shape, 1))  # S_j along rows
    e = row * row - col * col
    inner = F.where(eye, 0.0, (uhgu * row + col * vhgv) / F.where(eye, 1.0, e))
    ga = u @ (inner + _diag_embed(F, gs)) @ vh
    if m > k:
        ga = ga + ((gu - u @ (_mT(F, u) @ gu)) / row) @ vh
    if n > k:
        ga = ga + u @ _mT(F, (gv - v @ (vh @ gv)) / row)
    return ga


def _qr_input(F: Any, grads: list[Any], q: Any, r: Any) -> Any:
    """A = QR (reduced, rows ≥ columns): ``(Q̄ + Q copyltu(M)) R⁻ᵀ``, ``M = R R̄ᵀ − Q̄ᵀ Q``,
    ``copyltu(M) = tril(M, −1) + tril(M, −1)ᵀ + diag(M)``."""
    gq, gr = grads
    mm = r @ _mT(F, gr) - _mT(F, gq) @ q
    low = F.tril(mm, -1)
    sym = low + _mT(F, low) + mm * np.eye(mm.shape[-1], dtype=mm.dtype)
    b = gq + q @ sym
    return _mT(F, F.solve_triangular(r, _mT(F, b), True, False))


def _outside(F: Any, g: Any, key: Any) -> Any:
    """``g`` with the entries at ``key`` zeroed: the overwritten part gets no gradient. The mask
    is made here, in the backward, so that a recorded ``x[key] = v`` costs O(size of v)."""
    if F is ARRAY:  # a copy with zeros written at key: two NumPy calls instead of a mask's five
        out = np.array(g, copy=True)
        out[key] = 0
        return out
    keep = np.ones(g.shape, dtype=bool)
    keep[key] = False
    return _masked(F, keep, g)


_ERFCX_SERIES_FROM = 8.0
_ERFCX_SLOPE_TERMS = tuple((-1) ** n * math.prod(range(1, 2 * n + 2, 2)) / 2**n for n in range(25))


def _erfcx_slope(F: Any, x: Any, r: Any) -> Any:
    """``erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi)``; from ``x = 8`` on, where those two terms cancel
    to ``-1/(x² sqrt(pi))`` (torch's formula loses half the digits at ``x = 1e4`` and all of
    them at ``1e8``), the derivative of the asymptotic series instead:
    ``-(1/sqrt(pi)) Σ (-1)ⁿ (2n+1)!!/2ⁿ x^-(2n+2)`` (25 terms reach float64's resolution)."""
    direct = 2 * x * r - _TWO_OVER_SQRT_PI
    far = F.data(x) >= _ERFCX_SERIES_FROM
    if not np.any(far):
        return direct
    inverse_square = 1 / (F.where(far, x, _ERFCX_SERIES_FROM) ** 2)
    series, power = 0.0, inverse_square
    for c in _ERFCX_SLOPE_TERMS:
        series = series + c * power
        power = power * inverse_square
    return F.where(far, series * (-1 / math.sqrt(math.pi)), direct)


_I1_SLOPE_TAYLOR = tuple(
    (2 * k + 1) / (2 ** (2 * k + 1) * math.factorial(k) * math.factorial(k + 1)) for k in range(9)
)
_SINC_SLOPE_TAYLOR = (-1 / 3, 1 / 30, -1 / 840, 1 / 45360, -1 / 3991680)


def _even_polynomial(F: Any, x: Any, coefficients: tuple[float, ...]) -> Any:
    """``Σ c_k x^(2k)`` by Horner's rule in ``x²`` (differentiable: Python operators only)."""
    square = x * x
    total = coefficients[-1]
    for c in coefficients[-2::-1]:
        total = total * square + c
    return total


def _i1_slope(F: Any, x: Any, r: Any, scaled: bool) -> Any:
    """``i1'(x) = i0(x) - i1(x)/x`` (``i1e' = i0e - i1e·(sign x + 1/x)``), torch's formula; for
    ``|x| < 1/2`` the Taylor series of ``i1'`` instead (9 terms, exact to rounding there), whose
    own derivative is right — the formula's cancels to noise near 0 (``i1/x² - i1'/x``)."""
    small = np.abs(F.data(x)) < 0.5
    safe = F.where(small, 1.0, x)
    direct = F.i0e(safe) - r * (F.sign(x) + 1 / safe) if scaled else F.i0(safe) - r / safe
    if not np.any(small):
        return direct
    near = F.where(small, x, 0.0)
    taylor = _even_polynomial(F, near, _I1_SLOPE_TAYLOR)
    if scaled:  # i1e' = exp(-|x|) i1' - sign(x) i1e
        taylor = F.exp(-(near * F.sign(near))) * taylor - F.sign(x) * r
    return F.where(small, taylor, direct)


def _sinc_slope(F: Any, x: Any) -> Any:
    """``(πx cos πx - sin πx) / (π x²)`` (torch's formula); for ``|πx| < 0.1``, where its terms
    cancel (30% off at ``x = 1e-8``, in torch too), ``π`` times the Taylor series of
    ``d/du sin(u)/u`` in ``u = πx`` (0 at 0, torch's fill there)."""
    small = np.abs(F.data(x)) * math.pi < 0.1
    safe = F.where(small, 1.0, x)
    pu = safe * math.pi
    direct = (pu * F.cos(pu) - F.sin(pu)) / (pu * safe)
    if not np.any(small):
        return direct
    u = F.where(small, x, 0.0) * math.pi
    taylor = u * _even_polynomial(F, u, _SINC_SLOPE_TAYLOR) * math.pi
    return F.where(small, taylor, direct)


def _logit_slope(F: Any, g: Any, x: Any, eps: float | None) -> Any:
    """``g / (x (1 - x))``; outside ``[eps, 1 - eps]`` 0 (clamped away), or outside ``[0, 1]``
    NaN and ``g · inf`` at 0 and 1 when there is no ``eps`` — torch's rules. The slope is
    computed at a safe point where it is replaced, so that its own derivative (under
    ``create_graph``) is not ``0 · inf``."""
    xs = F.data(x)
    if eps is None:
        replaced = (xs <= 0) | (xs >= 1)
        fill = np.where((xs == 0) | (xs == 1), np.inf, np.nan)
    else:
        replaced = (xs < eps) | (xs > 1 - eps)
        fill = np.zeros(xs.shape)
    if not np.any(replaced):
        return g / (x * (1 - x))
    safe = F.where(replaced, 0.5, x)
    if eps is not None:  # torch's where: exactly 0 there, also for an infinite or NaN g
        return F.where(replaced, fill.astype(xs.dtype), g / (safe * (1 - safe)))
    return g * F.where(replaced, fill.astype(xs.dtype), 1 / (safe * (1 - safe)))


def _xlog_slope(F: Any, g: Any, a: Any, b: Any, log_b: Any, pole: float) -> Any:
    """torch's ``a`` gradient of ``xlogy``/``xlog1py``: ``xlogy(g, b)`` (``g · log b``, 0 where
    ``g == 0`` unless ``b`` is NaN), and 0 where ``a == 0`` and ``b`` is at or beyond the
    logarithm's pole (``b <= 0``; ``xlog1py``: ``b <= -1``)."""
    bs = F.data(b)
    zero = ((F.data(g) == 0) & ~np.isnan(bs)) | ((F.data(a) == 0) & (bs <= pole))
    return F.where(zero, 0.0, g * log_b)


def _clamp_masks(F: Any, x: Any, lo: Any, hi: Any) -> tuple[Any, Any, Any]:
    xs = F.data(x)
    los = None if lo is None else F.data(lo)
    his = None if hi is None else F.data(hi)
    return xs, los, his


def _clamp_x(F: Any, g: Any, x: Any, lo: Any, hi: Any) -> Any:
    xs, los, his = _clamp_masks(F, x, lo, hi)
    inside = np.ones(np.broadcast_shapes(*(np.shape(v) for v in (xs, los, his) if v is not None)),
                     bool)  # fmt: skip
    if los is not None:
        inside &= xs >= los
    if his is not None:
        inside &= xs <= his
    return F.sum_to(_masked(F, inside, g), x.shape)


def _clamp_lo(F: Any, g: Any, x: Any, lo: Any, hi: Any) -> Any:
    xs, los, his = _clamp_masks(F, x, lo, hi)
    below = xs < los if his is None else (xs < los) & (los < his)
    return F.sum_to(_masked(F, np.broadcast_to(below, g.shape), g), lo.shape)


def _clamp_hi(F: Any, g: Any, x: Any, lo: Any, hi: Any) -> Any:
    xs, los, his = _clamp_masks(F, x, lo, hi)
    above = xs > his if los is None else (xs > his) | (his < los)
    return F.sum_to(_masked(F, np.broadcast_to(above, g.shape), g), hi.shape)


# ---- the table -------------------------------------------------------------------------------
# Formula arguments: ``g`` the output's gradient, ``x``/``a``/``b`` saved inputs, ``r`` the saved
# result. Where it is not plain from the names, a comment reads "saved; args": what the forward
# op saved, then its plain parameters.
# fmt: off

# element-wise, one input
NegBackward0 = _node("NegBackward0", lambda F, g: -g)
ExpBackward0 = _node("ExpBackward0", lambda F, g, r: g * r)
LogBackward0 = _node("LogBackward0", lambda F, g, x: g / x)
Log1PBackward0 = _node("Log1PBackward0", lambda F, g, x: g / (x + 1))
Expm1Backward0 = _node("Expm1Backward0", lambda F, g, r: g * (r + 1))
SinBackward0 = _node("SinBackward0", lambda F, g, x: g * F.cos(x))
CosBackward0 = _node("CosBackward0", lambda F, g, x: -g * F.sin(x))
TanBackward0 = _node("TanBackward0", lambda F, g, r: g * (r * r + 1))
TanhBackward0 = _node("TanhBackward0", lambda F, g, r: g * (1 - r * r))
ErfBackward0 = _node("ErfBackward0", lambda F, g, x: g * (_TWO_OVER_SQRT_PI * F.exp(-(x * x))))
LgammaBackward0 = _node("LgammaBackward0", lambda F, g, x: g * F.polygamma(0, x))
DigammaBackward0 = _node("DigammaBackward0", lambda F, g, x: g * F.polygamma(1, x))
# x; order n
PolygammaBackward0 = _node("PolygammaBackward0", lambda F, g, x, n: g * F.polygamma(n + 1, x))
ErfcBackward0 = _node("ErfcBackward0", lambda F, g, x: g * (-_TWO_OVER_SQRT_PI * F.exp(-(x * x))))
SigmoidBackward0 = _node("SigmoidBackward0", lambda F, g, r: g * r * (1 - r))
# torch's threshold_backward: the gradient passes unless the result is <= 0, so it also
# passes where the input (and result) is NaN
ReluBackward0 = _node("ReluBackward0", lambda F, g, r: F.relu_grad(F.data(r), g))
SqrtBackward0 = _node("SqrtBackward0", lambda F, g, r: g / (r * 2))
AbsBackward0 = _node("AbsBackward0", lambda F, g, x: g * F.sign(x))
# piecewise constant: zeros, also for an infinite or NaN gradient (torch's zeros_like(grad))
SignBackward0 = _node("SignBackward0", lambda F, g: F.zeros_like(g))
# a square root, not ** -0.5: (-inf) ** -0.5 is 0 where torch's rsqrt(-inf) is NaN
AsinBackward0 = _node("AsinBackward0", lambda F, g, x: g / F.sqrt(1 - x * x))
AcosBackward0 = _node("AcosBackward0", lambda F, g, x: -g / F.sqrt(1 - x * x))
AtanBackward0 = _node("AtanBackward0", lambda F, g, x: g / (x * x + 1))
SinhBackward0 = _node("SinhBackward0", lambda F, g, x: g * F.cosh(x))
CoshBackward0 = _node("CoshBackward0", lambda F, g, x: g * F.sinh(x))
AsinhBackward0 = _node("AsinhBackward0", lambda F, g, x: g * (x * x + 1) ** -0.5)
AcoshBackward0 = _node("AcoshBackward0", lambda F, g, x: g * (x * x - 1) ** -0.5)
AtanhBackward0 = _node("AtanhBackward0", lambda F, g, x: g / (1 - x * x))
Log2Backward0 = _node("Log2Backward0", lambda F, g, x: g / (x * math.log(2.0)))
Log10Backward0 = _node("Log10Backward0", lambda F, g, x: g / (x * math.log(10.0)))
Exp2Backward0 = _node("Exp2Backward0", lambda F, g, r: g * r * math.log(2.0))
ReciprocalBackward0 = _node("ReciprocalBackward0", lambda F, g, r: -g * r * r)
RsqrtBackward0 = _node("RsqrtBackward0", lambda F, g, r: g * r * r * r * -0.5)
# rounding: piecewise constant, gradient 0 (torch's convention), as for sign
FloorBackward0 = _node("FloorBackward0", *SignBackward0.vjps)
CeilBackward0 = _node("CeilBackward0", *SignBackward0.vjps)
TruncBackward0 = _node("TruncBackward0", *SignBackward0.vjps)
RoundBackward0 = _node("RoundBackward0", *SignBackward0.vjps)
FracBackward0 = _node("FracBackward0", lambda F, g: g)
# ; finite (where the input was finite): torch multiplies by the mask, so an infinite or NaN
# gradient gives NaN at the replaced elements
NanToNumBackward0 = _node("NanToNumBackward0", lambda F, g, finite: g * finite, frees_args=True)
# x; lo, hi
ClampBackward1 = _node(
    "ClampBackward1",
    lambda F, g, x, lo, hi: _masked(F, (F.data(x) >= lo) & (F.data(x) <= hi), g),
)
ClampMinBackward0 = _node("ClampMinBackward0", *ClampBackward1.vjps)  # clamp_min(x, lo)
ClampMaxBackward0 = _node("ClampMaxBackward0", *ClampBackward1.vjps)  # clamp_max(x, hi)
# x, lo, hi (Tensors, or None for a missing bound): torch's clamp.Tensor
ClampBackward0 = _node("ClampBackward0", _clamp_x, _clamp_lo, _clamp_hi)
ClampMinBackward1 = _node("ClampMinBackward1", _clamp_x, _clamp_lo, None)
ClampMaxBackward1 = _node("ClampMaxBackward1", _clamp_x, None, _clamp_hi)
# x; exponent
# x; exponent
PowBackward0 = _node("PowBackward0", _pow_scalar_base)
# result; base
PowBackward2 = _node("PowBackward2", None, _pow_scalar_exponent)
CloneBackward0 = _node("CloneBackward0", lambda F, g: g)
# ; in dtype
ToCopyBackward0 = _node("ToCopyBackward0", lambda F, g, dtype: F.cast(g, dtype))

# element-wise, two inputs (broadcasting: gradients are summed back to each input's shape)
# ; shapes
AddBackward0 = _node(
    "AddBackward0",
    lambda F, g, sa, sb: F.sum_to(g, sa),
    lambda F, g, sa, sb: F.sum_to(g, sb),
    apply=_add_apply,
)
SubBackward0 = _node(
    "SubBackward0",
    lambda F, g, sa, sb: F.sum_to(g, sa),
    lambda F, g, sa, sb: F.sum_to(-g, sb),
    apply=_sub_apply,
)
# scalar - x
RsubBackward1 = _node("RsubBackward1", lambda F, g: -g)
MulBackward0 = _node(
    "MulBackward0",
    lambda F, g, a, b: F.mul_sum_to(g, b, a.shape),
    lambda F, g, a, b: F.mul_sum_to(g, a, b.shape),
    apply=_mul_apply,
)
# ; scalar
MulScalarBackward0 = _node("MulBackward0", lambda F, g, s: g * s, None, frees_args=True)
DivBackward0 = _node(
    "DivBackward0",
    lambda F, g, a, b: F.sum_to(g / b, a.shape),
    lambda F, g, a, b: F.sum_to(-g * a / (b * b), b.shape),
    apply=_div_apply,
)
# ; scalar
DivScalarBackward0 = _node("DivBackward0", lambda F, g, s: g / s, None, frees_args=True)
# x; scalar
RdivBackward0 = _node("DivBackward0", None, lambda F, g, x, s: -g * s / (x * x))
# a, b, result
PowBackward1 = _node("PowBackward1", _pow_base, _pow_exponent)
MaximumBackward0 = _node("MaximumBackward0", _maximum_a, _maximum_b)
MinimumBackward0 = _node("MinimumBackward0", _minimum_a, _minimum_b)
Atan2Backward0 = _node(
    "Atan2Backward0",
    lambda F, g, a, b: F.sum_to(g * b * _atan2_scale(F, a, b), a.shape),
    lambda F, g, a, b: F.sum_to(-g * a * _atan2_scale(F, a, b), b.shape),
)
# 1 / (1 + e^(b - a)) rather than e^(a - result): finite where one side is infinite (torch's)
LogaddexpBackward0 = _node(
    "LogaddexpBackward0",
    lambda F, g, a, b: F.sum_to(g / (1 + F.exp(b - a)), a.shape),
    lambda F, g, a, b: F.sum_to(g / (1 + F.exp(a - b)), b.shape),
)
# torch's names: ...Backward1 for a tensor divisor, ...Backward0 for a number
RemainderBackward1 = _node(
    "RemainderBackward1",
    lambda F, g, a, b: F.sum_to(g, a.shape),
    # floor_divide, not floor(a / b): -1 // inf is -1 (torch's floor division), floor(-0.0) is 0
    lambda F, g, a, b: F.sum_to(-g * np.floor_divide(F.data(a), F.data(b)), b.shape),
)
RemainderBackward0 = _node("RemainderBackward0", *RemainderBackward1.vjps)
FmodBackward1 = _node(
    "FmodBackward1",
    lambda F, g, a, b: F.sum_to(g, a.shape),
    lambda F, g, a, b: F.sum_to(-g * np.trunc(F.data(a) / F.data(b)), b.shape),
)
FmodBackward0 = _node("FmodBackward0", *FmodBackward1.vjps)
# ; cond, shapes
WhereBackward0 = _node(
    "WhereBackward0",
    lambda F, g, c, sa, sb: F.sum_to(_masked(F, c, g), sa),
    lambda F, g, c, sa, sb: F.sum_to(_masked(F, ~c, g), sb),
    frees_args=True,
)

# special functions (torch.special's formulas); "tiny": |x| <= eps, where i1's 1/x is replaced
# by its limit
ErfinvBackward0 = _node("ErfinvBackward0", lambda F, g, r: g * (_HALF_SQRT_PI * F.exp(r * r)))
SpecialErfcxBackward0 = _node("SpecialErfcxBackward0", lambda F, g, x, r: g * _erfcx_slope(F, x, r))
SpecialNdtrBackward0 = _node(
    "SpecialNdtrBackward0", lambda F, g, x: g * (F.exp(x * x * -0.5) * _INV_SQRT_2PI)
)
SpecialNdtriBackward0 = _node(
    "SpecialNdtriBackward0", lambda F, g, r: g * (F.exp(r * r * 0.5) * _SQRT_2PI)
)
# pdf / cdf as sqrt(2/pi) / erfcx(-x/sqrt 2): torch's exp(-(log_ndtr(x) + x²/2)) cancels to
# nothing for very negative x (the gradient there is about -x, and correct here)
SpecialLogNdtrBackward0 = _node(
    "SpecialLogNdtrBackward0", lambda F, g, x: g * (_SQRT_2_OVER_PI / F.erfcx(x * -_INV_SQRT2))
)
I0Backward0 = _node("I0Backward0", lambda F, g, x: g * F.i1(x))
SpecialI0EBackward0 = _node(
    "SpecialI0EBackward0", lambda F, g, x, r: g * (F.i1e(x) - F.sign(x) * r)
)
SpecialI1Backward0 = _node("SpecialI1Backward0", lambda F, g, x, r: g * _i1_slope(F, x, r, False))
SpecialI1EBackward0 = _node("SpecialI1EBackward0", lambda F, g, x, r: g * _i1_slope(F, x, r, True))
SincBackward0 = _node("SincBackward0", lambda F, g, x: g * _sinc_slope(F, x))
SpecialEntrBackward0 = _node("SpecialEntrBackward0", lambda F, g, x: g * -(1 + F.log(x)))
# x; eps (None: no clamping)
LogitBackward0 = _node("LogitBackward0", lambda F, g, x, eps: _logit_slope(F, g, x, eps))
XlogyBackward0 = _node(
    "XlogyBackward0",
    lambda F, g, a, b: F.sum_to(_xlog_slope(F, g, a, b, F.log(b), 0.0), a.shape),
    lambda F, g, a, b: F.sum_to(g * a / b, b.shape),
)
SpecialXlog1PyBackward0 = _node(
    "SpecialXlog1PyBackward0",
    lambda F, g, a, b: F.sum_to(_xlog_slope(F, g, a, b, F.log1p(b), -1.0), a.shape),
    lambda F, g, a, b: F.sum_to(g * a / (b + 1), b.shape),
)

# a, b; axis
LinalgCrossBackward0 = _node(
    "LinalgCrossBackward0",
    lambda F, g, a, b, ax: F.sum_to(F.cross(b, g, ax), a.shape),
    lambda F, g, a, b, ax: F.sum_to(F.cross(g, a, ax), b.shape),
)

# scans ; axis (None: a 0-d input)
CumsumBackward0 = _node(
    "CumsumBackward0", lambda F, g, ax: g if ax is None else _reverse_cumsum(F, g, ax)
)
# x, result; axis
CumprodBackward0 = _node("CumprodBackward0", _cumprod_input)

# linear algebra (tadiff.ops.decompositions): result
LinalgInvBackward0 = _node("LinalgInvBackward0", lambda F, g, r: -(_mT(F, r) @ g @ _mT(F, r)))
# a, result
LinalgDetBackward0 = _node("LinalgDetBackward0", _det_input)
# a
LinalgSlogdetBackward0 = _multi("LinalgSlogdetBackward0", _slogdet_input)
# a, result; vector right-hand side, its shape
LinalgSolveBackward0 = _node("LinalgSolveBackward0", _solve_a, _solve_b)
# a, result; upper, unitriangular
LinalgSolveTriangularBackward0 = _node("LinalgSolveTriangularBackward0", _solve_tri_a, _solve_tri_b)
# result L
LinalgCholeskyBackward0 = _node("LinalgCholeskyBackward0", _cholesky_input)
# results (eigenvalues, eigenvectors)
LinalgEighBackward0 = _multi("LinalgEighBackward0", _eigh_input)
# results (U, S, Vh)
LinalgSvdBackward0 = _multi("LinalgSvdBackward0", _svd_input)
# results (Q, R)
LinalgQrBackward0 = _multi("LinalgQrBackward0", _qr_input)

# reductions (dims: tuple of axes or None for all; keepdim as given)
# ; shape, dims, keepdim
# torch's names: ...Backward0 for sum()/mean()/prod() without dim, ...Backward1 with one
SumBackward1 = _node(
    "SumBackward1", lambda F, g, shape, dims, keepdim: F.unreduce(g, shape, dims, keepdim)
)
SumBackward0 = _node("SumBackward0", *SumBackward1.vjps)
# ; ..., count
MeanBackward1 = _node(
    "MeanBackward1", lambda F, g, shape, dims, keepdim, n: F.unreduce(g / n, shape, dims, keepdim)
)
MeanBackward0 = _node("MeanBackward0", *MeanBackward1.vjps)
# x; dims, keepdim, correction, n
VarBackward0 = _node("VarBackward0", _variance)
# x, result; same
StdBackward0 = _node("StdBackward0", _std)
# x; dims, keepdim
ProdBackward1 = _node(
    "ProdBackward1",
    lambda F, g, x, dims, keepdim: F.unreduce(g, x.shape, dims, keepdim) * F.prod_others(x, dims),
)
ProdBackward0 = _node("ProdBackward0", *ProdBackward1.vjps)
# x, result; dims, keepdim
AmaxBackward0 = _node(
    "AmaxBackward0",
    lambda F, g, x, r, dims, keepdim:
        F.unreduce(g, x.shape, dims, keepdim) * _max_weights(F, x, r, dims, keepdim),
)
AminBackward0 = _node("AminBackward0", *AmaxBackward0.vjps)
# max()/min() without dim; x, result; dims, keepdim
MaxBackward1 = _node("MaxBackward1", _evenly_shared)
MinBackward1 = _node("MinBackward1", *MaxBackward1.vjps)
# ; shape, dim, keepdim, indices
MaxBackward0 = _node(
    "MaxBackward0",
    lambda F, g, shape, dim, keepdim, idx: F.scatter_add_zeros(
        F.reshape(g, keepdim_shape(shape, (dim,))), dim, idx, shape),
    frees_args=True,
)
MinBackward0 = _node("MinBackward0", *MaxBackward0.vjps, frees_args=True)
# x, result; dims, keepdim
LogsumexpBackward0 = _node(
    "LogsumexpBackward0",
    lambda F, g, x, r, dims, keepdim: F.unreduce(g, x.shape, dims, keepdim)
        * F.exp(x - F.unreduce(r, x.shape, dims, keepdim)),
)
# x, result; dims, keepdim
LinalgVectorNormBackward0 = _node("LinalgVectorNormBackward0", _norm2)
# result; dim
SoftmaxBackward0 = _node(
    "SoftmaxBackward0", lambda F, g, r, dim: r * (g - F.sum(g * r, (dim,), True))
)
# result; dim
LogSoftmaxBackward0 = _node(
    "LogSoftmaxBackward0", lambda F, g, r, dim: g - F.exp(r) * F.sum(g, (dim,), True)
)

# shape ops
# ; input shape
ViewBackward0 = _node("ViewBackward0", lambda F, g, shape: F.reshape(g, shape))
SqueezeBackward1 = _node("SqueezeBackward1", *ViewBackward0.vjps)
UnsqueezeBackward0 = _node("UnsqueezeBackward0", *ViewBackward0.vjps)
# ; dim0, dim1
TransposeBackward0 = _node(
    "TransposeBackward0", lambda F, g, d0, d1: F.swapaxes(g, d0, d1) if d0 != d1 else g
)
TBackward0 = _node("TBackward0", *TransposeBackward0.vjps)
PermuteBackward0 = _node("PermuteBackward0", lambda F, g, inverse: F.permute(g, inverse))
# ; input shape
ExpandBackward0 = _node("ExpandBackward0", lambda F, g, shape: F.sum_to(g, shape))
# ; dims
FlipBackward0 = _node("FlipBackward0", lambda F, g, dims: F.flip(g, dims))
# ; axis, offsets
CatBackward0 = _indexed("CatBackward0", _cat_piece)


def _stack_apply(self: IndexedOpNode, g: Any, create_graph: bool) -> list[Any]:
    # a plain pass of a stack along the first axis (small vectors and matrices assembled from
    # scalars in Python): input i's gradient is g[i], without a formula call per input
    if create_graph or self._args[0]:
        return IndexedOpNode._apply(self, g, create_graph)
    return [None if producer is None else g[i] for i, producer in enumerate(self._next)]


# ; axis
StackBackward0 = _indexed(
    "StackBackward0", lambda F, g, i, axis: g[(slice(None),) * axis + (i,)], _stack_apply
)
UnbindBackward0 = _multi("UnbindBackward0", lambda F, grads, axis: F.stack(grads, axis))
SplitBackward0 = _multi("SplitBackward0", lambda F, grads, axis: F.cat(grads, axis))
SplitWithSizesBackward0 = _multi("SplitWithSizesBackward0", SplitBackward0.vjp)

# indexing (gradient by scatter-add, so repeated advanced indices accumulate)
# ; shape, key
IndexBackward0 = _node(
    "IndexBackward0", lambda F, g, shape, key: F.index_scatter(g, key, shape), frees_args=True
)
SliceBackward0 = _node("SliceBackward0", *IndexBackward0.vjps)
SelectBackward0 = _node("SelectBackward0", *IndexBackward0.vjps)
# ; shape, one int or slice (``x[i]``, ``x[a:b]``: the key's tuple is made in the backward, not
# kept in the graph)
def _one_key_scatter(F: Any, g: Any, shape: tuple[int, ...], key: Any) -> Any:
    return F.index_scatter(g, (key,), shape)


def _one_key_apply(self: OpNode, g: Any, create_graph: bool) -> list[Any]:
    # a plain pass: zeros with the gradient written at the key, which addresses each element
    # once (rows picked in Python loops: the LSTM's state rows, bundle adjustment's points)
    if create_graph:
        return OpNode._apply(self, g, create_graph)
    shape, key = self._args
    out = np.zeros(shape, g.dtype if type(g) is np.ndarray else np.result_type(g))
    out[key] = g
    return [out]


SliceOneBackward0 = _node("SliceBackward0", _one_key_scatter, apply=_one_key_apply)
SelectOneBackward0 = _node("SelectBackward0", _one_key_scatter, apply=_one_key_apply)
DiagonalBackward0 = _node("DiagonalBackward0", *IndexBackward0.vjps)
# each window's first maximum (its flat position in the input); the input's shape — max
# pooling whose windows tile the input: each position is written once, so no scatter-add
MaxPoolTiledBackward0 = _node(
    "MaxPoolTiledBackward0", lambda F, g, first, shape: F.put_positions(g, first, shape)
)
# ; key
IndexScatterBackward0 = _node("IndexScatterBackward0", lambda F, g, key: g[key], frees_args=True)
# ; interior slices
ConstantPadNdBackward0 = _node("ConstantPadNdBackward0", lambda F, g, key: g[key])
# ; key, value shape
IndexPutBackward0 = _node(
    "IndexPutBackward0",
    lambda F, g, key, sv: _outside(F, g, key),
    lambda F, g, key, sv: F.sum_to(g[key], sv),
    frees_args=True,
)
# ; positions (flat indices into the base, shaped like the view), kept (0 at the positions)
# The base after an in-place op on one of its views: the old base outside the view, the op's
# result inside it.
CopySlices = _node(
    "CopySlices",
    lambda F, g, pos, kept: g * kept,
    lambda F, g, pos, kept: g.reshape(-1)[pos],
)
# ; positions, base shape: a view of a base whose graph an in-place op rewrote
AsStridedBackward0 = _node(
    "AsStridedBackward0",
    lambda F, g, pos, shape: F.index_scatter(g, (pos,), (math.prod(shape),)).reshape(shape),
)
# ; dim, index, shape
GatherBackward0 = _node(
    "GatherBackward0",
    lambda F, g, dim, idx, shape: F.scatter_add_zeros(g, dim, idx, shape),
    frees_args=True,
)
# ; dim, index
ScatterAddBackward0 = _node(
    "ScatterAddBackward0",
    lambda F, g, dim, idx: g,
    lambda F, g, dim, idx: F.gather(g, dim, idx),
    frees_args=True,
)

# ; dim, index, alpha
IndexAddBackward0 = _node(
    "IndexAddBackward0",
    lambda F, g, dim, idx, alpha: g,
    lambda F, g, dim, idx, alpha: F.take(g, idx, dim) * alpha,
    frees_args=True,
)

# linear algebra

MmBackward0 = _node("MmBackward0", _matmul_a, _matmul_b)
# x, weight (of x @ weight.T + bias; the bias is the third input)
AddmmBackward0 = _node("AddmmBackward0", _linear_input, _linear_weight, _linear_bias)
BmmBackward0 = _node("BmmBackward0", _matmul_a, _matmul_b)
MvBackward0 = _node("MvBackward0", _matmul_a, _matmul_b)
DotBackward0 = _node("DotBackward0", _matmul_a, _matmul_b)
# operands; plan
EinsumBackward0 = _indexed("EinsumBackward0", _einsum_operand)

# fmt: on
