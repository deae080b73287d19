"""Pictures of the backward graph: DOT text, rendered to SVG or PNG by graphviz's ``dot``.

The graph drawn is the one ``backward`` walks: starting from a tensor's ``grad_fn``, each backward
node's ``next_functions`` lead to the nodes of its inputs, ending at one ``AccumulateGrad`` per
leaf that requires grad. Edges point the way the forward computation ran (input -> op -> output);
gradients flow against them.

- backward nodes (grey boxes): the node's name, e.g. ``MulBackward0``;
- ``AccumulateGrad`` (blue): the leaf's name when given, its dtype and shape;
- saved tensors (orange, dashed edge to the node that saved them): what the backward formula will
  read, with dtype and shape — constants such as ``b`` in ``e = (a*b)*d`` appear only here;
- the output (green): dtype and shape;
- with ``show_values=True``, leaves, saved tensors and the output also show their values.

Example:
    >>> import tadiff as td
    >>> a = td.tensor(2.0, requires_grad=True); b = td.tensor(3.0)
    >>> d = td.tensor(4.0, requires_grad=True)
    >>> e = (a * b) * d
    >>> print(to_dot(e, names={"a": a, "b": b, "d": d, "e": e}))  # doctest: +SKIP
    >>> render(e, "graph.svg", names={"a": a, "d": d})            # doctest: +SKIP
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tadiff.autograd.tensor import Tensor
from tadiff.errors import DTypeError, InputError, MissingProgramError

_FORMATS = ("svg", "png", "pdf", "dot")
_INSTALL_HINT = (
    "install graphviz: `apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
    "(macOS), `conda install graphviz`, or see https://graphviz.org/download/ ; "
    "tadiff.viz.to_dot() gives the DOT text without it"
)


def _describe(array: np.ndarray) -> str:
    return f"{array.dtype} {tuple(array.shape)}"


def _value_text(array: np.ndarray, max_elements: int) -> str:
    if array.size > max_elements:
        flat = ", ".join(f"{v:.4g}" for v in array.ravel()[:max_elements])
        return f"[{flat}, ...]"
    return np.array2string(array, precision=4, separator=", ", threshold=max_elements)


def _quote(text: str) -> str:
    """A DOT string literal: escape quotes and backslashes, keep our ``\\n`` line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n") + '"'


def _saved_entries(node: Any, name: str) -> list[tuple[int | None, np.ndarray | None, str]]:
    """(identity of the saved tensor or None, its array, a default label) per saved value."""
    saved = getattr(node, "_saved", ())
    if isinstance(saved, str):  # released after backward without retain_graph
        return [(None, None, "(saved tensors freed by backward)")]
    entries = []
    for value in saved or ():
        if isinstance(value, Tensor):
            entries.append((id(value), value.data, ""))
        elif isinstance(getattr(value, "data", None), np.ndarray):  # the op's own output
            entries.append((None, value.data, f"output of {name}"))
        elif isinstance(value, np.ndarray):
            entries.append((None, value, ""))
    return entries


def _roots(tensors: Tensor | Sequence[Tensor]) -> list[Tensor]:
    if isinstance(tensors, Tensor):
        return [tensors]
    if not isinstance(tensors, (list, tuple)):
        raise DTypeError(
            f"to_dot: expected a Tensor or a list of Tensors, got {type(tensors).__name__}"
        )
    roots = list(tensors)
    for i, t in enumerate(roots):
        if not isinstance(t, Tensor):
            raise DTypeError(f"to_dot: output {i} is a {type(t).__name__}, expected a Tensor")
    if not roots:
        raise InputError("to_dot: no output tensors given")
    return roots


