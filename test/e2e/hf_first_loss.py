"""Run with build/pyenv's python (transformers, PEFT): the loss of a Hugging Face model on the
first 8 samples of a megac dataset, printed as one JSON line.

    hf_first_loss.py FOLDER DATA_PREFIX SEQ_LENGTH [--adapter PEFT_FOLDER] [--save-sharded DIR]

FOLDER loads with AutoModelForCausalLM.from_pretrained (its missing and unexpected tensors are
reported); --adapter puts PEFT's PeftModel.from_pretrained(model, PEFT_FOLDER) on it (its LoRA
tensors and warnings reported); --save-sharded also saves the model sharded, as transformers
does for big models."""
import argparse
import json
import os
import sys
import warnings

import hf_offline  # noqa: E402,F401  (before transformers and PEFT: offline, bitsandbytes hidden)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from indexed_dataset import GPTSamples, IndexedDataset  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("prefix")
    ap.add_argument("seq", type=int)
    ap.add_argument("--adapter")
    ap.add_argument("--save-sharded")
    a = ap.parse_args()
    model, info = transformers.AutoModelForCausalLM.from_pretrained(a.folder, output_loading_info=True)
    out = {"class": type(model).__name__, "transformers": transformers.__version__,
           "missing": info["missing_keys"], "unexpected": info["unexpected_keys"]}
    if a.adapter:
        import peft
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = peft.PeftModel.from_pretrained(model, a.adapter)
        out.update(peft=peft.__version__, **{"class": type(model).__name__},
                   adapters=sum(1 for n, _ in model.named_parameters() if "lora_" in n),
                   warnings=[str(w.message) for w in caught
                             if "missing" in str(w.message).lower() or "unexpected" in str(w.message).lower()],
                   target_modules=sorted(model.peft_config["default"].target_modules))
    model.eval()
    samples = GPTSamples(IndexedDataset(a.prefix).token_stream(), a.seq)
    ids = torch.tensor(np.stack([samples[i][0] for i in range(8)]))
    labels = torch.tensor(np.stack([samples[i][1] for i in range(8)]))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), labels.reshape(-1))
    out["loss"] = float(loss)
    if a.save_sharded:
        model.save_pretrained(a.save_sharded, max_shard_size="40KB", safe_serialization=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
