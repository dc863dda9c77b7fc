"""musa.save / musa.load: round trips of every supported type, views and
shared storage, every dtype, paths and file objects, mmap, map_location,
model and optimizer state continuing training bit for bit, the errors of
bad objects, bad trees and damaged files. PyTorch checkpoints are
test_pytorch_checkpoints.py."""
import collections
import enum
import io
import json
import math
import os
import pathlib
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.optim as optim

DTYPES = [musa.float32, musa.float64, musa.float16, musa.bfloat16, musa.int64, musa.int32,
          musa.int16, musa.int8, musa.uint8, musa.bool]


def roundtrip(obj, tmp_path, **kw):
    p = tmp_path / "obj.musa"
    musa.save(obj, p)
    return musa.load(p, **kw)


def bits(t):
    """A tensor's values as bytes (bfloat16 through float32, exactly)."""
    t = t.detach()
    if t.dtype == musa.bfloat16:
        t = t.float()
    return np.ascontiguousarray(t.numpy()).tobytes()


def same_tensor(a, b):
    return (type(a) is type(b) and a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
            and bits(a) == bits(b) and a.requires_grad == b.requires_grad)


def same(a, b):
    """Equal values of equal types, recursively; floats bit for bit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, musa.Tensor):
        return same_tensor(a, b)
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b) or (a != a and b != b)
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) in (dict, collections.OrderedDict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


# ---------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------

SCALARS = [None, True, False, 0, -1, 7, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 3**5000,
           -(10**400), 1.5, -0.0, 0.0, math.nan, math.inf, -math.inf, 5e-324, 1.7976931348623157e308,
           0.1, "", "plain", "h\u00e9llo \u2603 \U0001F600", "nul\x00byte", '"quotes" \\ \n\t',
           "$tensor", b"", b"\x00\xff bytes", musa.float16, musa.bool]


@pytest.mark.parametrize("x", SCALARS, ids=[repr(x)[:20] for x in SCALARS])
def test_scalars_round_trip(tmp_path, x):
    y = roundtrip(x, tmp_path)
    assert same(x, y)
    assert same([x], roundtrip([x], tmp_path))


def test_containers_keep_their_types_and_order(tmp_path):
    obj = {
        "list": [1, [2, [3, []]]], "tuple": (1, (2,), ()), "dict": {"b": 1, "a": {}},
        "odict": collections.OrderedDict([("z", 1), ("a", 2)]),
        "set": {1, "a", (2, 3), None}, "frozenset": frozenset({1.5, b"x"}), "empty": [(), {}, set()],
        "int keys": {3: "c", 1: "a", -2**70: "big"}, "mixed keys": {None: 0, 1.5: 1, (1, "a"): 2,
                                                                   b"k": 3, frozenset({1}): 4},
        "dollar keys": {"$tensor": 1, "$x": 2, "a": 3},
        "odict int keys": collections.OrderedDict([(2, "b"), (1, "a")]),
        "odict dollar": collections.OrderedDict([("$tuple", 1)]),
    }
    y = roundtrip(obj, tmp_path)
    assert same(obj, y)
    assert y["set"] == obj["set"] and type(y["set"]) is set
    assert y["frozenset"] == obj["frozenset"] and type(y["frozenset"]) is frozenset
    assert list(y["odict int keys"]) == [2, 1]


def test_the_same_object_gives_the_same_bytes(tmp_path):
    """Sets are written sorted where their elements allow, so a file does
    not depend on the process's string hashing."""
    code = ("import musa, sys; musa.save({'s': {'b', 'a', 'c', 'd'}, 'f': frozenset({3, 1, 2}), "
            "'x': musa.arange(3)}, sys.argv[1])")
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(musa.__file__).parents[1]))
    files = []
    for seed in ("1", "2"):
        out = tmp_path / f"{seed}.musa"
        subprocess.run([sys.executable, "-c", code, str(out)], check=True, timeout=120,
                       env=dict(env, PYTHONHASHSEED=seed))
        files.append(out.read_bytes())
    assert files[0] == files[1]


