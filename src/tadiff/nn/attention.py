"""``scaled_dot_product_attention``: ``softmax(q k^T * scale + mask) v``, composed of tadiff ops.

Example:
    >>> import tadiff as td
    >>> q = td.randn(2, 4, 5, 8)  # (batch, heads, length, features)
    >>> scaled_dot_product_attention(q, q, q, is_causal=True).shape
    (2, 4, 5, 8)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.ops._common import broadcasts_to


def _check_shapes(q: Tensor, k: Tensor, v: Tensor) -> None:
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError(
            f"scaled_dot_product_attention: query {q.shape}, key {k.shape}, value {v.shape}; "
            "expected at least 2 dims (..., length, features)"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ShapeError(
            f"scaled_dot_product_attention: query features {q.shape[-1]} and key features "
            f"{k.shape[-1]} differ (query {q.shape}, key {k.shape}); expected equal"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"scaled_dot_product_attention: key length {k.shape[-2]} and value length "
            f"{v.shape[-2]} differ (key {k.shape}, value {v.shape}); expected equal"
        )


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """Attention weights ``softmax(query @ key^T * scale + bias)`` applied to ``value``.

    A query row whose every key is masked out gets zero weights (output 0, gradient 0), as
    torch's math implementation does.

    Args:
        query: shape ``(..., L, E)``.
        key: shape ``(..., S, E)``.
        value: shape ``(..., S, Ev)``; batch dims of the three broadcast.
        attn_mask: broadcasts to ``(..., L, S)``: bool (True: the key takes part) or floating
            (added to the scores, e.g. ``-inf`` to mask), or None.
        dropout_p: must be 0 (attention dropout is not implemented; use ``F.dropout`` on the
            output if needed).
        is_causal: mask keys after the query position (the lower-left triangle of ``(L, S)``,
            as torch); not together with ``attn_mask``.
        scale: multiplies the scores; default ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention is not implemented (must be False).

    Returns:
        Shape ``(..., L, Ev)``.

    Raises:
        InputError: ``dropout_p != 0``, ``enable_gqa``, or ``is_causal`` with ``attn_mask``.
        ShapeError: query/key features, key/value lengths or the mask do not fit.
    """
    where = "scaled_dot_product_attention"
    q = as_tensor_arg(query, f"{where} query")
    k = as_tensor_arg(key, f"{where} key")
    v = as_tensor_arg(value, f"{where} value")
    if dropout_p != 0.0:
        raise InputError(f"{where}: dropout_p={dropout_p}; attention dropout is not implemented")
    if enable_gqa:
        raise InputError(f"{where}: enable_gqa=True; grouped-query attention is not implemented")
    _check_shapes(q, k, v)
    length, keys = q.shape[-2], k.shape[-2]
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.swapaxes(-1, -2)) * factor
    if is_causal:
        if attn_mask is not None:
            raise InputError(f"{where}: pass either attn_mask or is_causal=True, not both")
        attn_mask = np.tril(np.ones((length, keys), dtype=bool))
    if attn_mask is not None:
        mask = attn_mask.data if isinstance(attn_mask, Tensor) else np.asarray(attn_mask)
        if not broadcasts_to(mask.shape, scores.shape):
            raise ShapeError(
                f"{where}: attn_mask of shape {mask.shape} does not broadcast to the scores' "
                f"shape {scores.shape} (..., L, S)"
            )
        if mask.dtype == bool:
            scores = td.where(mask, scores, -np.inf)
        elif mask.dtype.kind == "f":
            scores = scores + (attn_mask if isinstance(attn_mask, Tensor) else Tensor(mask))
        else:
            raise DTypeError(f"{where}: attn_mask dtype {mask.dtype}; expected bool or floating")
    blocked = np.all(scores.data == -np.inf, axis=-1, keepdims=True)
    if blocked.any():
        # every key masked: softmax would be 0/0; torch returns zero weights for such rows
        weights = td.where(blocked, 0.0, td.softmax(td.where(blocked, 0.0, scores), dim=-1))
    else:
        weights = td.softmax(scores, dim=-1)
    return weights @ v


__all__ = ["scaled_dot_product_attention"]
