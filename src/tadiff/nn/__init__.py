"""Neural-network building blocks with PyTorch's names: modules, layers, losses, init, save/load.

Example:
    >>> import tadiff as td                                    # doctest: +SKIP
    >>> model = td.nn.Sequential(td.nn.Linear(2, 16), td.nn.ReLU(), td.nn.Linear(16, 2))
    >>> loss = td.nn.functional.cross_entropy(model(x), y)     # doctest: +SKIP
"""

from tadiff.nn.module import IncompatibleKeys, Module, Parameter

__all__ = ["IncompatibleKeys", "Module", "Parameter"]
