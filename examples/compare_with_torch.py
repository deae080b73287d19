"""Train the same model in tadiff and in PyTorch and show that the losses agree step by step.

Both runs start from the same weights (tadiff initializes them, PyTorch loads them through
``load_state_dict``), see the same mini-batches in the same order, and use the same optimizer
(Adam with weight decay and a step learning-rate schedule, or SGD with Nesterov momentum). The
script prints the loss of both per epoch with their difference, and at the end the largest
difference between the final parameters. It exits with status 1 if the runs disagree by more than
the tolerance for the dtype (float32: 1e-4 relative; float64: 1e-10).

Usage: ``python examples/compare_with_torch.py [--dtype float32|float64] [--optimizer adam|sgd]``
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tadiff as td
import tadiff.nn as nn
import tadiff.optim as optim
from tadiff.utils.progress import progress


def spirals(n: int, classes: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points per class on ``classes`` interleaved spiral arms, with a little noise."""
    radius = np.tile(np.linspace(0.05, 1.0, n), classes)
    label = np.repeat(np.arange(classes), n)
    angle = label * (2 * np.pi / classes) + radius * 4.0 + rng.normal(0, 0.15, n * classes)
    points = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    return points, label.astype(np.int64)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true", help="show no progress while training")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("this example needs PyTorch: pip install 'tadiff[torch]'")
        return 1
    dtype = np.dtype(args.dtype)
    tolerance = 1e-4 if dtype == np.float32 else 1e-10
    torch_dtype = torch.float32 if dtype == np.float32 else torch.float64

    rng = np.random.default_rng(args.seed)
    td.manual_seed(args.seed)
    points, labels = spirals(100, 3, rng)
    points = points.astype(dtype)

    ours = nn.Sequential(
        nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 3)
    ).to(dtype)
    tnn = torch.nn
    theirs = tnn.Sequential(
        tnn.Linear(2, 32), tnn.Tanh(), tnn.Linear(32, 32), tnn.GELU(), tnn.Linear(32, 3)
    ).to(torch_dtype)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})

    if args.optimizer == "adam":
        opt_ours = optim.Adam(ours.parameters(), lr=0.01, weight_decay=1e-4)
        opt_theirs = torch.optim.Adam(theirs.parameters(), lr=0.01, weight_decay=1e-4)
    else:
        opt_ours = optim.SGD(ours.parameters(), lr=0.1, momentum=0.9, nesterov=True)
        opt_theirs = torch.optim.SGD(theirs.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    sched_ours = optim.lr_scheduler.StepLR(opt_ours, step_size=4, gamma=0.5)
    sched_theirs = torch.optim.lr_scheduler.StepLR(opt_theirs, step_size=4, gamma=0.5)

    print(f"{args.dtype}, {args.optimizer}, {len(points)} points, batches of 30\n")
    print(f"{'epoch':>5}  {'tadiff loss':>14}  {'torch loss':>14}  {'|difference|':>12}")
    worst = 0.0
    for epoch in progress(range(1, args.epochs + 1), desc="epochs", quiet=args.quiet):
        order = rng.permutation(len(points))
        ours_total = theirs_total = 0.0
        for start in range(0, len(points), 30):
            index = order[start : start + 30]
            loss = nn.functional.cross_entropy(
                ours(td.tensor(points[index])), td.tensor(labels[index]), label_smoothing=0.05
            )
            opt_ours.zero_grad()
            loss.backward()
            opt_ours.step()
            reference = tnn.functional.cross_entropy(
                theirs(torch.from_numpy(points[index])),
                torch.from_numpy(labels[index]),
                label_smoothing=0.05,
            )
            opt_theirs.zero_grad()
            reference.backward()
            opt_theirs.step()
            ours_total += loss.item()
            theirs_total += reference.item()
            worst = max(worst, abs(loss.item() - reference.item()) / abs(reference.item()))
        sched_ours.step()
        sched_theirs.step()
        print(
            f"{epoch:5d}  {ours_total:14.8f}  {theirs_total:14.8f}  "
            f"{abs(ours_total - theirs_total):12.2e}"
        )

    params = {k: v.detach().numpy() for k, v in theirs.state_dict().items()}
    gap = max(float(np.max(np.abs(v - params[k]))) for k, v in ours.state_dict().items())
    print(f"\nlargest relative loss difference over all steps: {worst:.2e}")
    print(f"largest difference between final parameters:     {gap:.2e}")
    agree = worst <= tolerance
    print(f"agree within {tolerance:g}: {'yes' if agree else 'NO'}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
