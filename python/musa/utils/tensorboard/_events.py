"""TensorBoard's event files, written without TensorFlow or TensorBoard:
TFRecord framing (a little-endian uint64 length, its masked CRC-32C, the
bytes, their masked CRC-32C) around Event protocol buffers, encoded here by
hand (the few fields SummaryWriter needs, numbered as in TensorFlow's
event.proto, summary.proto, tensor.proto and tensor_shape.proto).

Fields used:
    Event: wall_time 1 (double), step 2 (int64), file_version 3 (string),
           summary 5 (Summary)
    Summary: value 1 (repeated Value)
    Value: tag 1, simple_value 2 (float), image 4 (Image), histo 5
           (HistogramProto), tensor 8 (TensorProto), metadata 9
           (SummaryMetadata)
    Image: height 1, width 2, colorspace 3, encoded_image_string 4
    HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5 (doubles),
                    bucket_limit 6, bucket 7 (packed doubles)
    TensorProto: dtype 1 (DT_STRING = 7), tensor_shape 2, string_val 8
    TensorShapeProto: dim 2 (Dim: size 1)
    SummaryMetadata: plugin_data 1 (PluginData: plugin_name 1, content 2)
    Event: graph_def 4 (a GraphDef's bytes)
    Value: audio 6 (Audio: sample_rate 1 (float), num_channels 2,
           length_frames 3, encoded_audio_string 4, content_type 5)
    TensorProto: float_val 5 (packed floats; dtype DT_FLOAT = 1)
    GraphDef (graph.proto): node 1 (NodeDef), versions 4 (VersionDef:
             producer 1)
    NodeDef (node_def.proto): name 1, op 2, input 3 (repeated string),
             attr 5 (map<string, AttrValue>: entries key 1, value 2)
    AttrValue (attr_value.proto): list 1 (ListValue: shape 7, repeated
             TensorShapeProto), s 2 (bytes)

The plugins' own messages (hparams, PR curves, custom scalars) are in
_plugins.py.
"""
import struct

# ---- CRC-32C (Castagnoli), as TFRecord frames records ----

_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _TABLE.append(_c)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data):
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    head = struct.pack("<Q", len(data))
    return (head + struct.pack("<I", masked_crc32c(head)) + data
            + struct.pack("<I", masked_crc32c(data)))


# ---- protocol buffer wire format ----

def _varint(n):
    n &= (1 << 64) - 1  # negative int64s as two's complement, as protobuf does
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def f_varint(field, n):
    return _key(field, 0) + _varint(int(n))


def f_double(field, x):
    return _key(field, 1) + struct.pack("<d", float(x))


def f_float(field, x):
    return _key(field, 5) + struct.pack("<f", float(x))


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode("utf-8")
    return _key(field, 2) + _varint(len(b)) + b


def f_packed_doubles(field, xs):
    return f_bytes(field, b"".join(struct.pack("<d", float(x)) for x in xs))


def f_packed_floats(field, xs):
    xs = [float(x) for x in xs]
    return f_bytes(field, struct.pack(f"<{len(xs)}f", *xs))


# ---- the messages ----

def event(wall_time, step=None, summary=None, file_version=None, graph_def=None):
    out = f_double(1, wall_time)
    if step is not None:
        out += f_varint(2, step)
    if file_version is not None:
        out += f_bytes(3, file_version)
    if graph_def is not None:
        out += f_bytes(4, graph_def)
    if summary is not None:
        out += f_bytes(5, summary)
    return out


def summary(*values):
    return b"".join(f_bytes(1, v) for v in values)


def scalar_value(tag, x):
    return f_bytes(1, tag) + f_float(2, x)


def histogram_value(tag, lo, hi, num, total, squares, limits, counts):
    histo = (f_double(1, lo) + f_double(2, hi) + f_double(3, num) + f_double(4, total)
             + f_double(5, squares) + f_packed_doubles(6, limits) + f_packed_doubles(7, counts))
    return f_bytes(1, tag) + f_bytes(5, histo)


def image_value(tag, height, width, channels, png):
    image = f_varint(1, height) + f_varint(2, width) + f_varint(3, channels) + f_bytes(4, png)
    return f_bytes(1, tag) + f_bytes(4, image)


def shape(dims):
    """A TensorShapeProto of these dim sizes."""
    return b"".join(f_bytes(2, f_varint(1, d)) for d in dims)


def metadata(plugin, content=b""):
    """A SummaryMetadata naming the plugin that reads the value."""
    data = f_bytes(1, plugin) + (f_bytes(2, content) if content else b"")
    return f_bytes(1, data)


def string_tensor(strings, dims):
    return f_varint(1, 7) + f_bytes(2, shape(dims)) + b"".join(f_bytes(8, x) for x in strings)


def float_tensor(values, dims):
    return f_varint(1, 1) + f_bytes(2, shape(dims)) + f_packed_floats(5, values)


def tensor_value(tag, tensor, plugin, content=b""):
    return f_bytes(1, tag) + f_bytes(8, tensor) + f_bytes(9, metadata(plugin, content))


def metadata_value(tag, plugin, content):
    """A value that is only its metadata (the hparams plugin's records)."""
    return f_bytes(1, tag) + f_bytes(9, metadata(plugin, content))


def text_value(tag, text):
    return tensor_value(tag, string_tensor([text], [1]), "text")


def audio_value(tag, sample_rate, channels, frames, wav):
    audio = (f_float(1, sample_rate) + f_varint(2, channels) + f_varint(3, frames)
             + f_bytes(4, wav) + f_bytes(5, "audio/wav"))
    return f_bytes(1, tag) + f_bytes(6, audio)


# ---- graphs ----

def attr_string(s):
    return f_bytes(2, s)


def attr_shapes(shapes):
    return f_bytes(1, b"".join(f_bytes(7, shape(dims)) for dims in shapes))


def node_def(name, op, inputs=(), attrs=None):
    out = f_bytes(1, name) + f_bytes(2, op) + b"".join(f_bytes(3, x) for x in inputs)
    for key, value in (attrs or {}).items():
        out += f_bytes(5, f_bytes(1, key) + f_bytes(2, value))
    return out


def graph_def(nodes, producer=22):
    return b"".join(f_bytes(1, n) for n in nodes) + f_bytes(4, f_varint(1, producer))
