"""What a user installs: the licence, the type marker, the metadata, and a wheel that works.

The wheel test builds tadiff with ``python -m build``, installs the wheel into a fresh virtual
environment (NumPy and threadpoolctl come from the package index) and runs ``tadiff demo`` there,
outside this checkout: it catches a module or data file left out of the wheel.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

import tadiff

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_licence_file_matches_the_metadata():
    assert PYPROJECT["license"] == "MIT" and PYPROJECT["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_package_is_marked_as_typed():
    assert (Path(tadiff.__file__).parent / "py.typed").is_file()
    assert "Typing :: Typed" in PYPROJECT["classifiers"]


def test_numpy_floor_is_numpy_2():
    # tadiff uses NumPy 2's API (.mT, np.concat): the declared floor must say so
    numpy = [d for d in PYPROJECT["dependencies"] if d.startswith("numpy")]
    assert numpy == ["numpy>=2.0"]


def _has_build() -> bool:
    # "build.__main__": a bare build/ folder (setuptools' output) would pass for the package
    try:
        return importlib.util.find_spec("build.__main__") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _has_build(), reason="needs the `build` package (test extra)")
def test_the_wheel_installs_in_a_fresh_environment_and_runs_the_demo(tmp_path):
    dist = tmp_path / "dist"
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (wheel,) = dist.glob("tadiff-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tadiff/py.typed" in names and "tadiff/__main__.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    install = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if install.returncode != 0 and "No matching distribution" in install.stderr:
        pytest.skip(f"no package index to install NumPy from: {install.stderr[-300:]}")
    assert install.returncode == 0, install.stderr
    demo = subprocess.run(
        [str(bin_dir / "tadiff"), "demo"], capture_output=True, text=True, timeout=600,
        cwd=tmp_path,  # not this checkout: the installed wheel is what runs
    )  # fmt: skip
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "All self-checks passed." in demo.stdout
