"""tadiff.data against torch.utils.data: batches, orders, lengths, collation, splits, errors."""

from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tadiff as td
from tadiff.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)
from tadiff.errors import InputError, ShapeError

torch = pytest.importorskip("torch")
tud = torch.utils.data


def _rows(batches):
    return [[np.asarray(t.data if isinstance(t, td.Tensor) else t.numpy()).tolist() for t in b]
            for b in batches]  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 23), st.integers(1, 7), st.booleans())
def test_sequential_batches_match_torch(n, batch_size, drop_last):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    y = np.arange(n)
    ours = DataLoader(TensorDataset(x, y), batch_size=batch_size, drop_last=drop_last)
    theirs = tud.DataLoader(tud.TensorDataset(torch.tensor(x), torch.tensor(y)),
                            batch_size=batch_size, drop_last=drop_last)  # fmt: skip
    assert len(ours) == len(theirs)
    assert _rows(ours) == _rows(theirs)


class Squares(Dataset):  # a map-style dataset with mixed sample types
    def __len__(self):
        return 7

    def __getitem__(self, i):
        return {"x": np.full(2, float(i), np.float32), "y": i * i, "name": f"s{i}"}


def test_generic_datasets_are_collated_like_torch():
    class TorchSquares(tud.Dataset):
        __len__ = Squares.__len__
        __getitem__ = Squares.__getitem__

    ours = list(DataLoader(Squares(), batch_size=3))
    theirs = list(tud.DataLoader(TorchSquares(), batch_size=3))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a["x"].data, b["x"].numpy())
        np.testing.assert_array_equal(a["y"].data, b["y"].numpy())
        assert a["name"] == b["name"]
    Pair = namedtuple("Pair", "a b")
    batch = default_collate([Pair(1.5, td.ones(2)), Pair(2.5, td.zeros(2))])
    assert isinstance(batch, Pair) and batch.b.shape == (2, 2) and batch.a.tolist() == [1.5, 2.5]


def test_shuffle_is_a_permutation_each_epoch_and_seedable():
    ds = TensorDataset(td.arange(50))
    td.manual_seed(5)
    first = [i for (b,) in DataLoader(ds, batch_size=8, shuffle=True) for i in b.tolist()]
    second = [i for (b,) in DataLoader(ds, batch_size=8, shuffle=True) for i in b.tolist()]
    td.manual_seed(5)
    again = [i for (b,) in DataLoader(ds, batch_size=8, shuffle=True) for i in b.tolist()]
    assert sorted(first) == list(range(50)) and first != list(range(50))
    assert first == again and first != second
    gen = np.random.default_rng(1)
    loader = DataLoader(ds, batch_size=50, shuffle=True, generator=gen)
    e1, e2 = (next(iter(loader))[0].tolist() for _ in range(2))
    assert e1 != e2 and sorted(e1) == sorted(e2)


def test_subsets_splits_and_concatenation():
    ds = TensorDataset(td.arange(10.0) * 2)
    a, b, c = random_split(ds, [5, 3, 2], generator=np.random.default_rng(0))
    got = sorted(v for part in (a, b, c) for (v,) in (part[i] for i in range(len(part))))
    assert [len(a), len(b), len(c)] == [5, 3, 2] and got == [2.0 * i for i in range(10)]
    fractions = random_split(ds, [0.25, 0.75], generator=np.random.default_rng(0))
    assert [len(p) for p in fractions] == [
        len(p) for p in tud.random_split(range(10), [0.25, 0.75])
    ]
    sub = Subset(Subset(ds, [9, 1, 5, 3]), [2, 0])  # the fast path follows nested subsets
    assert [b[0].tolist() for b in DataLoader(sub, batch_size=2)] == [[10.0, 18.0]]
    both = ConcatDataset([ds, Squares()])
    assert len(both) == 17 and both[12]["y"] == 4 and both[-1]["y"] == 36
    assert len(ds + ds) == 20


def test_samplers_and_batch_size_none():
    ds = TensorDataset(td.arange(5.0))
    assert list(SequentialSampler(ds)) == [0, 1, 2, 3, 4]
    draws = list(
        RandomSampler(ds, replacement=True, num_samples=20, generator=np.random.default_rng(0))
    )
    assert len(draws) == 20 and set(draws) <= set(range(5))
    assert list(BatchSampler(range(5), 2, drop_last=True)) == [[0, 1], [2, 3]]
    loader = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 3, False))
    assert [b[0].tolist() for b in loader] == [[0.0, 1.0, 2.0], [3.0, 4.0]]
    samples = list(DataLoader(ds, batch_size=None))
    assert len(samples) == 5 and samples[2][0].item() == 2.0
    custom = DataLoader(ds, batch_size=2, collate_fn=lambda items: len(items))
    assert list(custom) == [2, 2, 1]


def test_errors():
    with pytest.raises(ShapeError, match="same size in its first dimension"):
        TensorDataset(td.ones(3), td.ones(4))
    with pytest.raises(InputError, match="mutually exclusive with shuffle"):
        DataLoader(TensorDataset(td.ones(3)), sampler=[0, 1], shuffle=True)
    with pytest.raises(InputError, match="batch_size should be a positive integer"):
        DataLoader(TensorDataset(td.ones(3)), batch_size=0)
    with pytest.raises(InputError, match="summing to the dataset's size 3"):
        random_split(TensorDataset(td.ones(3)), [1, 1])
    with pytest.raises(InputError, match="cannot batch samples of type object"):
        default_collate([object(), object()])


def test_torch_import_paths():
    from tadiff.utils import data as utils_data

    assert utils_data.DataLoader is DataLoader and utils_data.random_split is random_split
