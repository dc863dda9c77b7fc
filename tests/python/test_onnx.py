"""musa.onnx: export (checked by onnx.checker and shape inference inside
export), import, round trips of a model zoo, PyTorch-exported models, the
backend, and hostile files."""
import io
import os

import numpy as np
import pytest

import musa
import musa.nn as nn

onnx = pytest.importorskip("onnx")


def block(lib, C=16):
    """A pre-LayerNorm causal self-attention block with a GELU MLP (lib:
    musa.nn or torch.nn)."""
    tril = musa.tril if lib is nn else _torch().tril

    class Block(lib.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = lib.LayerNorm(C), lib.LayerNorm(C)
            self.qkv, self.proj = lib.Linear(C, 3 * C), lib.Linear(C, C)
            self.ff = lib.Sequential(lib.Linear(C, 2 * C), lib.GELU(), lib.Linear(2 * C, C))

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
            q, k, v = (t.reshape(B, T, 2, C // 2).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (C // 2) ** 0.5
            att = att.masked_fill(tril(x.new_ones(T, T)) == 0, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
            return x + self.ff(self.ln2(x))
    return Block()


def _torch():
    import torch
    return torch


def resblock(lib):
    class ResBlock(lib.Module):
        def __init__(self):
            super().__init__()
            self.c1 = lib.Conv2d(3, 8, 3, padding=1, bias=False)
            self.b1 = lib.BatchNorm2d(8)
            self.c2 = lib.Conv2d(8, 8, 3, padding=1, bias=False)
            self.b2 = lib.BatchNorm2d(8)
            self.short = lib.Conv2d(3, 8, 1, stride=1)
            self.pool = lib.AdaptiveAvgPool2d(1)
            self.fc = lib.Linear(8, 10)

        def forward(self, x):
            h = self.b1(self.c1(x)).relu()
            h = (self.b2(self.c2(h)) + self.short(x)).relu()
            return self.fc(self.pool(h).flatten(1))
    return ResBlock()


def lstmnet(lib):
    class LSTMNet(lib.Module):
        def __init__(self):
            super().__init__()
            self.rnn = lib.LSTM(6, 8, batch_first=True)
            self.fc = lib.Linear(8, 3)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.fc(y[:, -1])
    return LSTMNet()


def resnet18(lib):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "bench"))
    import bench_models  # the CIFAR ResNet-18 the benchmarks train, written once for both
    return bench_models.resnet18(_torch() if lib is not nn else musa)


def zoo(lib):
    return {
        "resnet18": (resnet18(lib), (1, 3, 32, 32)),
        "mlp": (lib.Sequential(lib.Linear(8, 16), lib.ReLU(), lib.Linear(16, 4)), (3, 8)),
        "cnn_bn": (lib.Sequential(lib.Conv2d(1, 4, 3, padding=1), lib.BatchNorm2d(4), lib.ReLU(),
                                  lib.MaxPool2d(2), lib.Flatten(), lib.Linear(64, 10),
                                  lib.LogSoftmax(-1)), (2, 1, 8, 8)),
        "resnet_block": (resblock(lib), (2, 3, 8, 8)),
        "transformer_block": (block(lib), (2, 5, 16)),
        "lstm": (lstmnet(lib), (2, 4, 6)),
        "upsample": (lib.Sequential(lib.Conv2d(2, 3, 3, padding=1),
                                    lib.Upsample(scale_factor=2, mode="bilinear"),
                                    lib.Upsample(size=(11, 13), mode="bicubic", align_corners=True)),
                     (2, 2, 5, 6)),
    }


def export_bytes(model, args, **kw):
    buf = io.BytesIO()
    musa.onnx.export(model, args, buf, **kw)
    return buf.getvalue()


def randomize_bn(model):
    for m in model.modules():
        if m.__class__.__name__ == "BatchNorm2d":
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)


@pytest.mark.parametrize("name", list(zoo(nn)))
def test_round_trip_equals_musa(name):
    musa.manual_seed(0)
    model, shape = zoo(nn)[name]
    with musa.no_grad():
        randomize_bn(model)
    x = musa.randn(*shape)
    data = export_bytes(model, (x,), input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(data)
    onnx.checker.check_model(m, full_check=True)
    assert [i.name for i in m.graph.input] == ["x"] and [o.name for o in m.graph.output] == ["y"]
    assert any(".py:" in n.doc_string for n in m.graph.node)  # the user's source lines
    assert model.training  # export ran in eval mode and restored the mode
    model.eval()
    with musa.no_grad():
        want = model(x)
    got = musa.onnx.load_model(m)(x)
    assert float((got - want).abs().max()) <= 1e-5 * (1 + float(want.abs().max()))


def test_export_names_parameters_and_writes_files(tmp_path):
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh())
    path = tmp_path / "m.onnx"
    musa.onnx.export(model, musa.randn(2, 4), path)
    m = onnx.load(str(path))
    assert {t.name for t in m.graph.initializer} >= {"0.weight", "0.bias"}
    assert [n.op_type for n in m.graph.node] == ["Gemm", "Tanh"]
    loaded = musa.onnx.load(path)
    x = musa.randn(2, 4)
    assert float((loaded(x) - model(x).detach()).abs().max()) < 1e-6
    assert "tanh(" in loaded.get_graph()  # musa IR of the imported graph
    with pytest.raises(ValueError, match=r"input 'input_0' has shape \(5, 4\); dim 0 must be 2"):
        loaded(musa.randn(5, 4))  # a fixed dim of the file


def test_dynamic_batch():
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 3))
    data = export_bytes(model, (musa.randn(2, 1, 4, 4),), input_names=["x"], output_names=["y"],
                        dynamic_axes={"x": {0: "batch"}, "y": [0]})
    m = onnx.load_from_string(data)
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert m.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "y_dynamic_axes_1"
    r = musa.onnx.load_model(m)
    for b in (1, 7):
        x = musa.randn(b, 1, 4, 4)
        assert float((r(x) - model(x).detach()).abs().max()) < 1e-5


