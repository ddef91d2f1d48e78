"""Megatron indexed dataset (.bin/.idx) reader and writer, and unshuffled GPT samples.

Format (little-endian): see /work/shared/reference/facts.md.
"""
import struct

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequence_count, document_count (34 bytes)
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32, 8: np.uint16}
CODES = {np.dtype(t): c for c, t in DTYPES.items()}


class IndexedDataset:
    def __init__(self, prefix):
        with open(prefix + ".idx", "rb") as f:
            idx = f.read()
        if len(idx) < HEADER.size:
            raise ValueError(f"{prefix}.idx: too short for a header")
        magic, version, code, n, ndoc = HEADER.unpack_from(idx, 0)
        if magic != MAGIC:
            raise ValueError(f"{prefix}.idx: bad magic {magic!r} (not a Megatron indexed dataset)")
        if version != 1:
            raise ValueError(f"{prefix}.idx: version {version}, only 1 is supported")
        if code not in DTYPES:
            raise ValueError(f"{prefix}.idx: unknown dtype code {code}")
        if len(idx) != HEADER.size + 12 * n + 8 * ndoc:
            raise ValueError(f"{prefix}.idx: size {len(idx)} does not match {n} sequences, {ndoc} document entries")
        self.dtype = np.dtype(DTYPES[code]).newbyteorder("<")
        off = HEADER.size
        self.sizes = np.frombuffer(idx, "<i4", n, off)
        self.pointers = np.frombuffer(idx, "<i8", n, off + 4 * n)
        self.doc_idx = np.frombuffer(idx, "<i8", ndoc, off + 12 * n)
        self.bin = np.fromfile(prefix + ".bin", dtype=np.uint8)
        ends = self.pointers + self.sizes.astype(np.int64) * self.dtype.itemsize
        if n and ends.max() > self.bin.size:
            raise ValueError(f"{prefix}.bin: {self.bin.size} bytes, index points past the end")

    def __len__(self):
        return len(self.sizes)

    def __getitem__(self, i):
        start = int(self.pointers[i])
        return self.bin[start:start + int(self.sizes[i]) * self.dtype.itemsize].view(self.dtype)

    def token_stream(self):
        """All sequences concatenated in index order, as int64."""
        if len(self) == 0:
            return np.zeros(0, np.int64)
        return np.concatenate([self[i] for i in range(len(self))]).astype(np.int64)


class GPTSamples:
    """Sample i = tokens[i*s : i*s+s+1]; inputs = first s, labels = last s. No shuffling."""

    def __init__(self, tokens, seq_length):
        self.tokens, self.s = tokens, seq_length

    def __len__(self):
        return max(0, (len(self.tokens) - 1) // self.s)

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(f"sample {i} out of range: dataset has {len(self)} samples of seq_length {self.s}")
        chunk = self.tokens[i * self.s: i * self.s + self.s + 1]
        return chunk[:-1], chunk[1:]


def write_dataset(prefix, documents, vocab):
    """One sequence per document; uint16 if vocab < 65500 else int32; document index [0..n]."""
    dtype = np.dtype("<u2") if vocab < 65500 else np.dtype("<i4")
    arrays = []
    for j, doc in enumerate(documents):
        a = np.asarray(doc, dtype=np.int64)
        if a.size and (a.min() < 0 or a.max() >= vocab):
            raise ValueError(f"document {j}: token out of range [0, {vocab})")
        arrays.append(a.astype(dtype))
    sizes = np.array([a.size for a in arrays], dtype="<i4")
    pointers = np.zeros(len(arrays), dtype="<i8")
    if len(arrays) > 1:
        pointers[1:] = np.cumsum(sizes[:-1].astype(np.int64)) * dtype.itemsize
    doc_idx = np.arange(len(arrays) + 1, dtype="<i8")
    with open(prefix + ".bin", "wb") as f:
        for a in arrays:
            f.write(a.tobytes())
    with open(prefix + ".idx", "wb") as f:
        f.write(HEADER.pack(MAGIC, 1, CODES[np.dtype(dtype.type)], len(arrays), len(doc_idx)))
        f.write(sizes.tobytes() + pointers.tobytes() + doc_idx.tobytes())
