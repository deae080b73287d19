"""Containers: ``Sequential`` (a chain of modules), ``ModuleList``/``ModuleDict`` (indexable
modules) and ``ParameterList``/``ParameterDict`` (indexable parameters); what they hold is
registered, so it appears in ``parameters()`` and ``state_dict()``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from tadiff.errors import DTypeError, IndexingError, InputError
from tadiff.nn.module import Module, Parameter


def _check_index(index: int, length: int, where: str, items: str = "modules") -> int:
    if not -length <= index < length:
        raise IndexingError(f"{where}: index {index} is out of range for {length} {items}")
    return index % length


class Sequential(Module):
    """Modules applied one after the other; children are named ``"0"``, ``"1"``, ...

    Example:
        >>> import tadiff as td
        >>> net = Sequential(td.nn.Linear(2, 4), td.nn.Tanh(), td.nn.Linear(4, 1))
        >>> net(td.ones(3, 2)).shape
        (3, 1)
    """

    def __init__(self, *modules: Module):
        super().__init__()
        for i, module in enumerate(modules):
            if not isinstance(module, Module):
                raise DTypeError(
                    f"Sequential: argument {i} is a {type(module).__name__}, expected a Module"
                )
            self.add_module(str(i), module)

    def forward(self, x: Any) -> Any:
        for module in self._modules.values():
            x = module(x)
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: int | slice) -> Any:
        modules = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*modules[index])
        return modules[_check_index(index, len(modules), "Sequential")]

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end; returns self."""
        if not isinstance(module, Module):
            raise DTypeError(f"Sequential.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered (named ``"0"``, ``"1"``, ...).

    Example:
        >>> import tadiff as td
        >>> blocks = ModuleList([td.nn.Linear(4, 4) for _ in range(3)])
        >>> len(list(blocks.parameters()))
        6
    """

    def __init__(self, modules: Iterable[Module] = ()):
        super().__init__()
        for module in modules:
            self.append(module)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end; returns self."""
        if not isinstance(module, Module):
            raise DTypeError(f"ModuleList.append: expected a Module, got {type(module).__name__}")
        self.add_module(str(len(self)), module)
        return self

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, index: int) -> Module:
        modules = list(self._modules.values())
        return modules[_check_index(index, len(modules), "ModuleList")]


def _pairs(items: Mapping[str, Any] | Iterable[tuple[str, Any]], where: str) -> list:
    if isinstance(items, Mapping):
        return list(items.items())
    pairs = list(items)
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise DTypeError(f"{where}: item {i} is {pair!r}; expected a (name, value) pair")
    return pairs


class ModuleDict(Module):
    """Modules by name, registered under their keys (insertion order kept).

    Example:
        >>> import tadiff as td
        >>> heads = ModuleDict({"a": td.nn.Linear(4, 2), "b": td.nn.Linear(4, 3)})
        >>> heads["b"](td.ones(1, 4)).shape
        (1, 3)
    """

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] = ()):
        super().__init__()
        self.update(modules)

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise DTypeError(f"ModuleDict[{key!r}]: expected a Module, got {type(module).__name__}")
        self.add_module(key, module)

    def __getitem__(self, key: str) -> Module:
        if key not in self._modules:
            raise InputError(f"ModuleDict: no module named {key!r}; keys: {list(self._modules)}")
        return self._modules[key]

    def __delitem__(self, key: str) -> None:
        self[key]
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> list[str]:
        """The names, in insertion order."""
        return list(self._modules)

    def values(self) -> list[Module]:
        """The modules, in insertion order."""
        return list(self._modules.values())

    def items(self) -> list[tuple[str, Module]]:
        """``(name, module)`` pairs, in insertion order."""
        return list(self._modules.items())

    def pop(self, key: str) -> Module:
        """Remove and return the module named ``key``."""
        module = self[key]
        del self._modules[key]
        return module

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add (or replace) modules from a mapping or ``(name, module)`` pairs."""
        for key, module in _pairs(modules, "ModuleDict.update"):
            self[key] = module


def _check_parameter(value: Any, where: str) -> Any:
    if not isinstance(value, Parameter):
        raise DTypeError(f"{where}: expected a Parameter, got {type(value).__name__}")
    return value


class ParameterList(Module):
    """Parameters in a list, registered as ``"0"``, ``"1"``, ...

    Example:
        >>> import numpy as np
        >>> weights = ParameterList([Parameter(np.ones(2)) for _ in range(3)])
        >>> len(list(weights.parameters()))
        3
    """

    def __init__(self, values: Iterable[Any] = ()):
        super().__init__()
        for value in values:
            self.append(value)

    def append(self, value: Any) -> ParameterList:
        """Add a Parameter at the end; returns self."""
        self.register_parameter(str(len(self)), _check_parameter(value, "ParameterList.append"))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """Add Parameters at the end; returns self."""
        for value in values:
            self.append(value)
        return self

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._parameters.values())

    def __getitem__(self, index: int) -> Any:
        values = list(self._parameters.values())
        return values[_check_index(index, len(values), "ParameterList", "parameters")]

    def __setitem__(self, index: int, value: Any) -> None:
        index = _check_index(index, len(self), "ParameterList", "parameters")
        self._parameters[str(index)] = _check_parameter(value, f"ParameterList[{index}]")


class ParameterDict(Module):
    """Parameters by name, registered under their keys (insertion order kept).

    Example:
        >>> import numpy as np
        >>> scales = ParameterDict({"a": Parameter(np.ones(2))})
        >>> list(scales.state_dict())
        ['a']
    """

    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()):
        super().__init__()
        self.update(parameters)

    def __setitem__(self, key: str, value: Any) -> None:
        value = _check_parameter(value, f"ParameterDict[{key!r}]")
        if key in self._parameters:  # replaced in place: the key keeps its position
            self._parameters[key] = value
        else:
            self.register_parameter(key, value)

    def __getitem__(self, key: str) -> Any:
        if key not in self._parameters:
            raise InputError(
                f"ParameterDict: no parameter named {key!r}; keys: {list(self._parameters)}"
            )
        return self._parameters[key]

    def __delitem__(self, key: str) -> None:
        self[key]
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: object) -> bool:
        return key in self._parameters

    def keys(self) -> list[str]:
        """The names, in insertion order."""
        return list(self._parameters)

    def values(self) -> list[Any]:
        """The parameters, in insertion order."""
        return list(self._parameters.values())

    def items(self) -> list[tuple[str, Any]]:
        """``(name, parameter)`` pairs, in insertion order."""
        return list(self._parameters.items())

    def pop(self, key: str) -> Any:
        """Remove and return the parameter named ``key``."""
        value = self[key]
        del self._parameters[key]
        return value

    def update(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        """Add (or replace) parameters from a mapping or ``(name, parameter)`` pairs."""
        for key, value in _pairs(parameters, "ParameterDict.update"):
            self[key] = value
