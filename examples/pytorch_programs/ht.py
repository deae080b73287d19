"""Hand tracking: a skinned hand mesh posed by joint angles, fitted to observed points.

The ADBench/GradBench hand-tracking objective in a smaller form: every bone's rotation is built
from three Euler angles (matrices assembled from ``torch.stack`` of sines and cosines), bones are
chained to their parents in a Python loop, vertices are blended by skinning weights, a global
rotation (angle-axis) and translation place the hand, and the objective is the squared distance
of the observed points to their corresponding vertices.

Shapes: ``pose (bones, 3)``, ``global_rotation (3,)``, ``translation (3,)``,
``base_relatives, inverse_base_absolutes (bones, 4, 4)``, ``base_positions (vertices, 4)``,
``skinning (vertices, bones)``, ``points (n, 3)``, ``correspondences (n,)`` int64.
"""

import numpy as np
import torch

SIZES = {"test": (5, 30, 20), "bench": (22, 544, 200)}  # (bones, vertices, points)


def _parents(bones):
    # five fingers hanging off the wrist (bone 0), each a chain of equal length
    parents = [-1]
    fingers = 5
    for b in range(1, bones):
        parents.append(0 if b <= fingers else b - fingers)
    return parents


def make_inputs(size="test", dtype="float64", seed=0):
    bones, vertices, n = SIZES[size]
    rng = np.random.default_rng(seed)
    dtype = getattr(torch, dtype)
    relatives = np.tile(np.eye(4), (bones, 1, 1))
    relatives[:, :3, 3] = rng.standard_normal((bones, 3))
    absolutes = [relatives[0]]
    parents = _parents(bones)
    for b in range(1, bones):
        absolutes.append(absolutes[parents[b]] @ relatives[b])
    skinning = rng.random((vertices, bones)) ** 4
    positions = np.concatenate([rng.standard_normal((vertices, 3)) * 3, np.ones((vertices, 1))], 1)
    return {
        "pose": torch.tensor(0.3 * rng.standard_normal((bones, 3)), dtype=dtype),
        "global_rotation": torch.tensor(0.2 * rng.standard_normal(3), dtype=dtype),
        "translation": torch.tensor(rng.standard_normal(3), dtype=dtype),
        "base_relatives": torch.tensor(relatives, dtype=dtype),
        "inverse_base_absolutes": torch.tensor(np.linalg.inv(np.stack(absolutes)), dtype=dtype),
        "base_positions": torch.tensor(positions, dtype=dtype),
        "skinning": torch.tensor(skinning / skinning.sum(1, keepdims=True), dtype=dtype),
        "points": torch.tensor(rng.standard_normal((n, 3)) * 3, dtype=dtype),
        "correspondences": torch.from_numpy(rng.integers(0, vertices, n)),
    }


def euler_to_rotation(angles):
    (cx, cy, cz), (sx, sy, sz) = torch.cos(angles), torch.sin(angles)
    one, zero = torch.ones_like(cx), torch.zeros_like(cx)
    rx = torch.stack([torch.stack([one, zero, zero]), torch.stack([zero, cx, -sx]),
                      torch.stack([zero, sx, cx])])  # fmt: skip
    ry = torch.stack([torch.stack([cy, zero, sy]), torch.stack([zero, one, zero]),
                      torch.stack([-sy, zero, cy])])  # fmt: skip
    rz = torch.stack([torch.stack([cz, -sz, zero]), torch.stack([sz, cz, zero]),
                      torch.stack([zero, zero, one])])  # fmt: skip
    return rz @ ry @ rx


def angle_axis_to_rotation(rotation):
    theta = torch.linalg.norm(rotation)
    if theta < 1e-8:
        return torch.eye(3, dtype=rotation.dtype, device=rotation.device)
    x, y, z = rotation / theta
    zero = torch.zeros_like(x)
    cross = torch.stack([torch.stack([zero, -z, y]), torch.stack([z, zero, -x]),
                         torch.stack([-y, x, zero])])  # fmt: skip
    eye = torch.eye(3, dtype=rotation.dtype, device=rotation.device)
    return eye + torch.sin(theta) * cross + (1 - torch.cos(theta)) * cross @ cross


def absolute_transforms(pose, base_relatives):
    parents = _parents(len(pose))
    absolutes = []
    for bone, (angles, relative) in enumerate(zip(pose, base_relatives, strict=True)):
        joint = torch.eye(4, dtype=pose.dtype, device=pose.device)
        joint[:3, :3] = euler_to_rotation(angles)
        local = relative @ joint
        absolutes.append(local if parents[bone] < 0 else absolutes[parents[bone]] @ local)
    return torch.stack(absolutes)


def skinned_vertices(pose, global_rotation, translation, base_relatives, inverse_base_absolutes,
                     base_positions, skinning):  # fmt: skip
    transforms = absolute_transforms(pose, base_relatives) @ inverse_base_absolutes
    per_bone = torch.einsum("bij,vj->vbi", transforms, base_positions)
    blended = (skinning.unsqueeze(-1) * per_bone).sum(dim=1)[:, :3]
    return blended @ angle_axis_to_rotation(global_rotation).T + translation


def objective(pose, global_rotation, translation, base_relatives, inverse_base_absolutes,
              base_positions, skinning, points, correspondences):  # fmt: skip
    vertices = skinned_vertices(pose, global_rotation, translation, base_relatives,
                                inverse_base_absolutes, base_positions, skinning)  # fmt: skip
    return ((points - vertices[correspondences]) ** 2).sum()


def forward(inputs):
    return objective(**inputs)


def gradient(inputs):
    params = {k: inputs[k].clone().requires_grad_() for k in ("pose", "global_rotation",
                                                              "translation")}  # fmt: skip
    value = objective(**{**inputs, **params})
    value.backward()
    return {"value": value.detach(), **{k: p.grad for k, p in params.items()}}
