"""tadiff ops for torch tensors, as ``torch.autograd.Function`` s (CPU and CUDA).

Requires the ``torch`` extra: ``pip install "tadiff[torch]"``.
"""

from tadiff.errors import MissingDependencyError

try:
    import torch as _torch  # noqa: F401  (imported to fail early with a clear message)
except ImportError as _exc:  # pragma: no cover - exercised only without torch
    raise MissingDependencyError("tadiff.torch", "torch", "torch") from _exc

__all__: list[str] = []
