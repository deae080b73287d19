"""Run the Python code blocks of a Markdown page in order, in one namespace, as a reader would.

A block written as an interactive session (``>>>`` prompts) runs as a doctest: its printed
results are checked too. A block whose info string is ``python fragment`` is part of a
sentence, not a program (a signature, an excerpt of tadiff's source): it is skipped,
deliberately. A block that needs an optional dependency (torch, numba, Graphviz's ``dot``)
that is missing stops the page there: the test is skipped with the reason, since later blocks
may use what that one defined.
"""

from __future__ import annotations

import doctest
import importlib.util
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_BLOCK = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```", re.S | re.M)
_NEEDS = {
    "torch": re.compile(r"\bimport torch\b|\bfrom torch\b|\btadiff\.torch\b|\btdt\."),
    "numba": re.compile(r"\bnumba\b"),
    "dot": re.compile(r"\bviz\.render\("),
}


@dataclass
class Block:
    line: int
    code: str
    fragment: bool

    def missing(self) -> str | None:
        """The first optional dependency this block needs that is not installed."""
        for name, pattern in _NEEDS.items():
            if pattern.search(self.code):
                present = shutil.which("dot") if name == "dot" else importlib.util.find_spec(name)
                if not present:
                    return name
        return None


def python_blocks(path: Path) -> list[Block]:
    """The page's ``python`` blocks, with the line each starts on."""
    text = path.read_text()
    blocks = []
    for match in _BLOCK.finditer(text):
        language, info, code = match.groups()
        if language != "python":
            continue
        line = text.count("\n", 0, match.start()) + 1
        blocks.append(Block(line, code, fragment="fragment" in info.split()))
    return blocks


def run_page(path: Path) -> tuple[dict, str | None]:
    """Execute the page's blocks in order in one namespace; returns it, and the reason the
    page stopped early (a missing dependency) or None."""
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    for block in python_blocks(path):
        if block.fragment:
            continue
        missing = block.missing()
        if missing is not None:
            return namespace, f"{path.name}:{block.line} needs {missing}, which is not installed"
        if block.code.lstrip().startswith(">>>"):
            _run_session(block, path, namespace)
        else:
            exec(compile(block.code, f"{path}:{block.line}", "exec"), namespace)
    return namespace, None


def _run_session(block: Block, path: Path, namespace: dict) -> None:
    name = f"{path.name}:{block.line}"
    test = doctest.DocTestParser().get_doctest(block.code, namespace, name, str(path), block.line)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    report: list[str] = []
    result = runner.run(test, out=report.append, clear_globs=False)
    if result.failed:
        raise AssertionError(f"{name}: {result.failed} failing example(s)\n" + "".join(report))
