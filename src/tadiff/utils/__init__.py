"""``tadiff.utils``: torch.utils's import paths for code ported from PyTorch —
``tadiff.utils.data`` (the loaders of :mod:`tadiff.data`) and ``tadiff.utils.checkpoint`` — and
``tadiff.utils.progress``, the progress feedback of the examples and benchmarks."""

from tadiff.utils import checkpoint, data, progress

__all__ = ["checkpoint", "data", "progress"]
