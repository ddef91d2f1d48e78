"""Issue [15]: everything that names something is checked against what it names. A Hugging Face
folder's config.json against the program; a checkpoint against the program and its files
against each other; a sharded index against its shards; an adapter against its base and its
run's record; --save against its limits."""
import json
import os

from bad_inputs import files
from bad_inputs.case import Case

ITER = "iter_0000002"
W = "transformer.wpe.weight"


def load(name, expect, content, flags=(), area="checkpoints", program="{train}", load_path="{scratch}/ck"):
    """OUT/train --load LOAD_PATH (a scratch copy of a checkpoint or folder)."""
    return Case(area, name, [program, "--data-path", "{data}", "--lr", "1e-3", "--train-iters", "4",
                             "--lr-decay-iters", "2", "--load", load_path, "--save", "{scratch}/out",
                             "--metrics-file", "{scratch}/m.jsonl", *flags], expect,
                absent=["{scratch}/out", "{scratch}/m.jsonl"], files=content)


def checkpoint(state=None, model=None, optimizer=None, config=None):
    """A copy of the fixture's checkpoint (iteration 2) in ck/, with files replaced."""
    at = lambda name: os.path.join(ITER, name)
    return {"ck/latest_checkpointed_iteration.txt": "2",
            "ck/" + at("model.safetensors"): model or files.copy_of(at("model.safetensors")),
            "ck/" + at("optimizer.safetensors"): optimizer or files.copy_of(at("optimizer.safetensors")),
            "ck/" + at("train_state.json"): state or files.copy_of(at("train_state.json")),
            "ck/" + at("config.json"): config or files.copy_of(at("config.json"))}


def state(change):
    return files.json_of(os.path.join(ITER, "train_state.json"), change)


def hf_folder(change):
    """A Hugging Face folder hf/ (weights and config.json, no training state) with the config changed."""
    return {"hf/model.safetensors": files.copy_of(os.path.join(ITER, "model.safetensors")),
            "hf/config.json": files.json_of(os.path.join(ITER, "config.json"), change)}


def hf(name, change, expect):
    return load(name, expect, hf_folder(change), area="hf folders", load_path="{scratch}/hf")


def setting(key, value):
    return lambda config: config.__setitem__(key, value)


def optimizer_with(name, value):
    return files.safetensors_of(os.path.join(ITER, "optimizer.safetensors"),
                                lambda h, d: (h, files.set_float(h, d, name, value)))


