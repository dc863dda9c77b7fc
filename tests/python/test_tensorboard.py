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


def _classes():
    fdp = descriptor_pb2.FileDescriptorProto(name="musa_tb_test.proto", package="tbt",
                                             syntax="proto3")
    spec = {
        "Event": [("wall_time", 1, DOUBLE, ONE, ""), ("step", 2, INT64, ONE, ""),
                  ("file_version", 3, STRING, ONE, ""), ("summary", 5, MESSAGE, ONE, "Summary"),
                  ("session_log", 6, MESSAGE, ONE, "SessionLog")],
        "SessionLog": [("status", 1, INT32, ONE, "")],
        "Summary": [("value", 1, MESSAGE, MANY, "Value")],
        "Value": [("tag", 1, STRING, ONE, ""), ("simple_value", 2, FLOAT, ONE, ""),
                  ("image", 4, MESSAGE, ONE, "Image"), ("histo", 5, MESSAGE, ONE, "Histo"),
                  ("tensor", 8, MESSAGE, ONE, "TensorProto"), ("metadata", 9, MESSAGE, ONE, "Meta")],
        "Image": [("height", 1, INT32, ONE, ""), ("width", 2, INT32, ONE, ""),
                  ("colorspace", 3, INT32, ONE, ""), ("encoded_image_string", 4, BYTES, ONE, "")],
        "Histo": [("min", 1, DOUBLE, ONE, ""), ("max", 2, DOUBLE, ONE, ""),
                  ("num", 3, DOUBLE, ONE, ""), ("sum", 4, DOUBLE, ONE, ""),
                  ("sum_squares", 5, DOUBLE, ONE, ""), ("bucket_limit", 6, DOUBLE, MANY, ""),
                  ("bucket", 7, DOUBLE, MANY, "")],
        "TensorProto": [("dtype", 1, INT32, ONE, ""), ("tensor_shape", 2, MESSAGE, ONE, "Shape"),
                        ("string_val", 8, BYTES, MANY, "")],
        "Shape": [("dim", 2, MESSAGE, MANY, "Dim")],
        "Dim": [("size", 1, INT64, ONE, "")],
        "Meta": [("plugin_data", 1, MESSAGE, ONE, "PluginData")],
        "PluginData": [("plugin_name", 1, STRING, ONE, "")],
    }
    for name, fields in spec.items():
        m = fdp.message_type.add(name=name)
        for fname, num, typ, label, tname in fields:
            f = m.field.add(name=fname, number=num, type=typ, label=label)
            if tname:
                f.type_name = ".tbt." + tname
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    desc = pool.FindMessageTypeByName("tbt.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


Event = _classes()


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
        png = img.encoded_image_string
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        at, idat = 8, b""
        while at < len(png):
            (n,) = struct.unpack(">I", png[at:at + 4])
            tag, data = png[at + 4:at + 8], png[at + 8:at + 8 + n]
            assert struct.unpack(">I", png[at + 8 + n:at + 12 + n])[0] == zlib.crc32(tag + data)
            if tag == b"IHDR":
                w_, h_, depth, kind = struct.unpack(">IIBB", data[:10])
                assert (h_, w_, depth, kind) == (px.shape[0], px.shape[1], 8,
                                                 {1: 0, 3: 2, 4: 6}[px.shape[2]])
            idat += data if tag == b"IDAT" else b""
            at += 12 + n
        rows = zlib.decompress(idat)
        stride = 1 + px.shape[1] * px.shape[2]
        got = np.frombuffer(rows, np.uint8).reshape(px.shape[0], stride)
        assert (got[:, 0] == 0).all()  # filter type none
        assert (got[:, 1:].reshape(px.shape) == px).all()


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
