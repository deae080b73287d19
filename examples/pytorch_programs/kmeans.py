"""k-means: the cost of an assignment to the nearest centroid and one Newton step on it.

The GradBench k-means problem: the cost is the sum over points of the squared distance to the
nearest centroid; its Hessian in the centroids is diagonal (twice each centroid's point count),
so one Hessian-vector product with a vector of ones gives it, and the Newton direction is the
gradient divided by that diagonal.

Shapes: ``points (n, d)``, ``centroids (k, d)``.
"""

import numpy as np
import torch
from torch.autograd.functional import hvp, vhp

SIZES = {"test": (60, 3, 4), "bench": (1000, 8, 20)}  # (n, d, k)


def make_inputs(size="test", dtype="float64", seed=0):
    n, d, k = SIZES[size]
    rng = np.random.default_rng(seed)
    points = rng.standard_normal((n, d))
    return {
        "points": torch.tensor(points, dtype=getattr(torch, dtype)),
        "centroids": torch.tensor(points[rng.choice(n, k, replace=False)] + 0.1).to(
            getattr(torch, dtype)
        ),
    }


def cost(points, centroids):
    distances = ((points.unsqueeze(1) - centroids.unsqueeze(0)) ** 2).sum(dim=-1)
    return distances.min(dim=1).values.sum()


def forward(inputs):
    return cost(inputs["points"], inputs["centroids"])


def gradient(inputs):
    points, centroids = inputs["points"], inputs["centroids"]

    def objective(c):
        return cost(points, c)

    ones = torch.ones_like(centroids)
    value, hessian_diagonal = vhp(objective, centroids, ones)
    _, hessian_diagonal_too = hvp(objective, centroids, ones)  # symmetric Hessian: the same
    c = centroids.detach().requires_grad_()
    (grad,) = torch.autograd.grad(objective(c), c)
    return {
        "value": value,
        "grad": grad,
        "newton": grad / hessian_diagonal,
        "hvp": hessian_diagonal_too,
    }
