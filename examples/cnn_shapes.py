"""Train a small convolutional network on generated 16x16 images of four shapes with tadiff.

Every convolution and average pooling in the model is an index-notation definition whose
gradients tadiff derives symbolically (``tadiff.nn.Conv2d``); the rest is the engine. The images
are made here, nothing is downloaded: a horizontal bar, a vertical bar, a plus sign or a square
outline, each at a random position and size, in Gaussian pixel noise of standard deviation 0.5
(1600 training and 400 test images). The model (conv 1->8, BatchNorm, ReLU, max pool, conv
8->16, ReLU, average pool, linear 256->4; Adam with a cosine learning-rate schedule, 12 epochs,
about half a second each on one CPU core) reaches at least 93% test accuracy: 97.0% with the
default seed, 95.0-97.8% over seeds 0-4. The script exits with status 1 below 93%.

Usage: ``python examples/cnn_shapes.py [--epochs 12] [--seed 0]``
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tadiff as td
import tadiff.nn as nn
import tadiff.optim as optim
from tadiff.utils.progress import progress

TARGET_ACCURACY = 0.93
CLASSES = ("horizontal bar", "vertical bar", "plus", "square")
SIZE = 16
NOISE = 0.5


def make_shapes(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` noisy images ``(n, 1, 16, 16)`` float32 and their labels ``(n,)`` int64."""
    images = rng.normal(0.0, NOISE, (n, 1, SIZE, SIZE)).astype(np.float32)
    labels = rng.integers(0, len(CLASSES), n)
    for image, label in zip(images[:, 0], labels, strict=True):
        half = int(rng.integers(3, 6))  # the shape spans 2 * half + 1 pixels
        row, col = (int(v) for v in rng.integers(half, SIZE - half, 2))
        span = slice(row - half, row + half + 1), slice(col - half, col + half + 1)
        if label == 0:
            image[row, span[1]] += 1.5
        elif label == 1:
            image[span[0], col] += 1.5
        elif label == 2:
            image[row, span[1]] += 1.5
            image[span[0], col] += 1.5
            image[row, col] -= 1.5  # the centre once, not twice
        else:
            image[span[0], span[1]] += 1.5
            image[row - half + 1 : row + half, col - half + 1 : col + half] -= 1.5
    return images, labels.astype(np.int64)


def build_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AvgPool2d(2),
        Flatten(), nn.Linear(16 * 4 * 4, len(CLASSES)),
    )  # fmt: skip


class Flatten(nn.Module):
    """``(N, ...) -> (N, -1)``."""

    def forward(self, x: td.Tensor) -> td.Tensor:
        return x.reshape(x.shape[0], -1)


def accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of images whose largest logit is the true class (evaluation mode)."""
    model.eval()
    with td.no_grad():
        logits = model(td.tensor(images)).numpy()
    model.train()
    return float((logits.argmax(axis=1) == labels).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="show no progress while training")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    td.manual_seed(args.seed)
    train_x, train_y = make_shapes(1600, rng)
    test_x, test_y = make_shapes(400, rng)
    model = build_model()
    optimizer = optim.Adam(model.parameters(), lr=3e-3)
    schedule = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    batches = -(-len(train_x) // args.batch_size)

    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        order = rng.permutation(len(train_x))
        total_loss = 0.0
        for b in progress(range(batches), desc=f"epoch {epoch}", quiet=args.quiet):
            index = order[b * args.batch_size : (b + 1) * args.batch_size]
            loss = nn.functional.cross_entropy(
                model(td.tensor(train_x[index])), td.tensor(train_y[index])
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(index)
        schedule.step()
        print(
            f"epoch {epoch}  loss {total_loss / len(train_x):.4f}  "
            f"train acc {accuracy(model, train_x, train_y):.1%}  "
            f"test acc {accuracy(model, test_x, test_y):.1%}  "
            f"({time.perf_counter() - start:.2f} s)"
        )
    final = accuracy(model, test_x, test_y)
    print(f"\nfinal test accuracy {final:.1%} (target {TARGET_ACCURACY:.0%})")
    return 0 if final >= TARGET_ACCURACY else 1


if __name__ == "__main__":
    sys.exit(main())
