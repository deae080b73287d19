"""The documentation site builds with warnings as errors, has an API page per public module and
search, and the benchmark figures it shows are those the plotting script draws.

Needs the ``docs`` extra (MkDocs, Material, mkdocstrings, matplotlib), which the README's test
command installs; without it these tests are skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import tadiff

ROOT = Path(__file__).resolve().parents[1]
MISSING = [m for m in ("mkdocs", "material", "mkdocstrings_handlers.python")
           if importlib.util.find_spec(m.split(".")[0]) is None]  # fmt: skip
needs_docs = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the docs extra is not installed (missing {MISSING}): pip install -e .[docs]",
)


def _public_modules() -> list[str]:
    names = [n for n in tadiff.__all__ if isinstance(getattr(tadiff, n), types.ModuleType)]
    return ["tadiff", *(f"tadiff.{n}" for n in names)]


def test_every_public_module_has_an_api_page_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    for module in _public_modules():
        page = ROOT / "docs" / "api" / f"{module}.md"
        assert page.is_file(), f"no API page for {module}"
        assert f"::: {module}\n" in page.read_text()
        assert f"api/{module}.md" in nav, f"{module}'s page is not in mkdocs.yml's nav"


@needs_docs
def test_the_site_builds_strictly_with_search(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "WARNING" not in result.stderr
    for module in _public_modules():
        assert (site / "api" / module / "index.html").is_file()
    page = (site / "api" / "tadiff.parallel" / "index.html").read_text()
    text = re.sub(r"<[^>]+>", "", page)  # the examples are highlighted span by span
    assert "set_num_threads" in text and ">>> td.get_num_threads()" in text.replace("&gt;", ">")
    index = json.loads((site / "search" / "search_index.json").read_text())
    assert any("set_rng_state" in doc["text"] or "set_rng_state" in doc["title"]
               for doc in index["docs"])  # fmt: skip
    assert (site / "images" / "training-under-load-1.png").is_file()


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib")
def test_the_benchmark_figures_are_drawn_from_the_recorded_tables(tmp_path):
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    shown = set(re.findall(r"!\[[^\]]*\]\(images/([\w.-]+\.png)\)", page))
    assert shown, "benchmarks.md shows no figure"
    for name in shown:
        assert (ROOT / "docs" / "images" / name).is_file(), name
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "plot_figures.py"), "--out", str(tmp_path),
         "--quiet"],
        check=True, timeout=300,
    )  # fmt: skip
    assert {p.name for p in tmp_path.glob("*.png")} == shown


def test_no_code_fence_carries_text_after_it():
    """A closing fence followed by prose (```` ``` Returned ...````) does not close the block:
    Markdown then renders every later heading of the page as code, with no anchor to link to."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = [
        f"{page.name}:{number}: {line.strip()}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if re.match(r"\s*```\s+\S", line)
    ]
    assert not bad, "fences with text after them:\n" + "\n".join(bad)
