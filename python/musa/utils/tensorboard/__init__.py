"""musa.utils.tensorboard: PyTorch's SummaryWriter, writing TensorBoard event
files itself (_events.py): no TensorFlow, TensorBoard or protobuf needed to
write them, and `tensorboard --logdir runs` reads them.

    from musa.utils.tensorboard import SummaryWriter
    with SummaryWriter() as w:                  # runs/<date>_<host>
        for step in range(100):
            w.add_scalar("loss", loss.item(), step)
        w.add_histogram("fc.weight", model.fc.weight, step)

Scalars, groups of scalars, histograms (numpy's bins, or PyTorch's
"tensorflow" default buckets), images (PNG, written here with zlib) and
text. Not here: graphs, embeddings, audio, video, figures, meshes,
hparams and PR curves.
"""
import os
import socket
import struct
import time
import zlib
from datetime import datetime

from ... import _C
from . import _events as E

__all__ = ["SummaryWriter"]


class _FileWriter:
    """One events file: events.out.tfevents.<time>.<host>.<pid>.<n><suffix>."""

    _count = 0

    def __init__(self, log_dir, flush_secs, max_queue, filename_suffix="", purge_step=None):
        os.makedirs(log_dir, exist_ok=True)
        _FileWriter._count += 1
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{_FileWriter._count}{filename_suffix}")
        self.path = os.path.join(log_dir, name)
        self._f = open(self.path, "wb")
        self._flush_secs, self._max_queue = flush_secs, max_queue
        self._queued, self._last = 0, time.time()
        self.write(E.event(time.time(), file_version="brain.Event:2"))
        if purge_step is not None:  # a SessionLog START at that step: later steps replace
            session_log = E.f_bytes(6, E.f_varint(1, 1))
            self.write(E.event(time.time(), step=purge_step) + session_log)
        self.flush()

    def write(self, ev):
        if self._f is None:
            raise RuntimeError(f"[SummaryWriter] {self.path} is closed")
        self._f.write(E.record(ev))
        self._queued += 1
        if self._queued >= self._max_queue or time.time() - self._last >= self._flush_secs:
            self.flush()

    def flush(self):
        if self._f is not None:
            self._f.flush()
            self._queued, self._last = 0, time.time()

    def close(self):
        if self._f is not None:
            self._f.close()
            self._f = None


def _number(x, who):
    if isinstance(x, _C.Tensor):
        if x.numel() != 1:
            raise ValueError(f"[{who}] a scalar must have one element, got shape "
                             f"{tuple(x.shape)}")
        return float(x.item())
    if isinstance(x, bool) or not hasattr(x, "__float__"):
        raise TypeError(f"[{who}] expected a number or a one-element tensor, got "
                        f"{type(x).__name__}")
    return float(x)


def _array(values, who):
    import numpy as np
    if isinstance(values, _C.Tensor):
        values = values.detach()
        if not values.is_floating_point():
            values = values.double()
        values = values.float().numpy() if values.dtype == _C.bfloat16 else values.numpy()
    return np.asarray(values)


def _tf_bins():
    """PyTorch's default ("tensorflow") bucket edges: +-1e-12 * 1.1^k up to
    1e20, and 0."""
    import numpy as np
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    return np.array([-x for x in reversed(pos)] + [0.0] + pos)


def _png(pixels):
    """PNG bytes of an (H, W, C) uint8 array, C 1, 3 or 4 (zlib, no filter)."""
    h, w, c = pixels.shape
    kind = {1: 0, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + pixels[r].tobytes() for r in range(h))

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, kind, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


