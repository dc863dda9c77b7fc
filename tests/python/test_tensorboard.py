"""musa.utils.tensorboard.SummaryWriter: the event files read back with
protobuf's own parser (messages declared here from TensorFlow's field
numbers, independent of the writer's encoder), the TFRecord framing and its
CRC-32C (against the standard check value), the PNG images (chunk CRCs by
zlib, pixels decompressed), histograms against numpy, and the errors."""
import os
import struct
import zlib

import numpy as np
import pytest

import musa
from musa.utils.tensorboard import SummaryWriter
from musa.utils.tensorboard import _events as E

pb = pytest.importorskip("google.protobuf")
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402

F = descriptor_pb2.FieldDescriptorProto
DOUBLE, FLOAT, INT64, INT32, STRING, MESSAGE, BYTES = (F.TYPE_DOUBLE, F.TYPE_FLOAT, F.TYPE_INT64,
                                                       F.TYPE_INT32, F.TYPE_STRING,
                                                       F.TYPE_MESSAGE, F.TYPE_BYTES)
ONE, MANY = F.LABEL_OPTIONAL, F.LABEL_REPEATED


BOOL, UINT32 = F.TYPE_BOOL, F.TYPE_UINT32
SPEC = {
    "Event": [("wall_time", 1, DOUBLE, ONE, ""), ("step", 2, INT64, ONE, ""),
              ("file_version", 3, STRING, ONE, ""), ("graph_def", 4, BYTES, ONE, ""),
              ("summary", 5, MESSAGE, ONE, "Summary"),
              ("session_log", 6, MESSAGE, ONE, "SessionLog")],
    "SessionLog": [("status", 1, INT32, ONE, "")],
    "Summary": [("value", 1, MESSAGE, MANY, "Value")],
    "Value": [("tag", 1, STRING, ONE, ""), ("simple_value", 2, FLOAT, ONE, ""),
              ("image", 4, MESSAGE, ONE, "Image"), ("histo", 5, MESSAGE, ONE, "Histo"),
              ("audio", 6, MESSAGE, ONE, "Audio"),
              ("tensor", 8, MESSAGE, ONE, "TensorProto"), ("metadata", 9, MESSAGE, ONE, "Meta")],
    "Image": [("height", 1, INT32, ONE, ""), ("width", 2, INT32, ONE, ""),
              ("colorspace", 3, INT32, ONE, ""), ("encoded_image_string", 4, BYTES, ONE, "")],
    "Audio": [("sample_rate", 1, FLOAT, ONE, ""), ("num_channels", 2, INT64, ONE, ""),
              ("length_frames", 3, INT64, ONE, ""), ("encoded_audio_string", 4, BYTES, ONE, ""),
              ("content_type", 5, STRING, ONE, "")],
    "Histo": [("min", 1, DOUBLE, ONE, ""), ("max", 2, DOUBLE, ONE, ""),
              ("num", 3, DOUBLE, ONE, ""), ("sum", 4, DOUBLE, ONE, ""),
              ("sum_squares", 5, DOUBLE, ONE, ""), ("bucket_limit", 6, DOUBLE, MANY, ""),
              ("bucket", 7, DOUBLE, MANY, "")],
    "TensorProto": [("dtype", 1, INT32, ONE, ""), ("tensor_shape", 2, MESSAGE, ONE, "Shape"),
                    ("float_val", 5, FLOAT, MANY, ""), ("string_val", 8, BYTES, MANY, "")],
    "Shape": [("dim", 2, MESSAGE, MANY, "Dim")],
    "Dim": [("size", 1, INT64, ONE, "")],
    "Meta": [("plugin_data", 1, MESSAGE, ONE, "PluginData")],
    "PluginData": [("plugin_name", 1, STRING, ONE, ""), ("content", 2, BYTES, ONE, "")],
    # graphs (graph.proto, node_def.proto, attr_value.proto)
    "GraphDef": [("node", 1, MESSAGE, MANY, "NodeDef"), ("versions", 4, MESSAGE, ONE, "Versions")],
    "Versions": [("producer", 1, INT32, ONE, "")],
    "NodeDef": [("name", 1, STRING, ONE, ""), ("op", 2, STRING, ONE, ""),
                ("input", 3, STRING, MANY, ""), ("attr", 5, MESSAGE, MANY, "AttrEntry")],
    "AttrEntry": [("key", 1, STRING, ONE, ""), ("value", 2, MESSAGE, ONE, "AttrValue")],
    "AttrValue": [("list", 1, MESSAGE, ONE, "AttrList"), ("s", 2, BYTES, ONE, "")],
    "AttrList": [("shape", 7, MESSAGE, MANY, "Shape")],
    # the hparams plugin (plugin_data.proto, api.proto, struct.proto)
    "HParamsPluginData": [("version", 1, INT32, ONE, ""),
                          ("experiment", 2, MESSAGE, ONE, "Experiment"),
                          ("session_start_info", 3, MESSAGE, ONE, "SessionStartInfo"),
                          ("session_end_info", 4, MESSAGE, ONE, "SessionEndInfo")],
    "Experiment": [("hparam_infos", 4, MESSAGE, MANY, "HParamInfo"),
                   ("metric_infos", 5, MESSAGE, MANY, "MetricInfo")],
    "HParamInfo": [("name", 1, STRING, ONE, ""), ("type", 4, INT32, ONE, ""),
                   ("domain_discrete", 5, MESSAGE, ONE, "ListValue")],
    "MetricInfo": [("name", 1, MESSAGE, ONE, "MetricName")],
    "MetricName": [("group", 1, STRING, ONE, ""), ("tag", 2, STRING, ONE, "")],
    "SessionStartInfo": [("hparams", 1, MESSAGE, MANY, "HParamEntry"),
                         ("start_time_secs", 5, DOUBLE, ONE, "")],
    "HParamEntry": [("key", 1, STRING, ONE, ""), ("value", 2, MESSAGE, ONE, "PbValue")],
    "SessionEndInfo": [("status", 1, INT32, ONE, ""), ("end_time_secs", 2, DOUBLE, ONE, "")],
    "PbValue": [("number_value", 2, DOUBLE, ONE, ""), ("string_value", 3, STRING, ONE, ""),
                ("bool_value", 4, BOOL, ONE, "")],
    "ListValue": [("values", 1, MESSAGE, MANY, "PbValue")],
    # PR curves and custom scalars
    "PrCurvePluginData": [("version", 1, INT32, ONE, ""), ("num_thresholds", 2, UINT32, ONE, "")],
    "Layout": [("version", 1, INT32, ONE, ""), ("category", 2, MESSAGE, MANY, "Category")],
    "Category": [("title", 1, STRING, ONE, ""), ("chart", 2, MESSAGE, MANY, "Chart"),
                 ("closed", 3, BOOL, ONE, "")],
    "Chart": [("title", 1, STRING, ONE, ""), ("multiline", 2, MESSAGE, ONE, "Multiline"),
              ("margin", 3, MESSAGE, ONE, "Margin")],
    "Multiline": [("tag", 1, STRING, MANY, "")],
    "Margin": [("series", 1, MESSAGE, MANY, "Series")],
    "Series": [("value", 1, STRING, ONE, ""), ("lower", 2, STRING, ONE, ""),
               ("upper", 3, STRING, ONE, "")],
}


