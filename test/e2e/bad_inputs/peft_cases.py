"""Issue [16]: adapter folders PEFT saved (adapter_config.json as PEFT 0.13's save_pretrained
writes it + adapter_model.safetensors, no train_state.json) loaded into {train_lora} (GPT-2, r 2,
alpha 2, target attn.c_attn): a setting of another program, one megac does not implement, or a
base model it cannot find is refused by name, with both values and the fix."""
import json
import os

from bad_inputs import files
from bad_inputs.case import Case

ITER = "iter_0000002"
AREA = "lora"


def peft_config(ctx):
    """What PEFT's LoraConfig(r=2, lora_alpha=2, target_modules=["c_attn"]).save_pretrained writes for
    the LoRA fixture's adapters, on the fixture's base (the whole-model checkpoint's iteration)."""
    return {"alpha_pattern": {}, "auto_mapping": None, "base_model_name_or_path": os.path.join(ctx["ckpt"], ITER),
            "bias": "none", "fan_in_fan_out": True, "inference_mode": True, "init_lora_weights": True,
            "layer_replication": None, "layers_pattern": None, "layers_to_transform": None, "loftq_config": {},
            "lora_alpha": 2, "lora_dropout": 0.0, "megatron_config": None, "megatron_core": "megatron.core",
            "modules_to_save": None, "peft_type": "LORA", "r": 2, "rank_pattern": {}, "revision": None,
            "target_modules": ["c_attn"], "task_type": "CAUSAL_LM", "use_dora": False, "use_rslora": False}


def peft_folder(change=None, tensors="adapter_model.safetensors"):
    """peft/: the fixture's adapters under `tensors` and PEFT's adapter_config.json with change(dict)."""
    def config(ctx):
        value = peft_config(ctx)
        if change:
            change(value)
        return json.dumps(value, indent=2).encode()
    return {"peft/adapter_config.json": config,
            "peft/" + tensors: files.copy_of(os.path.join(ITER, "adapter_model.safetensors"), root="lora_ckpt")}


def setting(key, value):
    return lambda config: config.__setitem__(key, value)


def peft(name, expect, content, program="{train_lora}", flags=()):
    """OUT/train --load {scratch}/peft (a folder PEFT saved) into a LoRA program."""
    return Case(AREA, name, [program, "--data-path", "{data}", "--lr", "1e-3", "--train-iters", "2",
                             "--load", "{scratch}/peft", "--save", "{scratch}/out", *flags], expect,
                absent=["{scratch}/out"], files=content)


def other_base(ctx):
    """A base folder whose config.json is another model's (2 heads) beside the fixture's weights."""
    return files.json_of(os.path.join(ITER, "config.json"), setting("n_head", 2))(ctx)


PROGRAM = r"in this program's LoRA settings"


