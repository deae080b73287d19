"""Element-wise activations beyond ReLU/tanh/sigmoid/GELU, with ``torch.nn.functional``'s names.

Every function is composed of differentiable tadiff ops (``where``, ``clamp``, ``exp``,
``log1p``, ...), so first and higher derivatives come from the engine. Piecewise functions pick
their branch with ``td.where`` on a mask of the input, and each branch only ever sees inputs for
which it is finite (``exp`` arguments are clamped first), so an unused branch cannot turn the
gradient into ``0 * inf = nan``. At the kinks the gradient is torch's choice (stated per
function).

Example:
    >>> import tadiff as td
    >>> leaky_relu(td.tensor([-2.0, 3.0]), 0.1)
    tensor([-0.2,  3. ])
"""

from __future__ import annotations

import tadiff as td
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn._args import as_tensor_arg
from tadiff.ops._dual import sign_array

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _log1p_exp(z: Tensor) -> Tensor:
    """``log(1 + exp(z))`` for any ``z`` without overflow; gradient ``sigmoid(z)`` (1/2 at 0)."""
    positive = z.data > 0
    # z > 0: z + log1p(exp(-z)); else log1p(exp(z)). Each branch clamps its own argument so the
    # exp of the unused branch stays finite.
    high = td.clamp(z, min=0.0)
    low = td.clamp(z, max=0.0)
    return td.where(positive, high + (-high).exp().log1p(), low.exp().log1p())


def _no_inplace(inplace: bool, where: str) -> None:
    """tadiff activations return new tensors; refuse ``inplace=True`` instead of ignoring it."""
    if inplace:
        raise InputError(f"{where}: inplace=True is not supported; use the returned tensor")


def _inside(x: Tensor, low: float, high: float) -> Tensor:
    """Bool mask ``low < x < high`` (a constant: where the linear piece's gradient flows)."""
    return Tensor((x.data > low) & (x.data < high))


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x`` (gradient at 0: ``negative_slope``).

    Args:
        input: any shape.
        negative_slope: slope for negative inputs.
        inplace: must be False (tadiff returns a new tensor; True raises InputError).

    Example:
        >>> leaky_relu(td.tensor([-1.0, 1.0]), 0.2)
        tensor([-0.2,  1. ])
    """
    _no_inplace(inplace, "leaky_relu")
    x = as_tensor_arg(input, "leaky_relu")
    return td.where(x.data > 0, x, x * negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (gradient at 0: ``alpha``).

    Example:
        >>> elu(td.tensor([0.0, 2.0]))
        tensor([0., 2.])
    """
    _no_inplace(inplace, "elu")
    x = as_tensor_arg(input, "elu")
    return td.where(x.data > 0, x, td.clamp(x, max=0.0).expm1() * alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants of Klambauer et al.

    ``alpha = 1.6732632423543772848...`` and ``scale = 1.0507009873554804934...``, as in torch.

    Example:
        >>> selu(td.tensor([1.0]))
        tensor([1.0507])
    """
    _no_inplace(inplace, "selu")
    return elu(as_tensor_arg(input, "selu"), _SELU_ALPHA) * _SELU_SCALE


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``, continuously differentiable.

    Raises:
        InputError: ``alpha == 0``.

    Example:
        >>> celu(td.tensor([1.0]), alpha=2.0)
        tensor([1.])
    """
    _no_inplace(inplace, "celu")
    x = as_tensor_arg(input, "celu")
    if alpha == 0:
        raise InputError("celu: alpha=0 divides by zero; expected a nonzero alpha")
    return td.where(x.data > 0, x, (td.clamp(x, max=0.0) / alpha).expm1() * alpha)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)`` (also called swish).

    Example:
        >>> silu(td.tensor([0.0]))
        tensor([0.])
    """
    _no_inplace(inplace, "silu")
    x = as_tensor_arg(input, "silu")
    return x * x.sigmoid()


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``.

    Example:
        >>> mish(td.tensor([0.0]))
        tensor([0.])
    """
    _no_inplace(inplace, "mish")
    x = as_tensor_arg(input, "mish")
    return x * _log1p_exp(x).tanh()


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``.

    Args:
        input: any shape.
        beta: sharpness (nonzero).
        threshold: above this value of ``beta * x`` the function is linear (as torch).

    Example:
        >>> softplus(td.tensor([0.0, 100.0]))
        tensor([  0.6931, 100.    ])
    """
    x = as_tensor_arg(input, "softplus")
    if beta == 0:
        raise InputError("softplus: beta=0 divides by zero; expected a nonzero beta")
    scaled = x * beta
    linear = scaled.data > threshold
    # exp only of values up to the threshold: the linear region's branch would overflow
    smooth = td.clamp(scaled, max=float(threshold)).exp().log1p() / beta
    return td.where(linear, x, smooth)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``.

    Example:
        >>> softsign(td.tensor([1.0]))
        tensor([0.5])
    """
    x = as_tensor_arg(input, "softsign")
    return x / (x.abs() + 1.0)