def _classes():
    """Message classes for SPEC's messages, by name."""
    fdp = descriptor_pb2.FileDescriptorProto(name="musa_tb_test.proto", package="tbt",
                                             syntax="proto3")
    for name, fields in SPEC.items():
        m = fdp.message_type.add(name=name)
        for fname, num, typ, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=typ, label=label)
            if tname:
                f.type_name = ".tbt." + tname
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    out = {}
    for name in SPEC:
        desc = pool.FindMessageTypeByName("tbt." + name)
        out[name] = (message_factory.GetMessageClass(desc)
                     if hasattr(message_factory, "GetMessageClass")
                     else message_factory.MessageFactory(pool).GetPrototype(desc))
    return out


MSG = _classes()
Event = MSG["Event"]


def parse(name, data):
    m = MSG[name]()
    m.ParseFromString(data)
    return m




def read_events(path):
    data = open(path, "rb").read()
    out, at = [], 0
    while at < len(data):
        head = data[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        assert struct.unpack("<I", data[at + 8:at + 12])[0] == E.masked_crc32c(head)
        body = data[at + 12:at + 12 + n]
        assert struct.unpack("<I", data[at + 12 + n:at + 16 + n])[0] == E.masked_crc32c(body)
        ev = Event()
        ev.ParseFromString(body)
        out.append(ev)
        at += 16 + n
    return out


def events_in(d):
    files = [f for f in os.listdir(d) if f.startswith("events.out.tfevents.")]
    assert len(files) == 1, files
    return read_events(os.path.join(d, files[0]))


def test_crc32c_check_value():
    assert E.crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    assert E.crc32c(b"") == 0


def test_scalars_text_and_the_first_event(tmp_path):
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        assert w.get_logdir() == str(tmp_path)
        for step in range(3):
            w.add_scalar("loss", 1.0 / (step + 1), step, walltime=100.0 + step)
        w.add_scalar("acc", musa.tensor(0.75), 7)
        w.add_scalar("neg", -2, -5)
        w.add_text("note", "hello **world**", 2)
    evs = events_in(str(tmp_path))
    assert evs[0].file_version == "brain.Event:2" and not evs[0].HasField("summary")
    loss = [(e.step, e.wall_time, e.summary.value[0].simple_value) for e in evs[1:4]]
    assert loss == [(0, 100.0, 1.0), (1, 101.0, 0.5), (2, 102.0, np.float32(1 / 3))]
    assert evs[1].summary.value[0].tag == "loss"
    assert (evs[4].step, evs[4].summary.value[0].simple_value) == (7, 0.75)
    assert (evs[5].step, evs[5].summary.value[0].simple_value) == (-5, -2.0)
    text = evs[6].summary.value[0]
    assert text.tag == "note" and text.tensor.string_val == [b"hello **world**"]
    assert text.tensor.dtype == 7 and [d.size for d in text.tensor.tensor_shape.dim] == [1]
    assert text.metadata.plugin_data.plugin_name == "text"


def test_scalars_groups(tmp_path):
    w = SummaryWriter(log_dir=str(tmp_path))
    w.add_scalars("run/loss", {"train": 1.0, "val": 2.0}, 3)
    w.add_scalars("run/loss", {"train": 0.5, "val": 1.5}, 4)
    w.close()
    for key, vals in (("train", [1.0, 0.5]), ("val", [2.0, 1.5])):
        evs = events_in(str(tmp_path / f"run_loss_{key}"))
        assert [e.summary.value[0].simple_value for e in evs[1:]] == vals
        assert {e.summary.value[0].tag for e in evs[1:]} == {"run/loss"}


@pytest.mark.parametrize("bins", ["tensorflow", 10, "auto"])
def test_histograms(tmp_path, bins):
    rng = np.random.default_rng(0)
    v = rng.standard_normal(1000)
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_histogram("w", musa.tensor(v), 1, bins=bins)
    h = events_in(str(tmp_path))[1].summary.value[0].histo
    assert (h.min, h.max, h.num) == (v.min(), v.max(), 1000)
    assert h.sum == pytest.approx(v.sum()) and h.sum_squares == pytest.approx(v.dot(v))
    limits, counts = np.array(h.bucket_limit), np.array(h.bucket)
    assert counts.sum() == 1000 and len(limits) == len(counts) and (np.diff(limits) > 0).all()
    assert limits[-1] >= v.max() and counts[0] == 0  # the empty bucket on the left
    # PyTorch's make_histogram: numpy's histogram, trimmed to the buckets from
    # the first to the last non-empty one, with one more on the left
    from musa.utils.tensorboard import _tf_bins
    ref_counts, ref_limits = np.histogram(v, bins=_tf_bins() if bins == "tensorflow" else bins)
    nz = np.nonzero(ref_counts)[0]
    first, last = nz[0], nz[-1] + 1
    ref_counts = ref_counts[first - 1:last] if first > 0 else np.r_[0, ref_counts[:last]]
    assert counts.tolist() == ref_counts.tolist()
    assert limits.tolist() == ref_limits[first:last + 1].tolist()


def test_images_are_png(tmp_path):
    rng = np.random.default_rng(1)
    rgb = rng.random((3, 5, 7)).astype(np.float32)
    gray = rng.integers(0, 256, (4, 6)).astype(np.uint8)
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_image("rgb", musa.tensor(rgb), 0)
        w.add_image("gray", gray, 1, dataformats="HW")
        w.add_image("hwc", musa.tensor(rgb).permute(1, 2, 0), 2, dataformats="HWC")
    evs = events_in(str(tmp_path))
    want = {"rgb": (rgb.transpose(1, 2, 0) * 255).clip(0, 255).astype(np.uint8),
            "gray": gray[:, :, None],
            "hwc": (rgb.transpose(1, 2, 0) * 255).clip(0, 255).astype(np.uint8)}
    for ev in evs[1:]:
        val = ev.summary.value[0]
        img, px = val.image, want[val.tag]
        assert (img.height, img.width, img.colorspace) == px.shape
        assert (png_pixels(img.encoded_image_string) == px).all()


def png_pixels(png):
    """The (H, W, C) uint8 pixels of the writer's PNGs (8-bit, no filter),
    every chunk's CRC checked."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at, idat, shape = 8, b"", None
    while at < len(png):
        (n,) = struct.unpack(">I", png[at:at + 4])
        tag, data = png[at + 4:at + 8], png[at + 8:at + 8 + n]
        assert struct.unpack(">I", png[at + 8 + n:at + 12 + n])[0] == zlib.crc32(tag + data)
        if tag == b"IHDR":
            w_, h_, depth, kind = struct.unpack(">IIBB", data[:10])
            assert depth == 8
            shape = (h_, w_, {0: 1, 2: 3, 6: 4}[kind])
        idat += data if tag == b"IDAT" else b""
        at += 12 + n
    got = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(shape[0], -1)
    assert (got[:, 0] == 0).all()  # filter type none
    return got[:, 1:].reshape(shape)


def test_purge_step_and_default_log_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = SummaryWriter(comment="_exp", purge_step=5, filename_suffix=".x")
    w.close()
    d = w.get_logdir()
    assert d.startswith("runs" + os.sep) and d.endswith("_exp")
    f = os.listdir(d)[0]
    assert f.endswith(".x")
    evs = read_events(os.path.join(d, f))
    assert evs[1].step == 5 and evs[1].session_log.status == 1


@pytest.mark.parametrize("call, err, match", [
    (lambda w: w.add_scalar("x", musa.ones(2)), ValueError, "one element"),
    (lambda w: w.add_scalar("x", "1"), TypeError, "number"),
    (lambda w: w.add_scalars("x", [1.0]), TypeError, "dict"),
    (lambda w: w.add_histogram("h", musa.zeros(0)), ValueError, "no element"),
    (lambda w: w.add_histogram("h", musa.tensor([1.0, float("nan")])), ValueError, "finite"),
    (lambda w: w.add_image("i", musa.zeros(2, 3, 4)), ValueError, "1, 3 or 4 channels"),
    (lambda w: w.add_image("i", musa.zeros(3, 4), dataformats="CHW"), ValueError,
     "dataformats"),
    (lambda w: w.add_text("t", 3), TypeError, "str"),
])
def test_errors(tmp_path, call, err, match):
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        with pytest.raises(err, match=match):
            call(w)
    w = SummaryWriter(log_dir=str(tmp_path / "closed"))
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.add_scalar("x", 1.0)


def test_histogram_max_bins(tmp_path):
    v = np.arange(100.0)
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_histogram("h", v, 0, bins=10, max_bins=3)  # 10 buckets merged by 4: 3
    h = events_in(str(tmp_path))[1].summary.value[0].histo
    assert list(h.bucket) == [0, 40, 40, 20] and list(h.bucket_limit) == [0.0, 39.6, 79.2, 99.0]


def only_value(d, k=1):
    """The one summary value of event k of the single events file in d."""
    return events_in(str(d))[k].summary.value[0]


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC", "NHW"])
def test_images_as_one_grid(tmp_path, fmt):
    rng = np.random.default_rng(2)
    n, h, w = 10, 3, 4
    px = rng.integers(0, 256, (n, h, w, 1 if fmt == "NHW" else 3)).astype(np.uint8)
    arg = {"NCHW": px.transpose(0, 3, 1, 2), "NHWC": px, "NHW": px[..., 0]}[fmt]
    with SummaryWriter(log_dir=str(tmp_path)) as w_:
        w_.add_images("batch", musa.tensor(arg), 4, dataformats=fmt)
    val = only_value(tmp_path)
    want = np.zeros((2 * h, 8 * w, px.shape[3]), np.uint8)  # 8 to a row, PyTorch's grid
    for i in range(n):
        want[i // 8 * h:(i // 8 + 1) * h, i % 8 * w:(i % 8 + 1) * w] = px[i]
    assert val.tag == "batch" and (val.image.height, val.image.width) == (2 * h, 8 * w)
    assert (png_pixels(val.image.encoded_image_string) == want).all()


def test_figures(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import io
    import matplotlib.pyplot as plt

    def figure(color):
        f = plt.figure(figsize=(2, 1), dpi=40)
        f.add_axes([0.2, 0.2, 0.6, 0.6]).set_facecolor(color)
        return f
    one, pair = figure("red"), [figure("blue"), figure("green")]
    kept = figure("black")
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_figure("one", one, 0)
        w.add_figure("pair", pair, 1)
        w.add_figure("kept", kept, 2, close=False)
    assert not plt.fignum_exists(one.number) and not plt.fignum_exists(pair[0].number)
    assert plt.fignum_exists(kept.number)
    buf = io.BytesIO()
    kept.savefig(buf, format="png", dpi=40)  # matplotlib's own rendering and PNG
    plt.close(kept)
    buf.seek(0)
    ref = (plt.imread(buf)[:, :, :3] * 255).round().astype(np.uint8)
    evs = events_in(str(tmp_path))
    imgs = {e.summary.value[0].tag: png_pixels(e.summary.value[0].image.encoded_image_string)
            for e in evs[1:]}
    assert imgs["one"].shape == (40, 80, 3) and imgs["pair"].shape == (40, 160, 3)
    assert (imgs["kept"] == ref).all()
    assert imgs["one"][20, 40].tolist() == [255, 0, 0]  # inside the red axes
    assert imgs["pair"][20, 40].tolist() == [0, 0, 255]
    assert imgs["pair"][20, 120].tolist() == [0, 128, 0]


def test_audio(tmp_path):
    import io
    import wave
    t = np.arange(800) / 8000
    stereo = np.stack([np.sin(2 * np.pi * 440 * t), 0.5 * np.cos(2 * np.pi * 220 * t)])
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_audio("mono", musa.tensor(stereo[:1]), 0, sample_rate=8000)
        w.add_audio("stereo", stereo, 1, sample_rate=8000)
        with pytest.warns(UserWarning, match="clipped"):
            w.add_audio("loud", np.array([0.0, 2.0, -3.0]), 2)
    for ev, want in zip(events_in(str(tmp_path))[1:], [stereo[:1], stereo,
                                                         np.array([[0.0, 1.0, -1.0]])]):
        a = ev.summary.value[0].audio
        with wave.open(io.BytesIO(a.encoded_audio_string)) as f:
            assert (f.getnchannels(), f.getsampwidth()) == (want.shape[0], 2)
            assert f.getframerate() == a.sample_rate and f.getnframes() == want.shape[1]
            pcm = np.frombuffer(f.readframes(f.getnframes()), "<i2").reshape(-1, want.shape[0])
        assert (a.num_channels, a.length_frames, a.content_type) == (want.shape[0],
                                                                      want.shape[1], "audio/wav")
        assert (pcm.T == np.round(want * 32767)).all()


@pytest.mark.parametrize("weighted", [False, True])
def test_pr_curve(tmp_path, weighted):
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 500).astype(bool)
    p = np.clip(0.3 * y + 0.7 * rng.random(500), 0, 1)
    wt = rng.random(500) if weighted else np.ones(500)
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_pr_curve("pr", musa.tensor(y), musa.tensor(p), 5, num_thresholds=200,
                       weights=wt if weighted else None)
    val = only_value(tmp_path)
    n = 127  # at most 127 thresholds
    assert val.metadata.plugin_data.plugin_name == "pr_curves"
    assert parse("PrCurvePluginData", val.metadata.plugin_data.content).num_thresholds == n
    assert val.tensor.dtype == 1 and [d.size for d in val.tensor.tensor_shape.dim] == [6, n]
    got = np.array(val.tensor.float_val).reshape(6, n)
    # an example is predicted positive at threshold i when p >= i / (n - 1)
    at = p[None, :] * (n - 1) >= np.arange(n)[:, None]
    tp, fp = (at * (wt * y)).sum(1), (at * (wt * ~y)).sum(1)
    fn, tn = (wt * y).sum() - tp, (wt * ~y).sum() - fp
    want = np.stack([tp, fp, tn, fn, tp / np.maximum(tp + fp, 1e-7),
                     tp / np.maximum(tp + fn, 1e-7)])
    assert np.allclose(got, want.astype(np.float32), rtol=1e-6, atol=1e-5)
    assert got[5, 0] == 1.0 and got[4, -1] in (0.0, 1.0)


def test_hparams(tmp_path):
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_hparams({"lr": 0.01, "batch": 32, "opt": "sgd", "nesterov": True,
                       "wd": musa.tensor(1e-4)}, {"hparam/acc": 0.9, "hparam/loss": 0.25},
                      hparam_domain_discrete={"opt": ["sgd", "adam"]}, run_name="trial1",
                      global_step=7)
    assert os.listdir(str(tmp_path / "trial1"))
    evs = events_in(str(tmp_path / "trial1"))
    recs = {}
    for ev in evs[1:4]:
        v = ev.summary.value[0]
        assert v.metadata.plugin_data.plugin_name == "hparams" and not v.HasField("tensor")
        recs[v.tag] = parse("HParamsPluginData", v.metadata.plugin_data.content)
    exp = recs["_hparams_/experiment"].experiment
    assert {h.name: h.type for h in exp.hparam_infos} == {"lr": 3, "batch": 3, "opt": 1,
                                                          "nesterov": 2, "wd": 3}
    opt = [h for h in exp.hparam_infos if h.name == "opt"][0]
    assert [x.string_value for x in opt.domain_discrete.values] == ["sgd", "adam"]
    assert [m.name.tag for m in exp.metric_infos] == ["hparam/acc", "hparam/loss"]
    start = recs["_hparams_/session_start_info"].session_start_info
    hp = {e.key: e.value for e in start.hparams}
    assert hp["lr"].number_value == 0.01 and hp["batch"].number_value == 32
    assert hp["opt"].string_value == "sgd" and hp["nesterov"].bool_value is True
    assert hp["wd"].number_value == pytest.approx(1e-4)
    assert recs["_hparams_/session_end_info"].session_end_info.status == 1
    assert [(e.step, e.summary.value[0].tag, e.summary.value[0].simple_value)
            for e in evs[4:]] == [(7, "hparam/acc", np.float32(0.9)), (7, "hparam/loss", 0.25)]


def test_custom_scalars(tmp_path):
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_custom_scalars({"Losses": {"all": ["Multiline", ["loss/train", "loss/val.*"]],
                                         "band": ["Margin", ["m", "lo", "hi"]]}})
        w.add_custom_scalars_multilinechart(["acc/.*"], category="Acc", title="accs")
    evs = events_in(str(tmp_path))
    v = evs[1].summary.value[0]
    assert v.tag == "custom_scalars__config__"
    assert v.metadata.plugin_data.plugin_name == "custom_scalars"
    assert v.tensor.dtype == 7 and len(v.tensor.tensor_shape.dim) == 0
    lay = parse("Layout", v.tensor.string_val[0])
    (cat,) = lay.category
    assert cat.title == "Losses" and [c.title for c in cat.chart] == ["all", "band"]
    assert list(cat.chart[0].multiline.tag) == ["loss/train", "loss/val.*"]
    s = cat.chart[1].margin.series[0]
    assert (s.value, s.lower, s.upper) == ("m", "lo", "hi")
    lay2 = parse("Layout", evs[2].summary.value[0].tensor.string_val[0])
    assert lay2.category[0].title == "Acc" and lay2.category[0].chart[0].title == "accs"


def test_embedding(tmp_path):
    rng = np.random.default_rng(4)
    mat = rng.standard_normal((5, 3)).astype(np.float32)
    thumbs = rng.random((5, 1, 4, 6)).astype(np.float32)
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_embedding(musa.tensor(mat), metadata=[1, 2, 3, 4, "x"], label_img=thumbs,
                        tag="a/b")
        w.add_embedding(mat[:2], metadata=[["p", 1], ["q", 2]], metadata_header=["name", "k"],
                        global_step=3)
        w.add_embedding(mat[:3], metadata=musa.tensor([7, 8, 9]), tag="labels")
    d = tmp_path / "00000" / "a%2fb"
    rows = [line.split("\t") for line in (d / "tensors.tsv").read_text().splitlines()]
    assert np.array(rows, dtype=np.float64).tolist() == mat.astype(np.float64).tolist()
    assert (d / "metadata.tsv").read_text() == "1\n2\n3\n4\nx\n"
    sprite = png_pixels((d / "sprite.png").read_bytes())
    assert sprite.shape == (3 * 4, 3 * 6, 3)  # a 3 x 3 grid of 4 x 6 thumbnails
    want = (thumbs[1, 0] * 255).clip(0, 255).astype(np.uint8)
    assert (sprite[0:4, 6:12, 0] == want).all() and (sprite[4:8, 12:18] == 0).all()
    assert (tmp_path / "00003" / "default" / "metadata.tsv").read_text() == \
        "name\tk\np\t1\nq\t2\n"
    assert (tmp_path / "00000" / "labels" / "metadata.tsv").read_text() == "7\n8\n9\n"
    cfg = (tmp_path / "projector_config.pbtxt").read_text()
    assert cfg.count("embeddings {") == 3
    assert 'tensor_name: "a/b:00000"' in cfg and 'tensor_path: "00000/a%2fb/tensors.tsv"' in cfg
    assert "single_image_dim: 6\n    single_image_dim: 4" in cfg
    assert 'tensor_name: "default:00003"' in cfg and "00003/default/metadata.tsv" in cfg


class Net(musa.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = musa.nn.Linear(4, 8)
        self.block = musa.nn.Sequential(musa.nn.BatchNorm1d(8), musa.nn.ReLU())
        self.fc2 = musa.nn.Linear(8, 2)

    def forward(self, x):
        h = self.block(self.fc1(x))
        return self.fc2(h * 2), h


def test_graph(tmp_path):
    net = Net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        w.add_graph(net, musa.randn(3, 4))
    assert all((net.state_dict()[k] == v).all() for k, v in before.items())  # untouched
    assert not net.fc1._forward_hooks and not net.fc1._forward_pre_hooks
    ev = events_in(str(tmp_path))[1]
    gd = parse("GraphDef", ev.graph_def)
    assert gd.versions.producer == 22
    nodes = {n.name: n for n in gd.node}
    for n in gd.node:  # every input names a node (output k > 0 as name:k)
        for i in n.input:
            assert i.split(":")[0] in nodes, (n.name, i)

    def attr(n, key):
        return {a.key: a.value for a in n.attr}[key]
    assert nodes["input/input.0"].op == "IO Node"
    assert nodes["Net/Linear[fc1]/weight"].op == "Parameter"
    assert nodes["Net/Sequential[block]/BatchNorm1d[0]/running_mean"].op == "Buffer"
    (lin,) = [n for n in gd.node if n.op == "linear" and n.name.startswith("Net/Linear[fc1]/")]
    assert list(lin.input) == ["input/input.0", "Net/Linear[fc1]/weight", "Net/Linear[fc1]/bias"]
    assert [[d.size for d in s.dim] for s in attr(lin, "_output_shapes").list.shape] == [[3, 8]]
    assert attr(lin, "dtype").s == b"float32"
    (bn,) = [n for n in gd.node if n.op == "batch_norm"]
    assert bn.name.startswith("Net/Sequential[block]/BatchNorm1d[0]/")
    assert b"eps" in attr(bn, "attr").s
    (relu,) = [n for n in gd.node if n.op == "relu"]
    assert relu.name.startswith("Net/Sequential[block]/ReLU[1]/")
    (mul,) = [n for n in gd.node if n.op == "mul" and n.input[0] == relu.name]
    assert mul.name.startswith("Net/mul_")  # Net.forward's own op
    out0, out1 = nodes["output/output.0"], nodes["output/output.1"]
    assert out0.input[0].startswith("Net/Linear[fc2]/linear_") and out1.input == [relu.name]


def test_graph_of_a_failing_model(tmp_path):
    class Bad(musa.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = musa.nn.Linear(2, 2)

        def forward(self, x):
            self.fc(x)
            raise KeyError("boom")
    bad = Bad()
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        with pytest.raises(KeyError, match="boom"):
            w.add_graph(bad, musa.randn(1, 2))
        with pytest.raises(TypeError, match=r"\[add_graph\] model must be"):
            w.add_graph(lambda x: x, musa.randn(1))
    assert not bad.fc._forward_hooks
    assert musa.jit(lambda x: x + 1)(musa.ones(1)).item() == 2  # no capture left running


@pytest.mark.parametrize("call, err, match", [
    (lambda w: w.add_images("i", musa.zeros(0, 3, 2, 2)), ValueError, "no image"),
    (lambda w: w.add_images("i", musa.zeros(2, 3, 2)), ValueError, "dataformats"),
    (lambda w: w.add_figure("f", 3), TypeError, "Figure"),
    (lambda w: w.add_audio("a", musa.zeros(2, 2, 2)), ValueError, "shape"),
    (lambda w: w.add_video("v", musa.zeros(1, 2, 3, 4)), ValueError, r"\(N, T, C, H, W\)"),
    (lambda w: w.add_video("v", musa.zeros(1, 2, 2, 4, 4)), ValueError, "C 1 or 3"),
    (lambda w: w.add_video("v", musa.zeros(1, 2, 1, 4, 4), fps=0), ValueError, "fps"),
    (lambda w: w.add_audio("a", musa.tensor([0.0, float("nan")])), ValueError, "finite"),
    (lambda w: w.add_audio("a", musa.zeros(4), sample_rate=0), ValueError, "sample_rate"),
    (lambda w: w.add_pr_curve("p", [0, 1], [0.5]), ValueError, "differ in size"),
    (lambda w: w.add_pr_curve("p", [0, 2], [0.5, 0.5]), ValueError, "labels"),
    (lambda w: w.add_pr_curve("p", [0, 1], [0.5, 1.5]), ValueError, r"\[0, 1\]"),
    (lambda w: w.add_pr_curve("p", [0, 1], [0.5, 0.5], num_thresholds=1), ValueError,
     "num_thresholds"),
    (lambda w: w.add_hparams([1], {}), TypeError, "dicts"),
    (lambda w: w.add_hparams({"a": None}, {}), ValueError, "hparam 'a'"),
    (lambda w: w.add_hparams({"a": 1}, {"m": "x"}), TypeError, "number"),
    (lambda w: w.add_hparams({"a": 1}, {}, hparam_domain_discrete={"a": ["x"]}), TypeError,
     "hparam_domain_discrete"),
    (lambda w: w.add_custom_scalars({"c": {"t": ["Margin", ["a"]]}}), ValueError, "Margin"),
    (lambda w: w.add_custom_scalars({"c": {"t": ["Bars", ["a"]]}}), ValueError, "Multiline"),
    (lambda w: w.add_embedding(musa.zeros(3)), ValueError, r"\(N, D\)"),
    (lambda w: w.add_embedding(musa.zeros(3, 2), metadata=[1]), ValueError, "1 metadata rows"),
    (lambda w: w.add_embedding(musa.zeros(2, 2), metadata=["a\tb", "c"]), ValueError, "tab"),
    (lambda w: w.add_embedding(musa.zeros(2, 2), label_img=musa.zeros(2, 2, 3, 3)),
     ValueError, "label_img"),
])
def test_more_errors(tmp_path, call, err, match):
    with SummaryWriter(log_dir=str(tmp_path)) as w:
        with pytest.raises(err, match=match):
            call(w)


@pytest.mark.parametrize("n, c", [(1, 3), (3, 1), (5, 3)])
def test_video_is_an_animated_gif(tmp_path, n, c):
    Image = pytest.importorskip("PIL.Image")
    import io
    from musa.utils.tensorboard import _gif
    rng = np.random.default_rng(n)
    t, h, w = 3, 5, 7
    vid = rng.integers(0, 256, (n, t, c, h, w)).astype(np.uint8)
    with SummaryWriter(log_dir=str(tmp_path)) as wr:
        wr.add_video("v", musa.tensor(vid), 2, fps=5)
        wr.add_video("f", vid.astype(np.float32) / 255, 3)
    evs = events_in(str(tmp_path))
    rows = {1: 1, 3: 1, 5: 2}[n]  # PyTorch's grid: 8 slots for 5 videos, 2 rows of 4
    cols = {1: 1, 3: 4, 5: 4}[n]
    pal = np.array(_gif.palette(c), np.uint8)
    for ev in evs[1:]:
        img = ev.summary.value[0].image
        assert (img.height, img.width, img.colorspace) == (rows * h, cols * w, c)
        gif = Image.open(io.BytesIO(img.encoded_image_string))
        assert gif.n_frames == t and gif.info["loop"] == 0
        assert gif.info["duration"] == (200 if ev.summary.value[0].tag == "v" else 250)
        for k in range(t):
            gif.seek(k)
            got = np.array(gif.convert("RGB"))
            want = np.zeros((rows * h, cols * w, c), np.uint8)
            for i in range(n):
                r, q = divmod(i, cols)
                want[r * h:(r + 1) * h, q * w:(q + 1) * w] = vid[i, k].transpose(1, 2, 0)
            idx = np.frombuffer(_gif.indices(want), np.uint8).reshape(rows * h, cols * w)
            assert (got == pal[idx]).all()
            if c == 1:  # grey levels are exact
                assert (got[:, :, 0] == want[:, :, 0]).all()


def test_gif_lzw_round_trips_through_pillow():
    """The encoder alone, against Pillow's decoder: random, flat and
    two-level frames of many sizes, and a 300 x 300 one that fills the
    LZW table many times over."""
    Image = pytest.importorskip("PIL.Image")
    import io
    from musa.utils.tensorboard import _gif
    rng = np.random.default_rng(7)
    cases = [rng.integers(0, 256, (2, 300, 300, 3)).astype(np.uint8)]
    for k in range(40):
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 70)), int(rng.integers(1, 70)),
                 int(rng.choice([1, 3])))
        cases.append([rng.integers(0, 256, shape), rng.integers(0, 3, shape) * 100,
                      np.zeros(shape)][k % 3].astype(np.uint8))
    for fr in cases:
        gif = Image.open(io.BytesIO(_gif.encode(fr, 4)))
        pal = np.array(_gif.palette(fr.shape[3]), np.uint8)
        for k in range(fr.shape[0]):
            gif.seek(k)
            idx = np.frombuffer(_gif.indices(fr[k]), np.uint8).reshape(fr.shape[1:3])
            assert (np.array(gif.convert("RGB")) == pal[idx]).all()