class SummaryWriter:
    """Writes TensorBoard event files into log_dir (default
    runs/<Mon><day>_<H>-<M>-<S>_<host><comment>)."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix=""):
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        if not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"[SummaryWriter] max_queue must be a positive int, got "
                             f"{max_queue!r}")
        self.log_dir = str(log_dir)
        self._args = (flush_secs, max_queue)
        self._writer = _FileWriter(self.log_dir, flush_secs, max_queue, filename_suffix,
                                   purge_step)
        self._group_writers = {}

    def get_logdir(self):
        return self.log_dir

    def _add(self, value, step, walltime, writer=None):
        w = writer or self._writer
        w.write(E.event(time.time() if walltime is None else walltime,
                        None if step is None else int(step), E.summary(value)))

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        """One point of the curve `tag`."""
        self._add(E.scalar_value(tag, _number(scalar_value, "add_scalar")), global_step,
                  walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several curves on one chart: each key in its own run directory
        (<log_dir>/<main_tag>_<key>), as PyTorch writes them."""
        if not isinstance(tag_scalar_dict, dict):
            raise TypeError(f"[add_scalars] tag_scalar_dict must be a dict, got "
                            f"{type(tag_scalar_dict).__name__}")
        for key, v in tag_scalar_dict.items():
            d = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{key}")
            if d not in self._group_writers:
                self._group_writers[d] = _FileWriter(d, *self._args)
            self._add(E.scalar_value(main_tag, _number(v, "add_scalars")), global_step, walltime,
                      self._group_writers[d])

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        """The distribution of values: numpy's histogram with these bins
        (PyTorch's "tensorflow" buckets by default), trimmed to the buckets
        that hold values, with one empty bucket on the left."""
        import numpy as np
        v = _array(values, "add_histogram").reshape(-1).astype(np.float64)
        if v.size == 0:
            raise ValueError("[add_histogram] the input has no element")
        if not np.isfinite(v).all():
            raise ValueError("[add_histogram] the values must be finite")
        counts, limits = np.histogram(v, bins=_tf_bins() if bins == "tensorflow" else bins)
        if max_bins is not None and len(counts) > max_bins:  # merge neighbours
            k = -(-len(counts) // max_bins)
            pad = (-len(counts)) % k
            counts = np.pad(counts, (0, pad)).reshape(-1, k).sum(1)
            limits = np.concatenate([limits[:-1:k], limits[-1:]])
        nonzero = np.nonzero(counts)[0]
        start, end = int(nonzero[0]), int(nonzero[-1]) + 1
        counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
        limits = limits[start:end + 1]
        self._add(E.histogram_value(tag, v.min(), v.max(), v.size, v.sum(), v.dot(v),
                                    limits.tolist(), counts.tolist()), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """An image: floats in [0, 1] (or uint8) laid out as dataformats
        (CHW, HWC or HW), 1, 3 or 4 channels."""
        import numpy as np
        a = _array(img_tensor, "add_image")
        fmt = dataformats.upper()
        if sorted(fmt) not in (sorted("CHW"), sorted("HW")) or a.ndim != len(fmt):
            raise ValueError(f"[add_image] dataformats {dataformats!r} does not fit an image of "
                             f"shape {a.shape}")
        if fmt == "HW":
            a, fmt = a[None], "CHW"
        a = np.transpose(a, [fmt.index(x) for x in "HWC"])
        if a.shape[2] not in (1, 3, 4):
            raise ValueError(f"[add_image] an image has 1, 3 or 4 channels, got {a.shape[2]}")
        scale = 1 if a.dtype == np.uint8 else 255
        pixels = np.ascontiguousarray((a.astype(np.float32) * scale).clip(0, 255)
                                      .astype(np.uint8))
        h, w, c = pixels.shape
        self._add(E.image_value(tag, h, w, c, _png(pixels)), global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Text (markdown) under tag, shown by TensorBoard's text plugin."""
        if not isinstance(text_string, str):
            raise TypeError(f"[add_text] text_string must be a str, got "
                            f"{type(text_string).__name__}")
        self._add(E.text_value(tag, text_string), global_step, walltime)

    def flush(self):
        for w in [self._writer, *self._group_writers.values()]:
            w.flush()

    def close(self):
        for w in [self._writer, *self._group_writers.values()]:
            w.flush()
            w.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
