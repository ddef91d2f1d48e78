"""Megatron's BERT masking as runtime/include/megart/mlm_masking.h documents it, written again in
numpy from that text: whether and how a position is masked depends on (seed, the sample's place
in its stream, the position) only. The reference trains on these batches, and the transformers
checks feed them to BertForMaskedLM, so megac's masks are checked against an independent draw."""
import numpy as np

from dropout import GOLDEN, MASK64, mix, _int

SALT = 0x6D6C6D5F6D61736B  # "mlm_mask"
IGNORED = -100  # transformers' ignore_index


def _key(seed, stream):
    return _int(mix((seed ^ ((SALT + stream) & MASK64)) & MASK64))


def _bits(key, e):
    with np.errstate(over="ignore"):
        return mix(np.uint64(key) + (e + np.uint64(1)) * np.uint64(GOLDEN)) >> np.uint64(32)


def mask_sample(tokens, sample, seed, mask_id, vocab_size, never_masked):
    """(ids, labels) of one sample's tokens (int array of seq_length) at place `sample`."""
    tokens = np.asarray(tokens, dtype=np.int64)
    s = len(tokens)
    e = np.arange(s, dtype=np.uint64) + np.uint64(sample * s)
    chosen = _bits(_key(seed, 0), e) < np.uint64(int(0.15 * 4294967296.0))
    chosen &= ~np.isin(tokens, list(never_masked))
    kind = _bits(_key(seed, 1), e)
    random_token = ((_bits(_key(seed, 2), e) * np.uint64(vocab_size)) >> np.uint64(32)).astype(np.int64)
    ids = tokens.copy()
    ids = np.where(chosen & (kind < np.uint64(int(0.8 * 4294967296.0))), mask_id, ids)
    ids = np.where(chosen & (kind >= np.uint64(int(0.8 * 4294967296.0))) &
                   (kind < np.uint64(int(0.9 * 4294967296.0))), random_token, ids)
    labels = np.where(chosen, tokens, IGNORED)
    return ids.astype(np.int64), labels.astype(np.int64)


def masking_of(prefix):
    """(mask id, vocabulary size, never-masked ids) from PREFIX.tokenizer.json, as megac data wrote it."""
    import json
    with open(prefix + ".tokenizer.json") as f:
        record = json.load(f)
    special = record["special_tokens"]
    never = [special[k]["id"] for k in ("cls_token", "sep_token", "pad_token", "mask_token") if k in special]
    return special["mask_token"]["id"], record["vocab_size"], never


class MlmSamples:
    """Sample i = the first s of tokens[i*s : i*s+s+1], masked as sample i: (ids, labels)."""

    def __init__(self, tokens, seq_length, seed, prefix):
        self.tokens, self.s, self.seed = tokens, seq_length, seed
        self.mask_id, self.vocab_size, self.never = masking_of(prefix)

    def __len__(self):
        return max(0, (len(self.tokens) - 1) // self.s)

    def __getitem__(self, i):
        chunk = self.tokens[i * self.s: i * self.s + self.s]
        return mask_sample(chunk, i, self.seed, self.mask_id, self.vocab_size, self.never)
