"""Print index-notation IR as DSL text (which ``parse`` reads back) and as LaTeX.

Index expressions list variables in scope order (output indices, then sum indices from the
outside in), then sizes, then the constant: ``p - 2*t``, ``2*t + k``. Sum ranges print half-open
like the DSL: ``sum[t=max(0, ceil((p - 2)/2)):min(dy.shape[2], floor(p/2) + 1)]``.

Example:
    >>> from tadiff.index.parse import parse
    >>> d = parse("y[i] = sum[k=0:3](exp(x[i, 2*k]))")
    >>> function_text(d.out_name, d.out_vars, d.body)
    'y[i] = sum[k=0:3](exp(x[i, 2*k]))'
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from math import lcm

from tadiff.index.expr import (
    CHAIN,
    Access,
    Affine,
    Cond,
    Const,
    Index,
    Node,
    Op,
    Sum,
    Where,
    is_param,
    unshadow,
)

__all__ = ["affine_text", "expr_latex", "expr_text", "function_latex", "function_text"]

_INFIX = {"add": (" + ", 1), "sub": (" - ", 1), "mul": (" * ", 2), "div": (" / ", 2)}
_PRECEDENCE = {"add": 1, "sub": 1, "mul": 2, "div": 2, "neg": 3, "pow": 4}


def _number(value: Fraction) -> str:
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )


def _ordered_terms(expr: Affine, order: Sequence[str]) -> list[tuple[str, Fraction]]:
    rank = {name: k for k, name in enumerate(order)}
    return sorted(
        expr.items(), key=lambda item: (rank.get(item[0], len(rank) + is_param(item[0])), item[0])
    )


def _integral_text(expr: Affine, order: Sequence[str]) -> str:
    parts: list[str] = []
    for name, coeff in _ordered_terms(expr, order):
        magnitude = abs(coeff)
        term = name if magnitude == 1 else f"{_number(magnitude)}*{name}"
        parts.append(_signed(term, coeff < 0, not parts))
    if expr.const > 0 and parts and parts[0].startswith("-"):
        # 5 - p rather than -p + 5
        return _number(expr.const) + " - " + parts[0][1:] + "".join(parts[1:])
    if expr.const or not parts:
        parts.append(_signed(_number(abs(expr.const)), expr.const < 0, not parts))
    return "".join(parts)


def _signed(term: str, negative: bool, first: bool) -> str:
    if first:
        return f"-{term}" if negative else term
    return f" - {term}" if negative else f" + {term}"


def affine_text(expr: Affine, order: Sequence[str] = ()) -> str:
    """An index expression as text; fractions over a common denominator: ``(p - 3)/2``.

    Example:
        >>> affine_text(Affine({"t": 2, "k": 1}), ["t", "k"])
        '2*t + k'
    """
    den = lcm(*(c.denominator for _, c in expr.items()), expr.const.denominator)
    if den == 1:
        return _integral_text(expr, order)
    numerator = _integral_text(expr * den, order)
    simple = len(list(expr.items())) + (expr.const != 0) == 1 and " " not in numerator
    return f"{numerator}/{den}" if simple else f"({numerator})/{den}"


def _lower_text(bounds: tuple[Affine, ...], order: Sequence[str]) -> str:
    items = [
        affine_text(b, order) if b.is_integral else f"ceil({affine_text(b, order)})" for b in bounds
    ]
    return items[0] if len(items) == 1 else f"max({', '.join(items)})"


def _upper_text(bounds: tuple[Affine, ...], order: Sequence[str]) -> str:
    items = [
        affine_text(b + 1, order) if b.is_integral else f"floor({affine_text(b, order)}) + 1"
        for b in bounds
    ]
    return items[0] if len(items) == 1 else f"min({', '.join(items)})"


def _cond_parts(cond: Cond, fmt) -> str:
    # split into "positive side OP negative side" so conditions read like i == j, p <= n - 1
    expr = cond.expr
    positive = Affine({k: v for k, v in expr.items() if v > 0}, max(expr.const, 0))
    negative = positive - expr
    op = {"eq": "==", "ne": "!=", "ge": ">="}[cond.kind]
    if cond.kind == "ge" and _has_index(negative) and not _has_index(positive):
        return f"{fmt(negative)} <= {fmt(positive)}"
    return f"{fmt(positive)} {op} {fmt(negative)}"


def _cond_text(cond: Cond, order: Sequence[str]) -> str:
    if cond.kind == "mod":
        text = affine_text(cond.expr, order)
        if " " in text:
            text = f"({text})"
        return f"{text} % {cond.modulus} == 0"
    return _cond_parts(cond, lambda a: affine_text(a, order))


def _has_index(expr: Affine) -> bool:
    return any(not is_param(v) for v in expr.variables)


def _const_text(value: float) -> str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _text(node: Node, order: list[str]) -> tuple[str, int]:
    """(text, precedence) of ``node``; atoms have precedence 5."""
    if isinstance(node, Const):
        return _const_text(node.value), (5 if node.value >= 0 else 3)
    if isinstance(node, Index):
        text = affine_text(node.expr, order)
        items = list(node.expr.items())
        plain = (not items and node.expr.const >= 0) or (
            len(items) == 1 and items[0][1] == 1 and node.expr.const == 0
        )
        return (text, 5) if plain else (f"({text})", 5)
    if isinstance(node, Access):
        return f"{node.name}[{', '.join(affine_text(a, order) for a in node.indices)}]", 5
    if isinstance(node, Op):
        if node.op in _INFIX:
            return _chain_text(node, order), _INFIX[node.op][1]
        if node.op == "neg":
            return f"-{_wrap(node.args[0], order, 4)}", 3
        if node.op == "pow":
            return f"{_wrap(node.args[0], order, 5)}**{_wrap(node.args[1], order, 5)}", 4
        return f"{node.op}({', '.join(_text(a, order)[0] for a in node.args)})", 5
    if isinstance(node, Where):
        conds = " and ".join(_cond_text(c, order) for c in node.conds)
        return f"where({conds}, {_text(node.then, order)[0]}, {_text(node.other, order)[0]})", 5
    if isinstance(node, Sum):
        specs = []
        inner = order
        while isinstance(node, Sum):
            if node.lower:
                specs.append(
                    f"{node.var}={_lower_text(node.lower, inner)}:{_upper_text(node.upper, inner)}"
                )
            else:
                specs.append(node.var)
            inner = [*inner, node.var]
            node = node.body
        return f"sum[{', '.join(specs)}]({_text(node, inner)[0]})", 5
    raise TypeError(f"not an index-notation node: {node!r}")  # pragma: no cover


def _chain_text(node: Op, order: list[str]) -> str:
    """``a + b - c ...``: the left-deep chain of operators of one precedence under ``node``.

    A right operand of equal precedence keeps its parentheses: ``a - (b + c)`` for the value,
    ``a + (b + c)`` for the grouping (rounding, and reading back the same tree). The parser
    groups a chain of up to :data:`~tadiff.index.expr.CHAIN` terms left to right and a longer
    one as a balanced tree, so a longer chain prints its first part as a parenthesized group
    (``(t1 * ... * t_k) * ...``, 32 terms per level): it reads back as the same tree.
    """
    prec = _INFIX[node.op][1]
    spine = [node]  # the chain's operators, top first (a loop: chains can be long)
    while (
        (left := spine[-1].args[0])
        and isinstance(left, Op)
        and _INFIX.get(left.op, ("", 0))[1] == prec
    ):
        spine.append(left)
    if len(spine) + 1 > CHAIN:
        parts = [f"({_text(spine[CHAIN - 1], order)[0]})"]
        spine = spine[: CHAIN - 1]
    else:
        text, inner = _text(spine[-1].args[0], order)
        parts = [text if inner >= prec else f"({text})"]
    for op in reversed(spine):  # a loop, not a generator: one Python frame per level of nesting
        text, inner = _text(op.args[1], order)
        parts.append(_INFIX[op.op][0] + (text if inner > prec else f"({text})"))
    return "".join(parts)


def _wrap(node: Node, order: list[str], min_prec: int) -> str:
    text, prec = _text(node, order)
    return text if prec >= min_prec else f"({text})"


def expr_text(node: Node, order: Sequence[str] = ()) -> str:
    """A scalar expression as DSL text; ``order`` lists the names bound around it (output
    indices, then tensor names): a sum index repeating one of them is printed renamed
    (:func:`~tadiff.index.expr.unshadow`), so the text binds each name once."""
    return _text(unshadow(node, order, order), list(order))[0]


def function_text(
    out_name: str,
    out_vars: Sequence[str],
    body: Node,
    sizes: Sequence[Affine | int | None] | None = (),
    args: Sequence[str] = (),
) -> str:
    """A whole definition ``out[vars] = body`` as DSL text (parseable by ``parse``).

    ``sizes`` gives explicit output sizes to print as ``i:4`` or ``p:x.shape[0]`` (None:
    inferred, not printed). ``args`` are tensor names a renamed index must not take.
    """
    sizes = list(sizes or ()) or [None] * len(out_vars)
    head = ", ".join(
        v if n is None else f"{v}:{n if isinstance(n, int) else affine_text(n)}"
        for v, n in zip(out_vars, sizes, strict=True)
    )
    # tensor names follow the indices in the scope: a renamed sum index never takes one
    return f"{out_name}[{head}] = {expr_text(body, [*out_vars, *args])}"


# -- LaTeX --------------------------------------------------------------------------------------


def _latex_name(name: str) -> str:
    if "." in name:  # x.shape[2] -> N^{x}_{2}
        arg, dim = name.split(".shape[")
        return f"N^{{{arg}}}_{{{dim.rstrip(']')}}}"
    return name if len(name) == 1 else f"\\mathit{{{name}}}"


def _affine_latex(expr: Affine, order: Sequence[str]) -> str:
    den = lcm(*(c.denominator for _, c in expr.items()), expr.const.denominator)
    parts: list[str] = []
    for name, coeff in _ordered_terms(expr * den, order):
        magnitude = abs(coeff)
        term = _latex_name(name) if magnitude == 1 else f"{_number(magnitude)} {_latex_name(name)}"
        parts.append(_signed(term, coeff < 0, not parts))
    const = expr.const * den
    if const or not parts:
        parts.append(_signed(_number(abs(const)), const < 0, not parts))
    text = "".join(parts)
    return text if den == 1 else f"\\frac{{{text}}}{{{den}}}"


def _bound_latex(bounds: tuple[Affine, ...], order: Sequence[str], lower: bool) -> str:
    items = []
    for b in bounds:
        text = _affine_latex(b, order)
        if not b.is_integral:
            text = (
                f"\\left\\lceil {text} \\right\\rceil"
                if lower
                else f"\\left\\lfloor {text} \\right\\rfloor"
            )
        items.append(text)
    if len(items) == 1:
        return items[0]
    return f"\\{'max' if lower else 'min'}\\left({', '.join(items)}\\right)"


def _cond_latex(cond: Cond, order: Sequence[str]) -> str:
    if cond.kind == "mod":
        return f"{cond.modulus} \\mid {_affine_latex(cond.expr, order)}"
    text = _cond_parts(cond, lambda a: _affine_latex(a, order))
    for a, b in (("==", "="), ("!=", "\\neq"), (">=", "\\geq"), ("<=", "\\leq")):
        text = text.replace(a, b)
    return text


def _latex(node: Node, order: list[str]) -> tuple[str, int]:
    if isinstance(node, Const):
        return _const_text(node.value), (5 if node.value >= 0 else 3)
    if isinstance(node, Index):
        return f"({_affine_latex(node.expr, order)})", 5
    if isinstance(node, Access):
        indices = ", ".join(_affine_latex(a, order) for a in node.indices)
        return f"{_latex_name(node.name)}_{{{indices}}}", 5
    if isinstance(node, Op):
        args = node.args
        if node.op in ("add", "sub"):
            right = _latex_wrap(args[1], order, 2 if node.op == "sub" else 1)
            return f"{_latex_wrap(args[0], order, 1)} {'+' if node.op == 'add' else '-'} {right}", 1
        if node.op == "mul":
            return f"{_latex_wrap(args[0], order, 2)} \\, {_latex_wrap(args[1], order, 2)}", 2
        if node.op == "div":
            return f"\\frac{{{_latex(args[0], order)[0]}}}{{{_latex(args[1], order)[0]}}}", 5
        if node.op == "neg":
            return f"-{_latex_wrap(args[0], order, 4)}", 3
        if node.op == "pow":
            return f"{{{_latex_wrap(args[0], order, 5)}}}^{{{_latex(args[1], order)[0]}}}", 4
        name = {
            "exp": "\\exp",
            "log": "\\log",
            "sin": "\\sin",
            "cos": "\\cos",
            "tan": "\\tan",
            "tanh": "\\tanh",
            "maximum": "\\max",
            "minimum": "\\min",
        }.get(node.op, f"\\operatorname{{{node.op}}}")
        if node.op == "sqrt":
            return f"\\sqrt{{{_latex(args[0], order)[0]}}}", 5
        if node.op == "abs":
            return f"\\left|{_latex(args[0], order)[0]}\\right|", 5
        return f"{name}\\left({', '.join(_latex(a, order)[0] for a in args)}\\right)", 5
    if isinstance(node, Where):
        conds = ", ".join(_cond_latex(c, order) for c in node.conds)
        then = _latex(node.then, order)[0]
        if isinstance(node.other, Const) and node.other.value == 0.0:
            return f"\\left[{conds}\\right] {_latex_wrap(node.then, order, 2)}", 2
        other = _latex(node.other, order)[0]
        return (
            f"\\begin{{cases}} {then} & {conds} \\\\ {other} & \\text{{otherwise}} \\end{{cases}}",
            5,
        )
    if isinstance(node, Sum):
        inner = [*order, node.var]
        if node.lower:
            lo = _bound_latex(node.lower, order, True)
            hi = _bound_latex(node.upper, order, False)
            head = f"\\sum_{{{_latex_name(node.var)}={lo}}}^{{{hi}}}"
        else:
            head = f"\\sum_{{{_latex_name(node.var)}}}"
        return f"{head} {_latex_wrap(node.body, inner, 2)}", 2
    raise TypeError(f"not an index-notation node: {node!r}")  # pragma: no cover


def _latex_wrap(node: Node, order: list[str], min_prec: int) -> str:
    text, prec = _latex(node, order)
    return text if prec >= min_prec else f"\\left({text}\\right)"


def expr_latex(node: Node, order: Sequence[str] = ()) -> str:
    """A scalar expression as LaTeX (sums with inclusive bounds, Iverson brackets for deltas);
    sum indices renamed as in :func:`expr_text`."""
    return _latex(unshadow(node, order, order), list(order))[0]


def function_latex(
    out_name: str, out_vars: Sequence[str], body: Node, args: Sequence[str] = ()
) -> str:
    """A whole definition as LaTeX: ``y_{i, j} = \\sum_{k=0}^{...} ...``; a sum index that
    repeats a name bound around it is renamed, as in the text form."""
    order = [*out_vars, *args]
    return f"{_latex_name(out_name)}_{{{', '.join(out_vars)}}} = {expr_latex(body, order)}"