def test_export_errors():
    with pytest.raises(NotImplementedError, match=r"\[onnx.export\] op sort"):
        musa.onnx.export(lambda x: x.sort()[0], musa.randn(4), io.BytesIO())
    with pytest.raises(ValueError, match="opset 17"):
        musa.onnx.export(nn.ReLU(), musa.randn(2), io.BytesIO(), opset_version=13)
    with pytest.raises(ValueError, match="input_names"):
        musa.onnx.export(nn.ReLU(), musa.randn(2), io.BytesIO(), input_names=["a", "b"])
    with pytest.raises(ValueError, match="neither an input nor an output"):
        musa.onnx.export(nn.ReLU(), musa.randn(2), io.BytesIO(), dynamic_axes={"z": [0]})
    with pytest.raises(TypeError, match="must be a Tensor"):
        musa.onnx.export(nn.ReLU(), (3,), io.BytesIO())

    def branchy(x):
        return x * 2 if x.sum() > 0 else x - 1
    with pytest.raises(NotImplementedError, match="reads a tensor's value on the host"):
        musa.onnx.export(branchy, musa.ones(3), io.BytesIO())


@pytest.mark.parametrize("name", list(zoo(nn)))
def test_pytorch_exported_models_load(name, tmp_path):
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    torch.manual_seed(0)
    model, shape = zoo(tnn)[name]
    model.eval()
    with torch.no_grad():
        randomize_bn(model)
    x = torch.randn(*shape)
    path = str(tmp_path / f"{name}.onnx")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                          opset_version=17)
    got = musa.onnx.load(path)(musa.tensor(x.numpy())).numpy()
    want = model(x).detach().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_backend_runs_a_node_model():
    from onnx import helper, TensorProto
    import musa.onnx.backend as backend
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=2.0, beta=0.5)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                        for n, s in (("a", [3, 2]), ("b", [3, 4]), ("c", [4]))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    a, b, c = (np.random.RandomState(i).randn(*s).astype(np.float32)
               for i, s in enumerate(((3, 2), (3, 4), (4,))))
    (y,) = backend.run_model(m, [a, b, c])
    np.testing.assert_allclose(y, 2 * a.T @ b + 0.5 * c, rtol=1e-5)
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


