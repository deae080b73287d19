"""Every Python block of the README and the guides in docs/ runs as written, in order, one
namespace per page (see tests/docs_blocks.py for fragments and optional dependencies).

docs/torch.md runs in tests/torch/test_interop_docs.py, which also checks what its examples
compute; the docstrings' examples run in tests/test_docstring_examples.py.
"""

from __future__ import annotations

import pytest

from docs_blocks import ROOT, python_blocks, run_page

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKED_ELSEWHERE = {"torch.md"}


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # anomaly's NaN
@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in CHECKED_ELSEWHERE],
                         ids=lambda p: p.name)  # fmt: skip
def test_page_code_blocks_run_in_order(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    _, stopped = run_page(page)
    if stopped:
        pytest.skip(stopped)


def test_every_page_with_code_has_runnable_blocks():
    for page in PAGES:
        blocks = python_blocks(page)
        assert not blocks or any(not b.fragment for b in blocks), f"{page.name}: only fragments"
