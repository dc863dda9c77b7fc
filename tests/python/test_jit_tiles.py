"""Fused groups in tiles: the gelu chain in one group, streamed outputs,
tile sizes, the tiles of product heads, groups over nothing, and lean
members; all bitwise eager."""
import numpy as np
import pytest

import musa
import musa.nn.functional as F


def gelu_tanh_chain(x):
    return x * 0.5 * (1 + musa.tanh(0.79788456 * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("shape", [(4096,), (33, 65), (2, 3, 257)])
def test_gelu_chain_is_fused_and_bitwise_eager(shape):
    f = musa.jit(gelu_tanh_chain)
    x = musa.randn(*shape)
    f(x)
    out = f(x)
    assert np.array_equal(out.numpy(), gelu_tanh_chain(x).numpy())
    st = f.plan_stats()
    assert st["fused_groups"] == 1 and st["kernels"] == 0 and st["arena_bytes"] == 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_fused_outputs_stream_and_stay_bitwise_eager(dtype):
    # 8 MiB and more: outputs no later member reads go out with non-temporal
    # stores from a staging tile; an odd length gives a partial last tile
    def f(x):
        y = x * 0.5
        z = musa.tanh(y) + y      # y is read again inside the group: not streamed
        return z * x, y           # both outputs of the group; z * x is streamed
    dt = getattr(musa, dtype)
    x = musa.randn(2_100_001, dtype=dt)
    c = musa.jit(f)
    c(x)
    got = c(x)
    want = f(x)
    for g, w in zip(got, want):
        assert np.array_equal(g.numpy(), w.numpy())
    assert ", 1 streamed" in c.plan_text()
    small = musa.jit(f)
    small(x[:1000].contiguous())
    assert "streamed" not in small.plan_text()


def tile_rows(compiled):
    import re
    return [int(m) for m in re.findall(r"tiles of (\d+) rows", compiled.plan_text())]


@pytest.mark.parametrize("n", [1_000_003, 70_001, 5_000])
def test_elementwise_tiles_grow_with_the_group_and_stay_bitwise_eager(n):
    # relu's backward as a plan fuses it: few members, so tiles of many
    # elements (fewer kernel calls per member); small groups keep the least
    def f(a, b, c):
        return musa.where(c > 0, a + b, 0.0)
    a, b, c = musa.randn(n), musa.randn(n), musa.randn(n)
    comp = musa.jit(f)
    comp(a, b, c)
    assert np.array_equal(comp(a, b, c).numpy(), f(a, b, c).numpy())
    (rows,) = tile_rows(comp)
    threads = musa.get_num_threads()
    # every member is lean (gt, add and where call their loops directly):
    # tiles from 1024 elements, within 24 KiB of the group's outputs and the
    # inputs it reads (1 + 9 + 12 bytes an element: 1024)
    assert ", 3 lean" in comp.plan_text()
    assert rows == 1024
    # in bfloat16, 1 + 5 + 6 bytes an element: 2048 where four tiles a
    # thread still fit
    ah, bh, ch = a.bfloat16(), b.bfloat16(), c.bfloat16()
    comp = musa.jit(f)
    assert np.array_equal(comp(ah, bh, ch).float().numpy(), f(ah, bh, ch).float().numpy())
    (rows,) = tile_rows(comp)
    assert rows == (2048 if 2048 * 4 * threads <= n else 1024)
    # an integer member is not lean (its loop reports division by zero through
    # the kernel): the group keeps the kernel's tiles, from 2048 up
    def g(a, b, i):
        return (a + b) * (i // 3).float()
    i = musa.arange(n, dtype=musa.int32)
    comp = musa.jit(g)
    comp(a, b, i)
    assert np.array_equal(comp(a, b, i).numpy(), g(a, b, i).numpy())
    text = comp.plan_text()
    assert "floor_divide" in text and "lean" in text and ", 3 lean" not in text
    assert all(r == 2048 or (r >= 2048 and r * 4 * threads <= n) for r in tile_rows(comp))


@pytest.mark.parametrize("threads", [2, 4])
def test_product_heads_keep_sixteen_rows_a_tile_and_stay_bitwise_eager(threads):
    # a product heading a fused group is cut into tiles of at least 16 rows;
    # one over fewer can round otherwise than eager's single call, so the
    # last tile takes every row left (130 rows cut 128 + 2 rounded otherwise)
    saved = musa.get_num_threads()
    musa.set_num_threads(threads)
    try:
        musa.manual_seed(0)
        for M, K, N in [(18, 64, 4096), (17, 300, 4096), (36, 100, 2048), (130, 40, 512),
                        (129, 64, 512), (513, 7, 128), (64, 128, 128), (36, 292, 33)]:
            x, w, b = musa.randn(M, K), musa.randn(N, K), musa.randn(N)

            def lin(x, w, b):
                return musa.relu(F.linear(x, w, b)) * 2

            def mm(x, w):
                return musa.tanh(x @ w.t()) + 1
            for fn, args in ((lin, (x, w, b)), (mm, (x, w))):
                c = musa.jit(fn)
                for call in range(2):
                    got = c(*args)
                    assert np.array_equal(got.numpy(), fn(*args).numpy()), (M, K, N, call)
                (rows,) = tile_rows(c)
                assert rows >= 16 or rows == M, c.plan_text()
    finally:
        musa.set_num_threads(saved)


@pytest.mark.parametrize("shape", [(0, 0), (0, 3, 0), (0, 0, 4), (3, 0), (0, 5)])
def test_fused_groups_over_no_rows_and_no_elements(shape):
    # a group whose rows and inner elements are both 0 has no tiles (its
    # tile count once divided by a tile of 0 rows: SIGFPE while lowering)
    fns = [lambda x: (x * 2).sum(-1) + 1, lambda x: musa.relu(x @ x.transpose(-1, -2)) * 2,
           lambda x: x * 2 + 1, lambda x: musa.softmax(x * 2, -1) - 1]
    for fn in fns:
        x = musa.randn(*shape)
        c = musa.jit(fn)
        for call in range(2):
            got, want = c(x), fn(x)
            assert got.shape == want.shape and np.array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("n", [1, 1000, 4099, 70_001])
def test_lean_members_are_bitwise_eager(dtype, n):
    # members whose kernels have a loop resolver (unary.c, binary.c) run
    # their loop on each tile directly; the same loop on the same elements
    dt = getattr(musa, dtype)
    x = musa.randn(n, dtype=dt)

    def f(x):
        p = x ** 2 + abs(x) ** 0.5 - (x + 3) ** -1 + abs(x) ** 2.5
        w = musa.where(x > 0, musa.sigmoid(x) * 2, 0.0)
        g = F.gelu(x) + F.gelu(x, approximate="tanh") - musa.exp(-x * x)
        return gelu_tanh_chain(x) + p + w + g
    c = musa.jit(f)
    c(x)
    got, want = c(x), f(x)
    assert got.dtype == want.dtype
    assert np.array_equal(got.float().numpy(), want.float().numpy(), equal_nan=True)
    assert " lean" in c.plan_text()


def test_lean_pow_resolves_its_exponent_at_each_run():
    # pow's loop depends on its scalar exponent (x*x for 2, sqrt for 0.5): a
    # plan resolves it when it runs, from the exponent's value that run
    def f(x, e):
        return (x + 1) ** e * 2
    x = musa.rand(5000)
    c = musa.jit(f)
    for e in [2.0, 0.5, 3.0, -1.0, 1.7]:
        et = musa.tensor(e)
        got, want = c(x, et), f(x, et)
        assert np.array_equal(got.numpy(), want.numpy()), e
    assert c.compiles == 1
    assert ", 3 lean" in c.plan_text()
