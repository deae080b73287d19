"""Graph pictures: the DOT text of the seed's ``e = (a*b)*d`` graph, checked node by node and edge
by edge against the seed's description and against PyTorch's own graph; rendering with graphviz."""

import re
import shutil

import numpy as np
import pytest

import tadiff as td
from tadiff import viz
from tadiff.errors import DTypeError, InputError, MissingDependencyError, MissingProgramError

_NODE = re.compile(r'^\s*(\w+) \[label="((?:[^"\\]|\\.)*)"(.*)\];$')
_EDGE = re.compile(r"^\s*(\w+) -> (\w+)(?: \[(.*)\])?;$")


def _parse(dot):
    """(node id -> label lines, solid edges, dashed edges) from our DOT text."""
    nodes, solid, dashed = {}, [], []
    for line in dot.splitlines():
        if m := _NODE.match(line):
            nodes[m.group(1)] = m.group(2).split("\\n")
        elif m := _EDGE.match(line):
            attrs = m.group(3) or ""
            (dashed if "dashed" in attrs else solid).append((m.group(1), m.group(2), attrs))
    return nodes, solid, dashed


def _seed_graph():
    a = td.tensor(2.0, requires_grad=True)
    b = td.tensor(3.0)
    c = a * b
    d = td.tensor(4.0, requires_grad=True)
    e = c * d
    return a, b, c, d, e


def _ids(nodes, predicate):
    return sorted(n for n, label in nodes.items() if predicate(label))


def test_seed_graph_has_the_nodes_and_edges_the_seed_describes():
    a, b, c, d, e = _seed_graph()
    nodes, solid, dashed = _parse(viz.to_dot(e, names={"a": a, "b": b, "c": c, "d": d, "e": e}))

    muls = _ids(nodes, lambda label: label == ["MulBackward0"])
    acc_a = _ids(nodes, lambda label: label[0] == "a" and label[-1] == "AccumulateGrad")
    acc_d = _ids(nodes, lambda label: label[0] == "d" and label[-1] == "AccumulateGrad")
    outputs = _ids(nodes, lambda label: label[0] == "e")
    assert len(muls) == 2 and len(acc_a) == 1 and len(acc_d) == 1 and len(outputs) == 1
    assert nodes[acc_a[0]] == ["a", "float32 ()", "AccumulateGrad"]
    assert nodes[outputs[0]] == ["e", "float32 ()"]
    # e.grad_fn (outer Mul) takes the inner Mul (c's node) and d's AccumulateGrad; the inner Mul
    # takes a's AccumulateGrad and nothing for b (it does not require grad).
    outer = next(m for m in muls if (m, outputs[0], "") in solid)
    inner = next(m for m in muls if m != outer)
    assert sorted(solid) == sorted(
        [(outer, outputs[0], ""), (inner, outer, ""), (acc_d[0], outer, ""), (acc_a[0], inner, "")]
    )
    # Saved tensors: the inner Mul saved a and b, the outer Mul saved c and d (dashed edges).
    saved_by = {
        consumer: sorted(nodes[s][0] for s, t, _ in dashed if t == consumer)
        for consumer in (inner, outer)
    }
    assert saved_by == {inner: ["a", "b"], outer: ["c", "d"]}
    assert all(nodes[s][1] == "saved float32 ()" for s, _, _ in dashed)


def test_seed_graph_structure_matches_torch():
    torch = pytest.importorskip("torch")
    a, _b, _c, d, e = _seed_graph()
    ta = torch.tensor(2.0, requires_grad=True)
    td_ = torch.tensor(4.0, requires_grad=True)
    te = (ta * torch.tensor(3.0)) * td_

    def torch_edges(root, leaf_names):
        """(producer, consumer) pairs of torch's graph, nodes named like our labels."""
        ids, edges, stack = {}, set(), [root]

        def name(node):
            if hasattr(node, "variable"):
                return "AccumulateGrad:" + leaf_names[id(node.variable)]
            return ids.setdefault(node, f"{node.name()}#{len(ids)}")

        while stack:
            node = stack.pop()
            for nxt, _ in node.next_functions:
                if nxt is not None:
                    edges.add((name(nxt), name(node)))
                    stack.append(nxt)
        return {(p.split("#")[0], q.split("#")[0]) for p, q in edges}

    nodes, solid, _ = _parse(viz.to_dot(e, names={"a": a, "d": d}))

    def ours(node_id):
        label = nodes[node_id]
        return "AccumulateGrad:" + label[0] if label[-1] == "AccumulateGrad" else label[0]

    got = {(ours(p), ours(q)) for p, q, _ in solid if not q.startswith("out")}
    assert got == torch_edges(te.grad_fn, {id(ta): "a", id(td_): "d"})


