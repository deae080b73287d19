"""Fitting a generalized Lotka–Volterra model: RK4 steps written into a trajectory row by row.

``dy/dt = y * (r + A y)`` for ``n`` interacting species, integrated by the classical Runge–Kutta
method in a Python loop; each step is assigned into a row of a preallocated trajectory
(``trajectory[i + 1] = y``). The objective is the mean squared error against observations of
every tenth step; the gradient is in the growth rates, the interaction matrix and the initial
populations.

Shapes: ``rates (n,)``, ``interactions (n, n)``, ``initial (n,)``, ``observed (steps/10 + 1, n)``.
"""

import numpy as np
import torch

SIZES = {"test": (3, 40), "bench": (4, 200)}  # (species, steps)
DT = 0.02


def make_inputs(size="test", dtype="float64", seed=0):
    n, steps = SIZES[size]
    rng = np.random.default_rng(seed)
    dtype = getattr(torch, dtype)
    return {
        "rates": torch.tensor(rng.uniform(0.5, 1.5, n), dtype=dtype),
        "interactions": torch.tensor(
            -0.5 * np.eye(n) + 0.2 * rng.standard_normal((n, n)), dtype=dtype
        ),
        "initial": torch.tensor(rng.uniform(0.5, 1.5, n), dtype=dtype),
        "observed": torch.tensor(rng.uniform(0.5, 2.0, (steps // 10 + 1, n)), dtype=dtype),
    }


def rhs(rates, interactions, y):
    return y * (rates + interactions @ y)


def integrate(rates, interactions, initial, steps):
    trajectory = torch.zeros(steps + 1, len(initial), dtype=initial.dtype, device=initial.device)
    trajectory[0] = initial
    y = initial
    for i in range(steps):
        k1 = rhs(rates, interactions, y)
        k2 = rhs(rates, interactions, y + DT / 2 * k1)
        k3 = rhs(rates, interactions, y + DT / 2 * k2)
        k4 = rhs(rates, interactions, y + DT * k3)
        y = y + DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        trajectory[i + 1] = y
    return trajectory


def objective(rates, interactions, initial, observed):
    steps = 10 * (len(observed) - 1)
    trajectory = integrate(rates, interactions, initial, steps)
    return ((trajectory[::10] - observed) ** 2).mean()


def forward(inputs):
    return objective(**inputs)


def gradient(inputs):
    params = [inputs[k].detach().requires_grad_() for k in ("rates", "interactions", "initial")]
    value = objective(*params, inputs["observed"])
    value.backward()
    return {"value": value.detach(), "rates": params[0].grad, "interactions": params[1].grad,
            "initial": params[2].grad}  # fmt: skip
