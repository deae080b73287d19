"""The examples of docs/torch.md and the docstrings of tadiff.torch's interop modules run."""

import doctest
import importlib
import pathlib
import re

import pytest

torch = pytest.importorskip("torch")

# tadiff.torch.define / .function name the functions, which shadow their modules: import by path
MODULES = ["tadiff.torch", "tadiff.torch.convert", "tadiff.torch.define", "tadiff.torch.function"]
MODULES += ["tadiff.torch.library"]

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "torch.md"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    torch._dynamo.reset()  # drop compiled frames while the doctest globals they refer to live
    assert result.attempted > 0 and result.failed == 0


def test_docs_code_blocks_run_in_order():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 4
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    # the training example trained, the conversion shared memory, the conv has its shape
    assert float(namespace["loss"]) < 1.0
    assert float(namespace["a"].data[0, 0]) == 1.0
    assert tuple(namespace["y"].shape) == (8, 16, 30)