def test_subclasses_of_numbers_and_str_save_as_the_base_type(tmp_path):
    class Color(enum.IntEnum):
        RED = 3

    class Name(str):
        pass

    y = roundtrip([Color.RED, Name("x"), np.float64(2.5)], tmp_path)
    assert y == [3, "x", 2.5] and [type(v) for v in y] == [int, str, float]


def test_large_dicts_round_trip_in_order(tmp_path):
    d = {f"layer{i}.weight": i for i in range(5000)}
    od = collections.OrderedDict((f"k{i}", musa.tensor(float(i))) for i in range(3000))
    y = roundtrip({"d": d, "od": od}, tmp_path)
    assert list(y["d"].items()) == list(d.items())
    assert list(y["od"]) == list(od) and type(y["od"]) is collections.OrderedDict
    assert y["od"]["k2999"].item() == 2999.0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_tensors_of_every_dtype(tmp_path, dtype):
    if dtype == musa.bool:
        vals = [True, False, True]
    elif dtype.is_floating_point:
        vals = [1.5, -0.0, float("inf"), float("-inf"), 65504.0 if dtype == musa.float16 else 3e38]
    else:
        info = np.iinfo({musa.int64: np.int64, musa.int32: np.int32, musa.int16: np.int16,
                         musa.int8: np.int8, musa.uint8: np.uint8}[dtype])
        vals = [int(info.min), 0, int(info.max)]
    t = musa.tensor(vals, dtype=dtype)
    objs = [t, t.reshape(1, -1), t[0], musa.empty(0, dtype=dtype), musa.empty(2, 0, 3, dtype=dtype)]
    y = roundtrip(objs, tmp_path)
    for a, b in zip(objs, y):
        assert same_tensor(a, b)
    assert y[2].shape == () and y[3].shape == (0,) and y[4].shape == (2, 0, 3)


def test_nan_tensor_bits(tmp_path):
    t = musa.tensor([float("nan"), -float("nan")])
    assert bits(roundtrip(t, tmp_path)) == bits(t)


def test_non_contiguous_tensors(tmp_path):
    base = musa.arange(24.0).reshape(2, 3, 4)
    objs = [base.transpose(0, 2), base[:, ::2, 1::2], base[1], musa.ones(3).expand(4, 3),
            base.permute(2, 0, 1)]
    y = roundtrip(objs, tmp_path)
    for a, b in zip(objs, y):
        assert same_tensor(a, b)
        assert b.stride() == a.stride() or a.numel() <= 1
    assert y[3].stride() == (0, 1)


def test_views_share_storage_again(tmp_path):
    x = musa.arange(10.0)
    a, b, c = roundtrip([x, x[1:], x.view(2, 5).t()], tmp_path)
    assert a._shares_storage(b) and a._shares_storage(c)
    a[3] = 100.0
    assert b[2].item() == 100.0 and c[3, 0].item() == 100.0
    b[0] = -1.0
    assert a[1].item() == -1.0


def test_same_tensor_twice_is_one_object(tmp_path):
    x = musa.ones(3)
    y = roundtrip({"a": x, "b": [x, (x,)]}, tmp_path)
    assert y["a"] is y["b"][0] is y["b"][1][0]


def test_only_the_saved_span_of_a_storage_is_written(tmp_path):
    big = musa.zeros(1 << 20)
    musa.save(big[10:20], tmp_path / "a.musa")
    assert os.path.getsize(tmp_path / "a.musa") < 4096


def test_requires_grad_and_parameters(tmp_path):
    w = nn.Parameter(musa.randn(2, 3))
    frozen = nn.Parameter(musa.randn(2), requires_grad=False)
    leaf = musa.randn(3, requires_grad=True)
    nonleaf = leaf * 2
    plain = musa.randn(3)
    y = roundtrip({"w": w, "frozen": frozen, "leaf": leaf, "nonleaf": nonleaf, "plain": plain},
                  tmp_path)
    assert type(y["w"]) is nn.Parameter and y["w"].requires_grad
    assert type(y["frozen"]) is nn.Parameter and not y["frozen"].requires_grad
    assert type(y["leaf"]) is musa.Tensor and y["leaf"].requires_grad and y["leaf"].is_leaf
    assert y["nonleaf"].requires_grad and y["nonleaf"].is_leaf  # as in PyTorch
    assert not y["plain"].requires_grad
    for k in y:
        assert bits(y[k]) == bits({"w": w, "frozen": frozen, "leaf": leaf, "nonleaf": nonleaf,
                                   "plain": plain}[k])


