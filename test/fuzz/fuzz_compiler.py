"""Bounded fuzzing of megac's inputs: model specs (megac compile's YAML), plan flags, and the
plan a pass reads from the IR (shard.grid @grid and megac.plan, through megac-opt). Each input
is a valid one with a few pseudo-random edits (a fixed seed): extreme or malformed values, keys
dropped, doubled or misspelt, extra YAML documents, stray bytes. megac may refuse an input, with
an error message and a non-zero exit; it may not crash (a signal), hang (10 s), print a
sanitizer report, exit 0 without writing its output, or fail without saying why."""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

# A hang guard, not a speed bound: the largest inputs accepted (a 4096-layer spec) compile in
# about 2.5 s alone and took 7 s and more on a busy machine.
TIME_LIMIT = 60
SANITIZER = re.compile(r"ERROR: AddressSanitizer|runtime error: |UndefinedBehaviorSanitizer")

SPECS = {
    "gpt2": ("family: gpt2\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nseq_length: 32\n"
             "vocab_size: 257\nmax_position_embeddings: 64\nnorm_epsilon: 1.0e-5\n"),
    "llama": ("family: llama\nnum_layers: 2\nhidden_size: 64\nnum_attention_heads: 4\nnum_query_groups: 2\n"
              "ffn_hidden_size: 176\nseq_length: 32\nvocab_size: 257\nrotary_base: 10000\n"
              "tie_embeddings: false\nnorm_epsilon: 1.0e-6\n"),
}
VALUES = ["0", "-1", "1", "2", "3", "7", "4096", "65536", "2147483648", "4294967296", "9223372036854775807",
          "9223372036854775808", "99999999999999999999", "1e999", "-1e999", ".inf", "-.inf", ".nan", "nan",
          "1.5", "0x10", "1e3", "''", '""', "[]", "{}", "[1, 2]", "{a: 1}", "true", "false", "null", "~",
          "gpt2", "llama", "RMSNorm", "swiglu", "rope", "learned", "&a 1", "*a", "!!binary AAAA", "é", "\t1"]
KEYS = ["family", "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size",
        "seq_length", "vocab_size", "max_position_embeddings", "normalization", "activation",
        "position_embedding_type", "tie_embeddings", "add_bias_linear", "norm_epsilon", "rotary_base",
        "hidden_dropout", "attention_dropout", "unknown_key", "Num_Layers"]
FLAG_VALUES = ["0", "-1", "1", "2", "3", "4", "8", "1000", "1048576", "4294967296", "9223372036854775807",
               "9223372036854775808", "nan", "inf", "1e999", "-0", "2.5", "", "x", "0x2", "full", "selective",
               "uniform", "block", "mlp", "core_attn,layernorm", "mlp,mlp"]
FLAGS = ["--tp", "--pp", "--dp", "--vpp", "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
         "--micro-batch-size", "--global-batch-size", "--ddp-bucket-size", "--make-vocab-size-divisible-by",
         "--num-layers-per-virtual-pipeline-stage", "--pipeline-layout", "--pipeline-schedule",
         "--pipeline-forward-cost", "--pipeline-backward-cost", "--target", "--recompute-granularity",
         "--recompute-method", "--recompute-num-layers", "--recompute-modules"]
BOOL_FLAGS = ["--sp", "--sequence-parallel", "--overlap-grad-reduce", "--rank-layout", "--recompute-activations",
              "--distribute-saved-activations", "--bf16", "--fp16"]


def mutate_spec(rng):
    lines = SPECS[rng.choice(sorted(SPECS))].splitlines()
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(7)
        i = rng.randrange(len(lines))
        key = lines[i].split(":", 1)[0]
        if kind <= 2:
            lines[i] = f"{key}: {rng.choice(VALUES)}"
        elif kind == 3:
            del lines[i]
            if not lines:
                lines = ["family: gpt2"]
        elif kind == 4:
            lines.insert(i, f"{rng.choice(KEYS)}: {rng.choice(VALUES)}")
        elif kind == 5:
            lines.insert(i, rng.choice(["---", "...", "- a", "  indented: 1", "#", "key", ": v", "{", "["]))
        else:
            lines[i] = lines[i][:rng.randrange(len(lines[i]) + 1)] + chr(rng.randrange(1, 256))
    return "\n".join(lines) + "\n"


def mutate_flags(rng):
    flags = []
    for _ in range(rng.randint(1, 4)):
        if rng.random() < 0.2:
            flags.append(rng.choice(BOOL_FLAGS))
        else:
            flags += [rng.choice(FLAGS), rng.choice(FLAG_VALUES)]
    return flags


