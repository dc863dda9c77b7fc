"""musa as an ONNX backend (onnx.backend.base.Backend), so ONNX's standard
test runner and tools that take a backend can run models on musa:

    import musa.onnx.backend as backend
    rep = backend.prepare(model)          # an onnx.ModelProto
    outputs = rep.run([x])                # NumPy arrays in, NumPy arrays out
"""
import numpy as np
from onnx.backend.base import Backend, BackendRep

import musa

from . import load_model


def _tensor(array):
    a = np.array(array, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    return musa.tensor(a) if a.dtype != np.bool_ else musa.tensor(a.tolist(), dtype=musa.bool)


class MusaRep(BackendRep):
    def __init__(self, module):
        self.module = module

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.module.input_names]
        elif not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        out = self.module(*[_tensor(np.asarray(x)) for x in inputs])
        outs = out if isinstance(out, tuple) else (out,)
        return [o.float().numpy() if str(o.dtype) == "musa.bfloat16" else o.numpy() for o in outs]


class MusaBackend(Backend):
    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        super().prepare(model, device, **kwargs)
        return MusaRep(load_model(model))

    @classmethod
    def supports_device(cls, device):
        return str(device).upper() == "CPU"

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)


prepare = MusaBackend.prepare
run_model = MusaBackend.run_model
supports_device = MusaBackend.supports_device
