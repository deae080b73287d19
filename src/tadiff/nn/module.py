"""``Module`` and ``Parameter``: the containers a model is built from, with PyTorch's behaviour.

A Module owns Parameters (trainable leaf tensors), buffers (non-trainable state saved with the
model) and child Modules, all registered by plain attribute assignment. Names are dotted paths
(``"0.weight"``), so ``state_dict`` keys match PyTorch's for the same module tree.

Example:
    >>> import numpy as np
    >>> class Affine(Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.scale = Parameter(np.ones(3))
    ...     def forward(self, x):
    ...         return x * self.scale
    >>> [name for name, _ in Affine().named_parameters()]
    ['scale']
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from tadiff._device import check_device
from tadiff.autograd.graph import RemovableHandle
from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, ShapeError
from tadiff.nn import hooks as module_hooks
from tadiff.ops.shape import to_target
from tadiff.parallel import sync_threads

# id(tensor) -> weak reference, for every tensor made by Parameter(...). See Parameter for why
# parameters are marked rather than subclassed.
_PARAMETER_REFS: dict[int, weakref.ref] = {}


def _forget(key: int, ref: weakref.ref) -> None:
    if _PARAMETER_REFS.get(key) is ref:
        del _PARAMETER_REFS[key]


class _ParameterMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        ref = _PARAMETER_REFS.get(id(obj))
        return ref is not None and ref() is obj


class Parameter(metaclass=_ParameterMeta):
    """A trainable tensor: a leaf that requires grad and that a Module registers when assigned.

    ``Parameter(data)`` returns a ``tadiff.Tensor`` (sharing ``data``'s memory when it is an
    array or Tensor) that ``isinstance(p, Parameter)`` recognises. Unlike torch, the result's
    type is exactly ``Tensor`` — the engine's fast paths test ``type(t) is Tensor``, and a
    subclass there would be slower or mistaken for a constant — so ``Parameter`` marks tensors
    instead of subclassing ``Tensor``.

    Args:
        data: an array, a Tensor (detached, memory shared) or nested lists; floating dtype.
        requires_grad: whether the parameter is trained (default True).

    Returns:
        A leaf Tensor with ``requires_grad`` set, recognised as a Parameter.

    Example:
        >>> import numpy as np
        >>> w = Parameter(np.zeros((2, 3), dtype=np.float32))
        >>> isinstance(w, Parameter), w.requires_grad, w.shape
        (True, True, (2, 3))
    """

    def __new__(cls, data: Any = None, requires_grad: bool = True) -> Tensor:  # type: ignore[misc]
        if data is None:
            data = np.empty(0, dtype=np.float32)
        array = data.data if isinstance(data, Tensor) else np.asarray(data)
        if array.dtype.kind != "f":
            raise DTypeError(
                f"Parameter: data must have a floating dtype to be trained, got {array.dtype}"
            )
        return _mark_parameter(Tensor(array, requires_grad=requires_grad))


def _mark_parameter(tensor: Tensor) -> Tensor:
    """Make ``isinstance(tensor, Parameter)`` true for as long as ``tensor`` lives."""
    key = id(tensor)
    _PARAMETER_REFS[key] = weakref.ref(tensor, lambda ref, key=key: _forget(key, ref))
    return tensor


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` could not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]


class Module:
    """Base class of every model and layer; subclasses set attributes and define ``forward``.

    Assigning a Parameter, a Module, or (through :meth:`register_buffer`) a buffer tensor to an
    attribute registers it; calling the module runs ``forward``.

    Example:
        >>> import tadiff as td
        >>> model = td.nn.Sequential(td.nn.Linear(4, 8), td.nn.ReLU(), td.nn.Linear(8, 2))
        >>> sum(p.numel() for p in model.parameters())
        58
    """

    training: bool

    def __init__(self) -> None:
        # object.__setattr__: our __setattr__ needs these dicts to exist already.
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", {})

    def __setstate__(self, state: dict[str, Any]) -> None:
        # copy.deepcopy and pickle make new tensors: mark the copies of parameters again; a
        # copied parameter starts without a gradient, as torch's Parameter does
        self.__dict__.update(state)
        for param in state.get("_parameters", {}).values():
            if param is not None:
                _mark_parameter(param)
                param._grad = None

    # -- registration --------------------------------------------------------------------------
    def _registry(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        try:
            state = self.__dict__
            return state["_parameters"], state["_buffers"], state["_modules"]
        except KeyError:
            raise InputError(
                f"{type(self).__name__}: call super().__init__() before assigning parameters, "
                "buffers or submodules"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, (Parameter, Module)):
            params, buffers, modules = self._registry()
            for table in (params, buffers, modules):
                table.pop(name, None)
            self.__dict__.pop(name, None)
            (params if isinstance(value, Parameter) else modules)[name] = value
            return
        params, buffers, modules = self.__dict__.get("_parameters"), None, None
        if params is not None:
            _, buffers, modules = self._registry()
            if name in params:
                if value is not None:
                    raise DTypeError(
                        f"cannot assign {type(value).__name__} to parameter {name!r} of "
                        f"{type(self).__name__}: expected a Parameter or None"
                    )
                params[name] = None
                return
            if name in buffers:
                if value is not None and not isinstance(value, Tensor):
                    raise DTypeError(
                        f"cannot assign {type(value).__name__} to buffer {name!r} of "
                        f"{type(self).__name__}: expected a Tensor or None"
                    )
                buffers[name] = value
                return
            if name in modules:
                if value is not None:
                    raise DTypeError(
                        f"cannot assign {type(value).__name__} to submodule {name!r} of "
                        f"{type(self).__name__}: expected a Module or None"
                    )
                modules[name] = None
                return
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails: look in the registries.
        state = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            entries = state.get(table)
            if entries is not None and name in entries:
                return entries[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for table in ("_parameters", "_buffers", "_modules"):
            entries = self.__dict__.get(table)
            if entries is not None and name in entries:
                del entries[name]
                self.__dict__["_non_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        for table in ("_parameters", "_buffers", "_modules"):
            names.update(self.__dict__.get(table, {}))
        return sorted(names)

    def register_parameter(self, name: str, param: Tensor | None) -> None:
        """Register ``param`` (a Parameter, or None for an absent one such as a disabled bias)."""
        self._check_new_name(name)
        if param is not None and not isinstance(param, Parameter):
            raise DTypeError(
                f"register_parameter({name!r}): expected a Parameter or None, "
                f"got {type(param).__name__}"
            )
        self._registry()[0][name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Register non-trainable state (saved in ``state_dict`` when ``persistent``).

        Example:
            >>> m = Module()
            >>> m.register_buffer("steps", Tensor(np.zeros(())))
            >>> list(m.state_dict())
            ['steps']
        """
        self._check_new_name(name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise DTypeError(
                f"register_buffer({name!r}): expected a Tensor or None, got {type(tensor).__name__}"
            )
        self._registry()[1][name] = tensor
        if not persistent:
            self.__dict__["_non_persistent"].add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register a child module under ``name`` (a digit string in Sequential)."""
        self._check_new_name(name)
        if module is not None and not isinstance(module, Module):
            raise DTypeError(
                f"add_module({name!r}): expected a Module or None, got {type(module).__name__}"
            )
        self._registry()[2][name] = module

    def _check_new_name(self, name: str) -> None:
        if not isinstance(name, str) or not name or "." in name:
            raise InputError(
                f"{type(self).__name__}: {name!r} is not a valid name (a non-empty string "
                "without '.')"
            )
        registered = any(name in t for t in self._registry())
        if name in self.__dict__ and not registered:
            raise InputError(f"{type(self).__name__}: attribute {name!r} already exists")

    # -- traversal -----------------------------------------------------------------------------
    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """Yield ``(dotted name, module)`` for this module and every descendant, each once."""
        seen: set[int] = set()
        stack = [(prefix, self)]
        while stack:
            name, module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [
                (f"{name}.{child_name}" if name else child_name, child)
                for child_name, child in module._modules.items()
                if child is not None
            ]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        """Yield this module and every descendant, each once."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """Yield ``(name, module)`` for each direct child."""
        for name, module in self._modules.items():
            if module is not None:
                yield name, module

    def children(self) -> Iterator[Module]:
        """Yield each direct child module."""
        for _, module in self.named_children():
            yield module

    def _named_members(self, table: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_name, module in modules:
            for name, value in module.__dict__[table].items():
                if value is None or id(value) in seen:
                    continue
                seen.add(id(value))
                yield (f"{module_name}.{name}" if module_name else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Any]]:
        """Yield ``(dotted name, parameter)``; a parameter shared by two modules appears once.

        Example:
            >>> import tadiff as td
            >>> [n for n, _ in td.nn.Linear(2, 3).named_parameters()]
            ['weight', 'bias']
        """
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Tensor]:
        """Yield every parameter (of descendants too when ``recurse``), each once."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Any]]:
        """Yield ``(dotted name, buffer)`` for every registered buffer."""
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """Yield every registered buffer."""
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    # -- modes and gradients -------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (affects Dropout) on this module and its descendants; returns self."""
        if not isinstance(mode, bool):
            raise DTypeError(f"train(mode): expected a bool, got {type(mode).__name__}")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self) -> Module:
        """Set evaluation mode (``train(False)``); returns self."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Freeze (False) or unfreeze (True) every parameter; returns self."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradient of every parameter (to None, or to zeros in place)."""
        for param in self.parameters():
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.data[...] = 0

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every descendant and then on this module (e.g. custom init); self."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """Convert every floating parameter and buffer to a dtype in place; returns self.

        Takes torch's forms: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``,
        ``to(tensor)`` and the keywords ``device``/``dtype``; the device must be the CPU.

        Example:
            >>> import tadiff as td
            >>> td.nn.Linear(2, 2).to("cpu", np.float64).weight.dtype
            dtype('float64')
        """
        dtype = to_target(args, kwargs, "Module.to")
        if dtype is None:
            return self
        if dtype.kind != "f":
            raise DTypeError(f"Module.to: expected a floating dtype, got {dtype}")
        for tensor in [*self.parameters(), *self.buffers()]:
            if tensor.data.dtype.kind == "f" and tensor.data.dtype != dtype:
                tensor.data = tensor.data.astype(dtype)
                if tensor.grad is not None:
                    tensor.grad = Tensor(tensor.grad.data.astype(dtype))
        return self

    def double(self) -> Module:
        """Convert floating parameters and buffers to float64; returns self."""
        return self.to(np.float64)

    def float(self) -> Module:
        """Convert floating parameters and buffers to float32; returns self."""
        return self.to(np.float32)

    def half(self) -> Module:
        """Convert floating parameters and buffers to float16; returns self."""
        return self.to(np.float16)

    def cpu(self) -> Module:
        """``self``: a tadiff module lives on the CPU."""
        return self

    def cuda(self, device: Any = None) -> Module:
        """Raises :class:`~tadiff.errors.DeviceError`: tadiff's engine has no CUDA device."""
        check_device("cuda" if device is None else device, "Module.cuda")
        return self

    # -- calling -------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; every subclass defines it."""
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        sync_threads()  # use the cores other processes leave idle (tadiff.parallel)
        hooks = self.__dict__.get("_hooks")
        if hooks is None:
            return self.forward(*args, **kwargs)
        return module_hooks.call(self, hooks, args, kwargs)

    def register_forward_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, args)`` before each forward; a returned value replaces ``args``
        (a non-tuple is wrapped). Returns a handle with ``remove()``."""
        return module_hooks.register(self, "forward_pre", hook)

    def register_forward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after each forward; a returned value replaces
        the output. Returns a handle with ``remove()``."""
        return module_hooks.register(self, "forward", hook)

    def register_full_backward_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """Call ``hook(module, grad_input, grad_output)`` when the gradients with respect to the
        module's tensor inputs are computed (``None`` for inputs that need none; called with
        the output gradients alone when no input needs one). A returned tuple replaces
        ``grad_input``. Returns a handle with ``remove()``."""
        return module_hooks.register(self, "backward", hook)

    # -- saving and loading --------------------------------------------------------------------
    def state_dict(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Every parameter and persistent buffer by dotted name, as NumPy arrays (copies).

        Unlike torch (tensors sharing memory), the values are independent array copies, so a
        saved state does not change as training goes on.

        Example:
            >>> import tadiff as td
            >>> sorted(td.nn.Linear(2, 3).state_dict().items())[0][1].shape
            (3,)
        """
        state: dict[str, np.ndarray] = {}
        for module_name, module in self.named_modules(prefix):
            dotted = f"{module_name}." if module_name else ""
            for name, param in module._parameters.items():
                if param is not None:
                    state[dotted + name] = param.data.copy()
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent:
                    state[dotted + name] = buffer.data.copy()
        return state

    _optional_state: tuple[str, ...] = ()
    """Buffers a state dict may lack (saved before the layer had them): loading keeps their
    value, as torch does for BatchNorm's ``num_batches_tracked``."""

    def _state_targets(self) -> dict[str, Tensor]:
        targets: dict[str, Tensor] = {}
        for module_name, module in self.named_modules():
            dotted = f"{module_name}." if module_name else ""
            for name, param in module._parameters.items():
                if param is not None:
                    targets[dotted + name] = param
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent:
                    targets[dotted + name] = buffer
        return targets

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy values into this module's parameters and buffers, in place.

        Values may be NumPy arrays, tadiff Tensors or CPU torch tensors; they are cast to each
        parameter's dtype. Nothing is copied unless every key and shape fits.

        Args:
            state_dict: dotted name -> value, as made by :meth:`state_dict`.
            strict: when True, a missing or unexpected key is an error.

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)`` (both empty when strict).

        Raises:
            InputError: with ``strict``, naming every missing and unexpected key.
            ShapeError: a value's shape differs from the parameter's (the key and both shapes).
            DTypeError: a value is not numeric.

        Example:
            >>> import tadiff as td
            >>> a, b = td.nn.Linear(2, 3), td.nn.Linear(2, 3)
            >>> b.load_state_dict(a.state_dict())
            IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        """
        if not hasattr(state_dict, "items"):
            raise DTypeError(
                f"load_state_dict: expected a mapping of names to arrays, got "
                f"{type(state_dict).__name__}"
            )
        targets = self._state_targets()
        optional = {  # buffers newer than some saved states (BatchNorm's num_batches_tracked)
            f"{module_name}.{name}" if module_name else name
            for module_name, module in self.named_modules()
            for name in type(module)._optional_state
        }
        missing = [key for key in targets if key not in state_dict and key not in optional]
        unexpected = [key for key in state_dict if key not in targets]
        if strict and (missing or unexpected):
            parts = []
            if missing:
                parts.append(f"missing keys {missing}")
            if unexpected:
                parts.append(f"unexpected keys {unexpected}")
            raise InputError(
                f"load_state_dict for {type(self).__name__}: {'; '.join(parts)}. Expected "
                f"exactly the keys {list(targets)} (or pass strict=False)"
            )
        arrays = {}
        for key, target in targets.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            array = value.data if isinstance(value, Tensor) else np.asarray(value)
            if array.dtype.kind not in "biuf":
                raise DTypeError(
                    f"load_state_dict: value for {key!r} has dtype {array.dtype}; expected numbers"
                )
            if array.shape != target.data.shape:
                raise ShapeError(
                    f"load_state_dict: value for {key!r} has shape {array.shape}, the module's "
                    f"tensor has shape {target.data.shape}"
                )
            arrays[key] = array
        for key, array in arrays.items():
            targets[key].data[...] = array  # in place: optimizers keep their references
        return IncompatibleKeys(missing, unexpected)

    # -- printing ------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr``; layers override it."""
        return ""

    def __repr__(self) -> str:
        children = [
            f"({name}): " + repr(module).replace("\n", "\n  ")
            for name, module in self._modules.items()
        ]
        extra = self.extra_repr()
        if not children:
            return f"{type(self).__name__}({extra})"
        lines = ([extra] if extra else []) + children
        return f"{type(self).__name__}(\n  " + "\n  ".join(lines) + "\n)"