PLAN_KEYS = {"pp": "i64", "dp": "i64", "tp": "i64", "ddp_bucket_size": "i64", "make_vocab_size_divisible_by": "i64", "num_microbatches": "i64",
             "overlap_grad_reduce": "bool", "sequence_parallel": "bool", "virtual_pipeline_size": "i64"}


def mutate_module(rng, module_text):
    """The frontend IR with its @grid shape and some megac.plan entries changed."""
    def shape(_):
        axes = [rng.choice(["0", "1", "2", "3", "4", "8", "1024", "2147483647", "4294967296", "?"])
                for _ in range(rng.choice([3, 3, 3, 2, 4]))]
        return "shape = " + "x".join(axes)
    text = re.sub(r"shape = [0-9x?]+", shape, module_text, count=1)

    def entry(m):
        if rng.random() < 0.5:
            return m.group(0)
        return f"{m.group(1)} = " + rng.choice(["0 : i64", "-1 : i64", "9223372036854775807 : i64", "true",
                                                "1.5 : f64", '"x"', "[]"])

    def plan(m):
        body = re.sub(r"(\w+) = ([^,>\[]+|\[[^\]]*\])", entry, m.group(1))
        if rng.random() < 0.3:
            body = f"{rng.choice(sorted(PLAN_KEYS) + ['unknown_key'])} = {rng.choice(['0 : i64', '3 : i64', 'true'])}, " + body
        return "megac.plan = #megac.plan<" + body + ">"
    return re.sub(r"megac\.plan = #megac\.plan<([^>]*)>", plan, text, count=1)


def run_one(argv, expect_output=None):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        return f"still running after {TIME_LIMIT} s"
    out = p.stdout.decode(errors="replace")
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}: {out[-800:]}"
    if SANITIZER.search(out):
        return f"sanitizer report: {out[-800:]}"
    # LLVM's command-line parser says "for the --tp option: 'x' value invalid ...": that names
    # the flag and the value too.
    if p.returncode != 0 and not re.search(r"error|value invalid", out, re.IGNORECASE):
        return f"exit {p.returncode} without an error message: {out[-400:]}"
    if p.returncode == 0 and expect_output and not os.path.exists(expect_output):
        return f"exit 0 but no {expect_output}"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--megac-opt", required=True)
    ap.add_argument("--rounds", type=int, default=500, help="inputs of each kind")
    ap.add_argument("--seed", type=int, default=20261125)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="megac-fuzz-")
    rng = random.Random(args.seed)
    jobs = []  # (kind, description, argv, expected output)
    for i in range(args.rounds):
        spec = os.path.join(work, f"spec{i}.yaml")
        with open(spec, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(mutate_spec(rng))
        out = os.path.join(work, f"out-spec{i}")
        jobs.append(("spec", spec, [args.megac, "compile", spec, "--no-build", "-o", out], os.path.join(out, "main.cpp")))
    good = os.path.join(work, "good.yaml")
    with open(good, "w") as f:
        f.write(SPECS["gpt2"])
    for i in range(args.rounds):
        flags = mutate_flags(rng)
        out = os.path.join(work, f"out-flags{i}")
        jobs.append(("plan flags", " ".join(flags), [args.megac, "compile", good, "--no-build", "-o", out] + flags,
                     None))
    # The frontend IR of a 3D plan, whose grid and plan the passes then read.
    dump = os.path.join(work, "ir")
    subprocess.run([args.megac, "compile", good, "--tp", "2", "--pp", "2", "--dp", "2", "--global-batch-size", "8",
                    "--micro-batch-size", "2", "--no-build", "-o", os.path.join(work, "base"), "--dump-ir", dump],
                   check=True, stdout=subprocess.DEVNULL)
    frontend = open(os.path.join(dump, "00-frontend.mlir")).read()
    for i in range(args.rounds // 2):
        path = os.path.join(work, f"module{i}.mlir")
        with open(path, "w") as f:
            f.write(mutate_module(rng, frontend))
        jobs.append(("pass options", path, [args.megac_opt, "--megac-training-pipeline", path, "-o", os.devnull],
                     None))
    failures, counts = [], {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = pool.map(lambda job: run_one(job[2], job[3]), jobs)
        for (kind, what, argv, _), problem in zip(jobs, results):
            counts[kind] = counts.get(kind, 0) + 1
            if problem:
                failures.append(f"[{kind}] {what}: {problem}\n    {' '.join(argv)}")
    for f in failures[:20]:
        print("FAIL " + f)
    if failures:
        with open(os.path.join(work, "failures.txt"), "w") as f:
            f.write("\n".join(failures) + "\n")
    print(", ".join(f"{k}: {n} inputs" for k, n in counts.items()) + f" (seed {args.seed})")
    if not failures:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"inputs kept in {work}")
    print(f"{len(jobs) - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
