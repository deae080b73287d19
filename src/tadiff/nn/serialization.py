"""``nn.save`` and ``nn.load``: the checkpoint functions :func:`tadiff.save` and
:func:`tadiff.load` under the names earlier versions of tadiff gave them (a Module is saved as its
``state_dict``; plain ``.npz`` archives of arrays still load)."""

from tadiff.serialization import load, save

__all__ = ["load", "save"]