def _model_bytes():
    return export_bytes(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), (musa.randn(2, 4),))


def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7f) | (0x80 if n > 0x7f else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(num, payload):  # a length-delimited protobuf field
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def test_hostile_files(tmp_path):
    """Corrupt and hostile files give Python exceptions naming the problem,
    never a crash (the C importer; tests/fuzz/fuzz_onnx_load.c fuzzes it)."""
    from onnx import helper, TensorProto
    data = _model_bytes()
    # truncations and byte flips: a clear error or a model that loads; never a crash
    rng = np.random.RandomState(0)
    for cut in (1, 7, len(data) // 3, len(data) - 3):
        p = tmp_path / "cut.onnx"
        p.write_bytes(data[:cut])
        with pytest.raises((OSError, NotImplementedError)):
            musa.onnx.load(p)(musa.randn(2, 4))
    for _ in range(200):
        b = bytearray(data)
        for i in rng.randint(0, len(b), 3):
            b[i] ^= 1 << rng.randint(8)
        try:
            musa.onnx.load_model(bytes(b))(musa.randn(2, 4))
        except (OSError, ValueError, TypeError, IndexError, RuntimeError, NotImplementedError,
                MemoryError):
            pass

    def model(nodes, inputs=(("x", [2]),), outputs=(("y", [2]),), inits=(), opset=17):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                           for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                               for n, s in outputs], initializer=list(inits))
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    # an unsupported op names the node, the op, its domain and the opset
    with pytest.raises(NotImplementedError,
                       match=r"node 'hm' \(Unique\): op Unique \(domain '', opset 17\)"):
        musa.onnx.load_model(model([helper.make_node("Unique", ["x"], ["y"], name="hm")]))
    with pytest.raises(NotImplementedError, match=r"op Relu of domain 'com.example'"):
        musa.onnx.load_model(model([helper.make_node("Relu", ["x"], ["y"],
                                                     domain="com.example")]))
    # a cycle (y feeds its own producer) and a value read before it is made
    with pytest.raises(OSError, match=r"reads 'z', which no input, initializer or earlier node"):
        musa.onnx.load_model(model([helper.make_node("Relu", ["z"], ["y"]),
                                    helper.make_node("Relu", ["y"], ["z"])]))
    # attributes: an unknown one, a wrong type, a subgraph
    with pytest.raises(OSError, match=r"attribute 'alpha' is not one musa's importer knows"):
        musa.onnx.load_model(model([helper.make_node("Relu", ["x"], ["y"], alpha=1.0)]))
    with pytest.raises(OSError, match=r"attribute 'axis' is FLOAT; Softmax takes INT"):
        musa.onnx.load_model(model([helper.make_node("Softmax", ["x"], ["y"], axis=1.5)]))
    sub = helper.make_graph([], "sub", [], [])
    with pytest.raises(OSError, match=r"attribute 'then' holds a subgraph"):
        musa.onnx.load_model(model([helper.make_node("Relu", ["x"], ["y"], then=sub)]))
    with pytest.raises(OSError, match=r"names 'y', a value defined already"):
        musa.onnx.load_model(model([helper.make_node("Relu", ["x"], ["y"]),
                                    helper.make_node("Relu", ["x"], ["y"])]))
    with pytest.raises(OSError, match=r"opset 19; musa's importer reads opsets 1 to 18"):
        musa.onnx.load_model(model([helper.make_node("Relu", ["x"], ["y"])], opset=19))
    # external data pointing outside the model's folder
    m = onnx.load_from_string(data)
    t = m.graph.initializer[0]
    t.data_location = TensorProto.EXTERNAL
    t.ClearField("raw_data")
    t.ClearField("float_data")
    e = t.external_data.add()
    e.key, e.value = "location", "../../etc/passwd"
    p = tmp_path / "ext.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(OSError, match="outside the model's folder"):
        musa.onnx.load(p)
    # huge dims: an initializer its data does not fill, and shapes that
    # overflow or cannot be allocated, are clean errors
    t = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    t.dims[0] = 1 << 40
    with pytest.raises(OSError, match=r"initializer 'w'.* holds 1 values"):
        musa.onnx.load_model(model([helper.make_node("Add", ["x", "w"], ["y"])], inits=[t]))
    for op, shape, err in (("Reshape", [1 << 40, 1 << 40], ValueError),
                           ("ConstantOfShape", [1 << 30, 1 << 30], MemoryError)):
        sh = helper.make_tensor("s", TensorProto.INT64, [2], shape)
        n = helper.make_node(op, ["x", "s"] if op == "Reshape" else ["s"], ["y"])
        with pytest.raises(err, match=rf"node 'y' \({op}\)"):
            musa.onnx.load_model(model([n], inputs=[("x", [4])], outputs=[("y", [2, 2])],
                                       inits=[sh]))(musa.ones(4))
    # types nested 100000 deep (a sequence of a sequence of ...): musa's schema
    # does not parse them (no deep recursion), and the input is refused
    # (built from the inside out as a list of headers, not by copying the
    # growing message 100000 times: under ASan that took 500 s)
    heads, n = [], 0
    for _ in range(100000):  # TypeProto.sequence_type -> Sequence.elem_type
        inner = _varint(1 << 3 | 2) + _varint(n)
        outer = _varint(4 << 3 | 2) + _varint(len(inner) + n)
        heads.append(outer + inner)
        n += len(outer) + len(inner)
    t = b"".join(reversed(heads))
    assert t[:40] == _field(4, _field(1, t[len(heads[-1]):]))[:40] and len(t) == n
    graph = _field(11, _field(1, b"x") + _field(2, t)) + _field(12, _field(1, b"x"))
    raw = bytes([0x08, 8]) + _field(7, graph) + _field(8, bytes([0x10, 17]))
    with pytest.raises(OSError, match=r"input 'x' is not a tensor"):
        musa.onnx.load_model(raw)


