"""Write the seed corpus of fuzz_file_load: real files as musa writes them.

    PYTHONPATH=python /usr/bin/python3 tests/fuzz/make_file_load_seeds.py [dir]

(dir defaults to tests/fuzz/corpus/file_load). The seeds are small, so that
libFuzzer's length limit and mutations stay cheap: musa.save containers (a
state_dict, views sharing a storage, every dtype, an empty tree), saved
models (an MLP, a CNN with BatchNorm in eval and in training mode, a
transformer block, a dynamic batch) and two .npy files. test_fuzz replays
them and checks that the kinds are all there; the generator is
deterministic (fixed seeds), so rerunning it after a format change rewrites
the same names.
"""
import os
import sys

import numpy as np

import musa
import musa.nn as nn
import musa.nn.functional as F


class CnnBn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.bn = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3 * 2 * 2, 2)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(y.flatten(1))


class Block(nn.Module):
    """A transformer block (causal attention, then an MLP), 4 wide."""

    def __init__(self, d=4, heads=2):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)
        self.h = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.reshape(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.h) ** 0.5)
        att = att.masked_fill(musa.ones(t, t).tril() == 0, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def save_model(path, model, x, config=None):
    with musa.no_grad():
        traced = musa.jit.trace(model, (x,), config=config) if config else musa.jit.trace(model, (x,))
        traced(x)
    traced.save(path)


def main(out):
    os.makedirs(out, exist_ok=True)
    musa.manual_seed(0)
    p = lambda name: os.path.join(out, name)  # noqa: E731

    # musa.save containers (kind "object")
    musa.save(nn.Linear(3, 2).state_dict(), p("state_dict.musa"))
    base = musa.arange(12, dtype=musa.float32).reshape(3, 4)
    musa.save({"base": base, "row": base[1], "col": base[:, 2], "t": base.t()}, p("views.musa"))
    every = {str(dt): musa.ones(2, dtype=dt) for dt in
             (musa.float32, musa.float64, musa.float16, musa.bfloat16, musa.int64, musa.int32,
              musa.int8, musa.uint8, musa.bool)}
    musa.save([every, (1, 2.5, "s", None, True)], p("every_dtype.musa"))
    musa.save({}, p("empty.musa"))

    # saved models (kind "model")
    save_model(p("mlp.musa"), nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)),
               musa.randn(2, 3))
    save_model(p("cnn_bn_eval.musa"), CnnBn().eval(), musa.randn(1, 2, 4, 4))
    save_model(p("cnn_bn_train.musa"), CnnBn().train(), musa.randn(2, 2, 4, 4))
    save_model(p("transformer.musa"), Block(), musa.randn(1, 3, 4))
    save_model(p("dynamic_batch.musa"), nn.Sequential(nn.Linear(3, 2), nn.Tanh()),
               musa.randn(2, 3), config=musa.Config(dynamic={"input": {0: (1, 8)}}))

    # a model with a custom op: the fuzzer's process has not registered it,
    # so loading reaches the name's lookup and refuses it
    twice = musa.library.custom_op("seed::twice", lambda x: x.numpy() * 2)
    save_model(p("custom_op.musa"), lambda x: twice(x) + 1, musa.randn(2, 3))

    # .npy
    np.save(p("x.npy"), np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(p("f.npy"), np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)))
    for name in sorted(os.listdir(out)):
        print(f"{os.path.getsize(p(name)):7d}  {name}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else
         os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "file_load"))
