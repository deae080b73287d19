"""A tiny differentiable ray caster: spheres lit by a directional light, fitted to an image.

Rays from a pinhole camera at the origin meet each sphere (a Python loop over the spheres,
iterating the parameter tensors together with ``zip``); the nearest hit is kept with
``torch.where`` and shaded by Lambert's law. The objective is the mean squared difference to a
target image rendered from perturbed spheres; its gradient is in the sphere centres, radii and
colours (edges carry no gradient in this renderer, only shading does).

Shapes: ``centers (s, 3)``, ``radii (s,)``, ``colors (s, 3)``, ``light (3,)``,
``target (height, width, 3)``.
"""

import numpy as np
import torch

SIZES = {"test": (3, 16), "bench": (6, 48)}  # (spheres, image side)


def make_inputs(size="test", dtype="float64", seed=0):
    spheres, side = SIZES[size]
    rng = np.random.default_rng(seed)
    dtype = getattr(torch, dtype)
    centers = np.concatenate([rng.uniform(-1.5, 1.5, (spheres, 2)),
                              rng.uniform(-6, -4, (spheres, 1))], 1)  # fmt: skip
    radii = rng.uniform(0.6, 1.2, spheres)
    colors = rng.uniform(0.2, 1.0, (spheres, 3))
    light = torch.tensor([0.4, 0.6, 0.7], dtype=dtype)
    with torch.no_grad():
        target = render(torch.tensor(centers + 0.1 * rng.standard_normal(centers.shape),
                                     dtype=dtype), torch.tensor(radii, dtype=dtype),
                        torch.tensor(rng.uniform(0.2, 1.0, (spheres, 3)), dtype=dtype),
                        light / light.norm(), side)  # fmt: skip
    return {
        "centers": torch.tensor(centers, dtype=dtype),
        "radii": torch.tensor(radii, dtype=dtype),
        "colors": torch.tensor(colors, dtype=dtype),
        "light": light / light.norm(),
        "target": target,
    }


def render(centers, radii, colors, light, side):
    coordinates = torch.linspace(-0.5, 0.5, side, dtype=centers.dtype, device=centers.device)
    ys, xs = torch.meshgrid(-coordinates, coordinates, indexing="ij")
    directions = torch.stack([xs, ys, -torch.ones_like(xs)], dim=-1)
    directions = directions / directions.norm(dim=-1, keepdim=True)  # (side, side, 3)
    nearest = torch.full((side, side), float("inf"), dtype=centers.dtype, device=centers.device)
    image = torch.zeros(side, side, 3, dtype=centers.dtype, device=centers.device)
    for center, radius, color in zip(centers, radii, colors, strict=True):
        along = directions @ center  # ray parameter of the point closest to the centre
        discriminant = along**2 - (center @ center - radius**2)
        hit = discriminant > 0
        distance = along - torch.sqrt(torch.clamp(discriminant, min=1e-12))
        closer = hit & (distance > 0) & (distance < nearest)
        normal = (distance.unsqueeze(-1) * directions - center) / radius
        shade = torch.clamp((normal * light).sum(dim=-1), min=0.0)
        image = torch.where(closer.unsqueeze(-1), shade.unsqueeze(-1) * color, image)
        nearest = torch.where(closer, distance, nearest)
    return image


def objective(centers, radii, colors, light, target):
    return ((render(centers, radii, colors, light, target.shape[0]) - target) ** 2).mean()


def forward(inputs):
    return objective(**inputs)


def gradient(inputs):
    params = [inputs[k].detach().clone().requires_grad_() for k in ("centers", "radii", "colors")]
    value = objective(*params, inputs["light"], inputs["target"])
    grads = torch.autograd.grad(value, params)
    return {"value": value.detach(), "centers": grads[0], "radii": grads[1], "colors": grads[2]}
