"""FastH for torch tensors: ``householder_apply``, ``householder_product``, ``Orthogonal``,
``LinearSVD``, and ``cached`` (build each ``V``'s blocks once for a loop of calls, e.g. the time
steps of an orthogonal RNN; see :func:`tadiff.structured.householder.cached`).

The kernels are the ones of :mod:`tadiff.structured.householder`, run on torch tensors (CPU or
CUDA); this module wraps them in a ``torch.autograd.Function`` whose backward is FastH's blocked
Algorithm 2, not autograd through the forward loop. Importing it changes no global torch state.

Example:
    >>> import torch
    >>> from tadiff.torch.householder import Orthogonal
    >>> layer = Orthogonal(8, dtype=torch.float64)
    >>> x = torch.randn(5, 8, dtype=torch.float64)
    >>> bool(torch.allclose(layer.inverse(layer(x)), x))
    True
"""

from __future__ import annotations

import torch

from tadiff.errors import InputError, ShapeError
from tadiff.structured.householder import (
    _apply_differentiable,
    _backward,
    _blocks_of,
    _check_inputs,
    _fold,
    _forward,
    _unfold,
    _vjp_differentiable,
    cached,
)
from tadiff.torch._autocast import autocast_inputs, without_autocast

__all__ = [
    "LinearSVD",
    "Orthogonal",
    "autocast_inputs",
    "cached",
    "householder_apply",
    "householder_product",
    "without_autocast",
]


class _HouseholderApply(torch.autograd.Function):
    """``U X`` with the FastH backward (Algorithm 2) for first derivatives.

    Under ``create_graph`` (second derivatives) the backward runs the same algorithm written with
    out-of-place torch ops instead, which autograd can differentiate, so higher orders are exact.
    """

    @staticmethod
    @without_autocast
    def forward(ctx, V, X, block, transpose, recording):
        d = int(V.shape[1])
        blocks = _blocks_of(torch, V, block, transpose)
        # needs_input_grad is set even under no_grad; saving the block inputs then only costs.
        need_v = ctx.needs_input_grad[0] and recording
        Y, saved = _forward(torch, blocks, _fold(torch, X, d), save=need_v)
        ctx.save_for_backward(V, X)  # for create_graph, and torch's in-place-modification checks
        # Intermediates are plain tensors that require no grad: kept on ctx, freed with the graph.
        ctx.blocks, ctx.saved, ctx.block, ctx.transpose = blocks, saved, block, transpose
        return _unfold(torch, Y, tuple(X.shape))

    @staticmethod
    @without_autocast
    def backward(ctx, grad):
        V, X = ctx.saved_tensors
        need = ctx.needs_input_grad[:2]
        if torch.is_grad_enabled():  # create_graph: a differentiable gradient
            gV, gX = _vjp_differentiable(torch, V, X, grad, ctx.block, ctx.transpose)
            return gV if need[0] else None, gX if need[1] else None, None, None, None
        d = int(X.shape[-2])
        gV, gX = _backward(torch, ctx.blocks, ctx.saved, _fold(torch, grad, d), need_v=need[0])
        if gV is not None and ctx.transpose:
            gV = gV.flip(0)
        gX = _unfold(torch, gX, tuple(X.shape)) if need[1] else None
        return gV, gX, None, None, None


class _HouseholderApplyForTransforms(torch.autograd.Function):
    """The same ``U X`` for ``torch.func`` transforms (grad, vmap, jacrev, jacfwd, hessian, …).

    ``torch.func`` needs a forward without ``ctx``, so block intermediates cannot be kept from the
    forward: the backward recomputes them, with out-of-place operations that outer transforms can
    differentiate again (``grad(grad(f))``). ``vmap`` folds a batch of ``X`` into FastH's own
    batch dimensions (one blocked call for the whole batch) and loops over a batch of ``V``;
    forward mode (``jvp``, ``jacfwd``) pushes tangents through the differentiable forward.
    """

    @staticmethod
    @without_autocast
    def forward(V, X, block, transpose):
        blocks = _blocks_of(torch, V, block, transpose)
        Y, _ = _forward(torch, blocks, _fold(torch, X, int(V.shape[1])), save=False)
        return _unfold(torch, Y, tuple(X.shape))

    @staticmethod
    def setup_context(ctx, inputs, output):
        V, X, block, transpose = inputs
        ctx.save_for_backward(V, X)
        ctx.save_for_forward(V, X)
        ctx.options = (block, transpose)

    @staticmethod
    @without_autocast
    def backward(ctx, grad):
        V, X = ctx.saved_tensors
        gV, gX = _vjp_differentiable(torch, V, X, grad, *ctx.options)
        need = ctx.needs_input_grad
        return gV if need[0] else None, gX if need[1] else None, None, None

    @staticmethod
    @without_autocast
    def jvp(ctx, dV, dX, _block, _transpose):
        V, X = ctx.saved_tensors
        tangents = tuple(torch.zeros_like(t) if dt is None else dt for t, dt in ((V, dV), (X, dX)))

        def apply(V, X):
            return _apply_differentiable(torch, V, X, *ctx.options)

        return torch.func.jvp(apply, (V, X), tangents)[1]

    @staticmethod
    def vmap(info, in_dims, V, X, block, transpose):
        v_dim, x_dim = in_dims[:2]
        apply = _HouseholderApplyForTransforms.apply
        if v_dim is None:  # a batch of X: FastH's leading batch dimensions, one call
            return apply(V, X.movedim(x_dim, 0), block, transpose), 0
        Vs = V.movedim(v_dim, 0)
        Xs = [X] * info.batch_size if x_dim is None else X.movedim(x_dim, 0)
        pairs = zip(Vs, Xs, strict=True)
        return torch.stack([apply(v, x, block, transpose) for v, x in pairs]), 0


