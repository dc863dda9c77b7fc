"""musa.load of PyTorch checkpoints (the zip files torch.save writes):
handmade pickles (no torch needed), malformed and damaged ones, malicious
pickles refused without running, and state dicts written by python3-torch
loading into musa models."""
import collections
import copyreg
import io
import math
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import musa
import musa.nn as nn
import musa.optim as optim

from test_serialization import bits


# ---------------------------------------------------------------------------
# PyTorch checkpoints: handmade pickles (no torch needed)
# ---------------------------------------------------------------------------

class G:
    """GLOBAL module.name in a handmade pickle."""

    def __init__(self, module, name):
        self.module, self.name = module, name


class Call:
    """func(*args): REDUCE."""

    def __init__(self, func, *args):
        self.func, self.args = func, args


class Pid:
    """A persistent id: BINPERSID."""

    def __init__(self, pid):
        self.pid = pid


def emit(x):
    """Protocol-2 pickle opcodes for x (no memo)."""
    if isinstance(x, G):
        return b"c" + x.module.encode() + b"\n" + x.name.encode() + b"\n"
    if isinstance(x, Call):
        return emit(x.func) + emit(tuple(x.args)) + b"R"
    if isinstance(x, Pid):
        return emit(x.pid) + b"Q"
    if type(x) is tuple:
        return b"(" + b"".join(emit(e) for e in x) + b"t"
    if type(x) is list:
        return b"](" + b"".join(emit(e) for e in x) + b"e"
    if type(x) is dict:
        return b"}(" + b"".join(emit(k) + emit(v) for k, v in x.items()) + b"u"
    return pickle.dumps(x, protocol=2)[2:-1].replace(b"q\x00", b"")


def pkl(x):
    return b"\x80\x02" + emit(x) + b"."


def tensor_call(key, numel, size, stride, offset=0, storage="FloatStorage", location="cpu",
                requires_grad=False):
    return Call(G("torch._utils", "_rebuild_tensor_v2"),
                Pid(("storage", G("torch", storage), key, location, numel)), offset, size, stride,
                requires_grad, Call(G("collections", "OrderedDict")))


def write_zip(path, data_pkl, records=(), extra=()):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", data_pkl)
        for key, data in dict(records).items():
            z.writestr(f"archive/data/{key}", data)
        z.writestr("archive/version", b"3\n")
        for name, data in extra:
            z.writestr(name, data)


FLOATS6 = np.arange(6, dtype="<f4").tobytes()