def cases():
    return [
        peft("peft adapter of another rank", r"r 8 in .*adapter_config\.json, 2 " + PROGRAM + r": compile with "
             r"--lora-rank 8", peft_folder(setting("r", 8))),
        peft("peft adapter of another alpha", r"lora_alpha 16 in .*, 2 " + PROGRAM + r": compile with --lora-alpha 16",
             peft_folder(setting("lora_alpha", 16))),
        peft("peft adapter with dropout", r"lora_dropout 0\.1 in .*, 0 " + PROGRAM + r": compile with --lora-dropout "
             r"0\.1", peft_folder(setting("lora_dropout", 0.1))),
        peft("peft adapter with rslora", r"use_rslora true in .*, false " + PROGRAM + r": compile with --use-rslora",
             peft_folder(setting("use_rslora", True))),
        peft("peft targets disagree with its tensors", r"target_modules \[\"c_proj\"\] in .* \(its tensors adapt "
             r"attn\.c_attn\), \[\"attn\.c_attn\"\] " + PROGRAM + r": its target_modules name other modules than its "
             r"tensors adapt", peft_folder(setting("target_modules", ["c_proj"]))),
        peft("peft adapter with a bias", r"bias \"all\" in .*, \"none\" " + PROGRAM + r": megac does not implement "
             r"bias \"all\" \(yet\)", peft_folder(setting("bias", "all"))),
        peft("peft dora adapter", r"use_dora true in .*: megac does not implement use_dora true \(yet\)",
             peft_folder(setting("use_dora", True))),
        peft("peft adapter saving modules", r"modules_to_save \[\"lm_head\"\] in .*: megac does not implement "
             r"modules_to_save", peft_folder(setting("modules_to_save", ["lm_head"]))),
        peft("peft adapter of other layers", r"layers_to_transform \[0\] in .*: megac does not implement",
             peft_folder(setting("layers_to_transform", [0]))),
        peft("peft per-module ranks", r"rank_pattern \{.*\} in .*: megac does not implement rank_pattern",
             peft_folder(setting("rank_pattern", {"c_attn": 4}))),
        peft("peft pissa adapter", r"init_lora_weights \"pissa\" in .*: adapters initialised so belong with the base "
             r"weights PEFT rewrote", peft_folder(setting("init_lora_weights", "pissa"))),
        peft("peft setting of a newer peft", r"lora_bias true in .* is a setting megac does not implement \(yet\)",
             peft_folder(setting("lora_bias", True))),
        peft("peft adapter of another method", r"peft_type \"IA3\" in .*: megac trains LoRA adapters only",
             peft_folder(setting("peft_type", "IA3"))),
        peft("peft adapter for conv1d turned off", r"fan_in_fan_out false in .*, true " + PROGRAM + r": the model "
             r"family fixes it", peft_folder(setting("fan_in_fan_out", False))),
        peft("peft base on the hub", r"base_model_name_or_path \"openai-community/gpt2\" is no local file or folder "
             r".*megac downloads nothing .*--pretrained-checkpoint DIR",
             peft_folder(setting("base_model_name_or_path", "openai-community/gpt2"))),
        peft("peft base not named", r"base_model_name_or_path is null, so the adapters name no base model; give .*"
             r"--pretrained-checkpoint BASE", peft_folder(setting("base_model_name_or_path", None))),
        peft("peft base of another model", r"the base model \(adapter_config\.json's base_model_name_or_path\): "
             r".*describes another model than this program:\s+n_head 2 in the file, 4 in this program",
             {**peft_folder(setting("base_model_name_or_path", "base")),
              "base/config.json": other_base,
              "base/model.safetensors": files.copy_of(os.path.join(ITER, "model.safetensors"))}),
        peft("peft base is an adapter folder", r"base_model_name_or_path .*lora-ckpt is a LoRA checkpoint \(adapters "
             r"only\), not a base model", peft_folder(lambda c: c.__setitem__("base_model_name_or_path",
                                                                              c["base_model_name_or_path"].replace(
                                                                                  "/ckpt/" + ITER, "/lora-ckpt")))),
        peft("peft adapters pickled", r"adapter_model\.bin is PyTorch's pickle format, which megac does not read: "
             r"save the adapters with PEFT's save_pretrained\(DIR, safe_serialization=True\)",
             peft_folder(tensors="adapter_model.bin")),
        peft("peft folder that is a megac checkpoint without its state", r"the folder has adapter_config\.json and "
             r"optimizer\.safetensors but no train_state\.json; it is not a complete megac checkpoint",
             {**peft_folder(), "peft/optimizer.safetensors": files.copy_of(os.path.join(ITER, "optimizer.safetensors"),
                                                                            root="lora_ckpt")}),
        peft("peft adapters in a full program", r"is a LoRA checkpoint \(adapters only\), but this program trains "
             r"every parameter", peft_folder(), program="{train}"),
        Case(AREA, "peft dora adapter merged",
             ["{train_lora}", "merge-lora", "--load", "{scratch}/peft", "--save", "{scratch}/merged"],
             r"use_dora true in .*: megac does not implement use_dora true", absent=["{scratch}/merged"],
             files=peft_folder(setting("use_dora", True))),
        # A program without LoRA (megac generate's) has no settings to check the folder against:
        # the merge refuses what its formula does not compute.
        Case(AREA, "peft dora adapter merged by a full program",
             ["{train}", "merge-lora", "--load", "{scratch}/peft", "--save", "{scratch}/merged"],
             r"settings merge-lora does not compute .*\n  use_dora true\nmegac does not implement them \(yet\); "
             r"merge these adapters with PEFT's merge_and_unload", absent=["{scratch}/merged"],
             files=peft_folder(setting("use_dora", True))),
        Case(AREA, "peft adapter with a bias merged by a full program",
             ["{train}", "merge-lora", "--load", "{scratch}/peft", "--save", "{scratch}/merged"],
             r"settings merge-lora does not compute .*\n  bias \"all\"", absent=["{scratch}/merged"],
             files=peft_folder(setting("bias", "all"))),
        Case(AREA, "peft per-module ranks merged by a full program",
             ["{train}", "merge-lora", "--load", "{scratch}/peft", "--save", "{scratch}/merged"],
             r"settings merge-lora does not compute .*\n  rank_pattern \{", absent=["{scratch}/merged"],
             files=peft_folder(setting("rank_pattern", {"c_attn": 4}))),
        Case(AREA, "peft adapter of another rank generated",
             ["{train_lora}", "generate", "--load", "{scratch}/peft", "--prompt-ids", "1,2"],
             r"r 8 in .*adapter_config\.json, 2 " + PROGRAM, files=peft_folder(setting("r", 8))),
    ]
