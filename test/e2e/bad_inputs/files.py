"""Bad files made from good ones: safetensors checkpoints with one thing broken, Megatron
.bin/.idx datasets with one thing broken."""
import json
import os
import struct


def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack_from("<Q", blob, 0)
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def write_safetensors(header, data):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def model_file(ctx):
    return os.path.join(ctx["ckpt"], "iter_0000002", "model.safetensors")


def without_tensor(name):
    def make(ctx):
        header, data = read_safetensors(model_file(ctx))
        header.pop(name)
        return write_safetensors(header, data)
    return make


def with_dtype(name, dtype):
    def make(ctx):
        header, data = read_safetensors(model_file(ctx))
        header[name]["dtype"] = dtype
        return write_safetensors(header, data)
    return make


def with_nan(name, index=3):
    def make(ctx):
        header, data = read_safetensors(model_file(ctx))
        begin = header[name]["data_offsets"][0] + 4 * index
        data = data[:begin] + struct.pack("<f", float("nan")) + data[begin + 4:]
        return write_safetensors(header, data)
    return make


def truncated_model(ctx):
    with open(model_file(ctx), "rb") as f:
        blob = f.read()
    return blob[:len(blob) // 2]


def huge_header_length(ctx):
    return struct.pack("<Q", 1 << 60) + b"{}"


def copy_of(relative, root="ckpt"):
    """A file of the good checkpoint (or of the fixture `root`: "lora_ckpt"), unchanged."""
    def make(ctx):
        with open(os.path.join(ctx[root], relative), "rb") as f:
            return f.read()
    return make


def json_of(relative, change, root="ckpt"):
    """A JSON file of the good checkpoint (or of `root`) with change(dict) applied."""
    def make(ctx):
        with open(os.path.join(ctx[root], relative)) as f:
            value = json.load(f)
        change(value)
        return json.dumps(value, indent=2).encode()
    return make


def safetensors_of(relative, change, root="ckpt"):
    """A safetensors file of the good checkpoint with change(header, data) -> (header, data) applied."""
    def make(ctx):
        header, data = read_safetensors(os.path.join(ctx[root], relative))
        header, data = change(header, data)
        return write_safetensors(header, data)
    return make


def set_float(header, data, name, value, index=0):
    """data with element `index` of tensor `name` (F32) set to `value`."""
    begin = header[name]["data_offsets"][0] + 4 * index
    return data[:begin] + struct.pack("<f", value) + data[begin + 4:]


def train_state(change):
    """The good checkpoint's train_state.json with change(dict) applied."""
    return json_of(os.path.join("iter_0000002", "train_state.json"), change)


# Megatron indexed dataset: header, sizes, pointers, document index.
def dataset_idx(sizes, version=1, magic=b"MMIDIDX\x00\x00", dtype_code=8):
    docs = list(range(len(sizes) + 1))
    pointers, at = [], 0
    for s in sizes:
        pointers.append(at)
        at += 2 * s
    return (struct.pack("<9sQBQQ", magic, version, dtype_code, len(sizes), len(docs)) +
            struct.pack(f"<{len(sizes)}i", *sizes) + struct.pack(f"<{len(sizes)}q", *pointers) +
            struct.pack(f"<{len(docs)}q", *docs))


def dataset_bin(tokens):
    return struct.pack(f"<{len(tokens)}H", *tokens)


class Special:
    """A case file that is not bytes: made by make(path, fill) (fill expands {placeholders})."""


class Fifo(Special):
    def make(self, path, fill):
        os.mkfifo(path)


class Folder(Special):
    def make(self, path, fill):
        os.makedirs(path)


class Link(Special):
    def __init__(self, target):
        self.target = target

    def make(self, path, fill):
        os.symlink(fill(self.target), path)
