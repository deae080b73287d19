"""``tadiff.utils.data``: the same objects as :mod:`tadiff.data` under torch's import path."""

from tadiff.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

__all__ = [
    "BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "RandomSampler", "Sampler",
    "SequentialSampler", "Subset", "TensorDataset", "default_collate", "random_split",
]  # fmt: skip
