"""Training a small CNN with batch normalization: a few steps of SGD with momentum.

The loop every PyTorch tutorial writes: a device picked at run time, a ``nn.Module`` built of
``Conv2d``/``BatchNorm2d``/``ReLU``/``MaxPool2d``/``Linear``, moved with ``.to(device, dtype)``,
weights copied in under ``no_grad``, ``zero_grad``/``backward``/``step`` over mini-batches. The
forward alone is the evaluation-mode prediction under ``torch.inference_mode()``.

Shapes: ``images (n, 1, side, side)``, ``labels (n,)`` int64.
"""

import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {"test": (16, 8, 2), "bench": (64, 16, 4)}  # (images, side, steps)


class SmallNet(nn.Module):
    def __init__(self, side):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(16 * (side // 2) ** 2, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def make_inputs(size="test", dtype="float64", seed=0):
    n, side, steps = SIZES[size]
    rng = np.random.default_rng(seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = SmallNet(side).to(device, getattr(torch, dtype))
    with torch.no_grad():  # weights from a seeded NumPy generator, the same for every run
        for parameter in model.parameters():
            fan_in = parameter[0].numel() if parameter.dim() > 1 else 10
            draw = rng.standard_normal(tuple(parameter.shape)) / fan_in**0.5
            parameter.copy_(torch.from_numpy(draw))
    return {
        "model": model,
        "images": torch.tensor(
            rng.standard_normal((n, 1, side, side)), device=device, dtype=getattr(torch, dtype)
        ),
        "labels": torch.from_numpy(rng.integers(0, 10, n)).to(device),
        "steps": steps,
    }


def forward(inputs):
    model = inputs["model"]
    model.eval()
    with torch.inference_mode():
        return model(inputs["images"])


def gradient(inputs):
    """Train a copy of the model; return the losses and the trained parameters."""
    model = copy.deepcopy(inputs["model"])
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    images, labels = inputs["images"], inputs["labels"]
    batch = len(images) // 2
    losses = []
    for step in range(inputs["steps"]):
        start = (step % 2) * batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images[start : start + batch]), labels[start : start + batch])
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return {"losses": torch.stack(losses), **dict(model.named_parameters()),
            **{k: v for k, v in model.named_buffers() if "running" in k}}  # fmt: skip
