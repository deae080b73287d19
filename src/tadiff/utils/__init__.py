"""``tadiff.utils``: torch.utils's import paths for code ported from PyTorch —
``tadiff.utils.data`` (the loaders of :mod:`tadiff.data`) and ``tadiff.utils.checkpoint``."""

from tadiff.utils import checkpoint, data

__all__ = ["checkpoint", "data"]
