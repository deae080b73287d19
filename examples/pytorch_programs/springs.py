"""A mass-spring cloth falling under gravity, differentiated through the whole simulation.

A grid of unit masses joined by springs to their right and lower neighbours, the top row pinned.
Each semi-implicit Euler step gathers both ends of every spring, sums spring forces into the
masses with ``index_add_`` and zeroes the pinned velocities with a boolean-mask assignment. The
objective is how far the cloth's centre of mass ends from a target; its gradient is in the
spring stiffnesses and the initial velocities.

Shapes: ``positions, velocities (m, 2)``, ``stiffness (s,)``, ``springs (s, 2)`` int64,
``rest (s,)``, ``pinned (m,)`` bool, ``target (2,)``.
"""

import numpy as np
import torch

SIZES = {"test": (4, 20), "bench": (10, 100)}  # (grid side, steps)
DT, DAMPING = 0.01, 0.99


def make_inputs(size="test", dtype="float64", seed=0):
    side, steps = SIZES[size]
    rng = np.random.default_rng(seed)
    dtype = getattr(torch, dtype)
    grid = np.stack(np.meshgrid(np.arange(side), -np.arange(side)), -1).reshape(-1, 2) * 1.0
    index = np.arange(side * side).reshape(side, side)
    springs = np.concatenate([
        np.stack([index[:, :-1].ravel(), index[:, 1:].ravel()], 1),
        np.stack([index[:-1].ravel(), index[1:].ravel()], 1),
    ])  # fmt: skip
    return {
        "positions": torch.tensor(grid + 0.05 * rng.standard_normal(grid.shape), dtype=dtype),
        "velocities": torch.tensor(0.1 * rng.standard_normal(grid.shape), dtype=dtype),
        "stiffness": torch.tensor(rng.uniform(50, 150, len(springs)), dtype=dtype),
        "springs": torch.from_numpy(springs),
        "rest": torch.ones(len(springs), dtype=dtype),
        "pinned": torch.from_numpy(grid[:, 1] == 0),
        "target": torch.tensor([side / 2, -side / 2], dtype=dtype),
        "steps": steps,
    }


def simulate(positions, velocities, stiffness, springs, rest, pinned, steps):
    start, end = springs[:, 0], springs[:, 1]
    gravity = torch.tensor([0.0, -9.81], dtype=positions.dtype, device=positions.device)
    x, v = positions, velocities
    for _ in range(steps):
        delta = x[end] - x[start]
        length = delta.norm(dim=1, keepdim=True)
        tension = (stiffness * (length.squeeze(1) - rest)).unsqueeze(1) * delta / length
        force = torch.zeros_like(x).index_add_(0, start, tension).index_add_(0, end, -tension)
        v = DAMPING * (v + DT * (force + gravity))
        v[pinned] = 0.0
        x = x + DT * v
    return x


def objective(positions, velocities, stiffness, springs, rest, pinned, target, steps):
    final = simulate(positions, velocities, stiffness, springs, rest, pinned, steps)
    return ((final.mean(dim=0) - target) ** 2).sum()


def forward(inputs):
    return objective(**inputs)


def gradient(inputs):
    stiffness = inputs["stiffness"].clone().requires_grad_(True)
    velocities = inputs["velocities"].clone().requires_grad_(True)
    value = objective(**{**inputs, "stiffness": stiffness, "velocities": velocities})
    value.backward()
    return {"value": value.detach(), "stiffness": stiffness.grad, "velocities": velocities.grad}
