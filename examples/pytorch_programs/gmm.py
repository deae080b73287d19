"""Gaussian mixture model: the log-posterior of K components with a Wishart prior.

The objective of the ADBench/GradBench GMM problem, written as a PyTorch user would: each
component's inverse covariance is ``Q = L Lᵀ`` with ``L`` lower triangular, its diagonal stored
as logarithms (``icf[:, :d]``) and the strict lower triangle after it (``icf[:, d:]``); the prior
is a Wishart distribution, whose normalizer needs the multivariate log-gamma function.

Shapes: ``alphas (k,)``, ``means (k, d)``, ``icf (k, d(d+1)/2)``, ``x (n, d)``.
"""

import math

import numpy as np
import torch
from torch.special import multigammaln

SIZES = {"test": (40, 3, 5), "bench": (1000, 10, 25)}  # (n, d, k)


def make_inputs(size="test", dtype="float64", seed=0):
    n, d, k = SIZES[size]
    rng = np.random.default_rng(seed)
    dtype = getattr(torch, dtype)
    return {
        "alphas": torch.tensor(rng.standard_normal(k), dtype=dtype),
        "means": torch.from_numpy(rng.random((k, d))).to(dtype),
        "icf": torch.as_tensor(0.5 * rng.standard_normal((k, d * (d + 1) // 2)), dtype=dtype),
        "x": torch.from_numpy(rng.random((n, d))).to(dtype),
    }


def lower_triangular(diagonal, below):
    """Batched lower-triangular matrices (k, d, d) from their diagonals and strict lower parts."""
    k, d = diagonal.shape
    L = torch.zeros((k, d, d), dtype=diagonal.dtype, device=diagonal.device)
    rows, cols = torch.tril_indices(d, d, offset=-1, device=diagonal.device)
    L[:, rows, cols] = below
    return L + torch.diag_embed(diagonal)


def log_wishart_prior(diagonal, L, sum_log_diagonal, gamma, m):
    k, d = diagonal.shape
    n = d + m + 1
    frobenius = (diagonal**2).sum() + (L.tril(-1) ** 2).sum()
    half_n = torch.tensor(0.5 * n, dtype=diagonal.dtype)
    normalizer = n * d * (math.log(gamma) - 0.5 * math.log(2)) - multigammaln(half_n, d)
    return 0.5 * gamma**2 * frobenius - m * sum_log_diagonal.sum() - k * normalizer


def objective(alphas, means, icf, x, gamma=1.0, m=0):
    n, d = x.shape
    log_diagonal = icf[:, :d]
    diagonal = torch.exp(log_diagonal)
    sum_log_diagonal = log_diagonal.sum(dim=1)
    L = lower_triangular(diagonal, icf[:, d:])
    centered = x.unsqueeze(1) - means  # (n, k, d)
    mahalanobis = torch.einsum("kij,nkj->nki", L, centered)
    inner = alphas + sum_log_diagonal - 0.5 * (mahalanobis**2).sum(dim=2)
    constant = -n * d * 0.5 * math.log(2 * math.pi)
    log_likelihood = torch.logsumexp(inner, dim=1).sum() - n * torch.logsumexp(alphas, dim=0)
    return constant + log_likelihood + log_wishart_prior(diagonal, L, sum_log_diagonal, gamma, m)


def forward(inputs):
    return objective(**inputs)


def gradient(inputs):
    """The objective and its gradient in the three parameter tensors, by ``torch.func``."""
    grad_fn = torch.func.grad_and_value(objective, argnums=(0, 1, 2))
    grads, value = grad_fn(inputs["alphas"], inputs["means"], inputs["icf"], inputs["x"])
    return {"value": value, "alphas": grads[0], "means": grads[1], "icf": grads[2]}
