"""Train a small MLP classifier on the two-moons data with tadiff.

The data are generated here (two interleaved half circles with Gaussian noise of standard
deviation 0.15, 1000 training and 500 test points), so nothing is downloaded. Each epoch shows
its progress over the mini-batches (``--quiet``: not), then prints the mean training loss and
the accuracy on the training and test sets. The model (2-64-64-2 MLP, ReLU, Adam with
cosine-annealed learning rate, 30 epochs) reaches at least 98% test accuracy: 99.6% with the
default seed, 98.2-99.6% over seeds 0-5. The script exits with status 1 if it stays below 98%.
``--picture`` draws the backward graph of one loss (SVG, PNG or PDF by the file's suffix) with
Graphviz's ``dot``; without Graphviz it writes the DOT text next to it and says how to install
Graphviz, as ``tadiff demo`` does.

Usage: ``python examples/mlp_moons.py [--epochs 30] [--seed 0] [--picture graph.svg] [--quiet]``
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import tadiff as td
import tadiff.nn as nn
import tadiff.optim as optim
from tadiff import viz
from tadiff.utils.progress import progress

TARGET_ACCURACY = 0.98
NOISE = 0.15


def make_moons(n: int, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points on two interleaved half circles (labels 0 and 1), plus Gaussian noise.

    Returns:
        points ``(n, 2)`` float32 and labels ``(n,)`` int64.
    """
    label = rng.integers(0, 2, n)
    angle = rng.uniform(0.0, np.pi, n)
    x = np.where(label == 0, np.cos(angle), 1.0 - np.cos(angle))
    y = np.where(label == 0, np.sin(angle), 0.5 - np.sin(angle))
    points = np.stack([x, y], axis=1) + rng.normal(0.0, noise, (n, 2))
    return points.astype(np.float32), label.astype(np.int64)


def accuracy(model: nn.Module, points: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of points whose largest logit is the true class."""
    with td.no_grad():
        logits = model(td.tensor(points)).numpy()
    return float((logits.argmax(axis=1) == labels).mean())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--picture", help="also draw the backward graph of one loss to this file")
    parser.add_argument("--quiet", action="store_true", help="show no progress while training")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    td.manual_seed(args.seed)
    train_x, train_y = make_moons(1000, NOISE, rng)
    test_x, test_y = make_moons(500, NOISE, rng)

    model = nn.Sequential(
        nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2)
    )
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    schedule = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    batches = -(-len(train_x) // args.batch_size)

    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        order = rng.permutation(len(train_x))
        total_loss = 0.0
        for b in progress(range(batches), desc=f"epoch {epoch:2d}", quiet=args.quiet):
            index = order[b * args.batch_size : (b + 1) * args.batch_size]
            logits = model(td.tensor(train_x[index]))
            loss = nn.functional.cross_entropy(logits, td.tensor(train_y[index]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(index)
        schedule.step()
        print(
            f"epoch {epoch:2d}  loss {total_loss / len(train_x):.4f}  "
            f"train acc {accuracy(model, train_x, train_y):.1%}  "
            f"test acc {accuracy(model, test_x, test_y):.1%}  "
            f"({time.perf_counter() - start:.2f} s)"
        )

    final = accuracy(model, test_x, test_y)
    print(f"\nfinal test accuracy {final:.1%} (target {TARGET_ACCURACY:.0%})")
    if args.picture:
        loss = nn.functional.cross_entropy(model(td.tensor(test_x[:8])), td.tensor(test_y[:8]))
        names = {**dict(model.named_parameters()), "loss": loss}
        written, note = viz.render_or_dot(loss, args.picture, names=names)
        print(note or f"backward graph written to {written}")
    return 0 if final >= TARGET_ACCURACY else 1


if __name__ == "__main__":
    sys.exit(main())
