"""musa.utils.tensorboard: PyTorch's SummaryWriter, writing TensorBoard event
files itself (_events.py): no TensorFlow, TensorBoard or protobuf needed to
write them, and `tensorboard --logdir runs` reads them.

    from musa.utils.tensorboard import SummaryWriter
    with SummaryWriter() as w:                  # runs/<date>_<host>
        for step in range(100):
            w.add_scalar("loss", loss.item(), step)
        w.add_histogram("fc.weight", model.fc.weight, step)

Scalars, groups of scalars, histograms (numpy's bins, or PyTorch's
"tensorflow" default buckets), images and batches of them (PNG, written
here with zlib), videos (animated GIFs, _gif.py), matplotlib figures,
text, audio (WAV), PR curves, hyperparameters with their metrics,
custom-scalar layouts, embeddings for the projector (_projector.py) and
model graphs (_graph.py: a musa capture of the model, scoped by module).
Not here: meshes.
"""
import io
import os
import socket
import struct
import time
import warnings
import wave
import zlib
from datetime import datetime

from ... import _C
from . import _events as E
from . import _plugins as P

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
    if isinstance(values, _C.Tensor):  # uint8 pixels stay uint8
        values = values.detach()
        values = values.float().numpy() if values.dtype in (_C.bfloat16, _C.float16) else \
            values.numpy()
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


def _to_uint8(a):
    """Pixels as uint8: uint8 kept, floats in [0, 1] scaled (and clipped)."""
    import numpy as np
    scale = 1 if a.dtype == np.uint8 else 255
    return np.ascontiguousarray((a.astype(np.float32) * scale).clip(0, 255).astype(np.uint8))


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


def _layout(a, dataformats, allowed, target, who):
    """a laid out as dataformats (the letters of one of allowed, in any
    order), transposed to target; a missing C becomes one channel."""
    import numpy as np
    fmt = str(dataformats).upper()
    if not any(sorted(fmt) == sorted(x) for x in allowed) or a.ndim != len(fmt):
        raise ValueError(f"[{who}] dataformats {dataformats!r} does not fit an array of shape "
                         f"{a.shape} (expected one of {', '.join(allowed)}, in any order)")
    if "C" not in fmt:
        a, fmt = a[..., None], fmt + "C"
    return np.transpose(a, [fmt.index(x) for x in target])


