"""musa.backends: PyTorch's torch.backends flags, for code that sets them.

musa runs on the CPU: cuDNN, MPS and CUDA are never available, and their
flags are plain settings that change nothing (``cudnn.benchmark = True``
is accepted, as scripts written for GPUs set it). ``openmp`` and
``mkldnn`` report what musa uses: OpenMP threads and oneDNN kernels.
"""
import types as _types


class _Flags(_types.ModuleType):
    """A backend namespace: is_available() and settable flags."""

    def __init__(self, name, available, **flags):
        super().__init__(f"musa.backends.{name}")
        self._available = available
        for k, v in flags.items():
            setattr(self, k, v)

    def is_available(self):
        return self._available

    def is_built(self):
        return self._available


cudnn = _Flags("cudnn", False, enabled=True, benchmark=False, deterministic=False,
               allow_tf32=True)
cuda = _Flags("cuda", False)
cuda.matmul = _types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True)
mps = _Flags("mps", False)
openmp = _Flags("openmp", True)
mkldnn = _Flags("mkldnn", True, enabled=True)
