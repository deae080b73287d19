"""The examples of docs/torch.md and the docstrings of tadiff.torch's interop modules run."""

import doctest
import importlib
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared page runner
from docs_blocks import ROOT, python_blocks, run_page

torch = pytest.importorskip("torch")

# tadiff.torch.define / .function name the functions, which shadow their modules: import by path
MODULES = ["tadiff.torch", "tadiff.torch.convert", "tadiff.torch.define", "tadiff.torch.function"]
MODULES += ["tadiff.torch.library"]

DOC = ROOT / "docs" / "torch.md"


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    torch._dynamo.reset()  # drop compiled frames while the doctest globals they refer to live
    assert result.attempted > 0 and result.failed == 0


def test_docs_code_blocks_run_in_order(tmp_path, monkeypatch):
    # the runner of tests/test_docs_examples.py, which leaves this page to this test
    assert len([b for b in python_blocks(DOC) if not b.fragment]) >= 4
    monkeypatch.chdir(tmp_path)
    namespace, stopped = run_page(DOC)
    if stopped:
        pytest.skip(stopped)
    # the training example trained, the conversion shared memory, the conv has its shape
    assert float(namespace["loss"]) < 1.0
    assert float(namespace["a"].data[0, 0]) == 1.0
    assert tuple(namespace["y"].shape) == (8, 16, 30)
