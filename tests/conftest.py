"""Suite-wide setup.

Without a GPU the Triton kernels are tested in Triton's interpreter, which must be switched on
before triton is first imported (triton builds jitted helpers at import time). Several test
modules use triton, so it is switched on here, once, before any of them is collected.
"""

import os

import pytest


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, lowered by a cgroup's CPU quota (a
    container limited to 2 CPUs of a 64-CPU host still sees 64 in its mask)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cpus or 1)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent without it
def pytest_xdist_auto_num_workers(config):
    """``pytest -n auto``: one worker per usable CPU, at most 8 (each worker imports torch and
    Numba, about 0.7 GB). pytest-xdist's own count is the host's physical cores where psutil is
    installed, which in a container can be many more than the CPUs it may use, or half of them
    on a machine whose CPUs are hyperthreads."""
    return min(_usable_cpus(), 8)
