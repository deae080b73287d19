import subprocess
import sys

import tadiff
from tadiff.cli import main


def test_version_flag_prints_package_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert capsys.readouterr().out.strip() == f"tadiff {tadiff.__version__}"


def test_demo_runs_and_all_self_checks_pass():
    result = subprocess.run(
        [sys.executable, "-m", "tadiff.cli", "demo"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All self-checks passed." in result.stdout
