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


def test_python_dash_m_tadiff_is_the_command_line():
    result = subprocess.run(
        [sys.executable, "-m", "tadiff", "--version"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"tadiff {tadiff.__version__}"


def test_demo_runs_and_all_self_checks_pass():
    result = subprocess.run(
        [sys.executable, "-m", "tadiff", "demo"], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "All self-checks passed." in result.stdout


def test_derive_prints_gradients_and_checks_them(capsys):
    matmul = "y[i,j] = sum[k](x[i,k] * w[k,j])"
    status = main(["derive", matmul, "--shape", "x=2x3", "--shape", "w=3x4", "--check"])
    out = capsys.readouterr().out
    assert status == 0
    assert "dx[i, k] = sum[j=0:w.shape[1]](dy[i, j] * w[k, j])" in out
    assert out.count("central difference") == 2


def test_derive_reports_a_bad_definition_without_traceback(capsys):
    assert main(["derive", "y[i] = x[i*i]"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tadiff derive: ")
    assert "not affine" in err
    assert "Traceback" not in err
