"""--load: checkpoint folders, training states and safetensors files; and --save folders that
hold a later run's checkpoints."""
from bad_inputs import files
from bad_inputs.case import Case

AREA = "checkpoints"
W = "transformer.wpe.weight"


def load_case(name, load, expect, content=None, flags=()):
    # The fixture checkpoint ran 2 iterations with --lr 1e-3 (so --lr-decay-iters 2).
    return Case(AREA, name, ["{train}", "--data-path", "{data}", "--lr", "1e-3", "--train-iters", "4",
                             "--lr-decay-iters", "2", "--load", load, "--metrics-file", "{scratch}/m.jsonl"] +
                list(flags), expect,
                absent=["{scratch}/m.jsonl", "{scratch}/out"], files=content or {})


def folder(tracker="2", state=None, model=None, optimizer=True):
    """A checkpoint folder 'ck' like the good one, with parts replaced."""
    content = {"ck/latest_checkpointed_iteration.txt": tracker,
               "ck/iter_0000002/model.safetensors": model or files.copy_of("iter_0000002/model.safetensors"),
               "ck/iter_0000002/train_state.json": state or files.copy_of("iter_0000002/train_state.json")}
    if optimizer:
        content["ck/iter_0000002/optimizer.safetensors"] = files.copy_of("iter_0000002/optimizer.safetensors")
    return content


def cases():
    st = "{scratch}/m.safetensors"
    return [
        load_case("tracker is a folder", "{scratch}/ck",
                  r"latest_checkpointed_iteration\.txt is not a regular file \(a folder\)",
                  content={**folder(), "ck/latest_checkpointed_iteration.txt": files.Folder()}),
        load_case("load a missing path", "{scratch}/nothing", r"--load .*nothing: no such file or folder"),
        load_case("load an empty folder", "{scratch}/empty", r"the folder has no latest_checkpointed_iteration\.txt",
                  content={"empty/.keep": ""}),
        load_case("tracker says release", "{scratch}/ck", r"latest_checkpointed_iteration\.txt: holds \"release\"",
                  content=folder(tracker="release")),
        load_case("tracker names a missing iteration", "{scratch}/ck", r"says 7, but there is no folder",
                  content=folder(tracker="7")),
        load_case("ckpt step missing", "{scratch}/ck", r"--ckpt-step 1, but there is no folder",
                  content=folder(), flags=["--ckpt-step", "1"]),
        load_case("iteration without optimizer state", "{scratch}/ck", r"has no optimizer\.safetensors",
                  content=folder(optimizer=False)),
        load_case("train state not JSON", "{scratch}/ck", r"train_state\.json", content=folder(state="{not json")),
        load_case("train state of another program", "{scratch}/ck", r"format is \"other\"",
                  content=folder(state=files.train_state(lambda s: s.update(format="other")))),
        load_case("train state inconsistent", "{scratch}/ck", r"optimizer_steps \(7\) \+ skipped_iterations \(0\) is more than iteration \(2\)",
                  content=folder(state=files.train_state(lambda s: s.update(optimizer_steps=7)))),
        load_case("train state negative iteration", "{scratch}/ck", r"iteration is -3; it must be >= 0",
                  content=folder(state=files.train_state(lambda s: s.update(iteration=-3)))),
        load_case("nothing left to train", "{ckpt}", r"the checkpoint is at iteration 2, so --train-iters 2",
                  flags=["--train-iters", "2"]),
        load_case("resume with another seed", "{ckpt}", r"--seed 99 differs from the checkpoint's",
                  flags=["--seed", "99"]),
        load_case("save folder holds newer checkpoints", "{scratch}/ck",
                  r"--save .*ck already holds a checkpoint at iteration 2, and this run starts at iteration 0.*"
                  r"--overwrite-checkpoints", content=folder(), flags=["--finetune", "--save", "{scratch}/ck"]),
        load_case("schedule differs from the checkpoint's", "{ckpt}",
                  r"--lr 0\.002 \(checkpoint: 0\.001\).*--override-opt_param-scheduler", flags=["--lr", "2e-3"]),
        load_case("no-shuffle against a shuffled checkpoint", "{ckpt}", r"--no-shuffle: the checkpoint's run read its data shuffled",
                  flags=["--no-shuffle"]),
        load_case("folder and state disagree on the iteration", "{scratch}/ck",
                  r"train_state\.json says iteration 5, but its folder is iteration 2",
                  content=folder(state=files.train_state(lambda s: s.update(iteration=5, optimizer_steps=5)))),
        load_case("header length 2^60", st, r"m\.safetensors", content={"m.safetensors": files.huge_header_length}),
        load_case("truncated weights", st, r"m\.safetensors", content={"m.safetensors": files.truncated_model}),
        load_case("tensor missing", st, r"missing tensor '" + W + "'",
                  content={"m.safetensors": files.without_tensor(W)}),
        load_case("tensor of dtype I32", st, r"tensor '" + W + "' has dtype I32; only BF16, F16, F32 can be loaded",
                  content={"m.safetensors": files.with_dtype(W, "I32")}),
        load_case("NaN in a tensor", st, r"tensor '" + W + "' holds NaN at element 3",
                  content={"m.safetensors": files.with_nan(W)}),
        load_case("sharded index naming a missing shard", "{scratch}/hf/model.safetensors.index.json",
                  r"names model-00002-of-00002\.safetensors .*which is not beside it",
                  content={"hf/model.safetensors.index.json":
                           '{"weight_map": {"a": "model-00002-of-00002.safetensors"}}'}),
        load_case("sharded index without weight_map", "{scratch}/hf", r"no \"weight_map\" object",
                  content={"hf/model.safetensors.index.json": '{"metadata": {}}'}),
    ]