def test_a_parameter_and_its_detached_alias_load_as_two_views(tmp_path):
    p = nn.Parameter(musa.ones(3))
    y = roundtrip([p, p.detach()], tmp_path)
    assert type(y[0]) is nn.Parameter and type(y[1]) is musa.Tensor
    assert y[0]._shares_storage(y[1])
    with musa.no_grad():
        y[0][1] = 5.0
    assert y[1][1].item() == 5.0


def test_file_objects_and_path_kinds(tmp_path):
    obj = {"x": musa.arange(5), "n": 3}
    buf = io.BytesIO()
    musa.save(obj, buf)
    buf.seek(0)
    assert same(musa.load(buf), obj)
    with open(tmp_path / "f.musa", "wb") as f:
        musa.save(obj, f)
    with open(tmp_path / "f.musa", "rb") as f:
        assert same(musa.load(f), obj)
    for p in (str(tmp_path / "s.musa"), tmp_path / "p.musa", os.fsencode(tmp_path / "b.musa")):
        musa.save(obj, p)
        assert same(musa.load(p), obj)
    assert (tmp_path / "f.musa").read_bytes() == (tmp_path / "s.musa").read_bytes()


def test_mmap(tmp_path):
    x = musa.arange(1000.0)
    p = tmp_path / "m.musa"
    musa.save({"x": x, "tail": x[500:]}, p)
    before = p.read_bytes()
    y = musa.load(p, mmap=True)
    assert bits(y["x"]) == bits(x) and y["x"]._shares_storage(y["tail"])
    y["x"][600] = -1.0  # copy on write: visible in the view, never in the file
    assert y["tail"][100].item() == -1.0
    assert p.read_bytes() == before
    assert musa.load(p)["x"][600].item() == 600.0


def test_state_dicts_continue_training_bitwise(tmp_path):
    data = musa.randn(16, 4)
    target = musa.randn(16, 2)

    def make(seed):
        musa.manual_seed(seed)
        model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
        opts = [optim.Adam(model[0].parameters(), lr=1e-2),
                optim.SGD(list(model[1].parameters()) + list(model[3].parameters()), lr=0.1,
                          momentum=0.9, nesterov=True)]
        return model, opts

    def train(model, opts, steps):
        for _ in range(steps):
            for o in opts:
                o.zero_grad()
            loss = ((model(data) - target) ** 2).mean()
            loss.backward()
            for o in opts:
                o.step()

    model, opts = make(0)
    train(model, opts, 3)
    ckpt = {"model": model.state_dict(), "optim": [o.state_dict() for o in opts], "epoch": 3}
    musa.save(ckpt, tmp_path / "ckpt.musa")
    train(model, opts, 4)

    model2, opts2 = make(1)
    loaded = musa.load(tmp_path / "ckpt.musa")
    assert type(loaded["model"]) is collections.OrderedDict
    assert list(loaded["optim"][0]["state"]) == [0, 1]  # int keys stay ints
    assert loaded["optim"][1]["param_groups"][0]["nesterov"] is True
    model2.load_state_dict(loaded["model"])
    for o, s in zip(opts2, loaded["optim"]):
        o.load_state_dict(s)
    train(model2, opts2, 4)
    for (k, a), b in zip(model.state_dict().items(), model2.state_dict().values()):
        assert bits(a) == bits(b), k


def test_adam_amsgrad_and_rmsprop_state_round_trip(tmp_path):
    for make in (lambda p: optim.Adam(p, lr=0.1, amsgrad=True, betas=(0.8, 0.9)),
                 lambda p: optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
                 lambda p: optim.AdamW(p, lr=0.1)):
        w = nn.Parameter(musa.randn(3))
        o = make([w])
        (w ** 2).sum().backward()
        o.step()
        sd = o.state_dict()
        assert same(sd, roundtrip(sd, tmp_path))


