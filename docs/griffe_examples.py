"""A griffe extension for the API reference, which renders tadiff's docstrings as Markdown:

* the docstrings head their doctests ``Example:``, which Google style reads as an admonition of
  Markdown text; the heading becomes ``Examples:``, so the examples render as code;
* reStructuredText roles (``:func:`name```, ``:class:`~a.b```) become code spans.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:[ \t]*$", re.M)
_ROLE = re.compile(r":(?:func|class|meth|mod|data|attr|exc|obj):`~?([^`]+)`")


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = _HEADING.sub(r"\1Examples:", obj.docstring.value)
            obj.docstring.value = _ROLE.sub(r"`\1`", text)
