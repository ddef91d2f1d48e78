#!/usr/bin/env python3
"""Draws the lm loss of a metrics JSONL file (OUT/train --metrics-file) as a PNG, with only
the standard library: a line chart with axes, ticks and numeric labels in a tiny bitmap font.

    scripts/plot_loss.py metrics.jsonl loss.png
"""
import json
import struct
import sys
import zlib

W, H = 720, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 30, 50

# 3x5 glyphs for the characters the labels use.
FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "-": "000000111000000",
    "l": "100100100100111", "o": "000111101101111", "s": "000111110011111", "i": "010000010010010",
    "t": "010111010010011", "e": "000111111100111", "r": "000111100100100", "a": "000011101101111",
    "n": "000110101101101", " ": "000000000000000",
}


def png(pixels):
    raw = b"".join(b"\x00" + bytes(row) for row in pixels)
    chunk = lambda tag, data: struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def main(metrics_path, out_path):
    with open(metrics_path) as f:
        points = [(m["iteration"], m["lm_loss"]) for m in map(json.loads, f)]
    if len(points) < 2:
        sys.exit(f"plot_loss: {metrics_path} has {len(points)} iterations; need at least 2")
    img = [[255] * (3 * W) for _ in range(H)]

    def put(x, y, rgb):
        if 0 <= x < W and 0 <= y < H:
            img[y][3 * x:3 * x + 3] = rgb

    def line(x0, y0, x1, y1, rgb, width=1):
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for i in range(steps + 1):
            x = round(x0 + (x1 - x0) * i / steps)
            y = round(y0 + (y1 - y0) * i / steps)
            for d in range(width):
                put(x, y + d, rgb)

    def text(x, y, s, scale=2):
        for c in s:
            glyph = FONT.get(c, FONT[" "])
            for i, bit in enumerate(glyph):
                if bit == "1":
                    for dx in range(scale):
                        for dy in range(scale):
                            put(x + (i % 3) * scale + dx, y + (i // 3) * scale + dy, (0, 0, 0))
            x += 4 * scale

    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_lo, x_hi, y_lo, y_hi = min(xs), max(xs), 0.0, max(ys) * 1.05
    px = lambda x: LEFT + round((x - x_lo) / (x_hi - x_lo) * (W - LEFT - RIGHT))
    py = lambda y: H - BOTTOM - round((y - y_lo) / (y_hi - y_lo) * (H - TOP - BOTTOM))
    grey, black, blue = (220, 220, 220), (0, 0, 0), (30, 90, 200)
    for k in range(6):  # horizontal grid and loss labels
        y = y_lo + (y_hi - y_lo) * k / 5
        line(LEFT, py(y), W - RIGHT, py(y), grey)
        text(8, py(y) - 5, f"{y:.1f}")
    for k in range(5):  # iteration labels
        x = x_lo + (x_hi - x_lo) * k / 4
        text(px(x) - 10, H - BOTTOM + 10, f"{round(x)}")
    line(LEFT, TOP, LEFT, H - BOTTOM, black)
    line(LEFT, H - BOTTOM, W - RIGHT, H - BOTTOM, black)
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        line(px(x0), py(y0), px(x1), py(y1), blue, width=2)
    text(LEFT, 8, "loss")
    text(W - RIGHT - 80, H - 20, "iteration")
    with open(out_path, "wb") as f:
        f.write(png(img))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
