"""Optimizers, gradient clipping and learning-rate schedules, with PyTorch's names and updates.

Optimizers update ``p.data`` (a ``numpy.ndarray``) in place from ``p.grad``; see
:class:`Optimizer`. The update formulas match ``torch.optim`` (checked step by step in the tests).

Example:
    >>> import tadiff as td                                       # doctest: +SKIP
    >>> opt = td.optim.Adam(model.parameters(), lr=1e-3)          # doctest: +SKIP
    >>> sched = td.optim.lr_scheduler.StepLR(opt, step_size=10)   # doctest: +SKIP
"""

from tadiff.optim import lr_scheduler
from tadiff.optim.adagrad import Adagrad
from tadiff.optim.adam import Adam, AdamW
from tadiff.optim.clip import clip_grad_norm_, clip_grad_value_
from tadiff.optim.optimizer import Optimizer
from tadiff.optim.rmsprop import RMSprop
from tadiff.optim.sgd import SGD

__all__ = [
    "SGD",
    "Adagrad",
    "Adam",
    "AdamW",
    "Optimizer",
    "RMSprop",
    "clip_grad_norm_",
    "clip_grad_value_",
    "lr_scheduler",
]
