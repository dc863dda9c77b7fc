"""SummaryWriter.add_embedding: the files TensorBoard's Projector reads.

Each call writes, under <log_dir>/<step, 5 digits>/<tag, '%', '/' and '\\'
escaped>/: tensors.tsv (one point a line, tab-separated), metadata.tsv (a
label a line, or a header line and tab-separated columns) and sprite.png
(the thumbnails tiled in a square grid). The writer's projector_config.pbtxt
(protobuf text format: an `embeddings` entry per call, with tensor_name
"<tag>:<step>", the paths relative to log_dir and the sprite's image size)
is rewritten with every entry so far.
"""
import os
import warnings

from . import _array, _grid, _png, _to_uint8


def _escape_dir(tag):
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def _quote(s):
    """A protobuf text-format string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _cell(x):
    s = str(x)
    if "\t" in s or "\n" in s:
        raise ValueError(f"[add_embedding] metadata {s!r} holds a tab or a newline, which "
                         f"would break metadata.tsv's rows")
    return s


def add_embedding(writer, mat, metadata, label_img, global_step, tag, metadata_header):
    import numpy as np
    m = _array(mat, "add_embedding")
    if m.ndim != 2 or m.shape[0] == 0:
        raise ValueError(f"[add_embedding] mat must be (N, D) with N >= 1, got shape {m.shape}")
    n = m.shape[0]
    if not isinstance(tag, str) or not tag:
        raise ValueError(f"[add_embedding] tag must be a non-empty str, got {tag!r}")
    step = 0 if global_step is None else int(global_step)
    sub = f"{step:05d}/{_escape_dir(tag)}"
    path = os.path.join(writer.log_dir, sub)
    if metadata is not None:  # a tensor of labels as its values (not "tensor(3)")
        metadata = metadata.tolist() if hasattr(metadata, "tolist") else list(metadata)
        if len(metadata) != n:
            raise ValueError(f"[add_embedding] {len(metadata)} metadata rows for {n} points")
        if metadata_header is not None:
            header = [_cell(h) for h in metadata_header]
            rows = [list(r) if isinstance(r, (list, tuple)) else None for r in metadata]
            if any(r is None or len(r) != len(header) for r in rows):
                raise ValueError(f"[add_embedding] with metadata_header, each metadata row must "
                                 f"be a list of {len(header)} values")
            lines = ["\t".join(header)] + ["\t".join(_cell(x) for x in r) for r in rows]
        else:
            lines = [_cell(x) for x in metadata]
    thumbs = None
    if label_img is not None:
        thumbs = _array(label_img, "add_embedding")
        if thumbs.ndim != 4 or thumbs.shape[0] != n or thumbs.shape[1] not in (1, 3):
            raise ValueError(f"[add_embedding] label_img must be (N={n}, 1 or 3, H, W), got "
                             f"shape {thumbs.shape}")
    if os.path.isdir(path):
        warnings.warn(f"[add_embedding] {path} exists and is overwritten (give each call its "
                      f"own global_step or tag)", stacklevel=3)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "tensors.tsv"), "w") as f:
        for row in m.astype(np.float64):
            f.write("\t".join(repr(float(x)) for x in row) + "\n")
    entry = [f"  tensor_name: {_quote(f'{tag}:{step:05d}')}",
             f"  tensor_path: {_quote(sub + '/tensors.tsv')}"]
    if metadata is not None:
        with open(os.path.join(path, "metadata.tsv"), "w") as f:
            f.write("".join(line + "\n" for line in lines))
        entry.append(f"  metadata_path: {_quote(sub + '/metadata.tsv')}")
    if thumbs is not None:
        t = np.transpose(thumbs, (0, 2, 3, 1))
        if t.shape[3] == 1:
            t = np.repeat(t, 3, axis=3)
        side = int(np.ceil(np.sqrt(n)))
        grid = _grid(t, side, "add_embedding")
        square = np.zeros((side * t.shape[1], side * t.shape[2], 3), dtype=grid.dtype)
        square[:grid.shape[0], :grid.shape[1]] = grid
        with open(os.path.join(path, "sprite.png"), "wb") as f:
            f.write(_png(_to_uint8(square)))
        entry += ["  sprite {", f"    image_path: {_quote(sub + '/sprite.png')}",
                  f"    single_image_dim: {t.shape[2]}", f"    single_image_dim: {t.shape[1]}",
                  "  }"]
    writer._embeddings.append("embeddings {\n" + "\n".join(entry) + "\n}\n")
    with open(os.path.join(writer.log_dir, "projector_config.pbtxt"), "w") as f:
        f.write("".join(writer._embeddings))
