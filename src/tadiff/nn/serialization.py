"""Save and load parameters as ``.npz`` files (NumPy's zip of arrays; no pickle involved)."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tadiff.errors import DTypeError, InputError
from tadiff.nn.module import Module


def save(obj: Module | dict[str, Any], path: str | Path) -> Path:
    """Write a module's ``state_dict`` (or a dict of arrays) to ``path`` as an ``.npz`` file.

    The file is written exactly at ``path`` (NumPy's habit of appending ``.npz`` is avoided).

    Args:
        obj: a Module, or a mapping of names to arrays/Tensors.
        path: the file to write.

    Returns:
        The path written.

    Example:
        >>> import tadiff as td                                     # doctest: +SKIP
        >>> td.nn.save(model, "model.npz")                          # doctest: +SKIP
        >>> model.load_state_dict(td.nn.load("model.npz"))          # doctest: +SKIP
    """
    state = obj.state_dict() if isinstance(obj, Module) else obj
    if not hasattr(state, "items"):
        raise DTypeError(f"save: expected a Module or a dict of arrays, got {type(obj).__name__}")
    arrays = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise InputError(f"save: key {key!r} is not a string")
        array = np.asarray(value)
        if array.dtype == object:
            raise DTypeError(f"save: value for {key!r} is not a numeric array")
        arrays[key] = array
    path = Path(path)
    with path.open("wb") as handle:
        np.savez(handle, **arrays)
    return path


def load(path: str | Path) -> dict[str, np.ndarray]:
    """Read a file written by :func:`save`: a dict of name -> NumPy array, in saved order.

    Raises:
        FileNotFoundError: no file at ``path``.
        InputError: the file is not an ``.npz`` archive.
    """
    path = Path(path)
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise InputError(f"load: {path} is not a tadiff/NumPy .npz file ({exc})") from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError(f"load: {path} holds a single array, not a saved state (.npz)")
    with archive:
        try:
            return {key: archive[key] for key in archive.files}
        except (zipfile.BadZipFile, ValueError, OSError) as exc:
            raise InputError(f"load: {path} is a damaged .npz file ({exc})") from exc
