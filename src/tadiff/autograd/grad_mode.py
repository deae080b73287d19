"""Grad mode: whether operations record the graph. Thread-local, like PyTorch's.

``no_grad``, ``enable_grad`` and ``set_grad_enabled`` work as context managers and as function
decorators (of generator functions too: each step of the generator runs in the mode). Ops read
``_state.enabled`` on their hot path, so it is a plain attribute of a ``threading.local`` whose
class supplies the default for new threads.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([1.0], requires_grad=True)
    >>> with td.no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any


class _GradState(threading.local):
    enabled = True  # class attribute: the default each new thread sees
    inference = False  # inside inference_mode (which also turns recording off)


_state = _GradState()


def is_grad_enabled() -> bool:
    """Return whether operations currently record the graph (per thread)."""
    return _state.enabled


class _GradModeContext:
    """Base of the grad-mode switches: a context manager that also decorates functions."""

    _target: bool

    def __enter__(self) -> None:
        self._previous = _state.enabled
        _state.enabled = self._target

    def __exit__(self, *exc: object) -> None:
        _state.enabled = self._previous

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        target = self._target
        if inspect.isgeneratorfunction(fn):
            return _each_step_in_mode(fn, target)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            previous = _state.enabled
            _state.enabled = target
            try:
                return fn(*args, **kwargs)
            finally:
                _state.enabled = previous

        return wrapper


def _in_mode(target: bool, step: Callable[..., Any], *args: Any) -> Any:
    previous = _state.enabled
    _state.enabled = target
    try:
        return step(*args)
    finally:
        _state.enabled = previous


def _each_step_in_mode(fn: Callable[..., Any], target: bool) -> Callable[..., Any]:
    """A decorated generator function: its body runs in the mode each time it is resumed, and
    the caller's mode is back in place at every ``yield`` (as torch's decorators do)."""

    @functools.wraps(fn)
    def generator(*args: Any, **kwargs: Any) -> Any:
        inner = fn(*args, **kwargs)
        try:
            value = _in_mode(target, inner.send, None)
            while True:
                try:
                    sent = yield value
                except GeneratorExit:
                    _in_mode(target, inner.close)
                    raise
                except BaseException as exc:
                    value = _in_mode(target, inner.throw, exc)
                else:
                    value = _in_mode(target, inner.send, sent)
        except StopIteration as stop:
            return stop.value

    return generator


class _Switch(_GradModeContext):
    """A switch usable as ``@switch()``, as ``@switch`` and as ``with switch():``."""

    def __new__(cls, fn: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        if fn is not None:
            return self(fn)
        return self

    def __init__(self, fn: Callable[..., Any] | None = None):
        pass


class no_grad(_Switch):
    """Disable graph recording inside the block (or decorated function).

    Example:
        >>> with no_grad():
        ...     pass
    """

    _target = False


class enable_grad(_Switch):
    """Enable graph recording inside the block, even within ``no_grad``."""

    _target = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode to ``mode``: immediately (like a function call) and for a ``with`` block.

    Args:
        mode: True to record the graph, False not to.

    Example:
        >>> with set_grad_enabled(False):
        ...     assert not is_grad_enabled()
    """

    def __init__(self, mode: bool):
        self._target = bool(mode)
        self._previous = _state.enabled
        _state.enabled = self._target

    def __enter__(self) -> None:
        pass  # already switched in __init__, as torch does

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        _state.enabled = self._previous  # used as a decorator: undo the eager switch
        return super().__call__(fn)


class inference_mode(_GradModeContext):
    """torch's ``inference_mode``: no recording inside the block (or decorated function).

    ``inference_mode()`` (or ``mode=True``) turns recording off like :class:`no_grad` and makes
    :func:`is_inference_mode_enabled` True; ``inference_mode(False)`` is torch's normal mode
    (recording on, even inside ``no_grad``). Works as ``with inference_mode():``,
    ``@inference_mode()`` and ``@inference_mode``.

    Unlike torch, results made inside are ordinary tensors: torch marks them as inference
    tensors and refuses to save them for a later backward pass; tadiff has no such mark (its
    no-grad results carry no autograd state to protect).

    Example:
        >>> with inference_mode():
        ...     assert is_inference_mode_enabled() and not is_grad_enabled()
    """

    def __new__(cls, mode: Any = True) -> Any:
        self = super().__new__(cls)
        if callable(mode):  # @inference_mode without parentheses
            self.__init__(True)
            return self(mode)
        return self

    def __init__(self, mode: Any = True):
        self._mode = bool(mode)

    def __enter__(self) -> None:
        self._previous = (_state.enabled, _state.inference)
        _state.enabled, _state.inference = not self._mode, self._mode

    def __exit__(self, *exc: object) -> None:
        _state.enabled, _state.inference = self._previous

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        context = self
        if inspect.isgeneratorfunction(fn):
            # each step of the generator runs in the recording mode the block would set
            return _each_step_in_mode(fn, not self._mode)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with inference_mode(context._mode):
                return fn(*args, **kwargs)

        return wrapper


def is_inference_mode_enabled() -> bool:
    """Whether an :class:`inference_mode` block is active (per thread)."""
    return _state.inference
