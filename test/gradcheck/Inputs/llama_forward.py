"""Llama forward of ../llama_layer.mlir written from Hugging Face's LlamaModel (weights
[out, in], RMSNorm, RoPE with rotate_half and cat(freqs, freqs), repeat_kv for grouped query
heads, SwiGLU MLP, untied head), independently of the tx dialect. Prints a FileCheck line
with its loss."""
import math

from reference_inputs import SplitMix64, cross_entropy_term, print_check

H, HEADS, GROUPS, D, FFN, VOCAB, B, S = 16, 4, 2, 4, 20, 11, 2, 3
r = SplitMix64()
embed = r.matrix(VOCAB, H)
layers = [dict(n1=r.vector(H), wq=r.matrix(H, H), wk=r.matrix(GROUPS * D, H), wv=r.matrix(GROUPS * D, H),
               wo=r.matrix(H, H), n2=r.vector(H), wg=r.matrix(FFN, H), wu=r.matrix(FFN, H), wd=r.matrix(H, FFN))
          for _ in range(2)]
norm, lm_head = r.vector(H), r.matrix(VOCAB, H)
ids, labels = r.tokens(B, S, VOCAB), r.tokens(B, S, VOCAB)


def linear(x, w):
    return [sum(a * b for a, b in zip(x, row)) for row in w]


def rms_norm(x, w, eps=1e-5):
    ms = sum(v * v for v in x) / len(x)
    return [v / math.sqrt(ms + eps) * g for v, g in zip(x, w)]


def rope(x, pos, theta=10000.0):
    half = len(x) // 2
    freqs = [pos * theta ** (-(2 * i) / len(x)) for i in range(half)]
    angles = freqs + freqs
    rotated = [-v for v in x[half:]] + x[:half]
    return [v * math.cos(a) + w * math.sin(a) for v, w, a in zip(x, rotated, angles)]


def block(xs, L):
    h1 = [rms_norm(x, L["n1"]) for x in xs]
    q = [[rope(linear(x, L["wq"])[h * D:(h + 1) * D], s) for h in range(HEADS)] for s, x in enumerate(h1)]
    k = [[rope(linear(x, L["wk"])[g * D:(g + 1) * D], s) for g in range(GROUPS)] for s, x in enumerate(h1)]
    v = [[linear(x, L["wv"])[g * D:(g + 1) * D] for g in range(GROUPS)] for x in h1]
    att = [[0.0] * H for _ in range(S)]
    for h in range(HEADS):
        g = h // (HEADS // GROUPS)
        for i in range(S):
            scores = [sum(a * b for a, b in zip(q[i][h], k[j][g])) / math.sqrt(D) for j in range(i + 1)]
            m = max(scores)
            e = [math.exp(t - m) for t in scores]
            for j in range(i + 1):
                for c in range(D):
                    att[i][h * D + c] += e[j] / sum(e) * v[j][g][c]
    r1 = [[a + b for a, b in zip(x, linear(o, L["wo"]))] for x, o in zip(xs, att)]
    out = []
    for x in r1:
        h2 = rms_norm(x, L["n2"])
        act = [a / (1 + math.exp(-a)) * u for a, u in zip(linear(h2, L["wg"]), linear(h2, L["wu"]))]
        out.append([a + b for a, b in zip(x, linear(act, L["wd"]))])
    return out


total = 0.0
for b in range(B):
    xs = [list(embed[t]) for t in ids[b]]
    for L in layers:
        xs = block(xs, L)
    for s in range(S):
        total += cross_entropy_term(linear(rms_norm(xs[s], norm), lm_head), labels[b][s])
print_check(total / (B * S))
