"""One bad input of the catalogue (test/e2e/bad_inputs.py): the command, the message it must
print (a regex naming what to change), and the paths it must not leave behind.

argv, env values and paths may use {placeholders} from Context: {megac}, {megac_opt}, {train}
(a compiled single-rank GPT-2), {train_dp2} (dp 2), {data} (a dataset prefix), {ckpt} (a
complete checkpoint folder of {train}), {train_lora} (the same compiled with --lora-rank 2),
{lora_ckpt} (its checkpoint, LoRA on {ckpt}), {train_bert} (a single-rank BERT, test/e2e/specs/bert-pp.yaml),
{spec} (a good GPT-2 spec), {scratch} (this case's
own empty folder, its working directory)."""
from dataclasses import dataclass, field


@dataclass
class Case:
    area: str                 # spec | plan flags | train flags | data files | checkpoints | pass options | megac data | launcher
    name: str
    argv: list
    expect: str               # regex the output must match
    absent: list = field(default_factory=list)   # paths that must not exist afterwards
    env: dict = field(default_factory=dict)
    # scratch-relative path -> bytes, str (as is) or a function of the Context
    # returning bytes: written before the command runs
    files: dict = field(default_factory=dict)
