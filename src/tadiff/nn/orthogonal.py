"""Orthogonal layers for tadiff's engine: ``Orthogonal`` and ``LinearSVD``, applied by FastH.

``U = H_1 ⋯ H_k`` is stored as its ``k`` Householder vectors and never materialised: forward,
inverse and gradients go through :func:`tadiff.structured.householder.householder_apply`.
The same layers for torch are in :mod:`tadiff.torch.householder`.

Example:
    >>> import tadiff as td
    >>> layer = Orthogonal(6, dtype=td.float64)
    >>> x = td.randn(4, 6, dtype=td.float64)
    >>> bool(abs(layer.inverse(layer(x)) - x).max() < 1e-12)
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn.module import Module, Parameter
from tadiff.structured.householder import (
    householder_apply,
    householder_product,
    orthogonal_forward,
    orthogonal_inverse,
)

__all__ = ["LinearSVD", "Orthogonal"]


def _init_reflectors(k: int, d: int, init: str, dtype: Any) -> Tensor:
    """``k`` reflector rows; ``"identity"`` pairs nearly equal rows so ``U ≈ I`` (even ``k``)."""
    if init not in ("identity", "random"):
        raise InputError(f"Orthogonal: init must be 'identity' or 'random', got {init!r}")
    if k < 1 or d < 1:
        raise InputError(f"Orthogonal: need d >= 1 and k >= 1 reflectors, got d={d}, k={k}")
    V = td.randn(k, d, dtype=dtype)
    if init == "identity":
        rows = V.data
        pairs = k // 2
        # H(w) H(w + εn) ≈ I: each pair nearly cancels; an odd last row stays a reflection.
        rows[1 : 2 * pairs : 2] = rows[0 : 2 * pairs : 2] + 1e-2 * rows[1 : 2 * pairs : 2]
    return V


class Orthogonal(Module):
    """Orthogonal linear map ``y = U x``, ``U = H_1 ⋯ H_k`` (FastH forward and backward).

    Args:
        d: feature dimension.
        k: number of reflectors (default ``d``). ``det U = (−1)^k``.
        block: FastH block size (``None``: the default rule).
        init: ``"identity"`` (pairs of nearly equal reflectors: ``U`` starts near ``I`` for even
            ``k``, near one reflection for odd ``k``) or ``"random"``.
        dtype: of the parameter (default float32).

    Shapes: ``forward``: (..., d) -> (..., d); ``inverse`` undoes it; ``log_abs_det(x)`` is zeros
    of shape (...). Parameter ``V``: (k, d).

    Example:
        >>> import tadiff as td
        >>> Orthogonal(4, k=2)(td.ones(3, 4)).shape
        (3, 4)
    """

    def __init__(
        self,
        d: int,
        k: int | None = None,
        *,
        block: int | None = None,
        init: str = "identity",
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.d = int(d)
        self.k = self.d if k is None else int(k)
        self.block = block
        self.V = Parameter(_init_reflectors(self.k, self.d, init, dtype))

    def forward(self, x: Tensor) -> Tensor:
        return orthogonal_forward(self.V, x, block=self.block)

    def inverse(self, y: Tensor) -> Tensor:
        """``x = Uᵀ y`` for rows of shape (..., d)."""
        return orthogonal_inverse(self.V, y, block=self.block)

    def log_abs_det(self, x: Tensor) -> Tensor:
        """``log |det ∂y/∂x| = 0`` for each row: zeros of shape ``x.shape[:-1]``."""
        return td.zeros(*x.shape[:-1], dtype=x.dtype)

    def matrix(self) -> Tensor:
        """The dense (d, d) matrix ``U`` (differentiable wrt ``V``)."""
        return householder_product(self.V, block=self.block)

    def extra_repr(self) -> str:
        return f"d={self.d}, k={self.k}, block={self.block}"


class LinearSVD(Module):
    """SVD-parameterised linear layer ``y = U diag(s) Vᵀ x + bias`` with trainable ``s``.

    ``U`` (out × out) and ``V`` (in × in) are Householder products applied by FastH, so the
    singular values are the explicit parameter ``s`` (length min(in, out), starting at 1).

    Args:
        in_features, out_features: sizes.
        bias: add a trainable bias (zeros at start).
        k_in, k_out: reflectors of ``V`` and ``U`` (default: full dimension).
        block: FastH block size.
        init: reflector init, ``"identity"`` or ``"random"``.
        dtype: of the parameters (default float32).

    Shapes: (..., in_features) -> (..., out_features). ``inverse`` and ``log_abs_det``
    (``Σ log|s|`` per row) need ``in_features == out_features``.

    Example:
        >>> import tadiff as td
        >>> LinearSVD(5, 3)(td.ones(2, 5)).shape
        (2, 3)
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        *,
        k_in: int | None = None,
        k_out: int | None = None,
        block: int | None = None,
        init: str = "identity",
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.block = block
        k_in = self.in_features if k_in is None else int(k_in)
        k_out = self.out_features if k_out is None else int(k_out)
        self.V_in = Parameter(_init_reflectors(k_in, self.in_features, init, dtype))
        self.V_out = Parameter(_init_reflectors(k_out, self.out_features, init, dtype))
        dt = self.V_in.dtype
        r = min(self.in_features, self.out_features)
        self.s = Parameter(np.ones(r, dtype=dt))
        self.bias = Parameter(np.zeros(self.out_features, dtype=dt)) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.in_features:
            raise ShapeError(
                f"LinearSVD: x must have shape (..., {self.in_features}), got {tuple(x.shape)}"
            )
        r = self.s.shape[0]
        cols = x.reshape(-1, self.in_features).mT  # (in, N): samples become columns
        t = householder_apply(self.V_in, cols, block=self.block, transpose=True)[:r]
        t = t * self.s.reshape(r, 1)
        if self.out_features > r:
            t = td.cat([t, td.zeros(self.out_features - r, t.shape[1], dtype=t.dtype)])
        y = householder_apply(self.V_out, t, block=self.block).mT
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def _require_square(self, what: str) -> None:
        if self.in_features != self.out_features:
            raise ShapeError(
                f"LinearSVD.{what} needs in_features == out_features, got "
                f"{self.in_features} and {self.out_features}"
            )

    def inverse(self, y: Tensor) -> Tensor:
        """``x = V diag(1/s) Uᵀ (y − bias)`` for square layers."""
        self._require_square("inverse")
        if self.bias is not None:
            y = y - self.bias
        cols = y.reshape(-1, self.out_features).mT
        t = householder_apply(self.V_out, cols, block=self.block, transpose=True)
        t = t / self.s.reshape(-1, 1)
        return householder_apply(self.V_in, t, block=self.block).mT.reshape(*y.shape)

    def log_abs_det(self, x: Tensor) -> Tensor:
        """``Σ log|s|`` for each row of ``x`` (shape ``x.shape[:-1]``), square layers only."""
        self._require_square("log_abs_det")
        return td.log(td.abs(self.s)).sum().expand(tuple(x.shape[:-1]))

    def matrix(self) -> Tensor:
        """The dense (out, in) weight ``U diag(s) Vᵀ``."""
        r = self.s.shape[0]
        Vt = householder_product(self.V_in, block=self.block, transpose=True)[:r]
        U = householder_product(self.V_out, block=self.block)[:, :r]
        return (U * self.s) @ Vt

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"
