"""Mixtures of experts from Hugging Face folders, run with /usr/bin/python3:

transformers (build/pyenv) makes a randomly initialised MixtralForCausalLM (4 experts, 2 per token,
dropless) and a Qwen2MoeForCausalLM (4 experts, 2 per token, their probabilities not renormalised,
a shared expert gated by a sigmoid; and one of 4 layers with decoder_sparse_step 2, dense MLPs in
layers 0 and 2) and saves them; `megac compile FOLDER` compiles it and `OUT/train --load FOLDER
--skip-train` gives transformers' validation loss (1e-5) and `generate --logits-file` its logits
(1e-5 of the largest); two iterations trained from the folder are saved one tensor per expert, and
transformers' from_pretrained of that checkpoint gives megac's loss (1e-5); tp2 + sp computes the
single rank's loss (1e-5). The routers' weights are drawn wider than the others (std 0.4), so that
no token has two experts within rounding of each other (such a tie would be routed by rounding
differently in any two programs).

With output_router_logits true (router_aux_loss_coef 0.1), the first iteration's
load_balancing_loss in the metrics file equals the mean over its microbatches of transformers'
aux_loss (load_balancing_loss_func over both layers' router logits, 1e-4), and its gradient norm
(before clipping) equals transformers' of lm loss + 0.1 x aux_loss over the same microbatches
(1e-4); transformers' without the aux loss is far from it (the loss is in what is trained). Its
tokens_per_expert (each layer's choices per expert over the iteration) equals the count of
transformers' top-k choices of output_router_logits, layer by layer."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import library_check_args, metrics, python_json, relative  # noqa: E402
from hf_folders import check_folder, report  # noqa: E402

SEQ = 32

MAKE_MODELS = r"""
import json, sys
import torch, transformers
out = sys.argv[1]
torch.manual_seed(4321)
families = {
    "mixtral": transformers.MixtralForCausalLM(transformers.MixtralConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        max_position_embeddings=128, vocab_size=300, num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": transformers.Qwen2MoeForCausalLM(transformers.Qwen2MoeConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        moe_intermediate_size=48, shared_expert_intermediate_size=96, num_experts=4, num_experts_per_tok=2,
        max_position_embeddings=128, vocab_size=300)),
    # Dense layers 0 and 2 (decoder_sparse_step 2: experts where the index + 1 is even).
    "qwen2_moe-sparse-step": transformers.Qwen2MoeForCausalLM(transformers.Qwen2MoeConfig(
        num_hidden_layers=4, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        moe_intermediate_size=48, shared_expert_intermediate_size=96, num_experts=4, num_experts_per_tok=2,
        max_position_embeddings=128, vocab_size=300, decoder_sparse_step=2)),
    "mixtral-aux": transformers.MixtralForCausalLM(transformers.MixtralConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
        max_position_embeddings=128, vocab_size=300, num_local_experts=4, num_experts_per_tok=2,
        output_router_logits=True, router_aux_loss_coef=0.1)),
}
for name, model in families.items():
    with torch.no_grad():
        for key, p in model.named_parameters():
            if p.dim() == 1:  # norm weights (1 at init): perturbed, so that one read wrongly shows
                p.add_(0.1 * torch.randn_like(p))
            if key.endswith("gate.weight"):  # the routers: wide apart, no near ties
                p.normal_(0.0, 0.4)
    model.save_pretrained(f"{out}/{name}", safe_serialization=True)