def hardtanh(
    input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """``x`` clipped to ``[min_val, max_val]``; the gradient is 0 at the two bounds (as torch's
    ``hardtanh``, unlike ``clamp`` whose gradient is 1 there).

    Raises:
        InputError: ``max_val < min_val``.

    Example:
        >>> hardtanh(td.tensor([-3.0, 0.5, 3.0]))
        tensor([-1. ,  0.5,  1. ])
    """
    _no_inplace(inplace, "hardtanh")
    x = as_tensor_arg(input, "hardtanh")
    if max_val < min_val:
        raise InputError(
            f"hardtanh: max_val={max_val} is below min_val={min_val}; expected min_val <= max_val"
        )
    clipped = Tensor(x.data.clip(min_val, max_val))
    return td.where(_inside(x, min_val, max_val), x, clipped)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)`` (``hardtanh(x, 0, 6)``: gradient 0 at 0 and 6).

    Example:
        >>> relu6(td.tensor([-1.0, 7.0]))
        tensor([0., 6.])
    """
    _no_inplace(inplace, "relu6")
    return hardtanh(as_tensor_arg(input, "relu6"), 0.0, 6.0)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``0`` for ``x <= -3``, ``1`` for ``x >= 3``, ``x / 6 + 1 / 2`` between (gradient 0 at ±3).

    Example:
        >>> hardsigmoid(td.tensor([0.0, 4.0]))
        tensor([0.5, 1. ])
    """
    _no_inplace(inplace, "hardsigmoid")
    x = as_tensor_arg(input, "hardsigmoid")
    ramp = x / 6.0 + 0.5
    return td.where(_inside(x, -3.0, 3.0), ramp, Tensor(ramp.data.clip(0.0, 1.0)))


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``: ``0`` up to -3, ``x`` from 3 on, ``x (x + 3) / 6`` between.

    The gradient at -3 is 0 and at 3 is 1 (the outer pieces'), as torch's.

    Example:
        >>> hardswish(td.tensor([-4.0, 0.0, 4.0]))
        tensor([-0.,  0.,  4.])
    """
    _no_inplace(inplace, "hardswish")
    x = as_tensor_arg(input, "hardswish")
    middle = x * (x + 3.0) / 6.0
    below = x.data <= -3.0
    return td.where(below, x * 0.0, td.where(x.data < 3.0, middle, x))


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x)) = -softplus(-x)``, accurate for large ``|x|``.

    Example:
        >>> logsigmoid(td.tensor([0.0]))
        tensor([-0.6931])
    """
    return -_log1p_exp(-as_tensor_arg(input, "logsigmoid"))


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``; the gradient passes where ``x`` is kept.

    A NaN input is kept (torch's rule: only ``x <= threshold`` is replaced).

    Args:
        input: any shape.
        threshold: the value ``x`` must exceed to be kept.
        value: what replaces the others.
        inplace: must be False (True raises InputError).

    Example:
        >>> threshold(td.tensor([0.5, 2.0]), 1.0, -1.0)
        tensor([-1.,  2.])
    """
    _no_inplace(inplace, "threshold")
    x = as_tensor_arg(input, "threshold")
    return td.where(~(x.data <= threshold), x, Tensor(x.data.dtype.type(value)))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``0`` where ``-lambd <= x <= lambd``, else ``x`` (gradient 0 on that closed interval; a
    negative ``lambd`` keeps every element, as in torch).

    Example:
        >>> hardshrink(td.tensor([-1.0, 0.25, 0.5, 2.0]))
        tensor([-1.,  0.,  0.,  2.])
    """
    x = as_tensor_arg(input, "hardshrink")
    zero = (x.data >= -lambd) & (x.data <= lambd)
    return td.where(zero, Tensor(x.data.dtype.type(0)), x)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, ``0`` between (gradient 0
    on the closed interval ``[-lambd, lambd]``, 1 outside; NaN stays NaN).

    Raises:
        InputError: ``lambd < 0``.

    Example:
        >>> softshrink(td.tensor([-1.0, 0.25, 2.0]))
        tensor([-0.5,  0. ,  1.5])
    """
    x = as_tensor_arg(input, "softshrink")
    if not lambd >= 0:  # (also NaN) torch's RuntimeError; InputError is one
        raise InputError(f"softshrink: lambd={lambd}; expected lambd >= 0")
    xd = x.data
    zero = (xd >= -lambd) & (xd <= lambd)
    # the shift towards 0 is a constant: the gradient is 1 outside the interval, exactly 0 in it
    shift = Tensor((sign_array(xd) * lambd).astype(xd.dtype, copy=False))
    return td.where(zero, Tensor(xd.dtype.type(0)), x - shift)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``.

    Example:
        >>> tanhshrink(td.tensor([0.0]))
        tensor([0.])
    """
    x = as_tensor_arg(input, "tanhshrink")
    return x - x.tanh()


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: split ``input`` in halves ``a, b`` along ``dim``; ``a * sigmoid(b)``.

    Args:
        input: shape with an even size along ``dim``.
        dim: the axis to halve.

    Returns:
        ``input``'s shape with ``dim`` halved.

    Raises:
        ShapeError: the size along ``dim`` is odd (or the input is 0-d).

    Example:
        >>> glu(td.ones(2, 4)).shape
        (2, 2)
    """
    x = as_tensor_arg(input, "glu")
    if x.ndim == 0 or not -x.ndim <= dim < x.ndim:
        raise ShapeError(f"glu: dim={dim} is out of range for an input of shape {x.shape}")
    size = x.shape[dim]
    if size % 2:
        raise ShapeError(
            f"glu: input of shape {x.shape} has odd size {size} along dim {dim}; expected an "
            "even size to halve"
        )
    a, b = td.split(x, size // 2, dim=dim)
    return a * b.sigmoid()


def softmin(input: Tensor, dim: int) -> Tensor:
    """``softmax(-x)`` along ``dim``.

    Example:
        >>> softmin(td.tensor([0.0, 0.0]), dim=0)
        tensor([0.5, 0.5])
    """
    return td.softmax(-as_tensor_arg(input, "softmin"), dim=dim)


__all__ = [
    "celu",
    "elu",
    "glu",
    "hardshrink",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "leaky_relu",
    "logsigmoid",
    "mish",
    "relu6",
    "selu",
    "silu",
    "softmin",
    "softplus",
    "softshrink",
    "softsign",
    "tanhshrink",
    "threshold",
]
