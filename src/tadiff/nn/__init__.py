"""Neural-network building blocks with PyTorch's names: modules, layers, losses, init, save/load.

Example:
    >>> import tadiff as td
    >>> model = td.nn.Sequential(td.nn.Linear(2, 16), td.nn.ReLU(), td.nn.Linear(16, 3))
    >>> logits = model(td.randn(8, 2))
    >>> loss = td.nn.functional.cross_entropy(logits, td.tensor([0, 1, 2, 0, 1, 2, 0, 1]))
    >>> loss.backward()
"""

from tadiff.nn import functional, init, utils
from tadiff.nn.activation import (
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmin,
    Softplus,
    Softsign,
    Tanh,
)
from tadiff.nn.adaptive_pooling import AdaptiveAvgPool1d, AdaptiveAvgPool2d
from tadiff.nn.batchnorm import BatchNorm1d, BatchNorm2d
from tadiff.nn.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from tadiff.nn.conv import Conv1d, Conv2d
from tadiff.nn.conv_transpose import ConvTranspose1d, ConvTranspose2d
from tadiff.nn.extras import (
    ConstantPad1d,
    ConstantPad2d,
    CosineSimilarity,
    InstanceNorm1d,
    InstanceNorm2d,
    PairwiseDistance,
    PReLU,
    ReflectionPad1d,
    ReflectionPad2d,
    ReplicationPad1d,
    ReplicationPad2d,
    ZeroPad1d,
    ZeroPad2d,
)
from tadiff.nn.layers import Dropout, Embedding, Flatten, LayerNorm, Unflatten
from tadiff.nn.linear import Identity, Linear
from tadiff.nn.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from tadiff.nn.module import IncompatibleKeys, Module, Parameter
from tadiff.nn.normalization import GroupNorm
from tadiff.nn.orthogonal import LinearSVD, Orthogonal
from tadiff.nn.pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from tadiff.nn.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from tadiff.nn.resampling import PixelShuffle, PixelUnshuffle, Upsample
from tadiff.nn.serialization import load, save
from tadiff.nn.transformer import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer

__all__ = [
    "CELU",
    "ELU",
    "GELU",
    "GLU",
    "GRU",
    "LSTM",
    "RNN",
    "SELU",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AvgPool1d",
    "AvgPool2d",
    "BCELoss",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "ConstantPad1d",
    "ConstantPad2d",
    "Conv1d",
    "Conv2d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "CosineSimilarity",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "GRUCell",
    "GroupNorm",
    "Hardsigmoid",
    "Hardswish",
    "Hardtanh",
    "HuberLoss",
    "Identity",
    "IncompatibleKeys",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "KLDivLoss",
    "L1Loss",
    "LSTMCell",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LinearSVD",
    "LogSigmoid",
    "LogSoftmax",
    "MSELoss",
    "MaxPool1d",
    "MaxPool2d",
    "Mish",
    "Module",
    "ModuleDict",
    "ModuleList",
    "MultiheadAttention",
    "NLLLoss",
    "Orthogonal",
    "PReLU",
    "PairwiseDistance",
    "Parameter",
    "ParameterDict",
    "ParameterList",
    "PixelShuffle",
    "PixelUnshuffle",
    "RNNCell",
    "ReLU",
    "ReLU6",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "SmoothL1Loss",
    "Softmax",
    "Softmin",
    "Softplus",
    "Softsign",
    "Tanh",
    "TransformerEncoder",
    "TransformerEncoderLayer",
    "Unflatten",
    "Upsample",
    "ZeroPad1d",
    "ZeroPad2d",
    "functional",
    "init",
    "load",
    "save",
    "utils",
]
