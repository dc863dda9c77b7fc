"""Animated GIF (GIF89a) bytes of uint8 frames, for SummaryWriter.add_video:
TensorBoard's image dashboard plays them.

One global 256-colour table: grey levels for one-channel frames, and for
colour a 3-3-2 cube (8 levels of red and green, 4 of blue; the nearest
level per channel). Each frame is an image with its delay (1/100 s) in a
graphic control extension; a NETSCAPE2.0 extension loops the animation.

The pixels are LZW-compressed with 8-bit roots: clear code 256, end code
257, codes of 9 to 12 bits packed from the low bit. The decoder adds its
table entry one code after the encoder (it learns each entry's last byte
from the next code), so the encoder widens its codes when its next free
code is 2**width + 1 (the "late change" of the GIF spec's decoders), also
after the last code, before the end code; a full table (4095 entries) is
cleared.
"""
import struct

CLEAR, END = 256, 257


def palette(channels):
    """The 256 (r, g, b) entries for frames of this many channels."""
    if channels == 1:
        return [(i, i, i) for i in range(256)]
    return [((i >> 5) * 255 // 7, (i >> 2 & 7) * 255 // 7, (i & 3) * 255 // 3)
            for i in range(256)]


def indices(frame):
    """An (H, W, C) uint8 frame as palette indices (bytes, row by row)."""
    import numpy as np
    if frame.shape[2] == 1:
        return frame[:, :, 0].tobytes()
    f = frame[:, :, :3].astype(np.uint16)
    r, g, b = ((f[:, :, k] * levels + 127) // 255 for k, levels in enumerate((7, 7, 3)))
    return (r << 5 | g << 2 | b).astype(np.uint8).tobytes()


def lzw(data):
    """The LZW code stream of data (bytes), packed, for minimum code size 8."""
    out, acc, nbits = bytearray(), 0, 0
    width, nxt, table = 9, 258, {}

    def put(code):
        nonlocal acc, nbits
        acc |= code << nbits
        nbits += width
        while nbits >= 8:
            out.append(acc & 0xFF)
            acc >>= 8
            nbits -= 8

    put(CLEAR)
    w = None
    for byte in data:
        if w is None:
            w = byte
            continue
        key = (w, byte)
        code = table.get(key)
        if code is not None:
            w = code
            continue
        put(w)
        table[key] = nxt
        nxt += 1
        if nxt == (1 << width) + 1 and width < 12:
            width += 1
        if nxt == 4095:  # full: start again
            put(CLEAR)
            width, nxt, table = 9, 258, {}
        w = byte
    if w is not None:
        put(w)
        nxt += 1  # the entry the decoder adds on reading it
        if nxt == (1 << width) + 1 and width < 12:
            width += 1
    put(END)
    if nbits:
        out.append(acc & 0xFF)
    return bytes(out)


def _blocks(data):
    """Data sub-blocks (at most 255 bytes each), then the terminator."""
    return b"".join(bytes([len(data[i:i + 255])]) + data[i:i + 255]
                    for i in range(0, len(data), 255)) + b"\x00"


def encode(frames, fps):
    """GIF bytes of frames, a (T, H, W, C) uint8 array (C 1 or 3), shown at
    fps frames a second and looped."""
    t, h, w, c = frames.shape
    delay = max(1, round(100 / fps))
    head = b"GIF89a" + struct.pack("<HHBBB", w, h, 0xF7, 0, 0)
    head += b"".join(bytes(rgb) for rgb in palette(c))
    head += b"\x21\xff\x0bNETSCAPE2.0\x03\x01" + struct.pack("<H", 0) + b"\x00"
    body = b""
    for k in range(t):
        body += b"\x21\xf9\x04\x00" + struct.pack("<H", delay) + b"\x00\x00"
        body += b"\x2c" + struct.pack("<HHHHB", 0, 0, w, h, 0)
        body += b"\x08" + _blocks(lzw(indices(frames[k])))
    return head + body + b"\x3b"
