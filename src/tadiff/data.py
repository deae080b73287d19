"""Datasets and mini-batch loading with ``torch.utils.data``'s names: ``Dataset``,
``TensorDataset``, ``Subset``, ``ConcatDataset``, ``random_split``, ``DataLoader``,
``default_collate`` and the samplers.

``DataLoader`` batches any dataset that has ``__len__`` and ``__getitem__`` by collating its
samples (arrays and Tensors are stacked, numbers become a Tensor, tuples/lists/dicts are
collated field by field). For a ``TensorDataset`` (or a ``Subset`` of one) it skips the
per-sample Python loop: a batch is one fancy-indexing of each tensor, as fast as slicing arrays
by hand. Loading happens in the calling process: ``num_workers`` is accepted for torch's
signature and does not start workers (NumPy datasets in memory do not need them).

Example:
    >>> import tadiff as td
    >>> from tadiff.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(td.arange(10.0), td.arange(10))
    >>> [tuple(x.shape) for x, y in DataLoader(ds, batch_size=4)]
    [(4,), (4,), (2,)]
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from tadiff.autograd.factories import numpy_generator
from tadiff.autograd.tensor import Tensor
from tadiff.errors import InputError, ShapeError

__all__ = [
    "BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "RandomSampler", "Sampler",
    "SequentialSampler", "Subset", "TensorDataset", "default_collate", "random_split",
]  # fmt: skip


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__(index)`` and ``__len__()``."""

    def __getitem__(self, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


def _as_tensor(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(np.asarray(x))


class TensorDataset(Dataset):
    """Samples are the rows ``(t[i] for t in tensors)`` of tensors with one first dimension.

    Args:
        *tensors: Tensors or arrays of shape ``(n, ...)`` with the same ``n``.
    """

    def __init__(self, *tensors: Any):
        if not tensors:
            raise InputError("TensorDataset needs at least one tensor")
        self.tensors = tuple(_as_tensor(t) for t in tensors)
        sizes = {t.shape[0] if t.ndim else None for t in self.tensors}
        if len(sizes) != 1 or None in sizes:
            raise ShapeError(
                "TensorDataset: every tensor needs the same size in its first dimension, got "
                f"shapes {[t.shape for t in self.tensors]}"
            )

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Any, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = [int(i) for i in indices]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, (list, np.ndarray)):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Several datasets one after the other."""

    def __init__(self, datasets: Sequence[Any]):
        self.datasets = list(datasets)
        if not self.datasets:
            raise InputError("ConcatDataset needs at least one dataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, index: int) -> Any:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for a dataset of {n} samples")
        index %= n
        k = bisect.bisect_right(self.cumulative_sizes, index)
        start = 0 if k == 0 else int(self.cumulative_sizes[k - 1])
        return self.datasets[k][index - start]


def random_split(dataset: Any, lengths: Sequence[float], generator: Any = None) -> list[Subset]:
    """Split into non-overlapping random subsets of the given ``lengths`` (counts summing to
    ``len(dataset)``, or fractions summing to 1, remainders spread round-robin as torch does).
    The order is drawn from ``generator`` (a ``tadiff.Generator`` or NumPy ``Generator``), else
    from the default generator (``td.manual_seed`` makes it reproducible)."""
    n = len(dataset)
    if all(0 <= f <= 1 for f in lengths) and math.isclose(sum(lengths), 1) and sum(lengths) != n:
        counts = [math.floor(n * f) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n or any(int(v) != v or v < 0 for v in lengths):
        raise InputError(
            f"random_split: lengths {list(lengths)} must be non-negative ints summing to the "
            f"dataset's size {n} (or fractions summing to 1)"
        )
    order = numpy_generator(generator, "random_split").permutation(n)
    bounds = np.cumsum([0, *[int(v) for v in lengths]])
    return [Subset(dataset, order[lo:hi].tolist()) for lo, hi in itertools.pairwise(bounds)]


# ---- samplers --------------------------------------------------------------------------------


class Sampler:
    """An iterable of dataset indices."""

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """``0, 1, …, len(data_source) - 1``."""

    def __init__(self, data_source: Any):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation of the indices at every iteration (or ``num_samples`` draws
    with ``replacement``)."""

    def __init__(
        self,
        data_source: Any,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Any = None,
    ):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None and (not isinstance(num_samples, int) or num_samples <= 0):
            raise InputError(f"num_samples should be a positive integer, got {num_samples!r}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        rng = numpy_generator(self.generator, "RandomSampler")  # the default one for None
        n = len(self.data_source)
        if self.replacement:
            return iter(rng.integers(0, n, self.num_samples).tolist())
        reps = -(-self.num_samples // n) if n else 0
        order = np.concatenate([rng.permutation(n) for _ in range(reps)]) if reps else []
        return iter(list(order[: self.num_samples]))

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``."""

    def __init__(self, sampler: Any, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise InputError(f"batch_size should be a positive integer, got {batch_size!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(int(i))
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# ---- collation and the loader ------------------------------------------------------------------


def default_collate(batch: Sequence[Any]) -> Any:
    """Stack a list of samples into a batch: Tensors and arrays are stacked along a new first
    dim, numbers become a 1-D Tensor, strings stay a list, and tuples, lists and dicts are
    collated field by field.

    Example:
        >>> default_collate([(1.0, [1, 2]), (2.0, [3, 4])])[0]
        tensor([1., 2.])
    """
    first = batch[0]
    if isinstance(first, Tensor):
        from tadiff.ops.shape import stack

        return stack(list(batch))
    if isinstance(first, (np.ndarray, np.generic)):
        return Tensor(np.stack(batch))
    if isinstance(first, (bool, int, float)):
        return Tensor(np.asarray(batch, dtype=np.float32 if isinstance(first, float) else None))
    if isinstance(first, str):
        return list(batch)
    if isinstance(first, dict):
        return {key: default_collate([b[key] for b in batch]) for key in first}
    if isinstance(first, (tuple, list)):
        if any(len(b) != len(first) for b in batch):
            raise ShapeError(
                "default_collate: every sample in a batch needs the same number of fields"
            )
        fields = [default_collate(list(column)) for column in zip(*batch, strict=True)]
        return type(first)(*fields) if hasattr(first, "_fields") else type(first)(fields)
    raise InputError(f"default_collate: cannot batch samples of type {type(first).__name__}")


def _tensor_source(dataset: Any) -> tuple[tuple[Tensor, ...], np.ndarray | None] | None:
    """The tensors behind a TensorDataset (or a Subset chain of one) and the index map."""
    indices = None
    while isinstance(dataset, Subset):
        here = np.asarray(dataset.indices, dtype=np.int64)
        indices = here if indices is None else here[indices]
        dataset = dataset.dataset
    if type(dataset) is TensorDataset:
        return dataset.tensors, indices
    return None


class DataLoader:
    """Iterate over ``dataset`` in mini-batches.

    Args:
        dataset: anything with ``__len__`` and ``__getitem__``.
        batch_size: samples per batch (``None``: samples one by one, uncollated).
        shuffle: a new random order every epoch (seed with ``td.manual_seed`` or ``generator``).
        sampler, batch_sampler: custom index orders (exclusive with ``shuffle``).
        num_workers: accepted for torch's signature; loading happens in this process.
        collate_fn: turns a list of samples into a batch (default :func:`default_collate`).
        drop_last: drop a last batch smaller than ``batch_size``.
        generator: a ``tadiff.Generator`` or ``numpy.random.Generator`` for the shuffling
            (default: the default generator).

    Example:
        >>> import tadiff as td
        >>> loader = DataLoader(TensorDataset(td.arange(6.0)), batch_size=4, drop_last=True)
        >>> len(loader), [b[0].tolist() for b in loader]
        (1, [[0.0, 1.0, 2.0, 3.0]])
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool = False,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        generator: Any = None,
        **ignored: Any,
    ):
        if sampler is not None and shuffle:
            raise InputError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler or drop_last):
            raise InputError(
                "DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                "shuffle, sampler, and drop_last"
            )
        if not isinstance(num_workers, int) or num_workers < 0:
            raise InputError(f"num_workers option should be non-negative, got {num_workers!r}")
        self.dataset = dataset
        self.batch_size = None if batch_sampler is not None else batch_size
        self.drop_last = drop_last
        self.num_workers = num_workers
        self.collate_fn = collate_fn
        if sampler is None:
            sampler = (
                RandomSampler(dataset, generator=generator)
                if shuffle
                else SequentialSampler(dataset)
            )
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self._fast = _tensor_source(dataset) if collate_fn is None else None

    def __len__(self) -> int:
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)

    def __iter__(self) -> Iterator[Any]:
        if self.batch_sampler is None:  # batch_size=None: samples as they are
            for i in self.sampler:
                yield (
                    self.dataset[i] if self.collate_fn is None else self.collate_fn(self.dataset[i])
                )
            return
        for indices in self.batch_sampler:
            if self._fast is not None:
                tensors, index_map = self._fast
                picked = np.asarray(indices, dtype=np.int64)
                rows = picked if index_map is None else index_map[picked]
                yield tuple(t[rows] for t in tensors)
            else:
                collate = self.collate_fn or default_collate
                yield collate([self.dataset[i] for i in indices])
