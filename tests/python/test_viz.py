"""musa.make_dot and get_graph().to_dot(): the seed snippet, the DOT they
write, pictures rendered by Graphviz (file signatures checked), the
autograd Node's attrs() and saved_tensors, and misuse."""
import shutil

import pytest

import musa
import musa.nn as nn
from musa.viz import Digraph, GraphText

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz (apt-get install graphviz) is not installed")
PNG, PDF = b"\x89PNG\r\n\x1a\n", b"%PDF"


def model_and_loss():
    musa.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2))
    return model, model(musa.randn(3, 4)).sum()


@needs_dot
def test_seed_snippet_as_written(tmp_path, monkeypatch):
    _, output = model_and_loss()
    monkeypatch.chdir(tmp_path)
    # --- SPEC section 5, as written ---
    musa.make_dot(output).render("graph")
    # ---
    assert (tmp_path / "graph").read_text().startswith("digraph {")
    assert (tmp_path / "graph.pdf").read_bytes().startswith(PDF)


@needs_dot
def test_autograd_graph_png(tmp_path):
    model, loss = model_and_loss()
    dot = musa.make_dot(loss, params=dict(model.named_parameters()))
    out = dot.render(tmp_path / "g", format="png", cleanup=True)
    assert out == str(tmp_path / "g.png") and not (tmp_path / "g").exists()
    assert (tmp_path / "g.png").read_bytes().startswith(PNG)
    assert dot.pipe("svg").lstrip().startswith(b"<?xml")


def test_autograd_graph_content():
    model, loss = model_and_loss()
    src = musa.make_dot(loss, params=dict(model.named_parameters())).source
    for name in ("SumBackward", "LinearBackward", "ReluBackward"):
        assert f'label="{name}"' in src
    # the leaves by parameter name and shape
    for label in ("0.weight\\n(6, 4)", "0.bias\\n(6)", "2.weight\\n(2, 6)", "2.bias\\n(2)"):
        assert f'"{label}" fillcolor=lightblue' in src
    assert '"()" fillcolor=darkolivegreen1' in src  # the output
    # each node once: 3 ops + SumBackward + 4 leaves
    assert src.count("fillcolor=lightgray") == 4 and src.count("fillcolor=lightblue") == 4
    # without names the leaves show their shapes only
    assert '"\\n(6, 4)" fillcolor=lightblue' in musa.make_dot(loss).source


def test_attrs_and_saved():
    x = musa.randn(3, 4, requires_grad=True)
    y = (x * 2).sum(dim=1).softmax(0)
    src = musa.make_dot(y, show_attrs=True, show_saved=True).source
    assert '"SumBackward\\ndims=[1], keepdim=false"' in src
    assert 'label="output 0\\n(3)" fillcolor=orange' in src  # softmax keeps its output
    assert 'label="input 0\\n(3, 4)" fillcolor=orange' in src  # mul keeps x
    short = musa.make_dot(y, show_attrs=True, max_attr_chars=8).source
    assert '"SumBackward\\ndims=..."' in short
    # the Node API behind it
    g = y.grad_fn
    assert g.attrs() == "dim=0, keepdim=false" and g.saved_tensors[0][:2] == ("output", 0)
    mul = g.next_functions[0][0].next_functions[0][0]
    assert [(s, i, tuple(t.shape)) for s, i, t in mul.saved_tensors] == [("input", 0, (3, 4)),
                                                                         ("input", 1, ())]
    y.sum().backward()  # no retain_graph: the saved tensors are freed
    assert mul.saved_tensors == () and "fillcolor=orange" not in musa.make_dot(
        y, show_saved=True).source


def test_several_outputs_and_leaves():
    a = musa.randn(2, requires_grad=True)
    b = a * 3
    src = musa.make_dot({"b": b, "a": a}).source
    assert '"b\\n(2)" fillcolor=darkolivegreen1' in src
    assert '"a\\n(2)" fillcolor=lightblue' in src  # a leaf output is drawn as itself
    src2 = musa.make_dot((b, b + 1)).source
    assert src2.count("MulBackward") == 1  # shared history drawn once


@needs_dot
def test_static_graph_to_dot_png(tmp_path):
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 2), nn.GELU()).compile()
    model(musa.randn(3, 4))
    g = model.get_graph()
    assert isinstance(g, GraphText) and isinstance(g, str) and "# forward" in g
    dot = g.to_dot()
    src = dot.source
    assert 'label="forward"' in src and 'label="backward"' in src
    groups = {i.group for t, graph in g._graphs for i in map(graph.node_info, range(graph.nodes_len))
              if i is not None and i.group >= 0}
    assert src.count("subgraph cluster_g0_fused") + src.count("subgraph cluster_g1_fused") >= 2
    assert 'label="fused 0"' in src and groups
    assert '"%0 \\"input\\"\\ninput float32[3, 4]"' in src
    assert dot.render(tmp_path / "static", format="png").endswith(".png")
    assert (tmp_path / "static.png").read_bytes().startswith(PNG)


def test_static_graph_without_fusion_has_no_clusters():
    @musa.jit(fusion_level=0)
    def f(x):
        return (x * 2).relu()

    f(musa.randn(5))
    src = f.get_graph().to_dot().source
    assert "fused" not in src and "mul(" not in src and 'label="mul\\n%' in src
    assert f.get_graph().to_json()["inputs"] == ["%x"]
    with pytest.raises(RuntimeError, match=r"\[GraphText.to_dot\] only the optimised IR"):
        f.get_graph(optimized=False).to_dot()


def test_misuse(tmp_path, monkeypatch):
    _, loss = model_and_loss()
    with pytest.raises(TypeError, match=r"\[make_dot\] expected a Tensor"):
        musa.make_dot(3)
    with pytest.raises(TypeError, match=r"\[make_dot\] outputs must be Tensors"):
        musa.make_dot([loss, 3])
    with pytest.raises(TypeError, match=r"\[make_dot\] params must be a dict"):
        musa.make_dot(loss, params=[1])
    dot = musa.make_dot(loss)
    with pytest.raises(ValueError, match=r"\[Digraph\] format must be one of"):
        dot.render(tmp_path / "g", format="bmp")
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on the PATH
    with pytest.raises(RuntimeError, match=r"Graphviz's dot is not installed; install the Debian "
                                           r"package graphviz"):
        dot.render(tmp_path / "g", format="png")
    assert dot.save(tmp_path / "g.gv") == str(tmp_path / "g.gv")
    assert Digraph("digraph {}").source == "digraph {}"
