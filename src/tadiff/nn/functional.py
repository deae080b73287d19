"""Stateless layer functions and losses, with ``torch.nn.functional``'s names and semantics.

Most functions are compositions of differentiable tadiff ops, so their gradients (and gradients
of gradients) come from the engine. For speed, ``linear`` and ``cross_entropy`` are one recorded
op each (``AddmmBackward0``, ``CrossEntropyBackward0``), both differentiable again. Losses take
raw scores (logits) and are computed stably through a shifted log-sum-exp.

Example:
    >>> import tadiff as td
    >>> logits = td.tensor([[2.0, 0.5, -1.0]], requires_grad=True)
    >>> loss = cross_entropy(logits, td.tensor([0]))
    >>> loss.backward()
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import tadiff as td
from tadiff._array import out_of_range
from tadiff.autograd.graph import record
from tadiff.autograd.tensor import Tensor, _make
from tadiff.errors import DTypeError, IndexingError, InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.nn._functions import ClassPicks, cross_entropy_op
from tadiff.nn.activation_functions import (  # noqa: F401 - torch's F.* names
    celu,
    elu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    leaky_relu,
    logsigmoid,
    mish,
    relu6,
    selu,
    silu,
    softmin,
    softplus,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
)
from tadiff.nn.adaptive_pooling import adaptive_avg_pool1d, adaptive_avg_pool2d  # noqa: F401
from tadiff.nn.attention import scaled_dot_product_attention  # noqa: F401
from tadiff.nn.batchnorm import batch_norm  # noqa: F401 - torch's F.* names
from tadiff.nn.conv import conv1d, conv2d  # noqa: F401
from tadiff.nn.conv_transpose import conv_transpose1d, conv_transpose2d  # noqa: F401
from tadiff.nn.extras import instance_norm, prelu  # noqa: F401
from tadiff.nn.extras import pad_mode as pad  # noqa: F401
from tadiff.nn.loss_functions import (  # noqa: F401
    _check_reduction,
    binary_cross_entropy,
    binary_cross_entropy_with_logits,
    gaussian_nll_loss,
    huber_loss,
    kl_div,
    l1_loss,
    poisson_nll_loss,
    smooth_l1_loss,
)
from tadiff.nn.margin_losses import (  # noqa: F401
    cosine_embedding_loss,
    hinge_embedding_loss,
    margin_ranking_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
    triplet_margin_loss,
)
from tadiff.nn.normalization import (  # noqa: F401
    cosine_similarity,
    group_norm,
    normalize,
    pairwise_distance,
)
from tadiff.nn.pooling import avg_pool1d, avg_pool2d, max_pool1d, max_pool2d  # noqa: F401
from tadiff.nn.resampling import interpolate, pixel_shuffle, pixel_unshuffle  # noqa: F401
from tadiff.ops._common import needs_grad
from tadiff.ops.derivatives import AddmmBackward0

_SQRT_HALF = math.sqrt(0.5)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias``.

    ``x``, ``weight`` and ``bias`` must share one dtype (as in torch).

    Args:
        x: input, shape ``(..., in_features)``.
        weight: shape ``(out_features, in_features)``.
        bias: shape ``(out_features,)`` or None.

    Returns:
        Shape ``(..., out_features)``.

    Example:
        >>> linear(td.ones(2, 3), td.ones(4, 3)).shape
        (2, 4)
    """
    x, weight = as_tensor_arg(x, "linear input"), as_tensor_arg(weight, "linear weight")
    xd, wd = x.data, weight.data  # checks on the arrays: this runs once per layer and step
    if bias is not None:
        bias = as_tensor_arg(bias, "linear bias")
    bd = None if bias is None else bias.data
    if wd.ndim != 2 or xd.ndim == 0 or xd.shape[-1] != wd.shape[1]:
        raise ShapeError(
            f"linear: input of shape {xd.shape} does not fit weight of shape {wd.shape}; "
            f"expected input shape (..., {wd.shape[-1] if wd.ndim else '?'}) and a 2-d "
            "weight (out_features, in_features)"
        )
    if bd is not None and bd.shape != (wd.shape[0],):
        raise ShapeError(
            f"linear: bias of shape {bd.shape} does not fit weight of shape {wd.shape}; "
            f"expected ({wd.shape[0]},), one per output feature"
        )
    if wd.dtype != xd.dtype or (bd is not None and bd.dtype != xd.dtype):
        name, other = ("weight", wd) if wd.dtype != xd.dtype else ("bias", bd)
        raise DTypeError(
            f"linear: input has dtype {xd.dtype} but {name} has dtype {other.dtype}; "
            "convert one of them (e.g. model.to(np.float64) or x.to(np.float32))"
        )
    n_rows = math.prod(xd.shape[:-1])
    if 2 * n_rows <= wd.shape[0]:
        # Few rows, wide output: (W @ x.T).T instead of x @ W.T, the same numbers in a
        # column-major result. OpenBLAS (x86, float32, one thread) runs it 10-35% faster there
        # (batch 32-128 into 256-2048 outputs) and no faster for more rows; for a narrow output
        # (256 -> 10) the column-major layout would make the backward's products 2-4x slower.
        rows = xd.reshape(n_rows, xd.shape[-1])
        out_t = wd @ rows.T
        if bd is not None:
            out_t += bd[:, None]  # in place: ``out_t`` is new
        out = out_t.T.reshape(*xd.shape[:-1], wd.shape[0])
    else:
        out = xd @ wd.T
        if bd is not None:
            out += bd
    if needs_grad(x, weight) or (bias is not None and needs_grad(bias)):
        return record(AddmmBackward0, out, (x, weight, bias), (x, weight))
    return _make(out)


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)`` element-wise (gradient 0 at 0)."""
    return as_tensor_arg(x, "relu").relu()


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent element-wise."""
    return as_tensor_arg(x, "tanh").tanh()


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))`` element-wise."""
    return as_tensor_arg(x, "sigmoid").sigmoid()


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit, ``x * Phi(x)``.

    Args:
        x: any shape, floating dtype.
        approximate: ``"none"`` (exact: ``x * erfc(-x / sqrt(2)) / 2``, accurate also in the
            negative tail) or ``"tanh"`` (``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``).
            Both are differentiable to any order.

    Example:
        >>> gelu(td.tensor([0.0, 1.0]), approximate="tanh")
        tensor([0.    , 0.8412])
    """
    x = as_tensor_arg(x, "gelu")
    if approximate == "none":
        return x * (td.erfc(x * -_SQRT_HALF) * 0.5)
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)
        return x * 0.5 * (inner.tanh() + 1.0)
    raise InputError(f"gelu: approximate={approximate!r}; expected 'none' or 'tanh'")