def _grid(nhwc, per_row, who):
    """(N, H, W, C) images tiled per_row to a row (the last row padded with
    black), as one (H', W', C) image."""
    import numpy as np
    n, h, w, c = nhwc.shape
    if n == 0:
        raise ValueError(f"[{who}] the batch has no image")
    cols = min(n, per_row)
    rows = -(-n // cols)
    out = np.zeros((rows * h, cols * w, c), dtype=nhwc.dtype)
    for i in range(n):
        r, k = divmod(i, cols)
        out[r * h:(r + 1) * h, k * w:(k + 1) * w] = nhwc[i]
    return out


def _hparam(name, x, who):
    """(kind, value) of one hyperparameter: str, bool or float."""
    if isinstance(x, _C.Tensor):
        x = _number(x, who)
    if type(x).__name__ == "bool_":  # numpy's
        x = bool(x)
    if isinstance(x, (str, bool)):
        return type(x), x
    if isinstance(x, (int, float)) or (hasattr(x, "__float__") and not hasattr(x, "__len__")):
        return float, float(x)
    raise ValueError(f"[{who}] hparam {name!r}: a value must be an int, float, str, bool or "
                     f"one-element tensor, got {type(x).__name__}")


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
        self._embeddings = []  # the projector config's entries (_projector.py)

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

    def _image(self, tag, hwc, global_step, walltime, who):
        """Write an (H, W, C) array: floats in [0, 1] or uint8."""
        if hwc.shape[2] not in (1, 3, 4):
            raise ValueError(f"[{who}] an image has 1, 3 or 4 channels, got {hwc.shape[2]}")
        pixels = _to_uint8(hwc)
        h, w, c = pixels.shape
        self._add(E.image_value(tag, h, w, c, _png(pixels)), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """An image: floats in [0, 1] (or uint8) laid out as dataformats
        (CHW, HWC or HW), 1, 3 or 4 channels."""
        a = _layout(_array(img_tensor, "add_image"), dataformats, ("CHW", "HW"), "HWC",
                    "add_image")
        self._image(tag, a, global_step, walltime, "add_image")

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        """A batch of images as one grid, 8 to a row (PyTorch's layout):
        dataformats NCHW, NHWC, NHW (or another order of those letters)."""
        a = _layout(_array(img_tensor, "add_images"), dataformats, ("NCHW", "NHW"), "NHWC",
                    "add_images")
        self._image(tag, _grid(a, 8, "add_images"), global_step, walltime, "add_images")

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """A matplotlib figure (or a list of them, as a grid), rendered by
        matplotlib's Agg backend; close closes it afterwards."""
        import numpy as np
        figs = figure if isinstance(figure, (list, tuple)) else [figure]
        if not figs or not all(hasattr(f, "savefig") and hasattr(f, "canvas") for f in figs):
            raise TypeError(f"[add_figure] expected a matplotlib Figure or a list of them, got "
                            f"{type(figure).__name__}")
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        images = []
        for f in figs:
            canvas = FigureCanvasAgg(f)
            canvas.draw()
            images.append(np.array(canvas.buffer_rgba())[:, :, :3])
            if close:
                import matplotlib.pyplot as plt
                plt.close(f)
        if isinstance(figure, (list, tuple)):
            if len({im.shape for im in images}) != 1:
                raise ValueError(f"[add_figure] the figures differ in size: "
                                 f"{sorted({im.shape[:2] for im in images})}")
            self._image(tag, _grid(np.stack(images), 8, "add_figure"), global_step, walltime,
                        "add_figure")
        else:
            self._image(tag, images[0], global_step, walltime, "add_figure")

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Text (markdown) under tag, shown by TensorBoard's text plugin."""
        if not isinstance(text_string, str):
            raise TypeError(f"[add_text] text_string must be a str, got "
                            f"{type(text_string).__name__}")
        self._add(E.text_value(tag, text_string), global_step, walltime)

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        """Sound: samples in [-1, 1] (clipped, with a warning, beyond), of
        shape (L,), (1, L) or (channels, L), written as 16-bit WAV."""
        import numpy as np
        a = _array(snd_tensor, "add_audio").astype(np.float64)
        if a.ndim == 2 and a.shape[0] == 1:
            a = a[0]
        if a.ndim not in (1, 2) or a.shape[-1] == 0:
            raise ValueError(f"[add_audio] expected samples of shape (L,) or (channels, L), got "
                             f"{a.shape}")
        rate = _number(sample_rate, "add_audio")
        if not (rate >= 1 and rate == int(rate)):
            raise ValueError(f"[add_audio] sample_rate must be a positive whole number, got "
                             f"{sample_rate!r}")
        if not np.isfinite(a).all():
            raise ValueError("[add_audio] the samples must be finite")
        if np.abs(a).max() > 1:
            warnings.warn("[add_audio] samples beyond [-1, 1] were clipped", stacklevel=2)
        a = a.reshape(-1, a.shape[-1]).T  # (L, channels): frames, interleaved
        pcm = (a.clip(-1, 1) * 32767).round().astype("<i2")
        buf = io.BytesIO()
        with wave.open(buf, "wb") as f:
            f.setnchannels(pcm.shape[1])
            f.setsampwidth(2)
            f.setframerate(int(rate))
            f.writeframes(pcm.tobytes())
        self._add(E.audio_value(tag, rate, pcm.shape[1], pcm.shape[0], buf.getvalue()),
                  global_step, walltime)

    def add_video(self, tag, vid_tensor, global_step=None, fps=4, walltime=None):
        """Videos (N, T, C, H, W), floats in [0, 1] or uint8, C 1 or 3, as
        one animated GIF: the N videos tiled in a grid as PyTorch tiles
        them (N padded to a power of two, rows the power of two nearest
        its square root from below), fps frames a second."""
        import numpy as np
        from ._gif import encode
        v = _array(vid_tensor, "add_video")
        if v.ndim != 5 or 0 in v.shape or v.shape[2] not in (1, 3):
            raise ValueError(f"[add_video] expected videos of shape (N, T, C, H, W) with C 1 or "
                             f"3 and no empty dim, got {v.shape}")
        rate = _number(fps, "add_video")
        if not 0 < rate <= 100:
            raise ValueError(f"[add_video] fps must be in (0, 100], got {fps!r}")
        n, t, c, h, w = v.shape
        padded = 1 << (n - 1).bit_length()
        rows = 1 << ((n.bit_length() - 1) // 2)
        cols = padded // rows
        grid = np.zeros((t, rows * h, cols * w, c), dtype=v.dtype)
        for i in range(n):
            r, k = divmod(i, cols)
            grid[:, r * h:(r + 1) * h, k * w:(k + 1) * w] = v[i].transpose(0, 2, 3, 1)
        self._add(E.image_value(tag, rows * h, cols * w, c, encode(_to_uint8(grid), rate)),
                  global_step, walltime)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127,
                     weights=None, walltime=None):
        """A precision-recall curve: labels (true/false, or 1/0) against
        predictions in [0, 1], at num_thresholds (at most 127) evenly spaced
        thresholds; weights, if given, weigh each example."""
        import numpy as np
        y = _array(labels, "add_pr_curve").reshape(-1)
        p = _array(predictions, "add_pr_curve").astype(np.float64).reshape(-1)
        if y.shape != p.shape:
            raise ValueError(f"[add_pr_curve] labels and predictions differ in size: "
                             f"{y.size} and {p.size}")
        if not np.isin(y, (0, 1)).all():
            raise ValueError("[add_pr_curve] labels must be true/false or 1/0")
        if not ((p >= 0) & (p <= 1)).all():
            raise ValueError("[add_pr_curve] predictions must lie in [0, 1]")
        if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, int) or \
                num_thresholds < 2:
            raise ValueError(f"[add_pr_curve] num_thresholds must be an int of at least 2, got "
                             f"{num_thresholds!r}")
        n = min(num_thresholds, 127)
        wt = np.ones_like(p) if weights is None else \
            np.broadcast_to(_array(weights, "add_pr_curve").astype(np.float64), p.shape)
        # each example counts at every threshold up to its prediction's
        bucket = np.floor(p * (n - 1)).astype(np.int64)
        pos = np.bincount(bucket, weights=wt * (y == 1), minlength=n)
        neg = np.bincount(bucket, weights=wt * (y == 0), minlength=n)
        tp, fp = np.cumsum(pos[::-1])[::-1], np.cumsum(neg[::-1])[::-1]
        tn, fn = fp[0] - fp, tp[0] - tp
        precision = tp / np.maximum(tp + fp, 1e-7)
        recall = tp / np.maximum(tp + fn, 1e-7)
        data = np.stack([tp, fp, tn, fn, precision, recall])
        self._add(E.tensor_value(tag, E.float_tensor(data.reshape(-1), data.shape), "pr_curves",
                                 P.pr_curve_content(n)), global_step, walltime)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        """One session of the HParams dashboard, in its own run directory
        (<log_dir>/<run_name>, by default the time): the hyperparameters
        (int, float, str, bool or one-element tensors), the metrics' values
        as scalars, and hparam_domain_discrete's lists of the values a
        hyperparameter takes over the experiment."""
        if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
            raise TypeError("[add_hparams] hparam_dict and metric_dict must be dicts")
        hp = {str(k): _hparam(k, v, "add_hparams") for k, v in hparam_dict.items()}
        metrics = {str(k): _number(v, "add_hparams") for k, v in metric_dict.items()}
        domains = hparam_domain_discrete or {}
        if not isinstance(domains, dict):
            raise TypeError(f"[add_hparams] hparam_domain_discrete must be a dict, got "
                            f"{type(domains).__name__}")
        for k, vals in domains.items():
            if k not in hp or not isinstance(vals, list) or \
                    not all(_hparam(k, v, "add_hparams")[0] is hp[k][0] for v in vals):
                raise TypeError(f"[add_hparams] hparam_domain_discrete[{k!r}] must be a list of "
                                f"values of the type of hparam_dict[{k!r}]")
        domains = {k: [_hparam(k, v, "add_hparams")[1] for v in vals]
                   for k, vals in domains.items()}
        run = os.path.join(self.log_dir, str(run_name) if run_name else str(time.time()))
        now = time.time()
        records = [(P.EXPERIMENT_TAG, "experiment", P.experiment(hp, metrics, domains)),
                   (P.SESSION_START_TAG, "session_start_info", P.session_start(hp, now)),
                   (P.SESSION_END_TAG, "session_end_info", P.session_end(now))]
        with SummaryWriter(log_dir=run) as w:
            for tag, which, message in records:
                w._add(E.metadata_value(tag, P.HPARAMS, P.hparams_content(which, message)),
                       global_step, None)
            for k, v in metrics.items():
                w.add_scalar(k, v, global_step)

    def add_custom_scalars(self, layout):
        """The Custom Scalars dashboard's layout: {category: {chart title:
        ["Multiline", [tag regexps]] or ["Margin", [value, lower, upper]]}}."""
        if not isinstance(layout, dict):
            raise TypeError(f"[add_custom_scalars] layout must be a dict, got "
                            f"{type(layout).__name__}")
        cats = []
        for cat, charts in layout.items():
            if not isinstance(charts, dict):
                raise TypeError(f"[add_custom_scalars] layout[{cat!r}] must be a dict of charts")
            out = []
            for title, spec in charts.items():
                ok = isinstance(spec, (list, tuple)) and len(spec) == 2 and \
                    spec[0] in ("Multiline", "Margin") and isinstance(spec[1], (list, tuple)) \
                    and all(isinstance(t, str) for t in spec[1])
                if not ok or (spec[0] == "Margin" and len(spec[1]) != 3):
                    raise ValueError(f"[add_custom_scalars] chart {title!r}: expected "
                                     f"['Multiline', [tags]] or ['Margin', [value, lower, "
                                     f"upper]], got {spec!r}")
                out.append((str(title), spec[0], list(spec[1])))
            cats.append((str(cat), False, out))
        self._add(E.tensor_value(P.CUSTOM_SCALARS_TAG, E.string_tensor([P.layout(cats)], []),
                                 "custom_scalars"), None, None)

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        self.add_custom_scalars({category: {title: ["Multiline", list(tags)]}})

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        self.add_custom_scalars({category: {title: ["Margin", list(tags)]}})

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        """Points for the Projector: mat (N, D), with per-point metadata (N
        labels, or N rows under metadata_header) and label_img (N, C, H, W)
        thumbnails. Writes <log_dir>/<step>/<tag>/ and projector_config.pbtxt."""
        from ._projector import add_embedding
        add_embedding(self, mat, metadata, label_img, global_step, tag, metadata_header)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """The model's graph for TensorBoard's Graphs dashboard: a capture of
        model(*input_to_model) (musa.jit's tracer; nothing is compiled),
        its nodes scoped by the modules that ran them."""
        from ._graph import graph_def
        gd = graph_def(model, input_to_model, verbose)
        self._writer.write(E.event(time.time(), graph_def=gd))

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
