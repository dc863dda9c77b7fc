"""Each pass on a small graph: the IR before and after (golden text, user
lines stripped) and the compiled result equal to eager."""
import json
import re

import numpy as np
import pytest

import musa
import musa.jit  # noqa: F401  (installs the user-line hook)
from musa import _C


def capture(fn, *inputs):
    g = _C.Graph()
    g.capture_begin("trace")
    for i, t in enumerate(inputs):
        g.add_input(t, f"x{i}")
    out = fn(*inputs)
    g.set_outputs(list(out) if isinstance(out, (list, tuple)) else [out])
    g.capture_end()
    return g, out


def text(g):
    return re.sub(r"  \S+\.py:\d+", "", g.text()).strip()


CASES = {
    "simplify": (
        lambda x: (-(-(((x * 1) + -0.0 - 0) / 1))).t().t().reshape(6, 2).reshape(3, 4) ** 1 * 3,
        ["fold", "simplify", "dce"],
        """graph(%0 "x0": float32[3, 4]) {
  %30 = const 3
  %24 = mul(%0, %30)  # float32[3, 4]
  return (%24)
}"""),
    "cse": (
        lambda x: (x + 1) * (x + 1) + musa.exp(x) * musa.exp(x),
        ["fold", "cse", "dce"],
        """graph(%0 "x0": float32[3, 4]) {
  %12 = const 1
  %3 = add(%0, %12)  # float32[3, 4]
  %7 = mul(%3, %3)  # float32[3, 4]
  %8 = exp(%0)  # float32[3, 4]
  %10 = mul(%8, %8)  # float32[3, 4]
  %11 = add(%7, %10)  # float32[3, 4]
  return (%11)
}"""),
    "fold": (
        lambda x: x * (musa.ones(4) * 2 + 1) @ musa.eye(4),
        ["fold"],
        """graph(%0 "x0": float32[3, 4]) {
  %15 = const float32[4]
  %16 = const float32[4, 4]
  %8 = mul(%0, %15)  # float32[3, 4]
  %10 = matmul(%8, %16, transpose_a=false, transpose_b=false)  # float32[3, 4]
  return (%10)
}"""),
    "dce": (
        lambda x: (musa.exp(x), musa.sin(x) * 2)[0] + 1,
        ["dce"],
        """graph(%0 "x0": float32[3, 4]) {
  %6 = const 1
  %1 = exp(%0)  # float32[3, 4]
  %7 = cast(%6, dtype=float32)  # float32[]
  %8 = add(%1, %7)  # float32[3, 4]
  return (%8)
}"""),
    "fuse": (
        lambda x: musa.relu(x @ x.t() + 1).sum(1) + x.sum(1) * 0,
        ["fuse"],
        """graph(%0 "x0": float32[3, 4]) {
  %3 = const 1
  %9 = const 0
  %1 = permute(%0, dims=[1, 0])  # float32[4, 3]
  %2 = matmul(%0, %1, transpose_a=false, transpose_b=false)  # float32[3, 3] fused:0
  %4 = cast(%3, dtype=float32)  # float32[]
  %5 = add(%2, %4)  # float32[3, 3] fused:0
  %6 = relu(%5)  # float32[3, 3] fused:0
  %7 = sum(%6, dims=[1], keepdim=false)  # float32[3] fused:0
  %8 = sum(%0, dims=[1], keepdim=false)  # float32[3] fused:1
  %10 = cast(%9, dtype=float32)  # float32[]
  %11 = mul(%8, %10)  # float32[3] fused:1
  %12 = add(%7, %11)  # float32[3] fused:1
  return (%12)
}"""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pass_golden_and_equal_to_eager(name):
    fn, passes, after = CASES[name]
    x = musa.randn(3, 4)
    g, eager = capture(fn, x)
    before = g.text()
    for p in passes:
        g.run_pass(p, verify=True)
    assert text(g) == after, text(g)
    assert g.text() != before
    plan = g.compile()
    for inp in (x, musa.randn(3, 4)):
        got = plan.run([inp])[0]
        want = fn(inp)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_pipeline_runs_every_pass_and_can_disable_by_name():
    fn = CASES["fold"][0]
    x = musa.randn(3, 4)
    g, _ = capture(fn, x)
    g.optimize(verify=True)
    # fold then simplify again: the identity matmul is gone
    assert [op for op, _ in g.ops()] == ["mul"]
    g2, _ = capture(fn, x)
    g2.optimize(disabled="fold, simplify", verify=True)
    assert [op for op, _ in g2.ops()].count("matmul") == 1
    with pytest.raises(ValueError, match="unknown pass 'nope'"):
        g2.run_pass("nope")


@pytest.mark.parametrize("op, kept", [
    (lambda x: x + 0, True),         # -0.0 + +0.0 is +0.0: not x
    (lambda x: 0 + x, True),
    (lambda x: x + -0.0, False),     # x + -0.0 is x, bit for bit
    (lambda x: x - 0, False),
    (lambda x: x - -0.0, True),      # x - -0.0 is x + 0
])
def test_simplify_drops_only_exact_zero_units(op, kept):
    def fn(x):
        return op(x) * 2
    x = musa.tensor([-0.0, 0.0, -1.5, float("nan")])
    g, _ = capture(fn, x)
    for p in ("fold", "simplify", "dce"):
        g.run_pass(p, verify=True)
    assert (" add(" in g.text() or " sub(" in g.text()) == kept, g.text()
    got, want = g.compile().run([x])[0].numpy(), fn(x).numpy()
    assert got.tobytes() == want.tobytes(), (got, want)


def test_simplify_never_returns_an_argument_for_a_new_tensor():
    # x * 1 is a new tensor in eager; simplified to x, the plan returned the
    # argument itself, and a write into the result reached it (test_jit_fuzz
    # seed 21868: a gradient came back as another argument); a function
    # that returns its argument still gets the argument back
    x, w = musa.randn(3), musa.randn(3, requires_grad=True)
    f, same = musa.jit(lambda a: a * 1), musa.jit(lambda a: a)
    for _ in range(2):
        r = f(x)
        assert r is not x and not r._shares_storage(x)
        r.add_(1)
        assert np.array_equal(r.numpy(), x.numpy() + 1)
        assert same(x) is x
        g = f(w)
        assert g.requires_grad and not g._shares_storage(w)


def test_simplify_keeps_outputs_distinct_and_mutation_safe():
    def f(x, y):
        a = x * 1
        x.add_(y)      # a must keep the old x
        return a, y + 0, y + 0

    x, y = musa.ones(3), musa.ones(3)
    g, _ = capture(f, x, y)
    g.optimize(verify=True)
    x2 = musa.ones(3)
    a, b, c = g.compile().run([x2, y])
    assert a.tolist() == [1.0] * 3 and x2.tolist() == [2.0] * 3
    assert b is not c or b is y


def test_verifier_runs_on_bad_capture_input():
    g = _C.Graph()
    with pytest.raises(ValueError, match="mode"):
        g.capture_begin("eager")
    made_before = musa.randn(3, 4).t()
    g.capture_begin("trace")
    with pytest.raises(ValueError, match="contiguous"):
        g.add_input(made_before)
    made_inside = musa.randn(2)
    with pytest.raises(ValueError, match="already in the graph"):
        g.add_input(made_inside)
    g.capture_end()
    with pytest.raises(RuntimeError, match="no capture is running"):
        g.capture_end()


def test_a_capturing_graph_refuses_passes_and_segments():
    g = _C.Graph()
    x = musa.ones(2)
    g.capture_begin("trace")
    g.add_input(x, "x")
    y = x + 1
    with pytest.raises(RuntimeError, match="still capturing"):
        g.optimize()
    with pytest.raises(RuntimeError, match="still capturing"):
        g.segment(0, 1, [])
    with pytest.raises(RuntimeError, match="still capturing"):
        g.compile()
    g.set_outputs([y])
    g.capture_end()
    assert g.compile().run([x])[0].tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="input 0 has 1 dims, got a shape of 2"):
        g.respecialize([[2, 1]], [])
    g.verify()


# ---- reading the graph through its getters ----

def _attr_json(v):
    """An attribute from node_info as the JSON form writes it."""
    if isinstance(v, musa.dtype):
        return repr(v)[len("musa."):]
    if isinstance(v, float) and v != v:
        return "nan"
    return v


def test_graph_getters_agree_with_the_json():
    def fn(x, w):
        h = (x @ w).clamp(-0.5, float("nan"))[:, 1:5:2]
        return h.to(musa.float64).sum(1, keepdim=True) + h.exp().sum() + (h.exp() * 2).sum()

    g, _ = capture(fn, musa.randn(6, 4), musa.randn(4, 8))
    sym = g.add_symbol("s0", 1, 64, 6)
    g.set_symbolic(0, 0, sym)
    assert g.run_pass("cse") > 0  # leaves dead nodes: the JSON skips them
    assert g.nodes_len > g.num_nodes
    j = json.loads(g.json())
    for name, jv in j["values"].items():
        info = g.value_info(jv["id"])
        assert info.kind == jv["kind"]
        assert info.dtype is getattr(musa, jv["dtype"])
        assert list(info.shape) == jv["shape"]
        if "symbolic" in jv:
            assert list(info.symbols) == jv["symbolic"]
        else:
            assert info.symbols == (None,) * len(info.shape)
    assert g.value_info(0).symbols == ("s0", None) and g.value_info(0).name == "x0"
    assert g.num_values > len(j["values"])  # the JSON leaves out what nothing refers to
    live = [g.node_info(i) for i in range(g.nodes_len)]
    assert None in live
    live = [n for n in live if n is not None]
    assert len(live) == len(j["nodes"]) == g.num_nodes
    ref = {jv["id"]: name for name, jv in j["values"].items()}  # inputs by name: %x0
    assert ref[0] == "%x0"
    for n, jn in zip(live, j["nodes"]):
        assert n.op == jn["op"]
        assert [ref[v] for v in n.inputs] == jn["inputs"]
        assert [ref[v] for v in n.outputs] == jn["outputs"]
        assert n.loc == jn.get("loc")
        assert {k: _attr_json(v) for k, v in n.attrs.items()} == jn["attrs"]
    assert live[0].loc.startswith("test_jit_passes.py:")
    ops = {}
    for n in live:
        ops.setdefault(n.op, n)  # the first node of each op
    assert ops["sum"].attrs["dims"] == [1] and ops["sum"].attrs["keepdim"] is True
    assert [n.attrs["step"] for n in live if n.op == "slice"] == [1, 2]  # [:, 1:5:2]
    assert ops["cast"].attrs["dtype"] is musa.float64
    assert ops["clamp"].attrs["min"] == -0.5 and isinstance(ops["clamp"].attrs["min"], float)


def test_graph_getters_refuse_bad_ids():
    g, _ = capture(lambda x: x + 1, musa.ones(2))
    with pytest.raises(IndexError, match=r"no value %-1"):
        g.value_info(-1)
    with pytest.raises(IndexError, match=f"no value %{g.num_values}"):
        g.value_info(g.num_values)
    with pytest.raises(IndexError, match=f"no node {g.nodes_len}"):
        g.node_info(g.nodes_len)
    with pytest.raises(OverflowError):
        g.node_info(1 << 40)
    with pytest.raises(TypeError):
        g.value_info("0")


def test_graph_breaks_and_values_have_named_fields():
    w = musa.ones(2)

    def f(x):
        y = x * 2
        if y.sum() > 0:            # a bool read
            y = y + 1
        s = float((y * w).sum())   # a scalar read
        return y * s

    g, _ = capture(f, musa.ones(2))
    reads = g.breaks()
    assert [r.kind for r in reads] == ["bool", "scalar"]
    assert [r.outcome for r in reads] == [1.0, 6.0]
    assert all(r.loc.startswith("test_jit_passes.py:") for r in reads)
    assert 0 < reads[0].at_node < reads[1].at_node < g.nodes_len
    read = g.value(reads[1].value)
    assert read.kind == "node" and 0 <= read.producer < reads[1].at_node and read.tensor is None
    assert g.value(0) == ("input", -1, None)
    param = g.value(g.value_of(w))
    assert param.kind == "param" and param.producer == -1 and param.tensor is w


def test_attr_slopes_follow_int_attributes_only():
    from musa.jit._dynamic import AttrSlope, attr_slopes

    def f(x):
        return x.reshape(x.shape[0], -1)

    def g(x):  # arange's end is a float attribute: it must not pass for an int
        return x.sum() + musa.arange(x.shape[0]).sum()

    a, _ = capture(f, musa.randn(8, 2, 2))
    b, _ = capture(f, musa.randn(9, 2, 2))
    assert attr_slopes(a, b) == [AttrSlope(node=0, field="shape", values=[8, 4], slope=[1, 0])]
    a, _ = capture(g, musa.randn(8))
    b, _ = capture(g, musa.randn(9))
    assert attr_slopes(a, b) is None


def test_split_gradients_become_one_cat_and_stay_equal_to_eager():
    # add(pad(gq), pad(gk)) ... of a split's gradient -> cat(gq, gk, gv)
    lin = musa.nn.Linear(8, 24)
    x = musa.randn(4, 8)

    def f(x):
        for p in lin.parameters():
            p.grad = None
        q, k, v = lin(x).split(8, dim=1)
        loss = (q * k).sum() + (v ** 2).sum()
        loss.backward()
        return loss.detach(), lin.weight.grad.clone(), lin.bias.grad.clone()

    c = musa.jit(f)
    want = f(x)
    c(x)
    for a, b in zip(want, c(x)):
        assert np.array_equal(a.numpy(), b.numpy())
    text = c.plan_text()
    assert "cat" in text and "pad" not in text

    # slices that leave a gap: their pads do not tile, and stay
    def g(x):
        x.grad = None
        a, b = x[:, :3], x[:, 5:]
        (a.sum() * 2 + (b * b).sum()).backward()
        return x.grad.clone()

    xg = musa.randn(4, 8, requires_grad=True)
    cg = musa.jit(g)
    want = g(xg)
    cg(xg)
    assert np.array_equal(cg(xg).numpy(), want.numpy())


@pytest.mark.parametrize("dtype", [musa.float32, musa.bfloat16], ids=["float32", "bfloat16"])
def test_matmul_writes_the_permuted_layout_its_clone_wanted(dtype):
    # attention's y.transpose(1, 2).reshape(B, T, C) and its gradient: the
    # products write (B, T, H, D) directly, the clones go, and the step is
    # bitwise eager's
    B, H, T, D = 2, 3, 5, 4
    proj = musa.nn.Linear(H * D, 6).to(dtype)
    q = musa.randn(B, H, T, D, dtype=dtype, requires_grad=True)
    v = musa.randn(B, H, T, D, dtype=dtype, requires_grad=True)

    def f(q, v):
        for t in (q, v, proj.weight, proj.bias):
            t.grad = None
        att = musa.nn.functional.softmax(q @ q.transpose(2, 3), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)
        out = proj(y)
        (out.float() ** 2).sum().backward()
        return out.detach(), q.grad, v.grad, proj.weight.grad  # (grads set afresh each call)

    c = musa.jit(f)
    want = f(q, v)
    c(q, v)
    for a, b in zip(want, c(q, v)):
        assert np.array_equal(a.float().numpy(), b.float().numpy())
    assert "clone" not in c.plan_text()


def test_matmul_layout_rule_leaves_other_readers_alone():
    # the product read by something else, or the clone returned: unchanged
    a, b = musa.randn(2, 3, 4), musa.randn(2, 4, 5)

    def two_readers(a, b):
        m = a @ b
        return m.transpose(1, 2).contiguous() + 1, m.sum()

    def returned(a, b):
        return (a @ b).transpose(1, 2).contiguous()

    for fn in (two_readers, returned):
        g, _ = capture(fn, a, b)
        g.run_pass("simplify", verify=True)
        assert "clone" in g.text(), fn.__name__
        want = fn(a, b)
        got = g.compile().run([a, b])
        for x, y in zip(got, want if isinstance(want, tuple) else (want,)):
            assert np.array_equal(x.numpy(), y.numpy())
    # the rewrite itself, at the IR: the clone is gone and the product runs
    g, _ = capture(lambda a, b: (a @ b).transpose(1, 2).contiguous() * 2, a, b)
    g.run_pass("simplify", verify=True)
    g.run_pass("dce", verify=True)
    assert "clone" not in g.text()
    out, = g.compile().run([a, b])
    assert np.array_equal(out.numpy(), ((a @ b).transpose(1, 2).contiguous() * 2).numpy())


def _groups(compiled):
    """{op: fusion group} of the last compiled graph's live nodes."""
    (_, g), = compiled.get_graph()._graphs
    return [(op, grp) for op, grp in g.ops() if op not in ("permute", "cast")]


def test_fusion_levels_group_what_they_document():
    def scores(x, w, mask):
        s = (x @ w) * 0.25
        return s.masked_fill(mask, float("-inf")).softmax(-1).sum(1)

    x, w = musa.randn(512, 32), musa.randn(32, 64)
    mask = musa.rand(512, 64) < 0.1
    want = scores(x, w, mask)
    got = {}
    for level in (0, 1, 2):
        f = musa.jit(scores, fusion_level=level)
        got[level] = f(x, w, mask)
        assert musa.equal(got[level], want), level  # every level, the same bits
        got[level] = _groups(f)
    assert all(grp < 0 for _, grp in got[0])
    # 1: the elementwise chain alone
    assert got[1] == [("matmul", -1), ("mul", 0), ("where", 0), ("softmax", -1), ("sum", -1)]
    # 2: the matmul heads it, the softmax joins it, the row sum ends it
    assert got[2] == [("matmul", 0), ("mul", 0), ("where", 0), ("softmax", 0), ("sum", 0)]
    assert musa.Config().fusion_level == 2


@pytest.mark.parametrize("shape", [(4096, 256), (2048, 2048), (16, 64)])
def test_tiles_read_a_transposed_input_in_whole_cache_lines(shape):
    """A tile reads tile-rows consecutive floats from each row of a
    transposed input: tiles of 4 or 8 rows read half lines, and the copy ran
    3.6x and 7.4x slower than eager's (plan/lower.c). At least 16 rows of
    float32 (64 bytes), or all of them."""
    import re

    def f(x):
        return x.t().contiguous() * 2

    x = musa.randn(*shape)
    c = musa.jit(f)
    assert musa.equal(c(x), f(x))
    rows = int(re.search(r"fused\[clone,mul\] tiles of (\d+) rows", c.plan_text()).group(1))
    assert rows >= min(16, shape[1]), c.plan_text()


@pytest.mark.parametrize("rows,heads", [(64, True), (128, True), (129, False), (1024, False)])
def test_a_product_heads_a_group_only_when_it_is_one_tile(rows, heads):
    """Cut into tiles, a product ran slower than whole with its epilogue
    after it (passes/fuse.c: 512x128x512 linear + GELU 365 us against 281):
    one with more than 65536 output elements runs whole, the GELU as its own
    instruction over the product's output."""
    def f(x, w, b):
        return musa.nn.functional.gelu(musa.nn.functional.linear(x, w, b))

    x, w, b = musa.randn(rows, 64), musa.randn(512, 64), musa.randn(512)
    c = musa.jit(f)
    assert musa.equal(c(x, w, b), f(x, w, b))
    groups = _groups(c)
    assert groups == ([("linear", 0), ("gelu", 0)] if heads else [("linear", -1), ("gelu", -1)])
    assert c.plan_stats()["instructions"] == (1 if heads else 2)


@pytest.mark.parametrize("name,fn", [
    ("softmax dim 0", lambda x: x.softmax(0) * 2),
    ("log_softmax dim 0", lambda x: x.log_softmax(0) + 1),
    ("cumsum dim 0", lambda x: musa.cumsum(x, 0) * 2),
    ("flip dim 0", lambda x: musa.flip(x, [0]) * 2),
    ("sum dim 0", lambda x: (x.sum(0, keepdim=True) * x).exp()),
    ("mean all", lambda x: x - x.mean()),
])
def test_ops_that_mix_rows_are_never_cut_into_tiles(name, fn):
    """They keep their shape, so the shape probe alone fused them into tiles
    of rows: softmax and cumsum along dim 0 then came out wrong."""
    x = musa.randn(4096, 64)
    assert musa.equal(musa.jit(fn, fusion_level=2)(x), fn(x)), name


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_lean_pow_reads_this_runs_exponent(dtype):
    # a group of one element computes pow's exponent and also writes it out
    # (flip reads it later): the lean pow resolved its loop from the
    # exponent's arena buffer before the group had written it, i.e. the last
    # call's exponent (jit fuzzer seed 349700 on its third call: 128.25
    # where eager gave inf)
    def f(a, b):
        e = b * -1.0 + -1.0
        return musa.pow(a.abs(), e), e.flip(0)
    c = musa.jit(f)
    dt = getattr(musa, dtype)
    a = musa.tensor(-0.5, dtype=dt)
    for bv in (1.0, 2.0, -3.0, 0.5, -1.5, 1.0):
        b = musa.tensor([bv], dtype=dt)
        assert c(a, b)[0].item() == f(a, b)[0].item(), bv