def test_inputs_read_as_numbers_and_free_dims():
    """A model input that an op reads as numbers (Reshape's shape) is built
    for its values, one plan per value; free dims take any size, equal
    names equal sizes."""
    from onnx import helper, TensorProto

    def vi(name, t, shape):
        return helper.make_tensor_value_info(name, t, shape)
    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"])], "g",
                          [vi("x", TensorProto.FLOAT, ["n", 6]), vi("s", TensorProto.INT64, [2])],
                          [vi("y", TensorProto.FLOAT, None)])
    m = musa.onnx.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert m.input_names == ["x", "s"]
    for n, shape in ((2, [4, 3]), (2, [3, 4]), (3, [9, 2]), (2, [4, 3])):
        x = musa.arange(6.0 * n).reshape(n, 6)
        y = m(x, musa.tensor(shape))
        np.testing.assert_array_equal(y.numpy(), x.numpy().reshape(shape))
    with pytest.raises(ValueError, match=r"node 'y' \(Reshape\).*invalid for input of size 12"):
        m(musa.ones(2, 6), musa.tensor([5, 5]))
    with pytest.raises(TypeError, match=r"input 's' is float32; the model takes int64"):
        m(musa.ones(2, 6), musa.ones(2))
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                          [vi("a", TensorProto.FLOAT, ["n", 3]), vi("b", TensorProto.FLOAT, ["n", 3])],
                          [vi("y", TensorProto.FLOAT, None)])
    m = musa.onnx.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert m(musa.ones(5, 3), musa.ones(5, 3)).shape == (5, 3)
    with pytest.raises(ValueError, match=r"dim 'n' is 2 in input 'a' \(2, 3\) but 4 in input 'b'"):
        m(musa.ones(2, 3), musa.ones(4, 3))


