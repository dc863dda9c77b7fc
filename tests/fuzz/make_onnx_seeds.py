"""Write the seed corpus of fuzz_onnx_load: real ONNX models, small.

    PYTHONPATH=python /usr/bin/python3 tests/fuzz/make_onnx_seeds.py [dir]

(dir defaults to tests/fuzz/corpus/onnx_load). Models exported by Debian's
PyTorch (an MLP, a CNN with BatchNorm and pooling, an LSTM, a transformer
block with a dynamic batch), one exported by musa, and models of single
nodes from ONNX's node tests that reach the importer's other paths (Resize,
Pad, Slice, Split, TopK, ConvTranspose in 2-d and 3-d, GRU, GatherElements,
ScatterElements, an asymmetric AveragePool, inputs read as numbers).
Fixed seeds: rerunning writes the same files.
"""
import io
import os
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def torch_models():
    import torch
    import torch.nn as tnn
    torch.manual_seed(0)

    class Block(tnn.Module):
        def __init__(self, C=4):
            super().__init__()
            self.ln = tnn.LayerNorm(C)
            self.qkv, self.proj = tnn.Linear(C, 3 * C), tnn.Linear(C, C)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln(x)).split(C, dim=-1)
            att = (q @ k.transpose(-2, -1) / 2.0).softmax(-1)
            return x + self.proj(att @ v)

    class Rnn(tnn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = tnn.LSTM(3, 4, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0][:, -1]

    cnn = tnn.Sequential(tnn.Conv2d(1, 2, 3, padding=1), tnn.BatchNorm2d(2), tnn.ReLU(),
                         tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(8, 3), tnn.LogSoftmax(-1))
    mlp = tnn.Sequential(tnn.Linear(4, 6), tnn.GELU(), tnn.Linear(6, 2))
    out = {}
    for name, model, shape, dyn in (("torch_mlp", mlp, (2, 4), False),
                                    ("torch_cnn_bn", cnn, (1, 1, 4, 4), False),
                                    ("torch_lstm", Rnn(), (1, 2, 3), False),
                                    ("torch_block_dynamic", Block(), (1, 3, 4), True)):
        model.eval()
        f = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (torch.randn(*shape),), f, input_names=["x"],
                              opset_version=17,
                              dynamic_axes={"x": {0: "batch", 1: "seq"}} if dyn else None)
        out[name] = f.getvalue()
    return out


def musa_models():
    import musa
    import musa.nn as nn
    musa.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(2, 2), nn.Softmax(-1))
    f = io.BytesIO()
    musa.onnx.export(model, (musa.randn(1, 1, 5, 5),), f, input_names=["x"])
    return {"musa_cnn": f.getvalue()}


def node_models():
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, inputs, outputs, inits=(), opset=17):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s)
                                           for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              initializer=[numpy_helper.from_array(np.asarray(v), n)
                                           for n, v in inits])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]) \
            .SerializeToString()

    F, I = TensorProto.FLOAT, TensorProto.INT64
    rng = np.random.RandomState(0)
    return {
        "node_resize_linear": model(
            [helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")],
            [("x", F, [1, 1, 2, 2])], [("y", F, None)],
            [("s", np.array([1, 1, 2, 1.5], np.float32))]),
        "node_resize_cubic_sizes": model(
            [helper.make_node("Resize", ["x", "", "", "z"], ["y"], mode="cubic",
                              coordinate_transformation_mode="align_corners")],
            [("x", F, [1, 1, 3, 3])], [("y", F, None)], [("z", np.array([1, 1, 2, 5]))]),
        "node_pad_reflect_input": model(
            [helper.make_node("Pad", ["x", "p"], ["y"], mode="reflect")],
            [("x", F, [2, 3]), ("p", I, [4])], [("y", F, None)]),
        "node_slice_negative_step": model(
            [helper.make_node("Slice", ["x", "a", "b", "c", "d"], ["y"])],
            [("x", F, [4, 5])], [("y", F, None)],
            [("a", np.array([-1, 0])), ("b", np.array([-10, 5])), ("c", np.array([0, 1])),
             ("d", np.array([-2, 2]))]),
        "node_split_topk": model(
            [helper.make_node("Split", ["x"], ["a", "b"], axis=1),
             helper.make_node("TopK", ["a", "k"], ["v", "i"], axis=1, largest=0)],
            [("x", F, ["n", 6])], [("v", F, None), ("i", I, None)],
            [("k", np.array([2]))]),
        "node_convtranspose_output_shape": model(
            [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2],
                              output_shape=[10, 8])],
            [("x", F, [1, 1, 3, 3])], [("y", F, None)],
            [("w", rng.randn(1, 2, 3, 3).astype(np.float32))]),
        "node_gru_bidirectional": model(
            [helper.make_node("GRU", ["x", "w", "r", "b"], ["y", "h"], hidden_size=2,
                              direction="bidirectional", linear_before_reset=1)],
            [("x", F, [2, 1, 3])], [("y", F, None), ("h", F, None)],
            [("w", rng.randn(2, 6, 3).astype(np.float32)),
             ("r", rng.randn(2, 6, 2).astype(np.float32)),
             ("b", rng.randn(2, 12).astype(np.float32))]),
        "node_shape_chain_reshape": model(
            [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zeros"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"]),
             helper.make_node("ReduceMean", ["y"], ["m"], axes=[1], keepdims=0)],
            [("x", F, ["b", 2, 3])], [("m", F, None)],
            [("zero", np.array(0)), ("zeros", np.array([0])), ("minus1", np.array([-1]))]),
        # importer helpers whose results are temps already (a double release, under ASan
        # a use after free, before): negative indices wrapped, 3-d transposed
        # convolution over depth slabs, an average pool with asymmetric pads
        "node_gather_scatter_elements": model(
            [helper.make_node("GatherElements", ["x", "i"], ["g"], axis=1),
             helper.make_node("ScatterElements", ["x", "i", "g"], ["y"], axis=1,
                              reduction="add")],
            [("x", F, [2, 3])], [("y", F, None)], [("i", np.array([[-1, 0], [1, -3]]))]),
        "node_convtranspose_3d": model(
            [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 1, 1])],
            [("x", F, [1, 1, 2, 3, 3])], [("y", F, None)],
            [("w", rng.randn(1, 2, 2, 2, 2).astype(np.float32))]),
        "node_averagepool_asymmetric": model(
            [helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2, 2],
                              pads=[0, 0, 1, 1])],
            [("x", F, [1, 1, 3, 3])], [("y", F, None)]),
    }


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "onnx_load")
    os.makedirs(out, exist_ok=True)
    seeds = {**torch_models(), **musa_models(), **node_models()}
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(data)
        print(f"{name}.onnx: {len(data)} bytes")


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
    main()
