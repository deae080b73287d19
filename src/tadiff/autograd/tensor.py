"""``Tensor``: a NumPy array that records the operations applied to it.

A Tensor is a thin record over ``data`` (a ``numpy.ndarray``): ``requires_grad``, ``grad``,
``grad_fn`` (the backward node that made it, ``None`` for leaves) and ``_output_nr`` (which output
of that node it is). Operations (``+``, ``exp``, ``sum``, indexing, ...) are defined in
``tadiff.ops`` and bound onto this class there, so this module holds only the record itself, the
autograd entry points (``backward``, hooks, ``retain_grad``, ``detach``) and conversions.

The class uses ``__slots__`` and keeps rarely used state (hooks, the leaf's gradient accumulator)
in one lazily created ``_meta`` object, so creating a Tensor in an op is cheap. ``_vc`` is the
version counter: a list ``[version]`` created on first need, shared with views as
``[version, True]`` (the flag tells in-place ops that memory is shared). A view also knows its
base (``_base``, as in torch) and a base its views (weakly), so that an in-place op on either
can rewrite the graph of both (see ``tadiff.ops.inplace``).

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0, 2.0], requires_grad=True)
    >>> (x * x).sum().backward()
    >>> x.grad
    tensor([2., 4.])
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tadiff._device import CPU, check_device
from tadiff.errors import AutogradError, DTypeError, ShapeError, SharingError

_ndarray = np.ndarray


class _Meta:
    """Rarely used per-tensor state, created on first use."""

    __slots__ = (
        "acc",
        "hooks",
        "post_hooks",
        "retains_grad",
        "view_no_grad",
        "views",
    )

    def __init__(self, view_no_grad: bool = False) -> None:
        self.acc = None  # the leaf's AccumulateGrad node (which refers back weakly)
        self.hooks = None  # leaf gradient hooks: list of callables
        self.post_hooks = None  # hooks run after .grad was accumulated: list of callables
        self.retains_grad = False
        self.view_no_grad = view_no_grad  # a view made without recording of a base needing grad
        self.views = None  # for a base: weak references to the views made of it


class Tensor:
    """A NumPy array that records operations for reverse-mode differentiation.

    Build tensors with :func:`tadiff.tensor` and the other factories; ``Tensor(ndarray)`` wraps an
    array without copying. torch's legacy forms also work: ``Tensor(2, 3)`` is a ``(2, 3)``
    tensor of the default dtype (zeros; torch leaves it uninitialized) and ``Tensor([1, 2])``
    a copy of the list in the default dtype.

    Attributes:
        data: the underlying ``numpy.ndarray`` (a documented difference from torch, where
            ``.data`` is a Tensor).
        grad: the accumulated gradient (a Tensor) after ``backward``; ``None`` before.
        grad_fn: the backward node that produced this tensor; ``None`` for leaves.

    Example:
        >>> t = Tensor(np.zeros(3, dtype=np.float32), requires_grad=True)
        >>> t.is_leaf, t.shape
        (True, (3,))
    """

    __slots__ = (
        "__weakref__", "_base", "_grad", "_meta", "_output_nr", "_rg", "_vc", "data", "grad_fn",
    )  # fmt: skip
    # Make NumPy hand mixed expressions (ndarray * Tensor) to Tensor's reflected operators.
    __array_ufunc__ = None
    __hash__ = object.__hash__  # __eq__ is element-wise, identity stays the hash like torch

    def __init__(self, data: Any = (), *size: int, requires_grad: bool = False):
        if type(data) is not _ndarray:
            data = _legacy_data(data, size)
        elif size:
            raise DTypeError(
                f"Tensor(): after an array, expected no more positional arguments, got {size!r} "
                "(pass requires_grad=... by keyword)"
            )
        self.data = data
        self._rg = False
        self._grad = None
        self.grad_fn = None
        self._output_nr = 0
        self._vc = None
        self._meta = None
        self._base = None
        if requires_grad:
            self.requires_grad_(True)

    # -- the autograd record -------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this tensor (set on leaves with ``requires_grad_``)."""
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set ``requires_grad`` on a leaf in place and return ``self``.

        Raises:
            AutogradError: on a non-leaf asked to stop requiring grad.
            DTypeError: when asked to require grad on a non-floating dtype.
        """
        if self.grad_fn is not None:
            if requires_grad:
                return self
            raise AutogradError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if requires_grad and self.data.dtype.kind != "f":
            # complex tensors are refused too: the VJP table has no conjugates (Wirtinger
            # calculus), so their gradients would be silently wrong
            raise DTypeError(
                "only Tensors of real floating point dtype can require gradients in tadiff; "
                f"this tensor has dtype {self.data.dtype}"
            )
        self._rg = bool(requires_grad)
        return self

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient (a Tensor of this tensor's shape and dtype), or None."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        # torch's checks: a wrong gradient would otherwise fail later, inside the next backward
        if value is not None:
            if not isinstance(value, Tensor):
                raise DTypeError(
                    "assigned grad expected to be a Tensor or None but got grad of type "
                    f"{type(value).__name__}"
                )
            if value.data.shape != self.data.shape:
                raise ShapeError(
                    f"attempting to assign a gradient of size '{list(value.data.shape)}' to a "
                    f"tensor of size '{list(self.data.shape)}'. Please ensure that the gradient "
                    "and the tensor are the same size"
                )
            if value.data.dtype != self.data.dtype:
                raise DTypeError(
                    f"attempting to assign a gradient with dtype '{value.data.dtype}' to a tensor "
                    f"with dtype '{self.data.dtype}'; cast it first (grad.to(t.dtype))"
                )
        self._grad = value

    @property
    def is_leaf(self) -> bool:
        """True for tensors not produced by a recorded operation."""
        return self.grad_fn is None

    @property
    def output_nr(self) -> int:
        """Which output of ``grad_fn`` this tensor is (0 for single-output ops)."""
        return self._output_nr

    @property
    def _version(self) -> int:
        """How many in-place modifications this tensor's memory has seen (shared by views)."""
        vc = self._vc
        return vc[0] if vc is not None else 0

    def _is_view(self) -> bool:
        """Whether this tensor is a view of another one (its ``_base``), as torch's
        ``Tensor._is_view()``: basic indexing, ``view``/``reshape`` without a copy, transposes,
        ``expand``, ``unbind``, ``split`` and the like give views; ``clone``, ``detach`` and
        advanced indexing do not.

        Example:
            >>> x = Tensor(np.zeros((2, 3)))
            >>> x[0]._is_view(), x[0]._base is x, x._base is None
            (True, True, True)
        """
        return self._base is not None

    @property
    def _is_view_related(self) -> bool:
        """Whether this tensor is a view or has views (its counter is marked shared)."""
        vc = self._vc
        return vc is not None and len(vc) > 1

    def __getstate__(self) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """What ``pickle`` and ``copy.copy`` keep: the data and ``requires_grad`` (torch's do
        not keep ``.grad``; ``copy.deepcopy`` does).

        The copy is a leaf of its own, as torch's: the graph that made this tensor, the views
        made of it and its gradient accumulator belong to this tensor (a copy that kept the
        accumulator would add its gradients into this tensor's ``.grad``)."""
        slots = {**_DEFAULT_SLOTS, "data": self.data, "_rg": self._rg}
        return getattr(self, "__dict__", None) or None, slots

    def __setstate__(self, state: tuple[dict[str, Any] | None, dict[str, Any]]) -> None:
        """Restore what :meth:`__getstate__` kept; a record pickled without one of the slots
        (an older version of tadiff) gets its default."""
        extra, slots = state
        for name, value in {**_DEFAULT_SLOTS, **slots}.items():
            setattr(self, name, value)
        if extra:
            self.__dict__.update(extra)

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        """A new leaf with copies of the data and gradient (torch refuses tensors made by a
        recorded op, whose graph a copy could not keep).

        Example:
            >>> import copy
            >>> x = Tensor(np.ones(2), requires_grad=True)
            >>> copy.deepcopy(x).requires_grad
            True
        """
        if self.grad_fn is not None:
            raise AutogradError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                "protocol at the moment: deepcopy x.detach() (and call requires_grad_() on the "
                "copy) instead"
            )
        extra, slots = self.__getstate__()
        slots["_grad"] = self._grad
        new = _new(type(self))
        memo[id(self)] = new
        for name, value in slots.items():
            setattr(new, name, copy.deepcopy(value, memo))
        if extra:
            new.__dict__.update(copy.deepcopy(extra, memo))
        return new

    def _get_meta(self) -> _Meta:
        """This tensor's own ``_Meta``, to read or change (made on first use)."""
        meta = self._meta
        if meta is None:
            meta = self._meta = _Meta()
        return meta

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Accumulate d(self)/d(leaf) · gradient into ``.grad`` of the leaves.

        Args:
            gradient: the vector of the vector-Jacobian product, shaped like ``self``; may be
                omitted only for single-element outputs (it is then 1).
            retain_graph: keep saved tensors for another backward; defaults to ``create_graph``.
            create_graph: record the backward pass, so the gradients can be differentiated.
            inputs: tensors to accumulate into (default: every leaf that requires grad).

        Example:
            >>> x = Tensor(np.array(3.0), requires_grad=True)
            >>> (x * x).backward()
            >>> float(x.grad)
            6.0
        """
        from tadiff.autograd.engine import backward

        backward(self, gradient, retain_graph, create_graph, inputs)

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Any:
        """Call ``hook(grad)`` whenever the gradient for this tensor is computed.

        The hook may return a replacement gradient. Returns a handle with ``remove()``.
        """
        from tadiff.autograd.graph import register_tensor_hook

        return register_tensor_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> Any:
        """Call ``hook(tensor)`` after a backward pass has accumulated into this leaf's
        ``.grad`` (torch 2.1's hook for fusing an optimizer step into backward). Returns a handle
        with ``remove()``.

        Raises:
            AutogradError: on a tensor that is not a leaf requiring grad.

        Example:
            >>> w = Tensor(np.ones(2), requires_grad=True)
            >>> handle = w.register_post_accumulate_grad_hook(lambda t: print(t.grad))
            >>> (w * 3).sum().backward()
            tensor([3., 3.], dtype=float64)
        """
        from tadiff.autograd.graph import RemovableHandle

        if not self._rg:
            raise AutogradError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise AutogradError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        meta = self._get_meta()
        if meta.post_hooks is None:
            meta.post_hooks = []
        meta.post_hooks.append(hook)
        return RemovableHandle(meta.post_hooks, hook)

    def retain_grad(self) -> None:
        """Make a non-leaf tensor keep its gradient in ``.grad`` after backward."""
        from tadiff.autograd.graph import retain_grad

        retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        """Whether ``retain_grad()`` was called on this non-leaf tensor."""
        return self._meta is not None and self._meta.retains_grad

    def detach(self) -> Tensor:
        """A new leaf sharing this tensor's memory (and version counter), outside the graph."""
        out = Tensor(self.data)
        if self._vc is None:
            self._vc = [0]
        out._vc = self._vc
        return out

    def detach_(self) -> Tensor:
        """Detach this tensor from the graph in place, making it a leaf.

        Raises:
            AutogradError: on a view (its base would still link it to the graph), as in torch.
        """
        if self._base is not None:
            raise AutogradError(
                "Can't detach views in-place. Use detach() instead (a new tensor sharing the "
                "memory, outside the graph)"
            )
        self.grad_fn = None
        self._rg = False
        self._output_nr = 0
        return self

    # -- conversions ---------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, a tuple of ints."""
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype."""
        return self.data.dtype

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self.data.ndim

    @property
    def device(self) -> Any:
        """Always ``device(type='cpu')``: tadiff's engine runs on NumPy."""
        return CPU

    @property
    def is_cuda(self) -> bool:
        """Always False: tadiff's engine runs on NumPy."""
        return False

    def cpu(self) -> Tensor:
        """``self``: every tadiff Tensor is on the CPU."""
        return self

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor:
        """Raises :class:`~tadiff.errors.DeviceError`: tadiff's engine has no CUDA device."""
        check_device("cuda" if device is None else device, "Tensor.cuda")
        return self

    def __dlpack__(self, **kwargs: Any) -> Any:
        """Share the memory through DLPack (``torch.from_dlpack(t)``, ``torch.as_tensor(t)``,
        ``np.from_dlpack(t)``); like torch, refused for a tensor that requires grad."""
        if self._rg:
            raise SharingError("Can't export tensors that require gradient, use tensor.detach()")
        return self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.data.__dlpack_device__()

    def dim(self) -> int:
        """Number of dimensions (torch's name)."""
        return self.data.ndim

    def size(self, dim: int | None = None) -> Any:
        """The shape, or the length of dimension ``dim``."""
        return self.data.shape if dim is None else self.data.shape[dim]

    def numel(self) -> int:
        """Number of elements."""
        return self.data.size

    def item(self) -> Any:
        """The single element as a Python number."""
        if self.data.size != 1:
            raise AutogradError(
                f"a Tensor with {self.data.size} elements cannot be converted to Scalar"
            )
        return self.data.item()

    def tolist(self) -> Any:
        """The elements as nested Python lists."""
        return self.data.tolist()

    def numpy(self) -> np.ndarray:
        """The underlying array (shared, not copied)."""
        return self.data

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is not None and dtype != self.data.dtype:
            return self.data.astype(dtype)
        return self.data.copy() if copy else self.data

    @staticmethod
    def __tadiff_namespace__() -> Any:
        import tadiff  # deferred: tadiff imports this module

        return tadiff

    def __len__(self) -> int:
        if self.data.ndim == 0:
            raise DTypeError("len() of a 0-d tensor")  # a TypeError, as in torch
        return self.data.shape[0]

    def __bool__(self) -> bool:
        if self.data.size != 1:
            raise AutogradError(
                f"Boolean value of Tensor with {self.data.size} elements is ambiguous"
            )
        return bool(self.data)

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.data.dtype.kind not in "iub":
            raise DTypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self.item())

    def __repr__(self) -> str:
        body = np.array2string(
            self.data, separator=", ", prefix="tensor(", floatmode="maxprec", precision=4
        )
        extras = []
        if self.data.dtype not in (np.float32, np.int64, np.bool_):
            extras.append(f"dtype={self.data.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self._rg:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body, *extras]) + ")"


