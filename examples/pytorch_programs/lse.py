"""Log-sum-exp, computed stably by shifting by the maximum (the GradBench lse problem).

Shapes: ``x (n,)``.
"""

import numpy as np
import torch

SIZES = {"test": 100, "bench": 10_000}


def make_inputs(size="test", dtype="float64", seed=0):
    rng = np.random.default_rng(seed)
    return {"x": torch.from_numpy(rng.standard_normal(SIZES[size]) * 3).to(getattr(torch, dtype))}


def logsumexp(x):
    top = x.max()
    return top + torch.log(torch.sum(torch.exp(x - top)))


def forward(inputs):
    return logsumexp(inputs["x"])


def gradient(inputs):
    x = inputs["x"].clone().requires_grad_(True)
    value = logsumexp(x)
    value.backward()
    return {"value": value.detach(), "x": x.grad}
