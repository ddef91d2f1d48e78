"""Makes broken checkpoints for bad-inputs.test from a good one: drop a tensor, or cut a row."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from safetensors_io import load_file, save_file  # noqa: E402

action, src, dst, name = sys.argv[1:]
tensors = load_file(src)
if action == "drop":
    del tensors[name]
elif action == "shrink":
    tensors[name] = tensors[name][:-1]
save_file(tensors, dst)
