"""Imported before transformers and PEFT by the tests that load Hugging Face models from local
folders: nothing is downloaded, and bitsandbytes is hidden from them. It is installed (--no-deps)
for its NF4 code, but its package does not import over Debian's torch; PEFT would import it for
quantized layers, which these models have none of."""
import importlib.util
import os

_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, *a: None if name == "bitsandbytes" else _find_spec(name, *a)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