# ---------------------------------------------------------------------------
# map_location
# ---------------------------------------------------------------------------

def test_map_location_forms(tmp_path):
    x = musa.arange(6.0)
    p = tmp_path / "x.musa"
    musa.save([x, x[2:]], p)
    for ml in ("cpu", musa.device("cpu"), {"cpu": "cpu"}, {"cuda:0": "cpu"},
               lambda s, loc: None, lambda s, loc: s):
        a, b = musa.load(p, map_location=ml)
        assert bits(a) == bits(x) and a._shares_storage(b)
    seen = []

    def double(storage, location):
        seen.append((tuple(storage.shape), location))
        return storage * 2

    a, b = musa.load(p, map_location=double)
    assert seen == [((6,), "cpu")]
    assert a.tolist() == [0, 2, 4, 6, 8, 10] and b.tolist() == [4, 6, 8, 10]
    a[3] = -1.0
    assert b[1].item() == -1.0


def test_map_location_errors(tmp_path):
    p = tmp_path / "x.musa"
    musa.save(musa.ones(2), p)
    with pytest.raises(RuntimeError, match=r"^\[musa.load\] .*has no CUDA; pass map_location='cpu'"):
        musa.load(p, map_location="cuda")
    with pytest.raises(RuntimeError, match=r"^\[musa.load\] .*has no CUDA"):
        musa.load(p, map_location={"cpu": "cuda:1"})
    with pytest.raises(TypeError, match=r"^\[musa.load\] map_location must be"):
        musa.load(p, map_location=3)
    with pytest.raises(TypeError, match=r"^\[musa.load\] a map_location dict maps"):
        musa.load(p, map_location={"cpu": 3})
    with pytest.raises(TypeError, match=r"^\[musa.load\] .*map_location returned str"):
        musa.load(p, map_location=lambda s, loc: "x")
    with pytest.raises(ValueError, match=r"^\[musa.load\] .*map_location returned"):
        musa.load(p, map_location=lambda s, loc: musa.ones(5))
    with pytest.raises(RuntimeError, match=r"^\[musa.load\] map_location: "):
        musa.load(p, map_location="gpu")


# ---------------------------------------------------------------------------
# what save refuses
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("obj, where, what", [
    ({"layers": [1, 2, lambda: 0]}, r"obj\['layers'\]\[2\]", "function"),
    ([nn.Linear(2, 2)], r"obj\[0\]", "Linear.*state_dict"),
    ({"a": (1, object())}, r"obj\['a'\]\[1\]", "object"),
    ({"n": np.int64(3)}, r"obj\['n'\]", r"NumPy scalar; save x.item\(\)"),
    ({"n": np.ones(2)}, r"obj\['n'\]", r"musa.from_numpy"),
    (collections.defaultdict(list), r"obj", r"dict subclass; save dict\(x\)"),
    ({"b": bytearray(b"x")}, r"obj\['b'\]", r"save bytes\(x\)"),
    ({"c": 1j}, r"obj\['c'\]", "complex"),
    ({"s": "bad \udc80"}, r"obj\['s'\]", "lone surrogate"),
    ({1: {(1, lambda: 0): 2}}, r"obj\[1\]<key 0>\[1\]", "function"),
    ({"s": {1, object()}}, r"obj\['s'\]<element \d>", "object"),
])
def test_save_refuses_with_the_path(tmp_path, obj, where, what):
    with pytest.raises(TypeError, match=rf"^\[musa.save\] {where} .*{what}"):
        musa.save(obj, tmp_path / "x.musa")
    assert not (tmp_path / "x.musa").exists()


def test_save_refuses_cycles_and_tensor_subclasses(tmp_path):
    a = [1]
    a.append(a)
    with pytest.raises(TypeError, match=r"^\[musa.save\] obj\[1\] contains itself"):
        musa.save(a, tmp_path / "x.musa")

    class Mine(musa.Tensor):
        pass

    t = musa.Tensor._make_subclass(Mine, musa.ones(2), False)
    with pytest.raises(TypeError, match=r"^\[musa.save\] obj\['t'\] is a .*Mine \(a Tensor subclass\)"):
        musa.save({"t": t}, tmp_path / "x.musa")


