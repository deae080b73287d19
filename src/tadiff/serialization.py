"""Checkpoints: ``td.save`` and ``td.load`` for nested dicts and lists of tensors, arrays,
numbers, strings, bools and ``None`` — model, optimizer and scheduler state, the epoch, the RNG
state — without pickle.

**Format: a NumPy ``.npz`` archive plus a JSON description.** Every array (a tensor's data, a
NumPy array, a NumPy scalar) is one ``.npy`` member of the zip, loaded with
``allow_pickle=False``; the nesting, the Python values and which member is a tensor are a JSON
document stored as one more member. Loading never runs code from the file, NumPy alone can
read the arrays (``numpy.load``), and tadiff needs no dependency beyond NumPy. safetensors was
the other candidate: it stores a flat mapping of arrays and string metadata only, so nested
state would need the same JSON on top, and it would be a new dependency.

What can be saved: ``dict`` (keys: ``str``, ``int``, ``float``, ``bool`` or ``None``, in their
order), ``list``, ``tuple``, ``Tensor`` (with ``requires_grad``), ``numpy.ndarray`` and NumPy
scalars (numeric, bool or string dtypes), ``int``, ``float`` (``inf`` and ``nan`` too),
``complex``, ``bool``, ``str``, ``None``. A ``Module`` is saved as its ``state_dict()``.
Anything else (a function, an object array) is an error naming where it sits
(``obj['optimizer']['param_groups'][0]['foo']``).

Example:
    >>> import tempfile, pathlib
    >>> import tadiff as td
    >>> model = td.nn.Linear(3, 2)
    >>> opt = td.optim.Adam(model.parameters())
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "checkpoint.tadiff"
    >>> _ = td.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
    ...              "rng": td.get_rng_state()}, path)
    >>> checkpoint = td.load(path)
    >>> checkpoint["epoch"], sorted(checkpoint["model"])
    (3, ['bias', 'weight'])
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError

__all__ = ["load", "save"]

_STRUCTURE = "__tadiff__"
"""The archive member holding the JSON description (``__tadiff__.npy``, a uint8 array)."""
_FORMAT = 1


class _Writer:
    """Turns a nested value into JSON-able data, collecting its arrays under "a0", "a1", ..."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def array(self, value: np.ndarray, where: str) -> str:
        if value.dtype.hasobject or value.dtype.kind == "V":
            raise DTypeError(
                f"save: the array {where} has dtype {value.dtype}, which cannot be saved "
                "without pickle; convert it to a numeric or string dtype"
            )
        name = f"a{len(self.arrays)}"
        self.arrays[name] = value
        return name

    def encode(self, value: Any, where: str) -> Any:
        from tadiff.nn.module import Module

        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"float": repr(value)}
        if isinstance(value, complex):
            return {"complex": [self.encode(value.real, where), self.encode(value.imag, where)]}
        if isinstance(value, Tensor):
            return {"tensor": self.array(value.data, where), "requires_grad": value.requires_grad}
        if isinstance(value, np.ndarray):
            return {"ndarray": self.array(value, where)}
        if isinstance(value, np.generic):
            return {"scalar": self.array(np.asarray(value), where)}
        if isinstance(value, Module):
            return self.encode(value.state_dict(), where)
        if isinstance(value, dict):
            items = []
            for key, item in value.items():
                if not (key is None or isinstance(key, (str, int, float, bool))):
                    raise DTypeError(
                        f"save: the dict {where} has a key {key!r} of type "
                        f"{type(key).__name__}; keys must be str, int, float, bool or None"
                    )
                items.append([self.encode(key, where), self.encode(item, f"{where}[{key!r}]")])
            return {"dict": items}
        if isinstance(value, (list, tuple)):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [self.encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
        raise DTypeError(
            f"save: {where} is a {type(value).__module__}.{type(value).__qualname__}"
            "; a checkpoint holds dicts, lists, tuples, Tensors, arrays, numbers, strings, bools "
            "and None (no pickle)"
        )


def save(obj: Any, f: str | Path | io.IOBase) -> Path | None:
    """Write ``obj`` (nested dicts/lists of tensors, arrays, numbers, strings, bools, None; a
    Module as its ``state_dict``) to a file, without pickle.

    Args:
        obj: what to save, e.g. ``{"model": model.state_dict(), "optimizer":
            opt.state_dict(), "scheduler": sched.state_dict(), "epoch": 3, "rng":
            td.get_rng_state()}``.
        f: a path (written exactly there, no suffix added) or a binary file object.

    Returns:
        The path written (``None`` for a file object).

    Raises:
        DTypeError: a value that cannot be saved without pickle (the message says where).

    Example:
        >>> import io, tadiff as td
        >>> buffer = io.BytesIO()
        >>> td.save({"step": 10, "lr": [0.1, 0.01], "w": td.ones(2)}, buffer)
        >>> _ = buffer.seek(0); td.load(buffer)
        {'step': 10, 'lr': [0.1, 0.01], 'w': tensor([1., 1.])}
    """
    writer = _Writer()
    structure = {"format": _FORMAT, "value": writer.encode(obj, "obj")}
    text = json.dumps(structure, allow_nan=False, separators=(",", ":"))
    members = {_STRUCTURE: np.frombuffer(text.encode(), dtype=np.uint8), **writer.arrays}
    if isinstance(f, (str, Path)):
        path = Path(f)
        with path.open("wb") as handle:
            np.savez(handle, **members)
        return path
    np.savez(f, **members)
    return None


class _Reader:
    def __init__(self, archive: Any, source: str):
        self.archive, self.source = archive, source

    def array(self, name: Any) -> np.ndarray:
        if not isinstance(name, str) or name not in self.archive.files:
            raise InputError(f"load: {self.source} refers to an array {name!r} it does not hold")
        return self.archive[name]

    def decode(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if not (isinstance(value, dict) and value):
            raise InputError(f"load: {self.source} has an unreadable entry {value!r:.80}")
        kind = next(iter(value))
        body = value[kind]
        if kind == "dict":
            return {self.decode(k): self.decode(v) for k, v in body}
        if kind == "list":
            return [self.decode(v) for v in body]
        if kind == "tuple":
            return tuple(self.decode(v) for v in body)
        if kind == "tensor":
            return Tensor(self.array(body), requires_grad=bool(value.get("requires_grad")))
        if kind == "ndarray":
            return self.array(body)
        if kind == "scalar":
            return self.array(body)[()]
        if kind == "float":
            return float(body)
        if kind == "complex":
            return complex(self.decode(body[0]), self.decode(body[1]))
        raise InputError(f"load: {self.source} has an entry of unknown kind {kind!r}")


def load(f: str | Path | io.IOBase, map_location: Any = None, weights_only: Any = None) -> Any:
    """Read what :func:`save` wrote (tensors come back as Tensors, arrays as arrays).

    A plain ``.npz`` archive of arrays (``numpy.savez``, or tadiff's ``nn.save`` of earlier
    versions) loads as a dict of name -> array.

    Args:
        f: a path or a binary file object.
        map_location, weights_only: accepted for ``torch.load``'s signature; tadiff loads on
            the CPU and never unpickles anything.

    Raises:
        FileNotFoundError: no file at ``f``.
        InputError: the file is not a tadiff checkpoint or ``.npz`` archive, or is damaged.

    Example:
        >>> import io, tadiff as td
        >>> buffer = io.BytesIO()
        >>> td.save({"epoch": 2, "best": float("inf"), "done": None}, buffer)
        >>> _ = buffer.seek(0); td.load(buffer)
        {'epoch': 2, 'best': inf, 'done': None}
    """
    source = str(f) if isinstance(f, (str, Path)) else "the file"
    try:
        archive = np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(
            f"load: {source} is not a tadiff checkpoint or NumPy .npz file ({exc})"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError(f"load: {source} holds a single array, not a checkpoint (.npz)")
    with archive:
        try:
            if _STRUCTURE not in archive.files:
                return {key: archive[key] for key in archive.files}
            structure = json.loads(archive[_STRUCTURE].tobytes().decode())
            if structure.get("format") != _FORMAT:
                raise InputError(
                    f"load: {source} was written in checkpoint format "
                    f"{structure.get('format')!r}; this tadiff reads format {_FORMAT}"
                )
            return _Reader(archive, source).decode(structure["value"])
        except (zipfile.BadZipFile, ValueError, OSError, KeyError, TypeError) as exc:
            raise InputError(f"load: {source} is a damaged checkpoint ({exc})") from None
