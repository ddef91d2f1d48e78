"""GPT-2 forward of ../gpt2_layer.mlir written from Hugging Face's GPT2Model (Conv1D weights
[in, out], fused c_attn split into q | k | v columns, tanh GELU, biased LayerNorm, tied head),
independently of the tx dialect. Prints a FileCheck line with its loss."""
import math

from reference_inputs import SplitMix64, cross_entropy_term, print_check

H, HEADS, D, FFN, VOCAB, B, S = 8, 2, 4, 32, 11, 2, 3
r = SplitMix64()
wte, wpe = r.matrix(VOCAB, H), r.matrix(S, H)
layers = [dict(ln1w=r.vector(H), ln1b=r.vector(H), c_attn=r.matrix(H, 3 * H), c_attn_b=r.vector(3 * H),
               proj=r.matrix(H, H), proj_b=r.vector(H), ln2w=r.vector(H), ln2b=r.vector(H),
               fc=r.matrix(H, FFN), fc_b=r.vector(FFN), fc2=r.matrix(FFN, H), fc2_b=r.vector(H))
          for _ in range(2)]
lnf_w, lnf_b = r.vector(H), r.vector(H)
ids, labels = r.tokens(B, S, VOCAB), r.tokens(B, S, VOCAB)


def conv1d(x, w, b):
    return [sum(x[i] * w[i][j] for i in range(len(x))) + b[j] for j in range(len(b))]


def layer_norm(x, w, b, eps=1e-5):
    m = sum(x) / len(x)
    var = sum((v - m) ** 2 for v in x) / len(x)
    return [(v - m) / math.sqrt(var + eps) * g + c for v, g, c in zip(x, w, b)]


def gelu(x):
    return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def block(xs, L):
    qkv = [conv1d(layer_norm(x, L["ln1w"], L["ln1b"]), L["c_attn"], L["c_attn_b"]) for x in xs]
    att = [[0.0] * H for _ in range(S)]
    for h in range(HEADS):
        for i in range(S):
            q = qkv[i][h * D:(h + 1) * D]
            scores = [sum(a * b for a, b in zip(q, qkv[j][H + h * D:H + (h + 1) * D])) / math.sqrt(D)
                      for j in range(i + 1)]
            m = max(scores)
            e = [math.exp(t - m) for t in scores]
            for j in range(i + 1):
                for c in range(D):
                    att[i][h * D + c] += e[j] / sum(e) * qkv[j][2 * H + h * D + c]
    r1 = [[a + b for a, b in zip(x, conv1d(o, L["proj"], L["proj_b"]))] for x, o in zip(xs, att)]
    out = []
    for x in r1:
        u = [gelu(t) for t in conv1d(layer_norm(x, L["ln2w"], L["ln2b"]), L["fc"], L["fc_b"])]
        out.append([a + b for a, b in zip(x, conv1d(u, L["fc2"], L["fc2_b"]))])
    return out


total = 0.0
for b in range(B):
    xs = [[a + p for a, p in zip(wte[t], wpe[s])] for s, t in enumerate(ids[b])]
    for L in layers:
        xs = block(xs, L)
    for s in range(S):
        hf = layer_norm(xs[s], lnf_w, lnf_b)
        total += cross_entropy_term([sum(a * w for a, w in zip(hf, row)) for row in wte], labels[b][s])
print_check(total / (B * S))
