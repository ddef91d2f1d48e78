"""Model specs (YAML)."""
from bad_inputs.case import Case

AREA = "spec"
OUT = "{scratch}/out"
GOOD = ("family: gpt2\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: 32\n"
        "vocab_size: 257\n")


def spec_case(name, text, expect):
    return Case(AREA, name, ["{megac}", "compile", "{scratch}/spec.yaml", "-o", OUT, "--no-build"], expect,
                absent=[OUT], files={"spec.yaml": text})


def with_key(key, value):
    lines = [l for l in GOOD.splitlines() if not l.startswith(key + ":")]
    return "\n".join(lines + [f"{key}: {value}"]) + "\n"


def cases():
    return [
        spec_case("hidden_size 2^61", with_key("hidden_size", 2305843009213693952), r"hidden_size"),
        spec_case("num_layers 100000", with_key("num_layers", 100000), r"num_layers"),
        spec_case("norm_epsilon inf", with_key("norm_epsilon", ".inf"), r"norm_epsilon"),
        spec_case("two YAML documents", GOOD + "---\nfamily: llama\n", r"document"),
    ]
