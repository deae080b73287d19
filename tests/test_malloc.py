"""tadiff keeps freed large arrays' memory for the next ones (glibc's malloc thresholds, set at
import): measured by the page faults of repeated 2 MB allocations, in fresh processes."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc malloc tuning is Linux-only"
)

# an eager engine's pattern: a few large results made and freed together, again and again
_SCRIPT = """
import resource
import numpy as np
import tadiff
from tadiff import _malloc
def step():
    a = np.ones((1000, 25, 10))
    b = a * 2.0
    c = b + a
    return float(c[0, 0, 0])
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print(_malloc.TUNED, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _run(**env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "TADIFF_MALLOC"))}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], env={**clean, **env}, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    tuned, faults = out.stdout.split()
    return tuned == "True", int(faults)


def test_freed_large_arrays_are_reused_without_page_faults():
    tuned, faults = _run()
    if not tuned:
        pytest.skip("not glibc: no mallopt")
    untuned, faults_off = _run(TADIFF_MALLOC_TUNING="0")
    assert not untuned
    # three 2 MB arrays per step: about 1 500 faults per step when each is mapped afresh
    # (20 steps: ~30 000); reused heap memory faults once, in the first step
    assert faults_off > 5_000, faults_off
    assert faults < faults_off / 10, (faults, faults_off)


def test_the_users_own_malloc_settings_are_left_alone():
    tuned, _ = _run(MALLOC_TRIM_THRESHOLD_="1000000")
    assert not tuned
