"""tadiff: differentiate tensor programs.

Public names are re-exported here as their layers land. Never bind a module-level ``torch`` global
in this file: importing ``tadiff.torch`` binds that name to the subpackage.
"""

from tadiff import errors

__version__ = "0.1.0"

__all__ = ["__version__", "errors"]