_transforms_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


def householder_apply(V, X, *, block=None, transpose=False):
    """FastH ``U X`` (or ``Uᵀ X``) for torch tensors, differentiable wrt ``V`` and ``X``.

    Args:
        V: (k, d) Householder vectors, one per row (nonzero), float32 or float64.
        X: (..., d, m) tensor, same dtype and device as ``V``. Under ``torch.autocast``,
            float16/bfloat16 inputs are computed in float32 (see :func:`autocast_inputs`).
        block: reflectors per block (``None``: :func:`tadiff.structured.householder.default_block`).
        transpose: compute ``Uᵀ X`` (the inverse).

    Returns:
        (..., d, m) tensor of the dtype of ``X`` (float32 for half-precision inputs under
        autocast).

    Example:
        >>> V = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        >>> Y = householder_apply(V, torch.eye(4, dtype=torch.float64))
        >>> Y.sum().backward(); V.grad.shape
        torch.Size([4, 4])
    """
    V, X = autocast_inputs(V, X)
    recording = torch.is_grad_enabled()
    _, _, b = _check_inputs(V, X, block, backward=recording and getattr(V, "requires_grad", False))
    if _transforms_active():  # inside torch.func.grad / vmap / jacrev / …
        return _HouseholderApplyForTransforms.apply(V, X, b, bool(transpose))
    return _HouseholderApply.apply(V, X, b, bool(transpose), recording)


def householder_product(V, *, block=None, transpose=False):
    """The dense (d, d) matrix ``U = H_1 ⋯ H_k`` (or ``Uᵀ``), differentiable wrt ``V``.

    Args:
        V: (k, d) Householder vectors.
        block: block size.
        transpose: return ``Uᵀ``.

    Returns:
        (d, d) orthogonal tensor.
    """
    if not isinstance(V, torch.Tensor) or V.ndim != 2:
        raise ShapeError(
            f"householder_product: V must be a tensor of shape (k, d), got "
            f"{tuple(V.shape) if isinstance(V, torch.Tensor) else type(V)}"
        )
    eye = torch.eye(int(V.shape[1]), dtype=V.dtype, device=V.device)
    return householder_apply(V, eye, block=block, transpose=transpose)


def _init_reflectors(k, d, init, dtype, device):
    """Rows for ``k`` reflectors in dimension ``d``.

    ``"identity"``: reflectors come in nearly equal pairs (``H(w) H(w + εn) ≈ I``), so ``U`` starts
    close to the identity; with odd ``k`` the last reflector is unpaired and ``U`` starts close to a
    single reflection (``det U = (−1)^k`` for every product of ``k`` reflectors). ``"random"``:
    i.i.d. normal rows, a well-spread orthogonal matrix.
    """
    if init not in ("identity", "random"):
        raise InputError(f"Orthogonal: init must be 'identity' or 'random', got {init!r}")
    V = torch.randn(k, d, dtype=dtype, device=device)
    if init == "identity":
        pairs = k // 2
        V[1 : 2 * pairs : 2] = V[0 : 2 * pairs : 2] + 1e-2 * V[1 : 2 * pairs : 2]
    return V


class Orthogonal(torch.nn.Module):
    """Orthogonal linear map ``y = U x`` with ``U = H_1 ⋯ H_k`` applied by FastH.

    Args:
        d: feature dimension.
        k: number of reflectors (default ``d``, which reaches every orthogonal matrix of
            determinant ``(−1)^d``).
        block: FastH block size (``None``: the default rule).
        init: ``"identity"`` (near-identity start, see below) or ``"random"``.
        dtype, device: of the parameter (default: torch's default dtype, CPU).

    Shapes: ``forward(x)``: (..., d) -> (..., d); ``inverse(y)`` undoes it;
    ``log_abs_det(x)`` is zeros of shape (...). Parameter ``V``: (k, d).

    Example:
        >>> layer = Orthogonal(6, k=4, dtype=torch.float64)
        >>> U = layer.matrix()
        >>> bool(torch.allclose(U @ U.T, torch.eye(6, dtype=torch.float64)))
        True
    """

    def __init__(self, d, k=None, *, block=None, init="identity", dtype=None, device=None):
        super().__init__()
        k = d if k is None else int(k)
        if int(d) < 1 or k < 1:
            raise InputError(f"Orthogonal: need d >= 1 and k >= 1, got d={d}, k={k}")
        self.d, self.k, self.block = int(d), k, block
        self.V = torch.nn.Parameter(_init_reflectors(k, int(d), init, dtype, device))

    def forward(self, x):
        return _rows(self.V, x, self.block, transpose=False)

    def inverse(self, y):
        """``x = Uᵀ y`` for (..., d) rows."""
        return _rows(self.V, y, self.block, transpose=True)

    def log_abs_det(self, x):
        """log |det ∂y/∂x| = 0 for every row of x (..., d): zeros of shape (...)."""
        return x.new_zeros(x.shape[:-1])

    def matrix(self):
        """The dense (d, d) matrix ``U``."""
        return householder_product(self.V, block=self.block)

    def extra_repr(self):
        return f"d={self.d}, k={self.k}, block={self.block}"


