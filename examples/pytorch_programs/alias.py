"""Import a PyTorch program with ``import torch`` resolving to tadiff — unchanged.

The program's own module gets an ``__import__`` that maps ``torch`` to ``tadiff`` and
``torch.X.Y`` to ``tadiff.X.Y`` (``import torch.nn.functional as F``, ``from torch.special
import multigammaln``). Nothing global changes: other modules, torch itself included, import as
usual, so a test can load the same file twice and run it on both libraries side by side.

Example:
    >>> import tadiff
    >>> lse = load_program(PROGRAMS / "lse.py", "tadiff")
    >>> lse.torch is tadiff
    True
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

PROGRAMS = Path(__file__).resolve().parent
NAMES = (
    "gmm", "kmeans", "lse", "lstm", "ba", "ht", "ode", "springs", "raytrace", "cnn_train",
)  # fmt: skip
"""The programs in this folder, each a file written for PyTorch."""


def _as_tadiff(name: str) -> str | None:
    if name == "torch" or name.startswith("torch."):
        return "tadiff" + name[len("torch") :]
    return None


def _import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0):
    target = _as_tadiff(name) if level == 0 else None
    if target is None:
        return builtins.__import__(name, globals, locals, fromlist, level)
    module = importlib.import_module(target)
    # ``import torch.nn as nn`` and ``import torch`` want the top package (the interpreter walks
    # the attributes); ``from torch.special import x`` wants the named module itself.
    return module if fromlist else importlib.import_module("tadiff")


def load_program(path: str | Path, backend: str) -> ModuleType:
    """The program file at ``path`` imported as a fresh module running on ``backend``.

    Args:
        path: a Python file that says ``import torch``.
        backend: ``"torch"`` (import as written) or ``"tadiff"`` (``torch`` means tadiff).

    Returns:
        The module, named ``<stem>_<backend>``.
    """
    path = Path(path)
    name = f"{path.stem}_{backend}"
    if backend == "torch":
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    if backend != "tadiff":
        raise ValueError(f"backend must be 'torch' or 'tadiff', got {backend!r}")
    module = ModuleType(name)
    module.__file__ = str(path)
    module.__dict__["__builtins__"] = {**vars(builtins), "__import__": _import}
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    return module