print(json.dumps({"made": sorted(families), "transformers": transformers.__version__}))
"""


# Runs in build/pyenv: transformers' aux_loss (load_balancing_loss_func) of each microbatch of the
# first iteration (the train split's first samples in order, --no-shuffle) and the norm of the
# iteration's gradient with and without coefficient x aux_loss in the loss.
HF_AUX = r"""
import json, sys
import numpy as np, torch, transformers
sys.path.insert(0, sys.argv[5])
from indexed_dataset import IndexedDataset
folder, prefix, seq, batch, micro = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[6])
ds = IndexedDataset(prefix)
tokens = np.concatenate([ds[i] for i in range(len(ds))]).astype(np.int64)
model = transformers.AutoModelForCausalLM.from_pretrained(folder)
model.train()
out = {}
k, experts = model.config.num_experts_per_tok, model.config.num_local_experts
load = [[0] * experts for _ in range(model.config.num_hidden_layers)]
for with_aux in (True, False):
    model.zero_grad()
    aux = []
    for m in range(batch // micro):
        rows = range(m * micro, (m + 1) * micro)
        ids = torch.tensor(np.stack([tokens[i * seq:i * seq + seq] for i in rows]))
        labels = torch.tensor(np.stack([tokens[i * seq + 1:i * seq + seq + 1] for i in rows]))
        o = model(input_ids=ids, output_router_logits=True)
        lm = torch.nn.functional.cross_entropy(o.logits.reshape(-1, o.logits.shape[-1]), labels.reshape(-1))
        loss = lm + (model.config.router_aux_loss_coef * o.aux_loss if with_aux else 0)
        (loss / (batch // micro)).backward()
        aux.append(float(o.aux_loss))
        if with_aux:  # each layer's top-k choices per expert (MixtralSparseMoeBlock's routing)
            for layer, logits in enumerate(o.router_logits):
                chosen = torch.topk(torch.softmax(logits.float(), dim=-1), k, dim=-1).indices
                for e, n in enumerate(torch.bincount(chosen.flatten(), minlength=experts).tolist()):
                    load[layer][e] += n
    norm = torch.norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
    out["grad_norm" if with_aux else "grad_norm_without_aux"] = float(norm)
    out["aux_loss"] = sum(aux) / len(aux)
out["tokens_per_expert"] = load
print(json.dumps(out))
"""


def main():
    args, corpus = library_check_args(__doc__, "transformers")
    w = lambda *p: os.path.join(args.workdir, *p)
    reference = os.path.join(HERE, "..", "reference")
    shutil.rmtree(w("hf"), ignore_errors=True)
    made = python_json(args.python, MAKE_MODELS, [w("hf")], "transformers' save_pretrained")
    print(f"transformers {made['transformers']} saved {', '.join(made['made'])}")
    failures = []
    check_load_balancing(args, w, corpus, reference, failures)
    for family in (f for f in made["made"] if not f.endswith("-aux")):
        check_folder(args, w, corpus, family, failures)
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")


def check_load_balancing(args, w, corpus, reference, failures):
    """The load-balancing loss of the first iteration, and the gradient it adds, against transformers'."""
    folder, out = w("hf", "mixtral-aux"), w("out", "mixtral-aux")
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([args.megac, "compile", folder, "--seq-length", str(SEQ), "--micro-batch-size", "2", "-o", out],
                   check=True, capture_output=True)
    jsonl = w("out", "mixtral-aux.jsonl")
    subprocess.run([os.path.join(out, "train"), "--data-path", corpus, "--no-shuffle", "--global-batch-size", "8",
                    "--train-iters", "1", "--lr", "1e-3", "--load", folder, "--metrics-file", jsonl],
                   check=True, capture_output=True)
    first = metrics(jsonl)[0]
    hf = python_json(args.python, HF_AUX, [folder, corpus, str(SEQ), "8", reference, "2"],
                     "transformers' aux_loss")
    err = relative(first["load_balancing_loss"], hf["aux_loss"])
    report(failures, err <= 1e-4, f"mixtral output_router_logits: iteration 1's load_balancing_loss {first['load_balancing_loss']:.7g}, "
          f"transformers' aux_loss {hf['aux_loss']:.7g} (relative {err:.2e})", "load_balancing_loss")
    ours = first.get("tokens_per_expert")
    report(failures, ours == hf["tokens_per_expert"],
           f"mixtral: iteration 1's tokens_per_expert {ours}, transformers' top-k choices of its router_logits "
           f"{hf['tokens_per_expert']} (per layer, over the 4 microbatches)", "tokens_per_expert")
    err = relative(first["grad_norm"], hf["grad_norm"])
    far = relative(first["grad_norm"], hf["grad_norm_without_aux"])
    report(failures, err <= 1e-4 and far > 1e-3, f"mixtral output_router_logits: gradient norm {first['grad_norm']:.7g}, "
          f"transformers' of lm loss + 0.1 x aux_loss {hf['grad_norm']:.7g} (relative {err:.2e}; without the aux "
          f"loss {hf['grad_norm_without_aux']:.7g}, {far:.2e})", "aux loss in the objective")


if __name__ == "__main__":
    main()