def to_dot(
    tensors: Tensor | Sequence[Tensor],
    names: Mapping[str, Tensor] | None = None,
    *,
    show_saved: bool = True,
    show_values: bool = False,
    max_elements: int = 6,
) -> str:
    """The backward graph of ``tensors`` as Graphviz DOT text.

    Args:
        tensors: an output Tensor, or several (their graphs are drawn together).
        names: optional ``{name: tensor}`` labels, e.g. ``dict(model.named_parameters())``; a
            name given for an output, a leaf or a saved tensor shows on its node.
        show_saved: draw the tensors each backward node saved for its formula.
        show_values: print values on leaves, saved tensors and outputs (arrays with more than
            ``max_elements`` elements are cut short).
        max_elements: how many elements of a value to print.

    Returns:
        The DOT source, deterministic for a given graph (node ids in visiting order).

    Example:
        >>> import tadiff as td
        >>> x = td.tensor([1.0, 2.0], requires_grad=True)
        >>> "AccumulateGrad" in to_dot((x * x).sum())
        True
    """
    roots = _roots(tensors)
    label_of = {id(t): name for name, t in (names or {}).items()}
    label_of_data = {id(t.data): name for name, t in (names or {}).items()}

    def value_lines(array: np.ndarray, name: str | None) -> list[str]:
        lines = [name] if name else []
        lines.append(_describe(array))
        if show_values:
            lines.append(_value_text(array, max_elements))
        return lines

    lines = [
        "digraph backward {",
        '  graph [rankdir=TB, fontname="Helvetica"];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    ids: dict[int, str] = {}
    saved_ids: dict[int, str] = {}

    def node_id(node: Any) -> str:
        key = id(node)
        if key not in ids:
            ids[key] = f"n{len(ids)}"
        return ids[key]

    stack = []
    for i, t in enumerate(roots):
        out_id = f"out{i}"
        text = value_lines(t.data, label_of.get(id(t), "output"))
        if t.grad_fn is None:
            text.append("leaf (no backward graph)")
        label = "\n".join(text)
        lines.append(f"  {out_id} [label={_quote(label)}, fillcolor=darkolivegreen1];")
        start = t.grad_fn
        if start is not None:
            lines.append(f"  {node_id(start)} -> {out_id};")
            stack.append(start)

    visited: set[int] = set()
    while stack:  # iterative: deep graphs must not hit the recursion limit
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        nid = node_id(node)
        name = node.name() if hasattr(node, "name") else type(node).__name__
        variable = getattr(node, "variable", None)
        if isinstance(variable, Tensor):
            label = "\n".join([*value_lines(variable.data, label_of.get(id(variable))), name])
            lines.append(f"  {nid} [label={_quote(label)}, fillcolor=lightblue];")
        else:
            lines.append(f"  {nid} [label={_quote(name)}, fillcolor=lightgrey];")
        if show_saved:
            for position, (key, array, note) in enumerate(_saved_entries(node, name)):
                # One box per array: an op's output saved by its own node (``tanh``) and the same
                # tensor saved as the input of the next op are drawn once.
                shared = id(array) if array is not None else None
                if shared is not None and shared in saved_ids:
                    sid = saved_ids[shared]
                else:
                    sid = f"s{len(saved_ids)}_{nid}"
                    if shared is not None:
                        saved_ids[shared] = sid
                    if array is None:
                        text = [note]
                    else:
                        label_name = label_of.get(key) or label_of_data.get(id(array)) or note
                        text = value_lines(array, label_name)
                        where = -2 if show_values else -1
                        text[where] = "saved " + text[where]
                    label = "\n".join(text)
                    lines.append(f"  {sid} [label={_quote(label)}, fillcolor=orange, shape=box];")
                lines.append(
                    f'  {sid} -> {nid} [style=dashed, arrowhead=none, label="{position}"];'
                )
        producers = getattr(node, "next_functions", ())
        for producer, output_nr in producers:
            if producer is None:
                continue
            attrs = ""
            if getattr(producer, "_n_outputs", 1) != 1:
                attrs = f' [label="output {output_nr}"]'
            lines.append(f"  {node_id(producer)} -> {nid}{attrs};")
            stack.append(producer)
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_available() -> bool:
    """Whether graphviz's ``dot`` program is on ``PATH`` (needed by :func:`render`)."""
    return shutil.which("dot") is not None


def render(
    graph: Tensor | Sequence[Tensor] | str,
    path: str | Path,
    *,
    format: str | None = None,
    **to_dot_options: Any,
) -> Path:
    """Draw a backward graph to a file with graphviz's ``dot``.

    Args:
        graph: an output Tensor (or several), or DOT text from :func:`to_dot`.
        path: the file to write; its suffix picks the format when ``format`` is None.
        format: ``"svg"``, ``"png"``, ``"pdf"`` or ``"dot"`` (the text itself; needs no graphviz).
        **to_dot_options: passed to :func:`to_dot` (``names``, ``show_values``, ...).

    Returns:
        The path written.

    Raises:
        MissingProgramError: graphviz's ``dot`` is not installed (the message says how to get it).
        InputError: unknown format, or ``dot`` failed (its message is included).

    Example:
        >>> render(loss, "loss_graph.svg", names=dict(model.named_parameters()))  # doctest: +SKIP
    """
    path = Path(path)
    fmt = (format or path.suffix.lstrip(".") or "svg").lower()
    if fmt not in _FORMATS:
        raise InputError(f"render: unknown format {fmt!r} for {path}; expected one of {_FORMATS}")
    source = graph if isinstance(graph, str) else to_dot(graph, **to_dot_options)
    if fmt == "dot":
        path.write_text(source)
        return path
    program = shutil.which("dot")
    if program is None:
        raise MissingProgramError("drawing a graph picture", "dot", _INSTALL_HINT)
    result = subprocess.run(
        [program, f"-T{fmt}", "-o", str(path)], input=source.encode(), capture_output=True
    )
    if result.returncode != 0:
        raise InputError(
            f"render: graphviz dot failed on {path} (exit {result.returncode}): "
            f"{result.stderr.decode(errors='replace').strip()}"
        )
    return path


def render_or_dot(
    graph: Tensor | Sequence[Tensor] | str, path: str | Path, **to_dot_options: Any
) -> tuple[Path, str | None]:
    """:func:`render`, or where Graphviz's ``dot`` is missing, the DOT text (which needs
    nothing) written next to ``path`` with the suffix ``.dot``: what ``tadiff demo`` and the
    examples do, so that a missing system package never stops them.

    Returns:
        ``(path written, note)``: the note is None when the picture was drawn, else a sentence
        saying that the DOT text was written instead and how to install Graphviz.

    Example:
        >>> import tempfile, pathlib, tadiff as td
        >>> x = td.tensor([1.0, 2.0], requires_grad=True)
        >>> folder = pathlib.Path(tempfile.mkdtemp())
        >>> written, note = render_or_dot((x * x).sum(), folder / "graph.svg")
        >>> written.suffix == (".svg" if dot_available() else ".dot")
        True
    """
    path = Path(path)
    if dot_available() or path.suffix.lower() == ".dot":
        return render(graph, path, **to_dot_options), None
    written = render(graph, path.with_suffix(".dot"), **to_dot_options)
    hint = _INSTALL_HINT.split(" ;")[0]
    return written, f"graphviz `dot` not found: wrote the DOT text instead of {path.name}; {hint}"