@pytest.mark.parametrize("wrap", [lambda v: [v], lambda v: (v,), lambda v: {"k": v},
                                  lambda v: {1: v}, lambda v: collections.OrderedDict(k=v)],
                         ids=["list", "tuple", "dict", "int-key dict", "odict"])
def test_depth_limit_is_the_readers(tmp_path, wrap):
    """Right up to the reader's JSON depth cap, save writes what load reads;
    past it, save refuses with its own message (never the C writer's or a
    file that cannot be read)."""
    saved = refused = 0
    for n in range(10, 70):
        v = musa.ones(1)
        for _ in range(n):
            v = wrap(v)
        try:
            musa.save(v, tmp_path / "d.musa")
        except TypeError as e:
            assert "nests too deeply" in str(e)
            refused += 1
            continue
        saved += 1
        assert refused == 0  # refusals start at one depth and stay
        assert same(v, musa.load(tmp_path / "d.musa"))
    assert saved and refused


def test_depth_limit_is_exact(tmp_path):
    """62 lists around a tensor save; 63 do not: the reader would refuse
    such a file, and so does the C writer (it checks members as the reader
    will see them)."""
    v = musa.ones(1)
    for _ in range(62):
        v = [v]
    musa.save(v, tmp_path / "d.musa")
    with pytest.raises(TypeError, match="nests too deeply"):
        musa.save([v], tmp_path / "d.musa")
    tree = {"$tensor": 0}
    for _ in range(63):
        tree = [tree]
    with pytest.raises(ValueError, match=r"not valid JSON: .*nesting deeper than 64 levels"):
        write_tree(tmp_path / "d.musa", tree, [musa.ones(1)])


def test_save_refuses_a_header_past_the_readers_limit(tmp_path):
    with pytest.raises(ValueError, match=r"^\[musa.save\] the header is \d+ bytes; a reader accepts "
                                         r"at most 16777216 \(.*keep large data in tensors\)"):
        musa.save({"text": "x" * (17 << 20)}, tmp_path / "big.musa")
    assert not (tmp_path / "big.musa").exists()


def test_save_argument_errors(tmp_path):
    with pytest.raises(TypeError, match=r"^\[musa.save\] f must be a path"):
        musa.save(1, 3)
    with open(tmp_path / "t.txt", "w") as f, \
            pytest.raises(TypeError, match=r"^\[musa.save\] f is a text file"):
        musa.save(1, f)
    with pytest.raises(OSError, match=r"^\[musa.save\] cannot create a temporary file"):
        musa.save(1, tmp_path / "no such folder" / "x.musa")


# ---------------------------------------------------------------------------
# what load refuses: bad trees and damaged files
# ---------------------------------------------------------------------------

def write_tree(path, tree, tensors=(), version="1", kind="object", extra=None):
    sections = {"object": json.dumps(tree), "object_version": version}
    sections.update(extra or {})
    if version is None:
        del sections["object_version"]
    musa._C._file_save(str(path), kind, list(tensors), sections)


BAD_TREES = [
    ({"$nope": 1}, r"object: unknown tag '\$nope'"),
    ({"$tuple": [], "$set": []}, "two tags"),
    ({"$tuple": [], "x": 1}, "'\\$tuple' takes no member 'x'"),
    ({"$tensor": 5}, r"object\['\$tensor'\]: tensor index 5 is not in \[0, 1\)"),
    ({"$tensor": -1}, "tensor index -1"),
    ({"$tensor": True}, "tensor index True"),
    ({"$tensor": 0.0}, "tensor index 0.0"),
    ({"$tensor": 0, "requires_grad": 1}, "'requires_grad' must be true or false"),
    ([{"$parameter": 1}], r"object\[0\]\['\$parameter'\]: tensor index 1"),
    ({"a": {"$tuple": {}}}, r"object\['a'\]\['\$tuple'\]: '\$tuple' takes an array, not an object"),
    ({"$set": [[1]]}, r"object\['\$set'\]\[0\]: a list cannot be a set element"),
    ({"$dict": [[1]]}, r"object\['\$dict'\]\[0\]: a member must be a \[key, value\] pair"),
    ({"$dict": 3}, "takes an object or an array of"),
    ({"$odict": [[{"a": 1}, 2]]}, "a dict cannot be a set element or a dict key"),
    ({"$dict": [[1, 2], [1, 3]]}, "duplicate key 1"),
    ({"$int": "12"}, "is not a hexadecimal integer"),
    ({"$int": "0x"}, "is not a hexadecimal integer"),
    ({"$int": 5}, "'\\$int' takes a string, not a number"),
    ({"$float": "NaN"}, "is not nan, inf or -inf"),
    ({"$bytes": "!!"}, "invalid base64"),
    ({"$dtype": "complex64"}, "unknown dtype 'complex64'"),
]