def shard(part, with_first=False):
    """Half of the fixture's tensors (part 1 or 2) as model-0000P-of-00002.safetensors; with_first:
    also the first tensor of part 1."""
    def change(header, data):
        names = sorted(k for k in header if k != "__metadata__")
        keep = set(names[:len(names) // 2] if part == 1 else names[len(names) // 2:]) | set(names[:1] if with_first else [])
        return {k: v for k, v in header.items() if k in keep or k == "__metadata__"}, data
    return files.safetensors_of(os.path.join(ITER, "model.safetensors"), change)


def shard_index(change=lambda weight_map, names: None):
    """model.safetensors.index.json of the two shards above, with change(weight_map, names) applied."""
    def make(ctx):
        header, _ = files.read_safetensors(os.path.join(ctx["ckpt"], ITER, "model.safetensors"))
        names = sorted(k for k in header if k != "__metadata__")
        weight_map = {n: "model-0000%d-of-00002.safetensors" % (1 if i < len(names) // 2 else 2)
                      for i, n in enumerate(names)}
        change(weight_map, names)
        return json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    return make


def sharded(name, expect, index=None, duplicate=False):
    content = {"sh/model-00001-of-00002.safetensors": shard(1),
               "sh/model-00002-of-00002.safetensors": shard(2, with_first=duplicate),
               "sh/model.safetensors.index.json": index or shard_index(),
               "sh/config.json": files.copy_of(os.path.join(ITER, "config.json"))}
    return load(name, expect, content, area="hf folders", load_path="{scratch}/sh")


def lora_copy(adapter_change=None):
    """A copy of the LoRA fixture's iteration folder in lck/, its adapter_config.json changed."""
    at = lambda name: os.path.join(ITER, name)
    content = {"lck/" + name: files.copy_of(at(name), root="lora_ckpt")
               for name in ("adapter_model.safetensors", "optimizer.safetensors", "train_state.json", "config.json")}
    content["lck/adapter_config.json"] = (files.json_of(at("adapter_config.json"), adapter_change, root="lora_ckpt")
                                          if adapter_change else files.copy_of(at("adapter_config.json"), root="lora_ckpt"))
    return content


def modified_base(ctx):
    """The LoRA fixture's base weights with one value changed: same names and shapes, another model."""
    header, data = files.read_safetensors(os.path.join(ctx["ckpt"], ITER, "model.safetensors"))
    return files.write_safetensors(header, files.set_float(header, data, W, 0.123))


def cases():
    return [
        # A Hugging Face folder's config.json against the program (a GPT-2 of the spec).
        load("hf config not JSON", r"config\.json: .*(JSON|json)", {"hf/model.safetensors": files.copy_of(
            os.path.join(ITER, "model.safetensors")), "hf/config.json": "{not json"}, area="hf folders",
            load_path="{scratch}/hf"),
        load("hf config is a folder", r"config\.json is not a regular file \(a folder\)",
             {"hf/model.safetensors": files.copy_of(os.path.join(ITER, "model.safetensors")),
              "hf/config.json": files.Folder()}, area="hf folders", load_path="{scratch}/hf"),
        hf("hf folder of another family", setting("model_type", "llama"),
           r"describes another model than this program:\s+model_type \"llama\" in the file, \"gpt2\" in this program "
           r"\(the spec's family\)"),
        hf("hf folder of another architecture", setting("architectures", ["MistralForCausalLM"]),
           r"architectures \[\"MistralForCausalLM\"\] in the file, \[\"GPT2LMHeadModel\"\] in this program"),
        hf("hf norm epsilon differs", setting("layer_norm_epsilon", 1e-6),
           r"layer_norm_epsilon 1e-06 in the file, 1e-05 in this program \(the spec's norm_epsilon\)"),
        hf("hf heads differ", setting("n_head", 2), r"n_head 2 in the file, 4 in this program \(the spec's "
           r"num_attention_heads\)"),
        hf("hf activation differs", setting("activation_function", "gelu"),
           r"activation_function \"gelu\" in the file, \"gelu_new\" in this program \(the spec's activation\)"),
        hf("hf embeddings untied", setting("tie_word_embeddings", False),
           r"tie_word_embeddings false in the file, true in this program \(the spec's tie_embeddings\)"),
        hf("hf vocabulary differs", setting("vocab_size", 300),
           r"vocab_size 300 in the file, 257 in this program \(the spec's vocab_size\)"),
        hf("hf sliding window", setting("sliding_window", 16),
           r"sliding_window 16 is a setting megac does not implement \(yet\)"),
        hf("hf rope scaling", setting("rope_scaling", {"type": "linear", "factor": 2.0}),
           r"rope_scaling \{.*\} is a setting megac does not implement \(yet\)"),
        hf("hf attention scaled by layer", setting("scale_attn_by_inverse_layer_idx", True),
           r"scale_attn_by_inverse_layer_idx true is a setting megac does not implement"),
        hf("hf config lacks a size", lambda c: c.pop("n_layer"), r"n_layer missing from the file, 2 in this program"),
        load("resume with a config of another model", r"layer_norm_epsilon 1e-06 in the file, 1e-05 in this program",
             checkpoint(config=files.json_of(os.path.join(ITER, "config.json"), setting("layer_norm_epsilon", 1e-6)))),
        # A resumed checkpoint against the program.
        load("resume a spec with another epsilon", r"the checkpoint was trained from another spec than this program's:"
             r"\s+norm_epsilon: 1\.0e-6 in the checkpoint, not set in this program's spec",
             checkpoint(state=state(lambda s: s.__setitem__("spec", s["spec"] + "norm_epsilon: 1.0e-6\n")))),
        load("resume a spec with dropout", r"hidden_dropout: 0\.3 in the checkpoint, not set in this program's spec",
             checkpoint(state=state(lambda s: s.__setitem__("spec", s["spec"] + "hidden_dropout: 0.3 # edited\n")))),
        load("resume a spec with another family", r"family: llama in the checkpoint, gpt2 in this program's spec",
             checkpoint(state=state(lambda s: s.__setitem__("spec", s["spec"].replace("family: gpt2", "family: llama"))))),
        load("resume a plan quantized by qlora", r"the checkpoint's base model was quantized in NF4 blocks of 64, this "
             r"program's not at all", checkpoint(state=state(lambda s: s["plan"].__setitem__("qlora_block_size", 64)))),
        load("resume a plan with tp 0", r"plan\.tensor_model_parallel_size is 0; it must be >= 1",
             checkpoint(state=state(lambda s: s["plan"].__setitem__("tensor_model_parallel_size", 0)))),
        load("resume a plan with micro batch -2", r"plan\.micro_batch_size is -2; it must be >= 1",
             checkpoint(state=state(lambda s: s["plan"].__setitem__("micro_batch_size", -2)))),
        # The files of one checkpoint against each other.
        load("optimizer state of another iteration", r"optimizer\.safetensors was saved with optimizer_steps 1, but "
             r"train_state\.json says 2", checkpoint(optimizer=files.copy_of("iter_0000001/optimizer.safetensors"))),
        load("weights of another iteration", r"model\.safetensors was saved with iteration 1, but train_state\.json "
             r"says 2", checkpoint(model=files.copy_of("iter_0000001/model.safetensors"))),
        load("optimizer steps edited", r"optimizer\.safetensors was saved with optimizer_steps 2, but "
             r"train_state\.json says 1", checkpoint(state=state(lambda s: s.__setitem__("optimizer_steps", 1)))),
        load("consumed samples 0 at iteration 2", r"model\.safetensors was saved with consumed_samples 4, but "
             r"train_state\.json says 0", checkpoint(state=state(lambda s: s.__setitem__("consumed_samples", 0)))),
        load("negative second moment", W + r"\.exp_avg_sq' holds -1\.0+ at element 0; a second moment",
             checkpoint(optimizer=optimizer_with(W + ".exp_avg_sq", -1.0))),
        load("NaN first moment", W + r"\.exp_avg' holds NaN at element 0",
             checkpoint(optimizer=optimizer_with(W + ".exp_avg", float("nan")))),
        load("infinite weight", W + r"' holds an infinity at element 0",
             checkpoint(model=files.safetensors_of(os.path.join(ITER, "model.safetensors"),
                                                   lambda h, d: (h, files.set_float(h, d, W, float("inf")))))),
        load("loss scaler in a bf16 state", r"holds a loss scaler's state, but its run was not fp16",
             checkpoint(state=state(lambda s: s.__setitem__(
                 "loss_scaler", {"scale": 65536.0, "growth_tracker": 0, "hysteresis_tracker": 2})))),
        load("fp16 state without its loss scaler", r"holds no loss scaler's state, but its run was fp16",
             checkpoint(state=state(lambda s: s["args"].__setitem__("fp16", True)))),
        # A sharded Hugging Face checkpoint's index against its shards.
        sharded("index maps a tensor to the wrong shard",
                r"maps tensor '.*' to model-00002-of-00002\.safetensors, but it is in shard model-00001",
                index=shard_index(lambda m, names: m.__setitem__(names[0], "model-00002-of-00002.safetensors"))),
        sharded("index leaves a tensor out", r"shard model-00001-of-00002\.safetensors holds tensor '.*', which the "
                r"index's weight_map does not list", index=shard_index(lambda m, names: m.pop(names[0]))),
        sharded("tensor in two shards", r"tensor '.*' is in two shards, model-00001-of-00002\.safetensors and "
                r"model-00002-of-00002\.safetensors", duplicate=True),
        sharded("index names a missing shard", r"names model-00003-of-00002\.safetensors .*which is not beside it",
                index=shard_index(lambda m, names: m.__setitem__(names[0], "model-00003-of-00002.safetensors"))),
        # LoRA: the adapters against the program, their run's record and their base.
        load("lora resumed with another rank", r"adapter_config\.json does not match this program's LoRA settings:"
             r"\s+r 4 in .*, 2 in this program's LoRA settings", lora_copy(setting("r", 4)), program="{train_lora}",
             area="lora", load_path="{scratch}/lck"),
        load("lora resumed with another alpha", r"lora_alpha 16 in .*adapter_config\.json, 2 in this program's",
             lora_copy(setting("lora_alpha", 16)), program="{train_lora}", area="lora", load_path="{scratch}/lck"),
        load("lora resumed with other targets", r"target_modules \[\"attn\.c_proj\"\] in .*, \[\"attn\.c_attn\"\]",
             lora_copy(setting("target_modules", ["attn.c_proj"])), program="{train_lora}", area="lora",
             load_path="{scratch}/lck"),
        load("lora base replaced", r"the base model is not the one its adapters were trained on: they were trained on "
             r".*model\.safetensors crc32c:[0-9a-f]{8} bytes:\d+; the base found now is .*crc32c:",
             {"base/model.safetensors": modified_base}, program="{train_lora}", area="lora", load_path="{lora_ckpt}",
             flags=["--pretrained-checkpoint", "{scratch}/base"]),
        load("lora base of another iteration", r"the base model is not the one its adapters were trained on",
             {}, program="{train_lora}", area="lora", load_path="{lora_ckpt}",
             flags=["--pretrained-checkpoint", "{ckpt}/iter_0000001"]),
        Case("lora", "merge with an edited alpha",
             ["{train_lora}", "merge-lora", "--load", "{scratch}/lck", "--save", "{scratch}/merged"],
             r"adapter_config\.json does not match the settings train_state\.json records of the run that trained "
             r"them:\s+lora_alpha 32 in .*, 2 in the settings", files=lora_copy(setting("lora_alpha", 32)),
             absent=["{scratch}/merged", "{scratch}/merged.tmp"]),
        Case("lora", "generate with an edited rsLoRA",
             ["{train_lora}", "generate", "--load", "{scratch}/lck", "--prompt-ids", "1,2"],
             r"use_rslora true in .*adapter_config\.json, false in this program's LoRA settings",
             files=lora_copy(setting("use_rslora", True))),
        # --save against the filesystem's limits, before training.
        Case("train flags", "save name too long", ["{train}", "--data-path", "{data}", "--lr", "1e-3", "--train-iters",
                                                   "2", "--save", "{scratch}/" + "x" * 300],
             r"--save .*: the name x+\.\.\. has 300 characters, more than the filesystem's 255",
             absent=["{scratch}/" + "x" * 300]),
        Case("train flags", "save path too long", ["{train}", "--data-path", "{data}", "--lr", "1e-3", "--train-iters",
                                                   "2", "--save", "{scratch}/" + "/".join(["y" * 200] * 21)],
             r"--save .*: the path has \d+ characters; with the checkpoint's files inside it reaches \d+, more than "
             r"the filesystem's 4096", absent=["{scratch}/" + "y" * 200]),
    ]
