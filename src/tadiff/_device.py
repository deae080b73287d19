"""``tadiff.device``: torch's device objects, for device-agnostic programs.

tadiff's engine computes with NumPy on the CPU, so ``"cpu"`` is its one device. Programs written
for torch pass devices around (``torch.zeros(3, device=x.device)``, ``model.to(device)``); those
calls work unchanged here, and asking for any other device (``"cuda"``, ``"mps"``) raises a
:class:`~tadiff.errors.DeviceError` that says where GPUs are available: tadiff's ops run on torch
tensors, on any device, through :mod:`tadiff.torch`.

Example:
    >>> import tadiff as td
    >>> td.zeros(2, device="cpu").device
    device(type='cpu')
    >>> td.device("cuda:1")
    device(type='cuda', index=1)
"""

from __future__ import annotations

from typing import Any

from tadiff.errors import DeviceError, InputError

# torch's device types (torch.device rejects other names with this list in its message)
DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve",
          "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
          "privateuseone")  # fmt: skip


class device:
    """A device: a type (``"cpu"``, ``"cuda"``, ...) and an optional index.

    Accepts what ``torch.device`` accepts: ``device("cuda:0")``, ``device("cuda", 0)``, another
    device, or (for a torch device) anything with ``type`` and ``index``. Constructing any device
    works; tadiff *computes* only on ``"cpu"``. Compares equal to devices of the same type and
    index, and (unlike torch) to its string (``td.zeros(1).device == "cpu"``).

    Example:
        >>> device("cpu") == device("cpu:0"), str(device("cuda", 1))
        (False, 'cuda:1')
    """

    __slots__ = ("index", "type")

    def __init__(self, type: Any, index: int | None = None):
        if not isinstance(type, str) and hasattr(type, "type"):  # a device, or a torch.device
            type, index = type.type, type.index
        elif not isinstance(type, str):
            raise InputError(f"device(): expected a string or a device, got {type!r}")
        name, _, number = type.partition(":")
        if name not in DEVICE_TYPES:
            raise InputError(
                f"Expected one of {', '.join(DEVICE_TYPES)} device type at start of device string: "
                f"{type}"
            )
        if number:
            if index is not None or not number.isdigit():
                raise InputError(f"Invalid device string: '{type}'")
            index = int(number)
        if index is not None and (not isinstance(index, int) or index < 0):
            raise InputError(f"Device index must not be negative, got {index!r}")
        self.type = name
        self.index = index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except InputError:
                return False
        if isinstance(other, device):
            return (self.type, self.index) == (other.type, other.index)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (device, (self.type, self.index))


CPU = device("cpu")
"""The device of every tadiff Tensor."""


def check_device(where: Any, who: str) -> None:
    """Accept ``where`` (``None``, ``"cpu"``, ``"cpu:0"``, a cpu device) or raise.

    Args:
        where: the ``device=`` argument a function received.
        who: the function's name, for the message.

    Raises:
        DeviceError: for any device other than the CPU.
    """
    if where is None or where is CPU or where == "cpu":
        return
    if isinstance(where, int):  # torch reads a bare int as a CUDA ordinal
        where = device("cuda", where)
    wanted = device(where)
    if wanted.type == "cpu":
        return
    raise DeviceError(
        f"{who}: tadiff's engine computes with NumPy on the CPU and has no '{wanted}' device "
        "(Torch not compiled with CUDA enabled, in torch's words). Leave out device= or pass "
        "'cpu'; to run tadiff's ops on a GPU, call them on torch tensors through tadiff.torch."
    )
