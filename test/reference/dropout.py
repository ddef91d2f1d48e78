"""Dropout masks as runtime/include/megart/dropout.h documents them, written again in numpy from
that text: whether an element is kept depends on (seed, iteration, layer, stream, its index in
the iteration's global batch) only. The reference model multiplies by these masks, so the
single-rank program is checked against an independent implementation of the same draw."""
import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
SALT = 0x64726F706F7574  # "dropout"
EMBEDDING, ATTENTION, ATTENTION_OUTPUT, MLP_OUTPUT = 0, 1, 2, 3  # the streams (TxNames.h)
MASK64 = (1 << 64) - 1


def mix(z):
    """splitmix64's output function on uint64 arrays (wrapping arithmetic)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = z ^ (z >> np.uint64(30))
        z = z * np.uint64(0xBF58476D1CE4E5B9)
        z = z ^ (z >> np.uint64(27))
        z = z * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _int(z):
    return int(np.asarray(z, dtype=np.uint64))


def iteration_key(seed, iteration):
    return _int(mix((_int(mix(seed ^ SALT)) + iteration * GOLDEN) & MASK64))


def site_key(it_key, layer, stream):
    return _int(mix((it_key + _int(mix(((layer + 1) << 8) | stream))) & MASK64))


def keep_scale(rate, shape, key, first_sample):
    """float32 array of `shape` ([samples, ...] of one microbatch whose first sample is
    `first_sample` in the global batch): 1 / (1 - rate) where kept, 0 where dropped."""
    rate32 = np.float32(rate)
    threshold = int(np.floor(np.float64(rate32) * 4294967296.0))
    per_sample = int(np.prod(shape[1:]))
    e = np.arange(int(np.prod(shape)), dtype=np.uint64) + np.uint64(first_sample * per_sample)
    with np.errstate(over="ignore"):
        bits = mix(np.uint64(key) + (e + np.uint64(1)) * np.uint64(GOLDEN)) >> np.uint64(32)
    scale = np.float32(1.0 / (1.0 - np.float64(rate32)))
    return np.where(bits >= np.uint64(threshold), scale, np.float32(0.0)).astype(np.float32).reshape(shape)


class Draw:
    """One microbatch's draw: the iteration's key and the microbatch's first sample."""

    def __init__(self, seed, iteration, first_sample):
        self.key, self.first_sample = iteration_key(seed, iteration), first_sample

    def mask(self, rate, shape, layer, stream):
        return keep_scale(rate, shape, site_key(self.key, layer, stream), self.first_sample)
