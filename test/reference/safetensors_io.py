"""Minimal safetensors reader/writer (F32 only).

Layout: u64 little-endian header length N; N bytes of JSON {name: {dtype, shape, data_offsets}}
(keys sorted, compact, padded with spaces so N is a multiple of 8); then the raw data, tensors
in sorted-name order, offsets relative to the end of the header.
"""
import json
import struct

import numpy as np
import torch


def save_file(tensors, path):
    """tensors: {name: torch.Tensor or np.ndarray}; stored as little-endian float32."""
    header, blobs, pos = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        blob = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [pos, pos + len(blob)]}
        blobs.append(blob)
        pos += len(blob)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for blob in blobs:
            f.write(blob)


def load_file(path):
    """-> {name: float32 torch.Tensor}. Ignores __metadata__; rejects non-F32 and bad offsets."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(raw[8:8 + n].decode())
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}; only F32 is supported")
        start, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end - start != 4 * count or end > len(data) or start < 0:
            raise ValueError(f"{path}: tensor {name}: data_offsets {info['data_offsets']} do not fit shape {info['shape']}")
        a = np.frombuffer(data, "<f4", count, start).reshape(info["shape"])
        out[name] = torch.from_numpy(a.astype(np.float32))  # copy: writable, native order
    return out
