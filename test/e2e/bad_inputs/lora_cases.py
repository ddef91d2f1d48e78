"""LoRA (issue 19): megac compile's LoRA flags, OUT/train's base model and merge flags, and
adapter checkpoints in the wrong program."""
from bad_inputs.case import Case
from bad_inputs.compile_cases import compile_case
from bad_inputs.train_cases import train_case

AREA = "train flags"
MERGED = "{scratch}/merged"


def cases():
    return [
        compile_case("lora rank negative", ["--lora-rank", "-1"], r"--lora-rank -1 is not a rank; give one between 1"),
        compile_case("lora rank too large", ["--lora-rank", "100000"], r"--lora-rank 100000 is not a rank"),
        compile_case("lora alpha without rank", ["--lora-alpha", "16"],
                     r"configure LoRA, which --lora-rank turns on; give --lora-rank"),
        compile_case("lora alpha zero", ["--lora-rank", "4", "--lora-alpha", "0"],
                     r"--lora-alpha 0 must be a positive number"),
        compile_case("lora dropout one", ["--lora-rank", "4", "--lora-dropout", "1"],
                     r"--lora-dropout 1 must be at least 0 and below 1"),
        compile_case("lora target of another family", ["--lora-rank", "4", "--lora-target-modules", "q_proj"],
                     r"--lora-target-modules: q_proj is no linear layer of a gpt2 layer; its modules are attn.c_attn"),
        compile_case("lora all-linear among others", ["--lora-rank", "4", "--lora-target-modules", "all-linear,c_fc"],
                     r"all-linear stands alone"),
        train_case("lora pretrained checkpoint for a full model", ["--pretrained-checkpoint", "{ckpt}"],
                   r"--pretrained-checkpoint .* gives a LoRA program's frozen base model, but this program trains every "
                   r"parameter"),
        train_case("lora merge of a full model", ["--merge-lora", MERGED],
                   r"--merge-lora .* this program trains every parameter \(nothing to merge\)"),
        Case(AREA, "lora merge without save",
             ["{train_lora}", "--data-path", "{data}", "--lr", "1e-3", "--train-iters", "2", "--merge-lora", MERGED],
             r"--merge-lora .* give --save DIR too", absent=[MERGED]),
        train_case("lora checkpoint in a full program", ["--load", "{lora_ckpt}"],
                   r"is a LoRA checkpoint \(adapters only\), but this program trains every parameter"),
        Case(AREA, "lora base file missing",
             ["{train_lora}", "--data-path", "{data}", "--lr", "1e-3", "--train-iters", "2",
              "--pretrained-checkpoint", "{scratch}/none.safetensors", "--save", "{scratch}/ck"],
             r"--pretrained-checkpoint .*/none.safetensors: no such file or folder", absent=["{scratch}/ck"]),
        Case(AREA, "lora base of another model",
             ["{train_lora}", "--data-path", "{data}", "--lr", "1e-3", "--train-iters", "2",
              "--pretrained-checkpoint", "{scratch}/other.safetensors", "--save", "{scratch}/ck"],
             r"the base model \(--pretrained-checkpoint\): .*checkpoint does not match the compiled program",
             absent=["{scratch}/ck"], files={"other.safetensors": other_model}),
        Case(AREA, "lora merge into a non-empty folder",
             ["{train_lora}", "merge-lora", "--load", "{lora_ckpt}", "--save", "{scratch}/full"],
             r"--merge-lora .*/full: the folder is not empty; give a new one",
             files={"full/keep.txt": "mine"}),
        Case(AREA, "lora merge of a full checkpoint",
             ["{train_lora}", "merge-lora", "--load", "{ckpt}", "--save", MERGED],
             r"--load .*/ckpt is not a megac LoRA checkpoint \(a folder with adapter_config.json.*nothing to merge", absent=[MERGED]),
    ]


def other_model(ctx):
    """A safetensors file holding one tensor the program does not have."""
    import json
    import struct
    header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + struct.pack("<f", 1.0)