class LinearSVD(torch.nn.Module):
    """SVD-parameterised linear layer ``y = U diag(s) Vᵀ x + bias``.

    ``U`` (out × out) and ``V`` (in × in) are products of Householder reflectors applied by FastH
    and ``s`` (min(in, out)) are trainable singular values, so the spectrum is explicit (clamp or
    regularise ``s`` to control the conditioning).

    Args:
        in_features, out_features: sizes.
        bias: add a trainable bias.
        k_in, k_out: reflectors for ``V`` and ``U`` (default: the full dimension).
        block: FastH block size.
        init: reflector init, ``"identity"`` or ``"random"``; ``s`` starts at 1.
        dtype, device: of the parameters.

    Shapes: (..., in_features) -> (..., out_features). ``inverse`` and ``log_abs_det``
    (``Σ log|s|`` per row) exist when ``in_features == out_features``.

    Example:
        >>> layer = LinearSVD(5, 3, dtype=torch.float64)
        >>> layer(torch.ones(2, 5, dtype=torch.float64)).shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        in_features,
        out_features,
        bias=True,
        *,
        k_in=None,
        k_out=None,
        block=None,
        init="identity",
        dtype=None,
        device=None,
    ):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.block = block
        k_in = self.in_features if k_in is None else int(k_in)
        k_out = self.out_features if k_out is None else int(k_out)
        r = min(self.in_features, self.out_features)
        self.V_in = torch.nn.Parameter(
            _init_reflectors(k_in, self.in_features, init, dtype, device)
        )
        self.V_out = torch.nn.Parameter(
            _init_reflectors(k_out, self.out_features, init, dtype, device)
        )
        self.s = torch.nn.Parameter(torch.ones(r, dtype=self.V_in.dtype, device=device))
        self.bias = (
            torch.nn.Parameter(torch.zeros(self.out_features, dtype=self.V_in.dtype, device=device))
            if bias
            else None
        )

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ShapeError(
                f"LinearSVD: x must have shape (..., {self.in_features}), got {tuple(x.shape)}"
            )
        r = self.s.shape[0]
        cols = x.reshape(-1, self.in_features).mT
        t = householder_apply(self.V_in, cols, block=self.block, transpose=True)[:r]
        t = t * self.s[:, None]
        if self.out_features > r:
            t = torch.cat([t, t.new_zeros(self.out_features - r, t.shape[1])])
        y = householder_apply(self.V_out, t, block=self.block).mT
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def _require_square(self, what):
        if self.in_features != self.out_features:
            raise ShapeError(
                f"LinearSVD.{what} needs in_features == out_features, got "
                f"{self.in_features} and {self.out_features}"
            )

    def inverse(self, y):
        """``x = V diag(1/s) Uᵀ (y − bias)``, for square layers."""
        self._require_square("inverse")
        if self.bias is not None:
            y = y - self.bias
        cols = y.reshape(-1, self.out_features).mT
        t = householder_apply(self.V_out, cols, block=self.block, transpose=True)
        t = t / self.s[:, None]
        x = householder_apply(self.V_in, t, block=self.block).mT
        return x.reshape(y.shape)

    def log_abs_det(self, x):
        """``Σ log|s|`` for every row of x (..., d), for square layers."""
        self._require_square("log_abs_det")
        return torch.log(self.s.abs()).sum().expand(x.shape[:-1])

    def matrix(self):
        """The dense (out, in) weight ``U diag(s) Vᵀ``."""
        r = self.s.shape[0]
        Vt = householder_product(self.V_in, block=self.block, transpose=True)[:r]
        U = householder_product(self.V_out, block=self.block)[:, :r]
        return (U * self.s) @ Vt

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


def _rows(V, x, block, transpose):
    d = V.shape[1]
    if x.shape[-1] != d:
        raise ShapeError(
            f"Orthogonal: x must have shape (..., {d}) to match V of shape {tuple(V.shape)}, "
            f"got shape {tuple(x.shape)}"
        )
    cols = x.reshape(-1, d).mT  # (d, N): samples become columns
    y = householder_apply(V, cols, block=block, transpose=transpose)
    return y.mT.reshape(x.shape)
