"""Suite-wide setup.

Without a GPU the Triton kernels are tested in Triton's interpreter, which must be switched on
before triton is first imported (triton builds jitted helpers at import time). Several test
modules use triton, so it is switched on here, once, before any of them is collected.
"""

import os


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if not _cuda_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