@pytest.mark.parametrize("tree, what", BAD_TREES, ids=[json.dumps(t)[:30] for t, _ in BAD_TREES])
def test_load_refuses_bad_trees(tmp_path, tree, what):
    p = tmp_path / "bad.musa"
    write_tree(p, tree, [musa.ones(2, dtype=musa.int64)])
    with pytest.raises(OSError, match=rf"^\[musa.load\] {p}: .*{what}"):
        musa.load(p)
    with pytest.raises(OSError, match=rf"^\[musa.load\] <file object>: .*{what}"):
        musa.load(io.BytesIO(p.read_bytes()))


def test_load_refuses_bad_headers(tmp_path):
    p = tmp_path / "bad.musa"
    cases = [
        (dict(version=None), "'object_version' is missing"),
        (dict(version="2"), r"object_version 2; this musa reads version 1 \(the file is from a newer"),
        (dict(version="true"), "'object_version' is missing or not an integer"),
        (dict(extra={"other": "1"}), "unknown member 'other'"),
        (dict(kind="model"), "a .musa file of kind 'model', not an object saved by musa.save; "
                             "load a saved model with musa.jit.load"),
        (dict(kind="other"), "a .musa file of kind 'other', not an object saved by musa.save$"),
    ]
    for kw, what in cases:
        write_tree(p, 1, **kw)
        with pytest.raises(OSError, match=rf"^\[musa.load\] {p}: .*{what}"):
            musa.load(p)
    musa._C._file_save(str(p), "object", [], {"object_version": "1"})
    with pytest.raises(OSError, match="no 'object' member"):
        musa.load(p)
    p2 = tmp_path / "ok.musa"
    write_tree(p2, {"$tensor": 0, "requires_grad": True}, [musa.ones(2, dtype=musa.int64)])
    with pytest.raises(OSError, match="requires_grad on a musa.int64 tensor"):
        musa.load(p2)


def test_random_trees_load_or_raise_cleanly(tmp_path):
    """Random JSON trees with tags in and out of place: each loads or raises
    OSError naming the file; nothing else escapes."""
    import random
    rng = random.Random(7)
    tags = ["$tuple", "$set", "$frozenset", "$dict", "$odict", "$int", "$float", "$bytes",
            "$dtype", "$tensor", "$parameter", "$x", "requires_grad"]
    scalars = [None, True, 0, -1, 2**63 - 1, 1.5, "", "$tensor", "0x1f", "-0x", "nan", "AP8=",
               "float32", 3, [], {}]

    def tree(d=0):
        r = rng.random()
        if d > 5 or r < 0.3:
            return rng.choice(scalars)
        if r < 0.45:
            return [tree(d + 1) for _ in range(rng.randint(0, 3))]
        if r < 0.6:
            return {rng.choice(["a", "$c", "requires_grad"]): tree(d + 1) for _ in range(2)}
        node = {rng.choice(tags): rng.choice([tree(d + 1), [[tree(d + 1), tree(d + 1)]],
                                              rng.randint(-1, 3)])}
        if rng.random() < 0.3:
            node[rng.choice(["requires_grad", "x"])] = rng.choice([True, 1, None])
        return node

    p = tmp_path / "t.musa"
    outcomes = set()
    for _ in range(150):  # (each save syncs the file: about 10 ms)
        write_tree(p, tree(), [musa.ones(2), musa.arange(3), musa.ones(2, dtype=musa.bool)])
        try:
            musa.load(p)
            outcomes.add("loaded")
        except OSError as e:
            assert str(e).startswith(f"[musa.load] {p}: "), e
            outcomes.add("refused")
    assert outcomes == {"loaded", "refused"}


