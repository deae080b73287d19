"""tadiff: differentiate tensor programs.

Public names are re-exported here as their layers land. Never bind a module-level ``torch`` global
in this file: importing ``tadiff.torch`` binds that name to the subpackage.
"""

import numpy as _np

# The autograd engine (tadiff.autograd) and its primitive ops (tadiff.ops). Importing ops binds
# the operators and methods onto Tensor. The NumPy-like functions below make ``tadiff`` the array
# namespace of its Tensors (tadiff._array.namespace), so xp-generic kernels accept Tensors.
from tadiff import autograd, errors, ops
from tadiff.autograd.factories import (
    arange,
    empty,
    eye,
    full,
    full_like,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from tadiff.autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from tadiff.autograd.tensor import Tensor
from tadiff.ops import (
    abs,
    add,
    amax,
    amin,
    broadcast_to,
    cat,
    chunk,
    clamp,
    clone,
    concatenate,
    cos,
    div,
    einsum,
    exp,
    expand,
    expm1,
    flatten,
    flip,
    gather,
    log,
    log1p,
    log_softmax,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    norm,
    permute,
    pow,
    prod,
    relu,
    reshape,
    scatter_add,
    sigmoid,
    sign,
    sin,
    softmax,
    split,
    sqrt,
    squeeze,
    stack,
    std,
    sub,
    sum,
    swapaxes,
    tan,
    tanh,
    transpose,
    unbind,
    unsqueeze,
    var,
    where,
)

clip = clamp
float32 = _np.dtype("float32")
float64 = _np.dtype("float64")
int64 = _np.dtype("int64")

__version__ = "0.1.0"

__all__ = [
    "Tensor", "__version__", "abs", "add", "amax", "amin", "arange", "autograd", "broadcast_to",
    "cat", "chunk", "clamp", "clip", "clone", "concatenate", "cos", "div", "einsum", "empty",
    "enable_grad", "errors", "exp", "expand", "expm1", "eye", "flatten", "flip", "float32",
    "float64", "full", "full_like", "gather", "int64", "is_grad_enabled", "linspace", "log",
    "log1p", "log_softmax", "logsumexp", "manual_seed", "matmul", "max", "maximum", "mean", "min",
    "minimum", "mul", "neg", "no_grad", "norm", "ones", "ones_like", "ops", "permute", "pow",
    "prod", "rand", "rand_like", "randn", "randn_like", "relu", "reshape", "scatter_add",
    "set_grad_enabled", "sigmoid", "sign", "sin", "softmax", "split", "sqrt", "squeeze", "stack",
    "std", "sub", "sum", "swapaxes", "tan", "tanh", "tensor", "transpose", "unbind", "unsqueeze",
    "var", "where", "zeros", "zeros_like",
]  # fmt: skip
