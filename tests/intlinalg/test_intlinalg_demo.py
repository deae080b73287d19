"""The ``tadiff demo`` showcase of intlinalg: prints what the issue asks and self-checks."""

from __future__ import annotations

from tadiff.intlinalg import demo


def test_demo_prints_kernel_bounds_and_a_brute_force_checked_count():
    lines: list[str] = []
    assert demo.run(lines.append) is True
    text = "\n".join(lines)
    assert "kernel K (columns) = " in text
    assert "<= z0 <=" in text and "<= z1 <=" in text
    # By hand: x0 = 3 + 2(x1 + x2) <= 7 leaves x1 + x2 <= 2, i.e. 6 solutions in the box.
    assert "solutions in the box via the loop nest: 6" in text
    assert "brute force over all 512 box points: 6" in text
