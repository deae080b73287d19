"""Anomaly mode: find the forward op behind a NaN gradient.

Inside ``detect_anomaly()`` every recorded node keeps the Python stack of the forward call that
created it, and the backward pass checks each node's outputs: the first NaN raises an
``AutogradError`` naming the node (``'LogBackward0' returned nan values in its 0th output``) and
showing where its forward op was created. Costly (a stack capture per op): for debugging only.

Example:
    >>> import tadiff as td
    >>> x = td.tensor([0.0], requires_grad=True)
    >>> with detect_anomaly():
    ...     y = (td.sqrt(x) * 0).sum()
    ...     try:
    ...         y.backward()
    ...     except td.errors.AutogradError as e:
    ...         print(str(e).splitlines()[0])
    Function 'SqrtBackward0' returned nan values in its 0th output.
"""

from __future__ import annotations

from typing import Any

from tadiff.autograd.graph import ANOMALY


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on."""
    return ANOMALY[0]


class set_detect_anomaly:
    """Turn anomaly detection on or off, immediately and for a ``with`` block."""

    def __init__(self, mode: bool):
        self._previous = ANOMALY[0]
        ANOMALY[0] = bool(mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        ANOMALY[0] = self._previous


class detect_anomaly(set_detect_anomaly):
    """Context manager enabling anomaly detection (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(True)
