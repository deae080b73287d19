"""``MultiheadAttention``, ``TransformerEncoderLayer`` and ``TransformerEncoder`` with torch's
names, parameters, masks and shapes, composed of tadiff ops (matmul, softmax, layer norm).

Example:
    >>> import tadiff as td
    >>> layer = TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
    >>> encoder = TransformerEncoder(layer, num_layers=2)
    >>> encoder(td.randn(3, 5, 8)).shape  # (batch, length, d_model)
    (3, 5, 8)
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

import tadiff as td
from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import functional as F
from tadiff.nn import init
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.container import ModuleList
from tadiff.nn.layers import Dropout, LayerNorm
from tadiff.nn.linear import Linear
from tadiff.nn.module import Module, Parameter


def _additive_mask(mask: Any, name: str, dtype: Any) -> Tensor | None:
    """A bool mask (True: masked out, torch's convention for these modules) or a float mask
    (added to the scores) as an additive float Tensor; None stays None."""
    if mask is None:
        return None
    array = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if array.dtype == bool:
        return Tensor(np.where(array, -np.inf, 0.0).astype(dtype))
    if array.dtype.kind != "f":
        raise DTypeError(f"MultiheadAttention: {name} dtype {array.dtype}; expected bool or float")
    return mask.to(dtype) if isinstance(mask, Tensor) else Tensor(array.astype(dtype))


class MultiheadAttention(Module):
    """Multi-head attention: ``softmax(q_h k_h^T / sqrt(head_dim) + mask) v_h`` per head,
    heads concatenated and projected by ``out_proj``.

    Args:
        embed_dim: query features ``E`` (and output features).
        num_heads: heads; must divide ``embed_dim``.
        dropout: dropout on the attention weights in training mode.
        bias: learn ``in_proj_bias`` (zeros) and ``out_proj.bias`` (zeros).
        add_bias_kv, add_zero_attn: must be False (not implemented).
        kdim, vdim: key and value features (default ``embed_dim``).
        batch_first: inputs and output are ``(batch, length, features)``.
        dtype: parameter dtype.

    Parameters (torch's names and initialisation): ``in_proj_weight`` ``(3E, E)`` (Xavier
    uniform) when ``kdim == vdim == E``, else ``q_proj_weight`` ``(E, E)``, ``k_proj_weight``
    ``(E, kdim)``, ``v_proj_weight`` ``(E, vdim)``; ``in_proj_bias`` ``(3E,)``; ``out_proj``
    a ``Linear(E, E)``.

    Forward ``(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)``:
        query ``(L, N, E)``, key ``(S, N, kdim)``, value ``(S, N, vdim)`` (batch first with
        ``batch_first``; unbatched ``(L, E)``, ``(S, kdim)``, ``(S, vdim)``).
        key_padding_mask ``(N, S)`` (``(S,)`` unbatched): bool (True: the key is ignored)
        or float (added). attn_mask ``(L, S)`` or ``(N * num_heads, L, S)``: bool (True: not
        allowed to attend) or float (added). is_causal is torch's hint that ``attn_mask`` is
        the causal mask: it needs ``attn_mask``, which is then applied as given.
        A query whose every key is masked gets zero weights (torch's ``need_weights=False``
        result; torch's ``need_weights=True`` path gives nan there).

    Returns:
        ``(attn_output, attn_weights)``: output ``(L, N, E)`` (laid out like query); weights
        ``(N, L, S)`` averaged over heads, ``(N, num_heads, L, S)`` with
        ``average_attn_weights=False`` (no ``N`` when unbatched), or None when
        ``need_weights=False``.

    Example:
        >>> import tadiff as td
        >>> mha = MultiheadAttention(8, 2, batch_first=True)
        >>> x = td.randn(3, 5, 8)
        >>> out, weights = mha(x, x, x)
        >>> out.shape, weights.shape
        ((3, 5, 8), (3, 5, 5))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "MultiheadAttention")
        where = "MultiheadAttention"
        for name, value in (("embed_dim", embed_dim), ("num_heads", num_heads)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(f"{where}: {name}={value!r}; expected a positive int")
        if embed_dim % num_heads:
            raise InputError(
                f"{where}: embed_dim={embed_dim} is not divisible by num_heads={num_heads}"
            )
        if add_bias_kv or add_zero_attn:
            raise InputError(f"{where}: add_bias_kv and add_zero_attn are not implemented")
        if not 0.0 <= dropout <= 1.0:
            raise InputError(f"{where}: dropout={dropout}; expected a probability in [0, 1]")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        self.kdim = self.embed_dim if kdim is None else int(kdim)
        self.vdim = self.embed_dim if vdim is None else int(vdim)
        self.dropout = float(dropout)
        self.batch_first = bool(batch_first)
        e = self.embed_dim
        self._qkv_same_embed_dim = self.kdim == e and self.vdim == e
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(np.empty((3 * e, e), dtype=dtype))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(np.empty((e, e), dtype=dtype))
            self.k_proj_weight = Parameter(np.empty((e, self.kdim), dtype=dtype))
            self.v_proj_weight = Parameter(np.empty((e, self.vdim), dtype=dtype))
        if bias:
            self.in_proj_bias = Parameter(np.empty(3 * e, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-uniform input projections, zero biases (``out_proj.weight`` as ``Linear``)."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _projections(self) -> tuple[Tensor, Tensor, Tensor]:
        if self._qkv_same_embed_dim:
            return self.in_proj_weight.chunk(3, 0)
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def _check_inputs(self, q: Tensor, k: Tensor, v: Tensor) -> bool:
        where = "MultiheadAttention"
        if q.ndim not in (2, 3) or k.ndim != q.ndim or v.ndim != q.ndim:
            raise ShapeError(
                f"{where}: query {q.shape}, key {k.shape}, value {v.shape}; expected all 3-D "
                "(batched) or all 2-D (unbatched)"
            )
        for name, t, size in (("query", q, self.embed_dim), ("key", k, self.kdim),
                              ("value", v, self.vdim)):  # fmt: skip
            if t.shape[-1] != size:
                dim = {"query": "embed_dim", "key": "kdim", "value": "vdim"}[name]
                raise ShapeError(
                    f"{where}: {name} of shape {t.shape} has {t.shape[-1]} features; expected "
                    f"{dim}={size}"
                )
        if k.shape[:-1] != v.shape[:-1]:
            raise ShapeError(
                f"{where}: key {k.shape} and value {v.shape} differ in length or batch"
            )
        batch_axis = 0 if self.batch_first else 1
        if q.ndim == 3 and q.shape[batch_axis] != k.shape[batch_axis]:
            raise ShapeError(
                f"{where}: query {q.shape} and key {k.shape} have different batch sizes"
            )
        return q.ndim == 3

    def _mask(self, mask: Tensor | None, padding: Tensor | None, n: int, lq: int, s: int):
        """The additive masks combined, broadcastable to the scores ``(N, heads, L, S)``."""
        where, h = "MultiheadAttention", self.num_heads
        if mask is not None:
            if mask.shape == (lq, s):
                pass
            elif mask.shape == (n * h, lq, s):
                mask = mask.reshape(n, h, lq, s)
            else:
                raise ShapeError(
                    f"{where}: attn_mask of shape {mask.shape}; expected {(lq, s)} or "
                    f"{(n * h, lq, s)} (L, S) or (batch * num_heads, L, S)"
                )
        if padding is not None:
            if padding.shape != (n, s):
                raise ShapeError(
                    f"{where}: key_padding_mask of shape {padding.shape}; expected {(n, s)} "
                    "(batch, S), or (S,) for unbatched inputs"
                )
            padding = padding.reshape(n, 1, 1, s)
            mask = padding if mask is None else mask + padding
        return mask

    def forward(
        self,
        query: Any,
        key: Any,
        value: Any,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        where = "MultiheadAttention"
        q = as_tensor_arg(query, f"{where} query")
        k = as_tensor_arg(key, f"{where} key")
        v = as_tensor_arg(value, f"{where} value")
        if is_causal and attn_mask is None:
            raise InputError(
                f"{where}: is_causal=True is a hint that attn_mask is the causal mask; pass "
                "attn_mask too"
            )
        batched = self._check_inputs(q, k, v)
        weight = self.in_proj_weight if self._qkv_same_embed_dim else self.q_proj_weight
        if q.dtype != weight.dtype:
            raise DTypeError(
                f"{where}: query dtype {q.dtype} differs from the parameters' {weight.dtype}; "
                "convert one of them (e.g. module.double())"
            )
        attn_mask = _additive_mask(attn_mask, "attn_mask", q.dtype)
        padding = _additive_mask(key_padding_mask, "key_padding_mask", q.dtype)
        if not batched:
            q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
            padding = None if padding is None else padding.unsqueeze(0)
        elif self.batch_first:
            q, k, v = q.swapaxes(0, 1), k.swapaxes(0, 1), v.swapaxes(0, 1)
        # now (length, batch, features)
        lq, n, e = q.shape
        s, h, d = k.shape[0], self.num_heads, self.head_dim
        w_q, w_k, w_v = self._projections()
        b_q, b_k, b_v = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)

        def heads(x: Tensor, w: Tensor, b: Any, length: int) -> Tensor:
            # (length, N, E) -> (N, heads, length, head_dim)
            return F.linear(x, w, b).reshape(length, n, h, d).permute(1, 2, 0, 3)

        qh = heads(q, w_q, b_q, lq) * (1.0 / math.sqrt(d))
        kh, vh = heads(k, w_k, b_k, s), heads(v, w_v, b_v, s)
        scores = qh @ kh.swapaxes(-1, -2)
        mask = self._mask(attn_mask, padding, n, lq, s)
        if mask is not None:
            scores = scores + mask
        blocked = np.all(scores.data == -np.inf, axis=-1, keepdims=True)
        if blocked.any():
            # every key masked: torch's need_weights=False path gives such a query zero weights
            # (its need_weights=True path gives nan); zero weights in both modes here
            weights = td.where(blocked, 0.0, td.softmax(td.where(blocked, 0.0, scores), dim=-1))
        else:
            weights = td.softmax(scores, dim=-1)
        if self.dropout and self.training:
            weights = F.dropout(weights, self.dropout, training=True)
        out = (weights @ vh).permute(2, 0, 1, 3).reshape(lq, n, e)
        out = self.out_proj(out)
        if not batched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.swapaxes(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(dim=1)
        return out, (weights if batched else weights.squeeze(0))

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _activation(activation: Any) -> Callable[[Tensor], Tensor]:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if callable(activation):
        return activation
    raise InputError(
        f"TransformerEncoderLayer: activation={activation!r}; expected 'relu', 'gelu' or a callable"
    )


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual and a layer norm.

    ``norm_first=False`` (torch's default): ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``;
    ``norm_first=True``: ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``, where
    ``ff(x) = dropout2(linear2(dropout(activation(linear1(x)))))`` and ``sa`` is
    ``self_attn`` followed by ``dropout1``.

    Args:
        d_model: features of each position.
        nhead: attention heads.
        dim_feedforward: hidden size of the feed-forward block.
        dropout: the dropout probability (attention weights and the three dropouts).
        activation: ``"relu"``, ``"gelu"`` or a callable.
        layer_norm_eps: the layer norms' eps.
        batch_first: ``(batch, length, d_model)`` instead of ``(length, batch, d_model)``.
        norm_first: pre-norm instead of post-norm.
        bias: biases in the linear layers and layer norms.
        dtype: parameter dtype.

    Forward ``(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: the masks
    as ``MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask``. Returns ``src``'s shape.

    Example:
        >>> import tadiff as td
        >>> TransformerEncoderLayer(8, 2, 16)(td.randn(5, 3, 8)).shape
        (5, 3, 8)
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: Any = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "TransformerEncoderLayer")
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, dtype=dtype
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = bool(norm_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x: Tensor, mask: Any, padding: Any, is_causal: bool) -> Tensor:
        out = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
            is_causal=is_causal,
        )[0]  # fmt: skip
        return self.dropout1(out)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(
        self,
        src: Any,
        src_mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = as_tensor_arg(src, "TransformerEncoderLayer src")
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class TransformerEncoder(Module):
    """A stack of ``num_layers`` independent copies of ``encoder_layer``, then ``norm``.

    Args:
        encoder_layer: the layer to copy (its parameters are deep-copied, so the copies train
            separately, as torch).
        num_layers: number of copies (``layers.0``, ``layers.1``, ... in the state dict).
        norm: an optional final module (e.g. ``LayerNorm``).
        enable_nested_tensor, mask_check: accepted for torch compatibility; no effect.

    Forward ``(src, mask=None, src_key_padding_mask=None, is_causal=None)``: passed to each
    layer (``is_causal=None`` counts as False). Returns ``src``'s shape.

    Example:
        >>> import tadiff as td
        >>> enc = TransformerEncoder(TransformerEncoderLayer(8, 2, 16), 2, norm=td.nn.LayerNorm(8))
        >>> enc(td.randn(5, 3, 8)).shape
        (5, 3, 8)
    """

    def __init__(
        self,
        encoder_layer: Module,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ):
        super().__init__()
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise InputError(f"TransformerEncoder: num_layers={num_layers!r}; expected an int >= 1")
        if not isinstance(encoder_layer, Module):
            raise DTypeError(
                f"TransformerEncoder: encoder_layer is a {type(encoder_layer).__name__}; "
                "expected a Module"
            )
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        src: Any,
        mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(
                x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                is_causal=bool(is_causal),
            )  # fmt: skip
        return x if self.norm is None else self.norm(x)


__all__ = ["MultiheadAttention", "TransformerEncoder", "TransformerEncoderLayer"]
