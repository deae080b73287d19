"""Containers: ``Sequential`` (a chain of modules) and ``ModuleList`` (an indexable list)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tadiff.errors import DTypeError, InputError
from tadiff.nn.module import Module


def _check_index(index: int, length: int, where: str) -> int:
    if not -length <= index < length:
        raise InputError(f"{where}: index {index} is out of range for {length} modules")
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