def test_backend_node_suite_pass_rate():
    """The ONNX backend node tests: at least 95 % of the cases whose ops
    musa imports pass (tests/onnx/suite.py prints the per-op table)."""
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, os.path.join(here, "..", "onnx", "suite.py"), "--min",
                        "0.95"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=os.path.dirname(musa.__path__[0])))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "cases of imported ops passed" in r.stdout


def _musa_run_output(model_path, x, tmp_path):
    """musa-run (C, no Python) on model_path with input x (NumPy): its output."""
    import subprocess
    musa_run = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                            "musa-run")
    if not os.path.exists(musa_run):
        pytest.skip("build/musa-run is not built")
    np.save(tmp_path / "x.npy", x)
    r = subprocess.run([musa_run, str(model_path), "--input", str(tmp_path / "x.npy"),
                        "--output", str(tmp_path / "y.npy")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return np.load(tmp_path / "y.npy")


def test_pytorch_model_runs_from_c_after_save(tmp_path):
    """ONNX from PyTorch -> musa.onnx.load -> .save() -> musa-run (C, no
    Python) gives PyTorch's outputs."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model, shape = zoo(torch.nn)["cnn_bn"]
    model.eval()
    x = torch.randn(*shape)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(tmp_path / "m.onnx"), opset_version=17)
    m = musa.onnx.load(tmp_path / "m.onnx")
    with pytest.raises(RuntimeError, match="call the model once"):
        m.save(tmp_path / "m.musa")
    m(musa.tensor(x.numpy()))
    m.save(tmp_path / "m.musa")
    np.testing.assert_allclose(_musa_run_output(tmp_path / "m.musa", x.numpy(), tmp_path),
                               model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list(zoo(nn)))
def test_musa_run_runs_pytorch_onnx_files(name, tmp_path):
    """musa-run model.onnx (C, no Python) gives PyTorch's outputs for the
    zoo exported by torch.onnx.export, with a dynamic batch."""
    import warnings
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model, shape = zoo(torch.nn)[name]
    model.eval()
    with torch.no_grad():
        randomize_bn(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(*shape),), str(tmp_path / "m.onnx"),
                          input_names=["x"], output_names=["y"], opset_version=17,
                          dynamic_axes={"x": {0: "batch"}})
    for batch in (shape[0], 3):
        x = torch.randn(batch, *shape[1:])
        np.testing.assert_allclose(_musa_run_output(tmp_path / "m.onnx", x.numpy(), tmp_path),
                                   model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_pytorch_3d_and_transposed_layers():
    """Conv, ConvTranspose and pools in 3-d (2-d kernels over depth slabs)
    and 1-d, with strides, dilation, groups, asymmetric and ceil-mode pads,
    give PyTorch's outputs."""
    import warnings
    torch = pytest.importorskip("torch")
    tnn = torch.nn
    torch.manual_seed(0)
    cases = [
        (tnn.Conv3d(2, 4, (3, 2, 3), stride=(2, 1, 2), padding=(1, 0, 1), dilation=(1, 2, 1),
                    groups=2), (2, 2, 7, 6, 7)),
        (tnn.ConvTranspose3d(2, 4, 3, stride=(2, 1, 2), padding=(1, 0, 1),
                             output_padding=(1, 0, 0), groups=2), (2, 2, 4, 3, 4)),
        (tnn.MaxPool3d((3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), ceil_mode=True),
         (2, 3, 7, 5, 6)),
        (tnn.AvgPool3d((3, 2, 2), stride=(2, 1, 2), padding=(1, 0, 1), ceil_mode=True,
                       count_include_pad=False), (2, 3, 7, 5, 6)),
        (tnn.AvgPool3d((3, 2, 2), stride=2, padding=1, count_include_pad=True), (2, 3, 7, 5, 6)),
        (tnn.ConvTranspose1d(3, 2, 4, stride=3, padding=1, output_padding=2), (2, 3, 5)),
        (tnn.Conv1d(3, 4, 3, stride=2, padding=2, dilation=2), (2, 3, 9)),
    ]
    for m, shape in cases:
        x = torch.randn(*shape)
        f = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(m, (x,), f, opset_version=17)
        got = musa.onnx.load_model(f.getvalue())(musa.tensor(x.numpy())).numpy()
        np.testing.assert_allclose(got, m(x).detach().numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=type(m).__name__)


def test_review_findings_stay_fixed():
    """Cases a review of the C importer found: an Einsum whose pair names 16
    labels (it overran a stack array; now a clean error), edge Pad and DepthToSpace with huge attributes, an empty tensor
    of absurd dims, Slice's negative-step start clamp, Hardmax before opset
    13 (over the 2-d view)."""
    from onnx import helper, TensorProto

    def run(nodes, inputs, inits=(), opset=17):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                                           for n, s, _ in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=list(inits))
        m = musa.onnx.load_model(helper.make_model(g, opset_imports=[helper.make_opsetid("",
                                                                                       opset)]))
        return m(*[musa.tensor(v) for _, _, v in inputs])
    one8 = np.ones([1] * 8, np.float32)
    with pytest.raises(ValueError, match=r"node 'y' \(Einsum\): more than 8 labels"):
        run([helper.make_node("Einsum", ["a", "b", "c"], ["y"],
                              equation="abcdefgh,ijklmnop,ijklmnop->abcdefgh")],
            [("a", [1] * 8, one8), ("b", [1] * 8, one8), ("c", [1] * 8, one8)])
    pads = helper.make_tensor("p", TensorProto.INT64, [2], [1 << 61, 0])
    with pytest.raises(ValueError, match=r"node 'y' \(Pad\): pads .* more than 2\^40"):
        run([helper.make_node("Pad", ["x", "p"], ["y"], mode="edge")],
            [("x", [3], np.ones(3, np.float32))], [pads])
    with pytest.raises(ValueError, match=r"blocksize in \[1, 2\^16\]"):
        run([helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=1 << 40)],
            [("x", [1, 4, 2, 2], np.ones((1, 4, 2, 2), np.float32))])
    shape = helper.make_tensor("s", TensorProto.INT64, [3], [0, 1 << 40, 1 << 40])
    with pytest.raises(ValueError, match=r"node 'y' \(Flatten\): input 0 has dims whose product"):
        run([helper.make_node("ConstantOfShape", ["s"], ["z"]),
             helper.make_node("Flatten", ["z"], ["y"], axis=2)], [], [shape])
    x = np.arange(3, dtype=np.float32)
    sl = [helper.make_tensor(n, TensorProto.INT64, [1], [v])
          for n, v in (("st", -5), ("en", -10), ("ax", 0), ("sp", -1))]
    y = run([helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], [("x", [3], x)], sl)
    np.testing.assert_array_equal(y.numpy(), [0.0])  # start clamped to 0 (ONNX), end to -1
    x = np.array([[[1, 5], [7, 2]], [[3, 3], [0, 1]]], np.float32)
    y = run([helper.make_node("Hardmax", ["x"], ["y"])], [("x", [2, 2, 2], x)], opset=11)
    want = np.zeros(8, np.float32)
    want[[2, 4]] = 1  # axis 1: the first maximum of each row of the (2, 4) view
    np.testing.assert_array_equal(y.numpy().reshape(-1), want)