def softmax(x: Tensor, dim: int) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``, computed stably."""
    return td.softmax(as_tensor_arg(x, "softmax"), dim=dim)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """``x - logsumexp(x)`` along ``dim``, computed stably."""
    return td.log_softmax(as_tensor_arg(x, "log_softmax"), dim=dim)


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask is drawn from tadiff's generator (``td.manual_seed`` makes it reproducible). In
    evaluation (``training=False``) or with ``p == 0`` the input is returned unchanged.

    Example:
        >>> dropout(td.ones(4), p=0.0)
        tensor([1., 1., 1., 1.])
    """
    x = as_tensor_arg(x, "dropout")
    if not 0.0 <= p <= 1.0:
        raise InputError(f"dropout: probability p={p} is not in [0, 1]")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = td.rand(*x.shape).data >= p
    scale = (keep / (1.0 - p)).astype(x.dtype)
    return x * Tensor(scale)


def embedding(indices: Any, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of ``weight`` picked by integer ``indices``.

    Args:
        indices: integer Tensor or array, any shape ``S``, entries in ``[0, num_embeddings)``.
        weight: shape ``(num_embeddings, embedding_dim)``.
        padding_idx: a row whose gradient stays zero (as in torch), or None.

    Returns:
        Shape ``S + (embedding_dim,)``.

    Example:
        >>> embedding(td.tensor([2, 0]), td.eye(3)).shape
        (2, 3)
    """
    weight = as_tensor_arg(weight, "embedding weight")
    idx = indices.data if isinstance(indices, Tensor) else np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"embedding: indices must be integers, got dtype {idx.dtype}")
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be 2-d, got shape {weight.shape}")
    n = weight.shape[0]
    bad = np.argwhere((idx < 0) | (idx >= n))
    if bad.size:
        where = tuple(int(i) for i in bad[0])
        raise IndexingError(
            f"embedding: index {int(idx[where])} at position {where} is out of range for "
            f"{n} embeddings (expected 0 <= index < {n})"
        )
    rows = weight[idx]
    if padding_idx is None:
        return rows
    pad_row = padding_idx + n if padding_idx < 0 else padding_idx
    is_pad = (idx == pad_row)[..., None]
    # Same values everywhere; only the padding rows come from a detached copy (no gradient).
    return td.where(Tensor(is_pad), weight.detach()[idx], rows)


def layer_norm(
    x: Tensor,
    normalized_shape: Sequence[int] | int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` dims to mean 0 and variance 1, then
    scale by ``weight`` and shift by ``bias`` (both of shape ``normalized_shape``).

    The variance is the biased one (divide by the count), as in torch.

    Example:
        >>> y = layer_norm(td.tensor([[1.0, 2.0, 3.0]]), 3)
        >>> round(float(y.sum()), 6)
        0.0
    """
    x = as_tensor_arg(x, "layer_norm")
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    if k == 0 or x.shape[x.ndim - k :] != shape:
        raise ShapeError(
            f"layer_norm: input of shape {x.shape} does not end with normalized_shape {shape}"
        )
    dims = tuple(range(x.ndim - k, x.ndim))
    centered = x - x.mean(dim=dims, keepdim=True)
    variance = (centered * centered).mean(dim=dims, keepdim=True)
    out = centered / (variance + eps).sqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def mse_loss(input: Tensor, target: Any, reduction: str = "mean") -> Tensor:
    """Squared error ``(input - target)**2``, averaged (``"mean"``), summed or kept (``"none"``).

    Shapes must be equal (torch only warns when they broadcast; here that is an error, since it
    is nearly always a bug such as ``(N, 1)`` against ``(N,)``).

    Example:
        >>> float(mse_loss(td.tensor([1.0, 3.0]), td.tensor([0.0, 0.0])))
        5.0
    """
    _check_reduction(reduction, "mse_loss")
    input = as_tensor_arg(input, "mse_loss input")
    target = target if isinstance(target, Tensor) else Tensor(np.asarray(target, input.dtype))
    if input.shape != target.shape:
        raise ShapeError(
            f"mse_loss: input shape {input.shape} and target shape {target.shape} differ; "
            "expected equal shapes"
        )
    diff = input - target
    squared = diff * diff
    if reduction == "none":
        return squared
    return squared.sum() if reduction == "sum" else squared.mean()


def _class_picks(
    target: np.ndarray, num_classes: int, ignore_index: int
) -> tuple[np.ndarray, np.ndarray]:
    """Checked class indices: ``(target with ignored elements set to class 0, valid mask)``;
    the mask is None when every element counts."""
    in_range = target.size and not out_of_range(target, num_classes)
    if in_range and not 0 <= ignore_index < num_classes:  # the common case: nothing ignored
        return target, None
    valid = target != ignore_index
    bad = valid & ((target < 0) | (target >= num_classes))
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise IndexingError(
            f"cross_entropy: target {int(target[where])} at position {where} is not a class "
            f"index in [0, {num_classes}) (nor ignore_index={ignore_index})"
        )
    return (target if valid.all() else np.where(valid, target, 0)), valid


def _target_weights(
    target: np.ndarray,
    num_classes: int,
    class_axis: int,
    weight: np.ndarray | None,
    ignore_index: int,
    smoothing: float,
    dtype: np.dtype,
) -> tuple[np.ndarray, float]:
    """For class-index targets: the coefficients ``q`` (input's shape) with
    ``loss_i = -sum_c q_ic log p_ic``, and the ``"mean"`` denominator ``sum_i w[t_i]``."""
    safe, valid = _class_picks(target, num_classes, ignore_index)
    if valid is None:
        valid = np.ones(target.shape, bool)
    w = np.ones(num_classes) if weight is None else weight.astype(np.float64)
    picked = w[safe] * valid  # weight of each element's own class; 0 where ignored
    q = np.zeros((*target.shape, num_classes))
    np.put_along_axis(q, safe[..., None], (1.0 - smoothing) * picked[..., None], axis=-1)
    if smoothing:
        q += (smoothing / num_classes) * w * valid[..., None]
    return np.moveaxis(q, -1, class_axis).astype(dtype), float(picked.sum())


def cross_entropy(
    input: Tensor,
    target: Any,
    weight: Any = None,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Cross entropy between ``softmax(input)`` and the target, like ``F.cross_entropy``.

    Computed as ``-sum_c q_c * log_softmax(input)_c`` (stable for any logits), where ``q`` is the
    target distribution mixed with the uniform one: ``(1 - label_smoothing) * target +
    label_smoothing / C``.

    Args:
        input: logits, shape ``(C,)``, ``(N, C)`` or ``(N, C, d1, ...)`` (class dim 1).
        target: class indices (integers, the input's shape without the class dim) or class
            probabilities (floating, the input's shape).
        weight: per-class weights, shape ``(C,)``, or None.
        ignore_index: a class-index target value whose elements do not count (index targets).
        reduction: ``"mean"`` (divided by the summed weights of the counted elements, for index
            targets; by the element count for probability targets), ``"sum"`` or ``"none"``.
        label_smoothing: in ``[0, 1]``.

    Returns:
        A scalar, or per-element losses for ``reduction="none"``.

    Example:
        >>> logits = td.tensor([[0.0, 0.0]])
        >>> round(float(cross_entropy(logits, td.tensor([1]))), 4)
        0.6931
    """
    _check_reduction(reduction, "cross_entropy")
    input = as_tensor_arg(input, "cross_entropy input")
    if input.ndim == 0:
        raise ShapeError("cross_entropy: input must have a class dimension, got a 0-d tensor")
    if not 0.0 <= label_smoothing <= 1.0:
        raise InputError(f"cross_entropy: label_smoothing={label_smoothing} is not in [0, 1]")
    class_axis = 0 if input.ndim == 1 else 1
    num_classes = input.shape[class_axis]
    t = target.data if isinstance(target, Tensor) else np.asarray(target)
    w = None
    if weight is not None:
        w = weight.data if isinstance(weight, Tensor) else np.asarray(weight)
        if w.shape != (num_classes,):
            raise ShapeError(
                f"cross_entropy: weight has shape {w.shape}; expected ({num_classes},), "
                "one per class"
            )
    if t.dtype.kind in "iu":
        expected = input.shape[:class_axis] + input.shape[class_axis + 1 :]
        if t.shape != expected:
            raise ShapeError(
                f"cross_entropy: class-index target of shape {t.shape} does not fit input of "
                f"shape {input.shape}; expected target shape {expected}"
            )
        if w is None and label_smoothing == 0.0:
            # the common case: one class per element, picked directly (no one-hot weights)
            safe, valid = _class_picks(t, num_classes, ignore_index)
            picks = ClassPicks(safe, valid, num_classes)
            return cross_entropy_op(input, picks, class_axis, reduction, picks.count)
        q, denominator = _target_weights(
            t, num_classes, class_axis, w, ignore_index, label_smoothing, input.dtype
        )
    elif t.dtype.kind == "f":
        if t.shape != input.shape:
            raise ShapeError(
                f"cross_entropy: probability target of shape {t.shape} must have the input's "
                f"shape {input.shape}"
            )
        q = t.astype(np.float64) * (1.0 - label_smoothing) + label_smoothing / num_classes
        if w is not None:
            shape = [1] * input.ndim
            shape[class_axis] = num_classes
            q = q * w.reshape(shape)
        q = q.astype(input.dtype)
        denominator = float(t.size // num_classes)
    else:
        raise DTypeError(
            f"cross_entropy: target dtype {t.dtype}; expected integer class indices or "
            "floating class probabilities"
        )
    return cross_entropy_op(input, q, class_axis, reduction, denominator)


def _reduce_weighted(losses: Tensor, reduction: str, denominator: float) -> Tensor:
    total = losses.sum()
    if reduction == "sum":
        return total
    with np.errstate(invalid="ignore", divide="ignore"):  # every target ignored: nan, as torch
        return total / denominator


def nll_loss(
    input: Tensor,
    target: Any,
    weight: Any = None,
    ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of class-index targets given log-probabilities ``input``.

    ``cross_entropy(x, t) == nll_loss(log_softmax(x, 1), t)``; same shapes and arguments.

    Example:
        >>> logp = td.log_softmax(td.tensor([[0.0, 0.0]]), dim=1)
        >>> round(float(nll_loss(logp, td.tensor([0]))), 4)
        0.6931
    """
    _check_reduction(reduction, "nll_loss")
    input = as_tensor_arg(input, "nll_loss input")
    if input.ndim == 0:
        raise ShapeError("nll_loss: input must have a class dimension, got a 0-d tensor")
    class_axis = 0 if input.ndim == 1 else 1
    num_classes = input.shape[class_axis]
    t = target.data if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind not in "iu":
        raise DTypeError(f"nll_loss: target must hold integer class indices, got {t.dtype}")
    expected = input.shape[:class_axis] + input.shape[class_axis + 1 :]
    if t.shape != expected:
        raise ShapeError(
            f"nll_loss: target of shape {t.shape} does not fit input of shape {input.shape}; "
            f"expected {expected}"
        )
    w = None if weight is None else (weight.data if isinstance(weight, Tensor) else weight)
    q, denominator = _target_weights(t, num_classes, class_axis, w, ignore_index, 0.0, input.dtype)
    losses = -(input * Tensor(q)).sum(dim=class_axis)
    if reduction == "none":
        return losses
    return _reduce_weighted(losses, reduction, denominator)


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """Class indices as one-hot rows: ``out[..., c] = 1`` where ``tensor[...] == c``.

    Args:
        tensor: integer class indices (Tensor or array), any shape ``S``, all ``>= 0``.
        num_classes: the number of classes; -1 means ``tensor.max() + 1``.

    Returns:
        An int64 Tensor of shape ``S + (num_classes,)`` (no gradient).

    Raises:
        DTypeError: non-integer indices.
        InputError: a negative index, or one ``>= num_classes`` (names its position).

    Example:
        >>> one_hot(td.tensor([0, 2]), 3)
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    idx = tensor.data if isinstance(tensor, Tensor) else np.asarray(tensor)
    if idx.dtype.kind not in "iu":
        raise DTypeError(f"one_hot: expected integer class indices, got dtype {idx.dtype}")
    if num_classes == -1:
        if idx.size == 0:
            raise InputError("one_hot: cannot infer num_classes from an empty tensor; pass it")
        num_classes = int(idx.max()) + 1
    if not (isinstance(num_classes, (int, np.integer)) and num_classes >= 0):
        raise InputError(f"one_hot: num_classes={num_classes!r}; expected -1 or an int >= 0")
    bad = (idx < 0) | (idx >= num_classes)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(
            f"one_hot: class index {int(idx[where])} at position {where} is not in "
            f"[0, {num_classes}); expected 0 <= index < num_classes"
        )
    out = np.zeros((*idx.shape, num_classes), dtype=np.int64)
    np.put_along_axis(out, idx[..., None].astype(np.intp), 1, axis=-1)
    return Tensor(out)