def crc32c(data):
    """CRC-32C (Castagnoli), as the container's prelude holds them: the
    Python one of the TensorBoard writer (checked against the standard
    check value in test_tensorboard.py), not the C one under test."""
    from musa.utils.tensorboard._events import crc32c as python_crc32c
    return python_crc32c(data)


def test_bool_bytes_other_than_0_and_1_are_refused(tmp_path):
    """A crafted file (its CRCs repaired) with bool bytes 2 and 255: the
    reader refuses it (kernels rely on bools being 0 or 1: a 2 printed True
    but summed and cast as 2)."""
    p = tmp_path / "b.musa"
    musa.save([musa.tensor([True, False, True, True])], p)
    b = bytearray(p.read_bytes())
    data_off, data_len = struct.unpack_from("<QQ", b, 24)
    assert crc32c(b[data_off:]) == struct.unpack_from("<I", b, 44)[0]
    b[data_off:data_off + 4] = b"\x02\x00\x01\xff"
    struct.pack_into("<I", b, 44, crc32c(b[data_off:]))
    struct.pack_into("<I", b, 48, crc32c(b[:48]))
    p.write_bytes(bytes(b))
    for kw in ({}, {"mmap": True}):
        with pytest.raises(OSError, match=r"storages\[0\] is bool but element 0 is the byte 2"):
            musa.load(p, **kw)


def test_damaged_files(tmp_path):
    p = tmp_path / "ok.musa"
    musa.save({"x": musa.arange(100.0), "y": [1, 2]}, p)
    good = p.read_bytes()
    bad = tmp_path / "bad.musa"
    for cut in (0, 1, 8, 63, 64, 100, len(good) // 2, len(good) - 1):
        bad.write_bytes(good[:cut])
        with pytest.raises(OSError, match=r"^\[musa.load\] "):
            musa.load(bad)
        with pytest.raises(OSError, match=r"^\[musa.load\] "):
            musa.load(io.BytesIO(good[:cut]))
    for at in (5, 20, 70, len(good) - 10):  # a flipped byte: a CRC (or the magic) catches it
        b = bytearray(good)
        b[at] ^= 0x10
        bad.write_bytes(bytes(b))
        with pytest.raises(OSError, match=r"^\[musa.load\] .*(CRC mismatch|magic|prelude)"):
            musa.load(bad)
    bad.write_bytes(b"just some text, not a checkpoint at all")
    with pytest.raises(OSError, match=r"^\[musa.load\] .*not a .musa file"):
        musa.load(bad)
    bad.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(OSError, match=r"^\[musa.load\] .*legacy format"):
        musa.load(bad)
    with pytest.raises(FileNotFoundError, match=r"^\[musa.load\] cannot open"):
        musa.load(tmp_path / "missing.musa")


def test_load_argument_errors(tmp_path):
    p = tmp_path / "x.musa"
    musa.save(1, p)
    with pytest.raises(TypeError, match=r"^\[musa.load\] f must be a path"):
        musa.load(3)
    with pytest.raises(TypeError, match=r"^\[musa.load\] mmap must be a bool"):
        musa.load(p, mmap=1)
    with pytest.raises(TypeError, match=r"^\[musa.load\] weights_only must be a bool"):
        musa.load(p, weights_only=None)
    with pytest.raises(ValueError, match=r"^\[musa.load\] mmap=True needs a path"):
        musa.load(io.BytesIO(p.read_bytes()), mmap=True)
    with open(p, "r", encoding="latin1") as f, \
            pytest.raises(TypeError, match=r"^\[musa.load\] .* is a text file"):
        musa.load(f)
    assert musa.load(p, weights_only=False) == 1  # accepted: musa.load never runs code
    with pytest.raises(ValueError, match=r"^\[musa.load\] cannot open 'a\\x00b'"):
        musa.load("a\0b")
    with pytest.raises(ValueError, match=r"^\[musa.save\] "):
        musa.save(1, "a\0b")
