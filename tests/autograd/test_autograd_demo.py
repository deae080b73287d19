from tadiff.autograd import demo


def test_demo_runs_and_its_self_checks_pass():
    lines = []
    assert demo.run(lines.append) is True
    text = "\n".join(lines)
    assert "((MulBackward0, 0), (AccumulateGrad, 0))" in text
    assert "((AccumulateGrad, 0), (None, 0))" in text