def _legacy_data(data: Any, size: tuple[Any, ...]) -> np.ndarray:
    """The array of ``Tensor(data, *size)`` when ``data`` is not an ndarray: torch's legacy
    constructor for sizes and lists, NumPy's wrapping for the rest."""
    if isinstance(data, Tensor):
        if size:
            raise DTypeError("Tensor(): after a Tensor, expected no more positional arguments")
        return data.data
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        sizes = (data, *size)
        if not all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in sizes):
            raise DTypeError(f"Tensor(): sizes must be ints, got {sizes!r}")
        if any(s < 0 for s in sizes):
            raise ShapeError(f"Tensor(): negative dimension in size {tuple(sizes)}")
        return np.zeros(tuple(int(s) for s in sizes), _default_dtype())
    if size:
        raise DTypeError(
            f"Tensor(): expected sizes (ints) or one data argument, got {data!r} and {size!r} "
            "(pass requires_grad=... by keyword)"
        )
    if isinstance(data, (list, tuple)):
        from tadiff.autograd.factories import numeric_array

        return numeric_array(data).astype(_default_dtype())
    return np.asarray(data)


def _default_dtype() -> np.dtype:
    from tadiff.autograd.factories import get_default_dtype  # the factories import this module

    return get_default_dtype()


def _make(data: np.ndarray, grad_fn: Any = None, output_nr: int = 0) -> Tensor:
    """Fast internal constructor (ops' hot path); NumPy scalars become 0-d arrays."""
    if type(data) is not _ndarray:
        data = np.asarray(data)
    t = _new(Tensor)
    t.data = data
    t._rg = grad_fn is not None
    t._grad = None
    t.grad_fn = grad_fn
    t._output_nr = output_nr
    t._vc = None
    t._meta = None
    t._base = None
    return t


def _make_outputs(datas: Sequence[np.ndarray], grad_fn: Any) -> tuple[Tensor, ...]:
    """``_make(data, grad_fn, nr)`` for each output ``nr`` of a multi-output node (``unbind``,
    ``split``; iterating over a tensor), in one call instead of one per output."""
    outs = []
    for nr, data in enumerate(datas):
        if type(data) is not _ndarray:
            data = np.asarray(data)
        t = _new(Tensor)
        t.data = data
        t._rg = True
        t._grad = None
        t.grad_fn = grad_fn
        t._output_nr = nr
        t._vc = None
        t._meta = None
        t._base = None
        outs.append(t)
    return tuple(outs)


_new = object.__new__

# A leaf's record without a graph or views: what pickle and copy keep of a tensor besides its
# data and requires_grad, and what an unpickled record lacks falls back to.
_DEFAULT_SLOTS = {"_grad": None, "_rg": False, "grad_fn": None, "_output_nr": 0, "_vc": None,
                  "_meta": None, "_base": None}  # fmt: skip
