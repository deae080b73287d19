"""The ``tadiff demo`` showcase derives, prints and checks a strided convolution's gradients,
and shows the schedule of a kernel sum's gradient with the engine op checked."""

from __future__ import annotations

from tadiff.index import demo


def test_demo_passes_and_prints_both_gradients():
    lines: list[str] = []
    assert demo.run(lines.append) is True
    text = "\n".join(lines)
    assert (
        "dx[b, c, p:x.shape[2]] = sum[o=0:w.shape[0], t=max(0, ceil((p - w.shape[2] + 1)/2))"
        in (text)
    )
    assert "dw[o, c, k:w.shape[2]] = sum[b=0:x.shape[0], t=0:dy.shape[2]]" in text
    assert text.count(" ok") == 3
    assert "loops i, j, q" in text  # the kernel sum's gradient accumulates rows inside j
