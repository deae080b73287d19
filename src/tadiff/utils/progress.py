"""Progress feedback for long loops: a tqdm bar when tqdm is installed, else a one-line counter.

The examples and benchmarks wrap their training epochs and measurement rounds in
:func:`progress`; their ``--quiet`` flag passes ``quiet=True``, or calls :func:`set_quiet` once
for a script whose loops sit in many functions. Progress goes to standard error, so a
benchmark's table on standard output stays clean when redirected to a file.

Example:
    >>> from tadiff.utils.progress import progress
    >>> total = 0
    >>> for i in progress(range(5), desc="summing", quiet=True):
    ...     total += i
    >>> total
    10
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, TypeVar

__all__ = ["progress", "set_quiet"]

T = TypeVar("T")

_REFRESH_SECONDS = 0.1
"""The counter redraws its line at most this often (a terminal is slower than a fast loop)."""

_quiet = False


def set_quiet(quiet: bool) -> bool:
    """Make :func:`progress` show nothing where its call does not say (a script's ``--quiet``
    flag); returns the previous setting.

    Example:
        >>> from tadiff.utils.progress import set_quiet
        >>> before = set_quiet(True)
        >>> _ = set_quiet(before)
    """
    global _quiet
    previous, _quiet = _quiet, bool(quiet)
    return previous


def progress(
    iterable: Iterable[T],
    *,
    desc: str = "",
    total: int | None = None,
    quiet: bool | None = None,
    file: TextIO | None = None,
    bar: bool = True,
) -> Iterator[T]:
    """Yield the items of ``iterable``, showing how many are done.

    With tqdm installed this is a tqdm bar. Without it, a counter ``desc 12/40 (3.1 s)`` is
    redrawn in place on a terminal, and written once, when the loop ends, elsewhere (a log
    file gets one line, not hundreds).

    Args:
        iterable: what to loop over.
        desc: a few words saying what is counted (``"epoch"``, ``"round"``).
        total: the number of items, when ``len(iterable)`` does not give it.
        quiet: show nothing (the ``--quiet`` flag of the examples and benchmarks); None:
            as :func:`set_quiet` said (default: show).
        file: where to write; standard error by default.
        bar: use tqdm's bar where tqdm is installed (``False``: always the plain counter).

    Returns:
        An iterator over the same items.

    Example:
        >>> import io
        >>> from tadiff.utils.progress import progress
        >>> out = io.StringIO()
        >>> list(progress(["a", "b"], desc="letters", file=out, bar=False))
        ['a', 'b']
        >>> out.getvalue().split(" (")[0]
        'letters 2/2'
    """
    return _progress(iterable, desc, total, _quiet if quiet is None else quiet, file, bar)


def _progress(
    iterable: Iterable[T], desc: str, total: int | None, quiet: bool, file: Any, bar: bool
) -> Iterator[T]:
    if quiet:
        yield from iterable
        return
    stream = file if file is not None else sys.stderr
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    if bar and importlib.util.find_spec("tqdm") is not None:
        from tqdm import tqdm

        yield from tqdm(iterable, desc=desc or None, total=total, file=stream, leave=False)
        return
    yield from _counter(iterable, desc, total, stream)


def _counter(iterable: Iterable[T], desc: str, total: int | None, stream: Any) -> Iterator[T]:
    interactive = getattr(stream, "isatty", lambda: False)()
    start = last = time.perf_counter()
    done = 0

    def line() -> str:
        counted = f"{done}/{total}" if total is not None else str(done)
        return f"{desc} {counted} ({time.perf_counter() - start:.1f} s)".lstrip()

    for item in iterable:
        yield item
        done += 1
        now = time.perf_counter()
        if interactive and now - last >= _REFRESH_SECONDS:
            stream.write("\r" + line())
            stream.flush()
            last = now
    stream.write(("\r" if interactive else "") + line() + "\n")
    stream.flush()
