"""Where a view's elements sit in its base: the index map behind in-place ops on views.

A tadiff view is a NumPy view: its elements are memory of the base tensor's array. To rewrite the
base's graph after an in-place op on the view (PyTorch's ``CopySlices``) only one fact is needed,
whatever chain of slicing, transposing and reshaping made the view: for every element of the
view, its row-major (flat) index in the base. It follows from the two arrays' strides and start
addresses, so views need to remember nothing but their base.

Example:
    >>> base = np.zeros((3, 4))
    >>> view_positions(base, base[1:, ::2].T)
    array([[ 4,  8],
           [ 6, 10]])
"""

from __future__ import annotations

import numpy as np

from tadiff.errors import AutogradError

__all__ = ["view_positions"]


def view_positions(base: np.ndarray, view: np.ndarray) -> np.ndarray:
    """Flat row-major indices into ``base`` of the elements of ``view`` (a NumPy view of it).

    Args:
        base: the array whose memory ``view`` reads, any strides (C, Fortran, transposed,
            sliced, flipped).
        view: an array of the same dtype whose elements all lie in ``base``'s memory.

    Returns:
        int64 array of ``view.shape``; repeated entries where ``view`` repeats elements (a
        broadcast view).

    Raises:
        AutogradError: when an element of ``view`` is not an element of ``base``.
    """
    item = base.itemsize
    if view.itemsize != item or any(s % item for s in base.strides + view.strides):
        raise AutogradError(
            f"in-place op on a view: a view of dtype {view.dtype} and strides {view.strides} "
            f"cannot be mapped onto its base of dtype {base.dtype} and strides {base.strides}"
        )
    start = (_address(view) - _address(base)) // item
    steps = [stride // item for stride in view.strides]
    offsets = _offsets(start, view.shape, steps)
    if base.flags.c_contiguous:
        # the offset of an element of a row-major array is its flat index: only the range of
        # the view's offsets needs checking, and that follows from its extreme elements
        low = start + sum((n - 1) * s for n, s in zip(view.shape, steps, strict=True) if s < 0)
        high = start + sum((n - 1) * s for n, s in zip(view.shape, steps, strict=True) if s > 0)
        if offsets.size == 0 or (low >= 0 and high < base.size):
            return offsets
        raise _foreign(base)
    return _flat_index(base, offsets)


def _offsets(start: int, shape: tuple[int, ...], steps: list[int]) -> np.ndarray:
    """``start + sum_k i_k * steps[k]`` over the index grid of ``shape`` (int64)."""
    offsets = None
    for axis, (n, step) in enumerate(zip(shape, steps, strict=True)):
        if n == 1:
            continue
        first = start if offsets is None else 0  # the start rides on the first line
        if step:
            line = np.arange(first, first + n * step, step, dtype=np.int64)
        else:  # a broadcast view: every element along this axis is the same one
            line = np.full(n, first, np.int64)
        if axis + 1 < len(shape):
            line = line.reshape((n,) + (1,) * (len(shape) - axis - 1))
        offsets = line if offsets is None else offsets + line
    if offsets is None:
        return np.full(shape, start, np.int64)
    return offsets.reshape(shape)  # only the skipped axes of length 1 are missing


def _address(a: np.ndarray) -> int:
    return a.ctypes.data


def _flat_index(base: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Row-major flat indices of the base elements at ``offsets`` (in elements from its start).

    Peels the base's axes from the largest stride to the smallest (``i = offset // stride``);
    axes with negative strides are counted from their far end. Peeling succeeds for every layout
    whose axes nest (each stride spans the axes below it): C- or Fortran-ordered arrays and every
    slice, transpose and flip of one. The peeled indices are checked to be in range and to
    address exactly the offset, so in a layout without repeated elements they name the element.
    """
    item = base.itemsize
    shape = base.shape
    strides = [s // item for s in base.strides]
    # offset of the lowest-addressed element: axes with negative strides start at their far end
    rest = offsets - sum((n - 1) * s for n, s in zip(shape, strides, strict=True) if s < 0)
    index = [None] * base.ndim
    for axis in sorted(range(base.ndim), key=lambda k: -abs(strides[k])):
        n, s = shape[axis], abs(strides[axis])
        if n == 1:
            index[axis] = 0
            continue
        if s == 0:
            break  # a broadcast base: no element has a single position
        i, rest = np.divmod(rest, s)
        if i.size and (i.min() < 0 or i.max() >= n):
            break
        index[axis] = n - 1 - i if strides[axis] < 0 else i
    else:
        if not rest.size or not rest.any():
            flat = np.zeros(offsets.shape, np.int64)
            for axis, n in enumerate(shape):
                flat = flat * n + index[axis]
            return flat
    raise _foreign(base)


def _foreign(base: np.ndarray) -> AutogradError:
    return AutogradError(
        f"in-place op on a view: the view's elements are not elements of its base of shape "
        f"{base.shape} and strides {base.strides}"
    )