def test_values_and_freed_buffers_are_shown():
    a, _b, _c, d, e = _seed_graph()
    nodes, _, _ = _parse(viz.to_dot(e, names={"a": a, "e": e}, show_values=True))
    assert ["e", "float32 ()", "24."] in nodes.values()
    assert ["a", "float32 ()", "2.", "AccumulateGrad"] in nodes.values()
    e.backward()
    nodes, _, dashed = _parse(viz.to_dot(e))
    freed = [nodes[s] for s, _, _ in dashed]
    assert freed == [["(saved tensors freed by backward)"]] * 2
    assert float(a.grad) == 12.0 and float(d.grad) == 6.0  # the seed's numbers


def test_multi_output_edges_name_the_output():
    xyz = td.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x, _, z = xyz.unbind()
    nodes, solid, _ = _parse(viz.to_dot(x * z))
    unbind = _ids(nodes, lambda label: label == ["UnbindBackward0"])
    assert len(unbind) == 1
    labels = sorted(attrs for p, _, attrs in solid if p == unbind[0])
    assert labels == ['label="output 0"', 'label="output 2"']


def test_deep_chain_is_walked_without_recursion():
    x = td.tensor(np.ones(2), requires_grad=True)
    y = x
    for _ in range(3000):
        y = y * 1.0001
    nodes, solid, _ = _parse(viz.to_dot(y.sum(), show_saved=False))
    assert sum(label == ["MulBackward0"] for label in nodes.values()) == 3000
    assert len(solid) == 3000 + 2  # chain, Sum -> output, AccumulateGrad -> first Mul


def test_leaf_output_and_bad_arguments():
    leaf = td.tensor([1.0], requires_grad=True)
    nodes, solid, _ = _parse(viz.to_dot(leaf))
    assert nodes == {"out0": ["output", "float32 (1,)", "leaf (no backward graph)"]}
    assert solid == []
    with pytest.raises(DTypeError, match="expected a Tensor or a list of Tensors, got ndarray"):
        viz.to_dot(np.ones(2))
    with pytest.raises(DTypeError, match="output 1 is a ndarray, expected a Tensor"):
        viz.to_dot([leaf, np.ones(2)])
    with pytest.raises(InputError, match="no output tensors"):
        viz.to_dot([])


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` not installed")
def test_render_svg_and_png(tmp_path):
    a, _b, _c, d, e = _seed_graph()
    svg = viz.render(e, tmp_path / "seed.svg", names={"a": a, "d": d, "e": e})
    text = svg.read_text()
    assert "<svg" in text and text.count("MulBackward0") == 2 and "AccumulateGrad" in text
    png = viz.render(viz.to_dot(e), tmp_path / "seed.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_without_dot_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(viz.shutil, "which", lambda name: None)
    _, _, _, _, e = _seed_graph()
    assert not viz.dot_available()
    with pytest.raises(MissingProgramError, match="apt-get install graphviz") as info:
        viz.render(e, tmp_path / "seed.svg")
    assert isinstance(info.value, MissingDependencyError) and "`dot` program" in str(info.value)
    # The DOT text itself needs no graphviz.
    written = viz.render(e, tmp_path / "seed.dot")
    assert written.read_text().startswith("digraph backward {")


def test_render_rejects_unknown_format(tmp_path):
    _, _, _, _, e = _seed_graph()
    with pytest.raises(InputError, match="unknown format 'jpeg'"):
        viz.render(e, tmp_path / "seed.jpeg")


def test_an_array_saved_by_several_nodes_is_drawn_once():
    x = td.tensor(np.full((2, 3), 0.5), requires_grad=True)
    h = x.tanh()  # TanhBackward0 saves its output; the Mul saves h twice
    nodes, _, dashed = _parse(viz.to_dot((h * h).sum(), names={"h": h}))
    saved_boxes = {s for s, _, _ in dashed}
    assert len(saved_boxes) == 1
    (box,) = saved_boxes
    assert nodes[box] == ["h", "saved float64 (2, 3)"]
    consumers = sorted(nodes[t][0] for _, t, _ in dashed)
    assert consumers == ["MulBackward0", "MulBackward0", "TanhBackward0"]
    unnamed, _, _ = _parse(viz.to_dot(x.tanh().sum()))
    assert ["output of TanhBackward0", "saved float64 (2, 3)"] in unnamed.values()


def test_render_or_dot_falls_back_to_the_dot_text(tmp_path, monkeypatch):
    e = _seed_graph()[-1]
    written, note = viz.render_or_dot(e, tmp_path / "graph.svg")
    if viz.dot_available():
        assert written == tmp_path / "graph.svg" and note is None
    monkeypatch.setattr(viz, "dot_available", lambda: False)
    written, note = viz.render_or_dot(e, tmp_path / "other.svg")
    assert written == tmp_path / "other.dot" and "install graphviz" in note
    assert written.read_text().startswith("digraph backward {")