def test_handmade_checkpoint_loads(tmp_path):
    p = tmp_path / "h.pt"
    obj = {"a": tensor_call("0", 6, (2, 3), (3, 1)), "b": tensor_call("0", 6, (3,), (1,), 3),
           "c": tensor_call("0", 6, (2, 2), (0, 2), 1), "n": [1, 2.5, "s", None, True]}
    write_zip(p, pkl(obj), {"0": FLOATS6})
    y = musa.load(p)
    assert y["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and y["b"].tolist() == [3, 4, 5]
    assert y["c"].tolist() == [[1, 3], [1, 3]] and y["n"] == [1, 2.5, "s", None, True]
    assert y["a"]._shares_storage(y["b"])
    y["a"][1, 0] = 9.0
    assert y["b"][0].item() == 9.0


MALFORMED = [
    (tensor_call("0", 6, (7,), (1,)), "reaches element 6 of storage '0', which has 6"),
    (tensor_call("0", 6, (2,), (1,), 5), "reaches element 6"),
    (tensor_call("0", 6, (2,), (-1,), 1), "do not describe a tensor"),
    (tensor_call("0", 6, (2,), (1, 1)), "do not describe a tensor"),
    (tensor_call("0", 6, (2.0,), (1,)), "do not describe a tensor"),
    (tensor_call("0", 6, (2,), (1,), -1), "do not describe a tensor"),
    (tensor_call("0", 5, (2,), (1,)), "record archive/data/0 holds 24 bytes; 5 float32 elements"),
    (tensor_call("1", 6, (2,), (1,)), "storage '1' has no record archive/data/1"),
    (tensor_call("../0", 6, (2,), (1,)), "refuses persistent id"),
    (tensor_call("0", 6, (2,), (1,), storage="ShortStorage"), "6 int16 elements take 12"),
    (tensor_call("0", 6, (2,), (1,), storage="ComplexFloatStorage"), "no complex64 dtype"),
    ([tensor_call("0", 6, (2,), (1,)), tensor_call("0", 3, (2,), (1,), storage="DoubleStorage")],
     "storage '0' is used as 6 float32 elements and as 3 float64"),
    (tensor_call("0", 6, (2,), (1,), location="cuda:0"), "storage '0' would load on cuda:0"),
    (tensor_call("0", 6, (2,), (1,), location="tpu"), "storage '0' was saved on 'tpu'"),
    (Pid(("module", "x")), "refuses persistent id"),
    (Pid(("storage", "FloatStorage", "0", "cpu", 6)), "is not a storage class"),
    (Pid(("storage", G("torch", "FloatStorage"), "0", "cpu", 6)), "a storage without a tensor"),
    (Call(G("torch._utils", "_rebuild_tensor_v2"), "x", 0, (1,), (1,), False, {}),
     "_rebuild_tensor: 'x' is not a storage"),
    (Call(G("torch._utils", "_rebuild_parameter"), "x", True, {}), "'x' is not a tensor"),
    (G("collections", "OrderedDict"), "holds the global OrderedDict itself, not data"),
    (G("torch", "FloatStorage"), "holds a storage class, not data"),
    (Call(G("torch", "Size"), ("a",)), "torch.Size of"),
    (tensor_call("2", 6, (2,), (1,), storage="LongStorage", requires_grad=True),
     "requires_grad on a musa.int64 tensor"),
]


@pytest.mark.parametrize("obj, what", MALFORMED, ids=[w[:40] for _, w in MALFORMED])
def test_handmade_malformed_checkpoints(tmp_path, obj, what):
    p = tmp_path / "m.pt"
    write_zip(p, pkl(obj), {"0": FLOATS6, "2": np.arange(6, dtype="<i8").tobytes()})
    with pytest.raises(Exception, match=r"^\[musa.load\] " + str(p).replace("\\", "\\\\")) as e:
        musa.load(p)
    assert what in str(e.value)
    assert isinstance(e.value, (pickle.UnpicklingError, RuntimeError))


def test_damaged_zips(tmp_path):
    p = tmp_path / "ok.pt"
    write_zip(p, pkl({"a": tensor_call("0", 6, (6,), (1,))}), {"0": FLOATS6})
    good = p.read_bytes()
    assert musa.load(p)["a"].tolist() == list(range(6))
    bad = tmp_path / "bad.pt"
    for cut in (10, len(good) // 2, len(good) - 5):
        bad.write_bytes(good[:cut])
        with pytest.raises(pickle.UnpicklingError, match=r"^\[musa.load\] .*damaged zip"):
            musa.load(bad)
    b = bytearray(good)
    at = good.index(FLOATS6)
    b[at + 5] ^= 1  # the record's CRC catches it
    bad.write_bytes(bytes(b))
    with pytest.raises(pickle.UnpicklingError, match=r"^\[musa.load\] .*(CRC|damaged)"):
        musa.load(bad)
    assert musa.load(bad, mmap=True)["a"].numel() == 6  # mapped records are not checked
    write_zip(bad, b"\x80\x02K\x01")  # no STOP
    with pytest.raises(pickle.UnpicklingError, match="not a valid pickle"):
        musa.load(bad)
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("x/other.pkl", b"")
    with pytest.raises(pickle.UnpicklingError, match="holds no NAME/data.pkl"):
        musa.load(bad)
    write_zip(bad, pkl(1), extra=[("archive/constants.pkl", b"")])
    with pytest.raises(pickle.UnpicklingError, match="a TorchScript archive"):
        musa.load(bad)
    write_zip(bad, pkl(1), extra=[("archive/byteorder", b"big")])
    with pytest.raises(pickle.UnpicklingError, match="big-endian"):
        musa.load(bad)


def test_mutated_pickles_load_or_raise_cleanly(tmp_path):
    """Bytes of a checkpoint's data.pkl flipped, cut and inserted: each
    loads or raises pickle.UnpicklingError (RuntimeError for a location
    changed into another device's); nothing else escapes, nothing crashes."""
    import random
    rng = random.Random(3)
    x = tensor_call("0", 6, (2, 3), (3, 1))
    base = pkl({
        "w": x, "v": tensor_call("0", 6, (3,), (1,), 3),
        "p": Call(G("torch._utils", "_rebuild_parameter"), tensor_call("0", 6, (6,), (1,)), True,
                  Call(G("collections", "OrderedDict"))),
        "n": [1, 2.5, "s", None, (True,)], "i": tensor_call("2", 6, (6,), (1,), 0, "LongStorage")})
    records = {"0": FLOATS6, "2": np.arange(6, dtype="<i8").tobytes()}
    write_zip(tmp_path / "ok.pt", base, records)
    assert musa.load(tmp_path / "ok.pt")["v"].tolist() == [3, 4, 5]
    outcomes = set()
    for _ in range(500):
        b = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(b))
            r = rng.random()
            if r < 0.5:
                b[at] = rng.randrange(256)
            elif r < 0.75:
                del b[at:at + rng.randint(1, 6)]
            else:
                b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
        buf = io.BytesIO()
        write_zip(buf, bytes(b), records)
        buf.seek(0)
        try:
            musa.load(buf)
            outcomes.add("loaded")
        except pickle.UnpicklingError as e:
            assert str(e).startswith("[musa.load] <file object>: "), e
            outcomes.add("refused")
        except RuntimeError as e:
            assert str(e).startswith("[musa.load] ") and "saved on" in str(e), e
    assert outcomes == {"loaded", "refused"}


# ---------------------------------------------------------------------------
# malicious pickles: refused, and nothing runs
# ---------------------------------------------------------------------------

class Evil:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def evil_pickles(canary):
    cmd = f"touch {canary}"
    yield "os.system", pickle.dumps(Evil(os.system, cmd), protocol=2)
    yield "os.system, protocol 4", pickle.dumps(Evil(os.system, cmd), protocol=4)
    yield "os.system, protocol 5", pickle.dumps({"w": [Evil(os.system, cmd)]}, protocol=5)
    yield "builtins.eval", pickle.dumps(Evil(eval, f"__import__('os').system('{cmd}')"), protocol=2)
    yield "builtins.exec", pickle.dumps(Evil(exec, f"open('{canary}', 'w')"), protocol=2)
    yield "subprocess.Popen", pickle.dumps(Evil(subprocess.Popen, ["touch", str(canary)]), protocol=2)
    yield "GLOBAL subprocess.Popen", b"\x80\x02csubprocess\nPopen\n."
    yield "getattr chain", pkl(Call(G("builtins", "getattr"), G("os", "path"), "join"))
    yield "INST", b"(S'" + cmd.encode() + b"'\nios\nsystem\n."
    yield "OBJ", b"\x80\x02(cos\nsystem\nX" + struct.pack("<I", len(cmd)) + cmd.encode() + b"o."
    yield "STACK_GLOBAL", (b"\x80\x04X\x02\x00\x00\x00osX\x06\x00\x00\x00system\x93X"
                           + struct.pack("<I", len(cmd)) + cmd.encode() + b"\x85R.")
    yield "a rebuild function's global with a REDUCE of os.system",\
        pkl(tensor_call("0", 6, (6,), (1,))).replace(b"ccollections\nOrderedDict\n",
                                                     b"cos\nsystem\n")
    yield "a memo bomb", b"\x80\x02K\x01r\xff\xff\xff\x7f."
    yield "nested in a state dict", pkl(collections.OrderedDict(
        [("w", tensor_call("0", 6, (6,), (1,)))])).replace(b"u.", b"") + \
        b"X\x01\x00\x00\x00e" + pickle.dumps(Evil(os.system, cmd), protocol=2)[2:-1] + b"su."


def test_malicious_pickles_are_refused_and_never_run(tmp_path):
    canary = tmp_path / "canary"
    names = []
    for name, data in evil_pickles(canary):
        p = tmp_path / "evil.pt"
        write_zip(p, data, {"0": FLOATS6})
        with pytest.raises(pickle.UnpicklingError, match=r"^\[musa.load\] .*(refuses|opcode|memo)"):
            musa.load(p)
        with pytest.raises(pickle.UnpicklingError, match=r"^\[musa.load\] "):
            musa.load(io.BytesIO(p.read_bytes()))
        assert not canary.exists(), name
        names.append(name)
    assert len(names) == 14


def test_build_cannot_change_classes_or_functions(tmp_path):
    """BUILD sets attributes of the object on the stack: on a global it
    would patch musa's Parameter class or a rebuild function for the whole
    process. Globals are immutable stand-ins, so it fails."""
    for module, name in [("torch.nn.parameter", "Parameter"), ("torch._utils", "_rebuild_tensor_v2"),
                         ("collections", "OrderedDict"), ("torch", "FloatStorage"),
                         ("torch", "float32")]:
        for state in ({"__new__": None, "x": 1}, (None, {"__new__": None, "x": 1})):
            write_zip(tmp_path / "b.pt", pkl(G(module, name))[:-1] + emit(state) + b"b.")
            with pytest.raises(pickle.UnpicklingError, match=r"^\[musa.load\] "):
                musa.load(tmp_path / "b.pt")
    assert type(nn.Parameter(musa.ones(1))) is nn.Parameter
    assert not hasattr(musa._pytorch._Unpickler._rebuild_tensor_v2, "x")
    # on an OrderedDict being built (torch's state_dict _metadata) it is allowed
    write_zip(tmp_path / "b.pt", pkl(Call(G("collections", "OrderedDict")))[:-1]
              + emit({"_metadata": {"": {"version": 1}}}) + b"b.")
    assert musa.load(tmp_path / "b.pt")._metadata == {"": {"version": 1}}


def test_refusal_names_the_global(tmp_path):
    p = tmp_path / "evil.pt"
    write_zip(p, pickle.dumps(Evil(os.system, "true"), protocol=2))
    with pytest.raises(pickle.UnpicklingError,
                       match=r"refuses global 'posix.system': only tensors, Parameters, dtypes"):
        musa.load(p)


def test_extension_registry_goes_through_the_allow_list(tmp_path):
    """EXT2 names a global through copyreg's registry: refused like GLOBAL."""
    canary = tmp_path / "canary"
    copyreg.add_extension("os", "system", 0x4242)
    try:
        cmd = f"touch {canary}".encode()
        data = b"\x80\x02\x83\x42\x42X" + struct.pack("<I", len(cmd)) + cmd + b"\x85R."
        write_zip(tmp_path / "e.pt", data)
        with pytest.raises(pickle.UnpicklingError, match="opcode EXT2"):
            musa.load(tmp_path / "e.pt")
    finally:
        copyreg.remove_extension("os", "system", 0x4242)
    assert not canary.exists()


# ---------------------------------------------------------------------------
# PyTorch checkpoints written by python3-torch
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def test_torch_state_dict_loads_into_the_musa_model(tmp_path, torch):
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(),
                               torch.nn.Linear(4, 3))
    for _ in range(3):  # running statistics and num_batches_tracked move
        tnet(torch.randn(8, 5))
    tnet.eval()
    torch.save(tnet.state_dict(), tmp_path / "net.pt")
    sd = musa.load(tmp_path / "net.pt")
    assert type(sd) is collections.OrderedDict and list(sd) == list(tnet.state_dict())
    assert sd["1.num_batches_tracked"].dtype == musa.int64
    assert sd["1.num_batches_tracked"].item() == 3
    net = nn.Sequential(nn.Linear(5, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 3))
    net.load_state_dict(sd)
    net.eval()
    x = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    with torch.no_grad():
        want = tnet(torch.from_numpy(x)).numpy()
    got = net(musa.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_torch_training_checkpoint_resumes_in_musa(tmp_path, torch):
    """A model's and an Adam optimizer's state_dicts saved by torch
    continue training in musa as they do in torch."""
    torch.manual_seed(0)
    tl = torch.nn.Linear(3, 2)
    topt = torch.optim.Adam(tl.parameters(), lr=0.01)
    x = torch.randn(4, 3)
    for _ in range(3):
        topt.zero_grad()
        tl(x).pow(2).mean().backward()
        topt.step()
    torch.save({"model": tl.state_dict(), "optim": topt.state_dict()}, tmp_path / "ck.pt")
    ck = musa.load(tmp_path / "ck.pt")
    ml = nn.Linear(3, 2)
    ml.load_state_dict(ck["model"])
    mopt = optim.Adam(ml.parameters(), lr=0.01)
    mopt.load_state_dict(ck["optim"])
    mx = musa.from_numpy(x.numpy())
    for _ in range(3):
        topt.zero_grad()
        tl(x).pow(2).mean().backward()
        topt.step()
        mopt.zero_grad()
        ml(mx).pow(2).mean().backward()
        mopt.step()
    np.testing.assert_allclose(ml.weight.detach().numpy(), tl.weight.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(ml.bias.detach().numpy(), tl.bias.detach().numpy(), atol=1e-6)


def test_torch_dtypes_views_and_containers(tmp_path, torch):
    x = torch.arange(24, dtype=torch.float32)
    tensors = {
        "f16": torch.tensor([1.5, -0.0, 65504.0, float("inf")], dtype=torch.float16),
        "bf16": torch.tensor([1.5, -3e38, float("-inf"), 1e-40], dtype=torch.bfloat16),
        "f64": torch.tensor([math.pi, -1e300]), "i64": torch.tensor([-2**63, 2**63 - 1]),
        "i32": torch.tensor([-2**31, 7], dtype=torch.int32),
        "i8": torch.tensor([-128, 127], dtype=torch.int8),
        "i16": torch.tensor([-32768, 32767, 5], dtype=torch.int16),
        "u8": torch.tensor([0, 255], dtype=torch.uint8), "b": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5), "empty": torch.empty(0, 3),
    }
    obj = {"x": x, "slice": x[2:9:3], "t": x.view(4, 6).t(), "view": x.view(2, 3, 4)[:, 1],
           "expanded": torch.ones(3).expand(4, 3), "tensors": tensors,
           "nested": [1, (2.5, None, "s", True), {"k": [x[:2]]}, {3: "int key"}],
           "p": torch.nn.Parameter(torch.ones(2)), "rg": torch.ones(2, requires_grad=True)}
    for proto in (2, 4, 5):
        torch.save(obj, tmp_path / "o.pt", pickle_protocol=proto)
        y = musa.load(tmp_path / "o.pt")
        for k, t in tensors.items():
            got = y["tensors"][k]
            assert tuple(got.shape) == tuple(t.shape), k
            want = t.float() if t.dtype == torch.bfloat16 else t
            assert np.ascontiguousarray(want.numpy()).tobytes() == bits(got), k
            assert str(got.dtype).split(".")[1] == str(t.dtype).split(".")[1], k
        for k in ("x", "slice", "t", "view", "expanded"):
            assert y[k].tolist() == obj[k].tolist() and y[k].stride() == obj[k].stride(), k
            assert y[k]._shares_storage(y["x"]) or k == "expanded"
        y["x"][5] = -1.0
        assert y["slice"][1].item() == -1.0 and y["t"][5, 0].item() == -1.0
        assert y["nested"][:2] == [1, (2.5, None, "s", True)] and y["nested"][3] == {3: "int key"}
        assert y["nested"][2]["k"][0]._shares_storage(y["x"])
        assert type(y["p"]) is nn.Parameter and y["p"].requires_grad
        assert y["rg"].requires_grad and type(y["rg"]) is musa.Tensor


def test_torch_checkpoint_from_file_objects_and_mmap(tmp_path, torch):
    w = torch.arange(100.0)
    obj = {"w": w, "v": w[10:]}
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    y = musa.load(buf)
    assert y["w"].tolist() == list(range(100)) and y["w"]._shares_storage(y["v"])
    p = tmp_path / "m.pt"
    torch.save(obj, p)
    before = p.read_bytes()
    y = musa.load(p, mmap=True)
    assert y["v"].tolist() == list(range(10, 100))
    y["w"][50] = -5.0
    assert y["v"][40].item() == -5.0 and p.read_bytes() == before


def test_torch_cuda_locations_need_map_location(tmp_path, torch):
    torch.save({"w": torch.arange(4.0)}, tmp_path / "c.pt")
    # rewrite the location as a GPU machine would have written it
    with zipfile.ZipFile(tmp_path / "c.pt") as z:
        entries = [(i.filename, z.read(i)) for i in z.infolist()]
    with zipfile.ZipFile(tmp_path / "g.pt", "w") as z:
        for name, data in entries:
            if name.endswith("data.pkl"):
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
                assert b"cuda:0" in data
            z.writestr(name, data)
    with pytest.raises(RuntimeError, match=r"would load on cuda:0.*pass map_location='cpu'"):
        musa.load(tmp_path / "g.pt")
    for ml in ("cpu", {"cuda:0": "cpu"}, musa.device("cpu"), lambda s, loc: s):
        assert musa.load(tmp_path / "g.pt", map_location=ml)["w"].tolist() == [0, 1, 2, 3]
    locs = []
    with pytest.raises(RuntimeError, match="would load on cuda:0"):  # None: where it was saved
        musa.load(tmp_path / "g.pt", map_location=lambda s, loc: locs.append(loc))
    assert locs == ["cuda:0"]


def test_torch_pickled_objects_are_refused(tmp_path, torch):
    canary = tmp_path / "canary"
    torch.save({"w": torch.ones(2), "evil": Evil(os.system, f"touch {canary}")}, tmp_path / "e.pt")
    with pytest.raises(pickle.UnpicklingError, match="refuses global 'posix.system'"):
        musa.load(tmp_path / "e.pt")
    assert not canary.exists()
    torch.save(torch.nn.Linear(2, 2), tmp_path / "m.pt")
    with pytest.raises(pickle.UnpicklingError,
                       match=r"refuses global 'torch.nn.modules.linear.Linear'.*save its state_dict"):
        musa.load(tmp_path / "m.pt")
    torch.save(torch.ones(2), tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    with pytest.raises(OSError, match=r"legacy format.*re-save it with a newer torch.save"):
        musa.load(tmp_path / "legacy.pt")


def test_loading_torch_checkpoints_does_not_import_torch(tmp_path, torch):
    torch.save({"w": torch.arange(3.0), "n": 1}, tmp_path / "a.pt")
    code = ("import sys; sys.modules['torch'] = None\n"
            "import musa\n"
            f"y = musa.load({str(tmp_path / 'a.pt')!r})\n"
            "assert y['w'].tolist() == [0.0, 1.0, 2.0] and y['n'] == 1\n"
            "print('ok')\n")
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(musa.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
