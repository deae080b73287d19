"""``Embedding``, ``LayerNorm``, ``Dropout``, ``Flatten`` and ``Unflatten``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tadiff.autograd.factories import factory_dtype
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError
from tadiff.nn import functional as F
from tadiff.nn import init
from tadiff.nn._args import as_tensor_arg
from tadiff.nn.module import Module, Parameter


class Embedding(Module):
    """A lookup table: integer indices select rows of ``weight`` (drawn from ``N(0, 1)``).

    Args:
        num_embeddings: number of rows.
        embedding_dim: size of each row.
        padding_idx: a row initialized to zeros whose gradient stays zero, or None.
        dtype: parameter dtype.

    Shapes:
        indices of any shape ``S`` -> output ``S + (embedding_dim,)``.

    Example:
        >>> import tadiff as td
        >>> Embedding(10, 4)(td.tensor([[1, 2], [3, 9]])).shape
        (2, 2, 4)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "Embedding")
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise InputError(
                f"Embedding: padding_idx={padding_idx} is out of range for {num_embeddings} rows"
            )
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.weight = Parameter(np.empty((num_embeddings, embedding_dim), dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Draw ``N(0, 1)`` rows; zero the padding row."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0

    def forward(self, indices: Any) -> Tensor:
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class LayerNorm(Module):
    """Normalize the trailing dims to mean 0, variance 1, then scale and shift (learned).

    Args:
        normalized_shape: the trailing shape normalized over (an int for the last dim).
        eps: added to the variance.
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros).
        bias: learn the bias too (when ``elementwise_affine``).
        dtype: parameter dtype.

    Example:
        >>> import tadiff as td
        >>> LayerNorm(4)(td.randn(2, 4)).shape
        (2, 4)
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        dtype: Any = None,
        device: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(dtype, device, "LayerNorm")
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class Dropout(Module):
    """Zero elements with probability ``p`` while training (scaling the rest by ``1/(1-p)``);
    the identity in eval mode.

    Example:
        >>> import tadiff as td
        >>> Dropout(0.5).eval()(td.ones(3))
        tensor([1., 1., 1.])
    """

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise InputError(f"Dropout: probability p={p} is not in [0, 1]")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Flatten(Module):
    """Merge dims ``start_dim..end_dim`` (inclusive) into one; the batch dim stays by default.

    Example:
        >>> import tadiff as td
        >>> Flatten()(td.ones(2, 3, 4)).shape
        (2, 12)
    """

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        x = as_tensor_arg(x, "Flatten")
        n = max(x.ndim, 1)
        start, end = self.start_dim, self.end_dim
        if not (-n <= start < n and -n <= end < n) or start % n > end % n:
            raise ShapeError(
                f"Flatten: start_dim={start}, end_dim={end} do not fit an input of shape "
                f"{x.shape}; expected dims in [-{n}, {n}) with start_dim <= end_dim"
            )
        return x.flatten(start, end)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (one entry may be -1, inferred).

    Example:
        >>> import tadiff as td
        >>> Unflatten(1, (3, 4))(td.ones(2, 12)).shape
        (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size: Sequence[int]):
        super().__init__()
        sizes = tuple(unflattened_size)
        if not sizes or not all(isinstance(s, (int, np.integer)) for s in sizes):
            raise InputError(
                f"Unflatten: unflattened_size={unflattened_size!r}; expected a non-empty "
                "sequence of ints"
            )
        self.dim, self.unflattened_size = dim, sizes

    def forward(self, x: Tensor) -> Tensor:
        x = as_tensor_arg(x, "Unflatten")
        if not -x.ndim <= self.dim < x.ndim:
            raise ShapeError(
                f"Unflatten: dim={self.dim} is out of range for an input of shape {x.shape}"
            )
        dim = self.dim % x.ndim
        size, sizes = x.shape[dim], self.unflattened_size
        known = int(np.prod([s for s in sizes if s != -1]))
        if -1 in sizes:
            fits = sizes.count(-1) == 1 and known > 0 and size % known == 0
        else:
            fits = known == size
        if not fits or any(s < -1 for s in sizes):
            raise ShapeError(
                f"Unflatten: unflattened_size={sizes} does not fit size {size} of dim {dim} "
                f"of the input of shape {x.shape}; expected sizes whose product is {size}"
            )
        return x.reshape(*x.shape[:dim], *sizes, *x.shape[dim + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
