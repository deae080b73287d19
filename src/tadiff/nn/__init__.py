"""Neural-network building blocks with PyTorch's names: modules, layers, losses, init, save/load.

Example:
    >>> import tadiff as td
    >>> model = td.nn.Sequential(td.nn.Linear(2, 16), td.nn.ReLU(), td.nn.Linear(16, 3))
    >>> logits = model(td.randn(8, 2))
    >>> loss = td.nn.functional.cross_entropy(logits, td.tensor([0, 1, 2, 0, 1, 2, 0, 1]))
    >>> loss.backward()
"""

from tadiff.nn import functional, init
from tadiff.nn.activation import GELU, LogSoftmax, ReLU, Sigmoid, Softmax, Tanh
from tadiff.nn.batchnorm import BatchNorm1d, BatchNorm2d
from tadiff.nn.container import ModuleList, Sequential
from tadiff.nn.conv import Conv1d, Conv2d
from tadiff.nn.layers import Dropout, Embedding, LayerNorm
from tadiff.nn.linear import Identity, Linear
from tadiff.nn.loss import CrossEntropyLoss, MSELoss, NLLLoss
from tadiff.nn.module import IncompatibleKeys, Module, Parameter
from tadiff.nn.orthogonal import LinearSVD, Orthogonal
from tadiff.nn.pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from tadiff.nn.serialization import load, save

__all__ = [
    "GELU",
    "AvgPool1d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Identity",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "LinearSVD",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "MaxPool2d",
    "Module",
    "ModuleList",
    "NLLLoss",
    "Orthogonal",
    "Parameter",
    "ReLU",
    "Sequential",
    "Sigmoid",
    "Softmax",
    "Tanh",
    "functional",
    "init",
    "load",
    "save",
]
