"""tadiff for PyTorch: tadiff ops as ``torch.autograd.Function`` s and ``torch.library`` ops.

Requires the ``torch`` extra: ``pip install "tadiff[torch]"``. Everything here takes and returns
torch tensors (CPU or CUDA; dtype and device are kept) and works inside ordinary torch training
loops, ``DistributedDataParallel`` and ``torch.compile``. See ``docs/torch.md``.

Public names:
    sinkhorn: Sinkhorn–Knopp with the implicit backward (:mod:`tadiff.torch.sinkhorn`).
    householder_apply, householder_product, Orthogonal, LinearSVD: FastH
        (:mod:`tadiff.torch.householder`).
    function: run a user's tadiff ``Function`` in torch autograd (:mod:`tadiff.torch.function`).
    to_torch, from_torch: conversions, zero-copy on CPU (:mod:`tadiff.torch.convert`).
    define: index-notation ops with derived backward, CPU tensors (:mod:`tadiff.torch.define`).
    library: the same ops registered as ``torch.ops.tadiff.*`` custom ops, which
        ``torch.compile`` keeps in one graph (:mod:`tadiff.torch.library`).

Example:
    >>> import torch
    >>> import tadiff.torch as tdt
    >>> layer = tdt.Orthogonal(4, dtype=torch.float64)
    >>> layer(torch.randn(3, 4, dtype=torch.float64)).shape
    torch.Size([3, 4])
"""

from tadiff.errors import MissingDependencyError

try:
    import torch as _torch  # noqa: F401  (imported to fail early with a clear message)
except ImportError as _exc:  # pragma: no cover - exercised only without torch
    raise MissingDependencyError("tadiff.torch", "torch", "torch") from _exc

from tadiff.torch import library
from tadiff.torch.convert import from_torch, to_torch
from tadiff.torch.define import define
from tadiff.torch.function import function
from tadiff.torch.householder import LinearSVD, Orthogonal, householder_apply, householder_product
from tadiff.torch.sinkhorn import sinkhorn

__all__ = [
    "LinearSVD",
    "Orthogonal",
    "define",
    "from_torch",
    "function",
    "householder_apply",
    "householder_product",
    "library",
    "sinkhorn",
    "to_torch",
]
