"""Bundle adjustment: reprojection errors of 3-D points in cameras, one observation at a time.

The ADBench/GradBench BA objective: a camera is 11 numbers (angle-axis rotation, center, focal
length, principal point, two radial distortion coefficients); each observation projects one
point into one camera and is weighted by ``w``, and ``1 - w**2`` penalizes small weights. The
program loops over the observations in Python and writes each residual into a row of a
preallocated tensor.

Shapes: ``cams (c, 11)``, ``points (p, 3)``, ``weights (o,)``, ``features (o, 2)``,
``observations (o, 2)`` int64 (camera, point).
"""

import numpy as np
import torch

SIZES = {"test": (3, 12, 20), "bench": (10, 100, 300)}  # (cameras, points, observations)


def make_inputs(size="test", dtype="float64", seed=0):
    c, p, o = SIZES[size]
    rng = np.random.default_rng(seed)
    dtype = getattr(torch, dtype)
    cams = np.concatenate(
        [
            0.1 * rng.standard_normal((c, 3)),  # rotation (angle-axis)
            rng.standard_normal((c, 3)) + np.array([0.0, 0.0, -10.0]),  # camera center
            rng.uniform(400, 600, (c, 1)),  # focal length
            rng.standard_normal((c, 2)),  # principal point
            1e-3 * rng.standard_normal((c, 2)),  # radial distortion
        ],
        axis=1,
    )
    observations = np.stack([np.arange(o) % c, rng.integers(0, p, o)], axis=1)
    return {
        "cams": torch.tensor(cams, dtype=dtype),
        "points": torch.tensor(rng.standard_normal((p, 3)), dtype=dtype),
        "weights": torch.tensor(rng.uniform(0.5, 1.0, o), dtype=dtype),
        "features": torch.tensor(rng.uniform(-50, 50, (o, 2)), dtype=dtype),
        "observations": torch.from_numpy(observations),
    }


def rodrigues_rotate(rotation, X):
    theta = torch.linalg.norm(rotation)
    if theta.item() < 1e-12:
        return X + torch.cross(rotation, X, dim=0)
    axis = rotation / theta
    cos, sin = torch.cos(theta), torch.sin(theta)
    return X * cos + torch.cross(axis, X, dim=0) * sin + axis * (axis @ X) * (1 - cos)


def radial_distort(coefficients, projected):
    r2 = (projected**2).sum()
    return projected * (1 + coefficients[0] * r2 + coefficients[1] * r2 * r2)


def project(cam, X):
    in_camera = rodrigues_rotate(cam[:3], X - cam[3:6])
    projected = -in_camera[:2] / in_camera[2]
    return radial_distort(cam[9:11], projected) * cam[6] + cam[7:9]


def objective(cams, points, weights, features, observations):
    residuals = torch.empty((len(observations), 2), dtype=cams.dtype, device=cams.device)
    for i, (camera, point) in enumerate(observations):
        residuals[i] = weights[i] * (project(cams[camera], points[point]) - features[i])
    weight_errors = 1 - weights**2
    return (residuals**2).sum() + (weight_errors**2).sum()


def forward(inputs):
    return objective(**inputs)


def gradient(inputs):
    names = ("cams", "points", "weights")
    cams, points, weights = (inputs[k].detach().requires_grad_() for k in names)
    value = objective(cams, points, weights, inputs["features"], inputs["observations"])
    grads = torch.autograd.grad(value, (cams, points, weights))
    return {"value": value.detach(), "cams": grads[0], "points": grads[1], "weights": grads[2]}
