"""examples/gaussian_process.py keeps its promises: gradient checks pass, noise and fit found."""

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gaussian_process.py"


def test_gaussian_process_example_fits_and_checks_its_gradient(capsys):
    spec = importlib.util.spec_from_file_location("gaussian_process", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--steps", "120"]) == 0
    out = capsys.readouterr().out
    assert "vs central differences" in out and "all checks passed" in out
    noise = float(out.split("learned noise σ = ")[1].split(" ")[0])
    assert abs(noise - module.TRUE_NOISE) < 0.05
