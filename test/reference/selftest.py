"""Self-checks of the reference against independent facts. Run: /usr/bin/python3 test/reference/selftest.py"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
import traceback

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import train as T  # noqa: E402
from indexed_dataset import GPTSamples, IndexedDataset, write_dataset  # noqa: E402
from model import Attention, Norm, Transformer, apply_rope, gelu_tanh, init_weights, rope_tables  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402
from spec import SpecError, load_spec, make_spec  # noqa: E402

GPT2 = os.path.join(ROOT, "examples", "gpt2-tiny.yaml")
LLAMA = os.path.join(ROOT, "examples", "llama-tiny.yaml")
TMP = tempfile.mkdtemp(prefix="megac-ref-")
TESTS = []


def test(fn):
    TESTS.append(fn)
    return fn


def close(a, b, rtol):
    return abs(a - b) <= rtol * max(abs(a), abs(b))


def pattern_data(name, n_docs=128):
    """Byte documents with short repeating patterns, each ending in end-of-document (256)."""
    rng = np.random.default_rng(0)
    docs = []
    for _ in range(n_docs):
        pat = list(b"abcdefgh"[: rng.integers(3, 9)])
        docs.append(pat * int(rng.integers(8, 20)) + [256])
    prefix = os.path.join(TMP, name)
    write_dataset(prefix, docs, 257)
    return prefix


def run_train(spec_path, prefix, **flags):
    args = ["--spec", spec_path, "--data-path", prefix]
    for k, v in flags.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    a = T.build_parser().parse_args(args)
    spec = load_spec(a.spec)
    model = init_weights(Transformer(spec), a.seed)
    samples = GPTSamples(IndexedDataset(prefix).token_stream(), spec.seq_length)
    return T.train(model, samples, a)


@test
def spec_defaults_and_errors():
    g, l = load_spec(GPT2), load_spec(LLAMA)
    assert (g.ffn_hidden_size, g.num_query_groups, g.tie_embeddings, g.normalization) == (256, 4, True, "LayerNorm")
    assert (l.ffn_hidden_size, l.num_query_groups, l.tie_embeddings, l.activation) == (176, 2, False, "swiglu")
    base = dict(family="llama", num_layers=1, hidden_size=4096, num_attention_heads=32, seq_length=8, vocab_size=10)
    assert make_spec(base).ffn_hidden_size == 11008  # Llama-7B's published size
    assert make_spec(dict(base, norm_epsilon="1e-6")).norm_epsilon == 1e-6  # YAML 1.1 reads 1e-6 as a string
    for bad, word in [(dict(base, hidden_sise=1), "hidden_sise"), (dict(base, num_query_groups=5), "num_query_groups"),
                      (dict(base, family="bert"), "family"), (dict(base, num_layers=True), "num_layers"),
                      ({k: v for k, v in base.items() if k != "vocab_size"}, "vocab_size")]:
        try:
            make_spec(bad)
        except SpecError as e:
            assert word in str(e), str(e)
        else:
            raise AssertionError(f"accepted {bad}")


@test
def safetensors_round_trip():
    t = {"b.weight": torch.randn(3, 5), "a.bias": torch.arange(4.0), "c": torch.tensor(2.5)}
    path = os.path.join(TMP, "t.safetensors")
    save_file(t, path)
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and raw[8 + n - 1:8 + n] in (b" ", b"}")
    header = json.loads(raw[8:8 + n])
    assert list(header) == sorted(t)
    assert header["a.bias"] == {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
    assert raw[8 + n:8 + n + 16] == struct.pack("<4f", 0, 1, 2, 3)
    back = load_file(path)
    assert set(back) == set(t) and all(torch.equal(back[k], t[k]) for k in t)


@test
def dataset_round_trip():
    docs = [[1, 2, 3], [256, 0], [7] * 5]
    prefix = os.path.join(TMP, "d")
    write_dataset(prefix, docs, 257)
    idx = open(prefix + ".idx", "rb").read()
    assert idx[:9] == b"MMIDIDX\x00\x00" and struct.unpack_from("<QBQQ", idx, 9) == (1, 8, 3, 4)
    assert len(idx) == 34 + 3 * 4 + 3 * 8 + 4 * 8
    assert open(prefix + ".bin", "rb").read() == np.array(sum(docs, []), "<u2").tobytes()
    ds = IndexedDataset(prefix)
    assert [list(ds[i]) for i in range(3)] == docs and list(ds.pointers) == [0, 6, 10]
    assert list(ds.doc_idx) == [0, 1, 2, 3]
    s = GPTSamples(ds.token_stream(), 3)  # 10 tokens -> 3 samples of 3 (+1 label)
    assert len(s) == 3 and list(s[1][0]) == [256, 0, 7] and list(s[1][1]) == [0, 7, 7]
    write_dataset(prefix + "32", [[70000, 1]], 70001)  # large vocab -> int32 (code 4)
    assert struct.unpack_from("<B", open(prefix + "32.idx", "rb").read(), 17)[0] == 4
    assert list(IndexedDataset(prefix + "32")[0]) == [70000, 1]


@test
def elementwise_math_matches_torch():
    x = torch.randn(4, 64) * 3
    assert torch.allclose(gelu_tanh(x), F.gelu(x, approximate="tanh"), atol=1e-6)
    ln = Norm(64, "LayerNorm", 1e-5)
    with torch.no_grad():
        ln.weight.normal_(), ln.bias.normal_()
    assert torch.allclose(ln(x), F.layer_norm(x, (64,), ln.weight, ln.bias, 1e-5), atol=1e-5)


@test
def rope_matches_complex_rotation():
    """rotate_half RoPE == pairing dims (i, i+d/2) as complex numbers times exp(i * pos * base^(-2i/d))."""
    S, d, base = 16, 8, 10000.0
    cos, sin = rope_tables(S, d, base)
    x = torch.randn(1, 1, S, d, dtype=torch.float64)
    got = apply_rope(x, cos.double(), sin.double())
    theta = np.arange(S)[:, None] * base ** (-np.arange(0, d, 2) / d)
    z = (x[..., : d // 2].numpy() + 1j * x[..., d // 2:].numpy()) * np.exp(1j * theta)
    want = np.concatenate([z.real, z.imag], axis=-1)
    assert np.allclose(got.numpy(), want, atol=1e-5)


def standard_mha(x, wq, wk, wv, wo, heads, rope=True):
    """Textbook multi-head causal attention, one head at a time (weights [out,in])."""
    S, h = x.shape[1], x.shape[2]
    d = h // heads
    cos, sin = rope_tables(S, d, 10000.0) if rope else (torch.ones(S, d), torch.zeros(S, d))
    outs = []
    for j in range(heads):
        sl = slice(j * d, (j + 1) * d)
        q = apply_rope(x @ wq[sl].t(), cos, sin)
        k = apply_rope(x @ wk[sl].t(), cos, sin)
        v = x @ wv[sl].t()
        s = torch.einsum("bqd,bkd->bqk", q, k) / math.sqrt(d)
        s = s + torch.full((S, S), float("-inf")).triu(1)
        outs.append(torch.softmax(s, -1) @ v)
    return torch.cat(outs, -1) @ wo.t()


@test
def gqa_equals_mha():
    base = dict(family="llama", num_layers=1, hidden_size=32, num_attention_heads=4, seq_length=8, vocab_size=11)
    torch.manual_seed(0)
    x = torch.randn(2, 8, 32)
    full = Attention(make_spec(dict(base, num_query_groups=4)), gpt2=False)
    for p in full.parameters():
        torch.nn.init.normal_(p, std=0.2)
    sa = full
    want = standard_mha(x, sa.q_proj.weight, sa.k_proj.weight, sa.v_proj.weight, sa.o_proj.weight, 4)
    assert torch.allclose(sa(x, rope_tables(8, 8, 10000.0)), want, atol=1e-5), "groups == heads differs from MHA"
    # 2 groups: head j uses kv head j // 2, i.e. MHA with kv weights [g0, g0, g1, g1]
    gqa = Attention(make_spec(dict(base, num_query_groups=2)), gpt2=False)
    for p in gqa.parameters():
        torch.nn.init.normal_(p, std=0.2)
    rep = lambda w: torch.cat([w[0:8], w[0:8], w[8:16], w[8:16]])
    want = standard_mha(x, gqa.q_proj.weight, rep(gqa.k_proj.weight), rep(gqa.v_proj.weight), gqa.o_proj.weight, 4)
    assert torch.allclose(gqa(x, rope_tables(8, 8, 10000.0)), want, atol=1e-5), "GQA differs from repeated-kv MHA"


@test
def gpt2_layout():
    """c_attn is Conv1D [h, 3h] with output columns [q | k | v]; logits are tied to wte."""
    spec = load_spec(GPT2)
    names = Transformer(spec).state_dict()
    assert "lm_head.weight" not in names and list(names["transformer.wpe.weight"].shape) == [32, 64]
    attn = Attention(make_spec(dict(family="gpt2", num_layers=1, hidden_size=32, num_attention_heads=4,
                                    seq_length=8, vocab_size=11, add_bias_linear=False)), gpt2=True)
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.2)
    W = attn.c_attn.weight
    x = torch.randn(2, 8, 32)
    want = standard_mha(x, W[:, :32].t(), W[:, 32:64].t(), W[:, 64:].t(), attn.c_proj.weight.t(), 4, rope=False)
    assert torch.allclose(attn(x), want, atol=1e-5)


@test
def loss_at_init_is_uniform():
    rng = np.random.default_rng(1)
    for path in (GPT2, LLAMA):
        spec = load_spec(path)
        model = init_weights(Transformer(spec), 1234)
        toks = torch.from_numpy(rng.integers(0, 257, (4, 33)))
        with torch.no_grad():
            loss = model.loss(toks[:, :-1], toks[:, 1:]).item()
        assert abs(loss - math.log(257)) < 0.1, f"{path}: {loss} vs ln(257) = {math.log(257)}"


@test
def lr_schedule():
    a = T.build_parser().parse_args(["--spec", "x", "--lr", "1.0", "--min-lr", "0.1", "--lr-decay-style", "cosine",
                                     "--lr-warmup-iters", "2", "--lr-decay-iters", "10"])
    got = [T.lr_at(n, a) for n in (0, 1, 2, 6, 10, 11)]
    want = [0.0, 0.5, 1.0, 0.55, 0.1, 0.1]
    assert all(abs(g - w) < 1e-12 for g, w in zip(got, want)), got
    a.lr_decay_style = "linear"
    assert abs(T.lr_at(4, a) - (0.1 + 0.75 * 0.9)) < 1e-12
    a.lr_decay_style = "constant"
    assert T.lr_at(50, a) == 1.0


FLAGS = dict(micro_batch_size=2, global_batch_size=8, lr=3e-3, min_lr=3e-4, lr_decay_style="cosine",
             lr_warmup_iters=2, weight_decay=0.1, clip_grad=1.0)


@test
def loss_falls_30_percent():
    prefix = pattern_data("pat")
    for path in (GPT2, LLAMA):
        m = run_train(path, prefix, **dict(FLAGS, train_iters=20, lr=1e-2, min_lr=1e-3))
        first, last = m[0]["lm_loss"], m[-1]["lm_loss"]
        assert last < 0.7 * first, f"{path}: loss {first:.4f} -> {last:.4f}"


@test
def grad_accumulation_matches_full_batch():
    prefix = pattern_data("acc")
    for path in (GPT2, LLAMA):
        flags = dict(FLAGS, train_iters=5, global_batch_size=4)
        acc = run_train(path, prefix, **dict(flags, micro_batch_size=2))
        full = run_train(path, prefix, **dict(flags, micro_batch_size=4))
        for x, y in zip(acc, full):
            assert close(x["lm_loss"], y["lm_loss"], 1e-5), (path, x, y)
            assert close(x["grad_norm"], y["grad_norm"], 1e-4), (path, x, y)


@test
def grad_norm_is_before_clipping():
    prefix = pattern_data("clip")
    spec = load_spec(LLAMA)
    model = init_weights(Transformer(spec), 1234)
    s = GPTSamples(IndexedDataset(prefix).token_stream(), spec.seq_length)
    ids = torch.stack([torch.from_numpy(s[i][0]) for i in range(4)])
    labels = torch.stack([torch.from_numpy(s[i][1]) for i in range(4)])
    model.loss(ids, labels).backward()
    want = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in model.parameters()))
    m = run_train(LLAMA, prefix, **dict(FLAGS, train_iters=1, global_batch_size=4, clip_grad=1e-3))
    assert close(m[0]["grad_norm"], want, 1e-5) and want > 1e-3, (m[0], want)


@test
def cli_end_to_end():
    prefix = pattern_data("cli")
    init, met1, met2 = (os.path.join(TMP, n) for n in ("init.safetensors", "m1.jsonl", "m2.jsonl"))
    base = [sys.executable, os.path.join(HERE, "train.py"), "--spec", LLAMA, "--data-path", prefix,
            "--train-iters", "3", "--lr", "1e-3", "--clip-grad", "1.0", "--weight-decay", "0.1"]
    cmd = base + ["--micro-batch-size", "2", "--global-batch-size", "4"]
    subprocess.run(cmd + ["--init-out", init, "--seed", "7", "--metrics-file", met1], check=True, capture_output=True)
    subprocess.run(cmd + ["--load", init, "--metrics-file", met2], check=True, capture_output=True)
    r1 = [json.loads(line) for line in open(met1)]
    r2 = [json.loads(line) for line in open(met2)]
    assert len(r1) == 3 and set(r1[0]) == {"iteration", "lm_loss", "grad_norm", "lr"} and r1 == r2, (r1, r2)
    assert sorted(load_file(init)) == sorted(Transformer(load_spec(LLAMA)).state_dict())
    bad = subprocess.run(base + ["--micro-batch-size", "3", "--global-batch-size", "4", "--load", init],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "--global-batch-size (4)" in bad.stderr and "--micro-batch-size (3)" in bad.stderr, bad.stderr


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(2)
    passed = failed = 0
    for fn in TESTS:
        try:
            fn()
            print(f"PASS {fn.__name__}")
            passed += 1
        except (Exception, SystemExit):
            print(f"FAIL {fn.__name__}\n{traceback.format_exc()}")
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
