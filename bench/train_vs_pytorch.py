#!/usr/bin/env python3
"""Training throughput: megac's OUT/train vs PyTorch eager, same model, same data, same cores.

    /usr/bin/python3 bench/train_vs_pytorch.py                  # ~3 min on 2 cores
    /usr/bin/python3 bench/train_vs_pytorch.py --write-docs     # also rewrites docs/benchmarks.md

For each model (default: GPT-2 and Llama, L=4, h=256, 4 heads, s=256, V=4096, micro batch 8):
  1. writes the spec YAML, a dataset of random token ids < V (fixed seed) and one set of initial
     weights (the reference's init, saved as safetensors) into a temp folder;
  2. `megac compile SPEC --micro-batch-size 8`, then OUT/train --load the weights for
     W warm-up + N measured iterations (global batch 8: no accumulation); tokens/s is the median
     of the metrics file's per-iteration tokens_per_s over the N measured iterations;
  3. trains the same model from the same weights with PyTorch eager (test/reference: Transformer,
     float32, AdamW, clip 1.0, the same linear lr schedule) for W + N iterations in a separate
     process, timing each iteration (zero_grad + batch + forward + backward + clip + step) and
     taking the median tokens/s of the N measured ones.
Runs are strictly one after the other, never in parallel. Both sides get OMP_NUM_THREADS =
OPENBLAS_NUM_THREADS = MKL_NUM_THREADS = --threads (default 2); PyTorch also torch.set_num_threads.
The iteration-1 losses of the two runs are compared: same weights and data must give the same loss.

The driver needs only the standard library; the PyTorch side runs under --python (Debian's
/usr/bin/python3 with torch 1.13).
"""
import argparse
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from bench_util import CpuMeter, cpu_model, git_rev, loadavg, log, read_metrics, replace_docs_block

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = os.path.join(REPO, "test", "reference")
DOCS = os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"

SIZES = dict(num_layers=4, hidden_size=256, num_attention_heads=4, seq_length=256, vocab_size=4096)
DATA_SEED = 1234
INIT_SEED = 1234
LR = 1e-3
CLIP = 1.0


# ---------------------------------------------------------------------------------------------
# PyTorch side (runs in its own process under --python)
# ---------------------------------------------------------------------------------------------

def worker_init(a):
    """Dataset of random ids < vocab (seeded) and the reference's initial weights."""
    import numpy as np
    sys.path.insert(0, REFERENCE)
    from indexed_dataset import write_dataset
    from model import Transformer, init_weights
    from safetensors_io import save_file
    from spec import load_spec

    spec = load_spec(a.spec)
    tokens = a.samples * spec.seq_length + 1  # GPTSamples: sample i = tokens[i*s : i*s+s+1]
    rng = np.random.default_rng(DATA_SEED)
    write_dataset(a.data_path, [rng.integers(0, spec.vocab_size, size=tokens)], spec.vocab_size)
    model = init_weights(Transformer(spec), INIT_SEED)
    save_file(model.state_dict(), a.load)


def worker_train(a):
    import torch
    torch.set_num_threads(a.threads)
    sys.path.insert(0, REFERENCE)
    from indexed_dataset import GPTSamples, IndexedDataset
    from model import Transformer
    from spec import load_spec
    import train as ref  # test/reference/train.py: the optimizer, lr schedule and weight loader

    spec = load_spec(a.spec)
    model = Transformer(spec)
    ref.load_weights(model, a.load)
    iters = a.warmup + a.iters
    b = B = a.micro_batch_size
    # The reference trainer's defaults = OUT/train's defaults (wd 0.01, betas 0.9/0.999, eps 1e-8,
    # linear decay to 0 over --train-iters, no warmup).
    opt_args = ref.build_parser().parse_args(
        ["--spec", a.spec, "--train-iters", str(iters), "--micro-batch-size", str(b),
         "--global-batch-size", str(B), "--lr", str(LR), "--clip-grad", str(CLIP)])
    opt_args.lr_decay_iters = iters
    opt = ref.make_optimizer(model, opt_args)
    params = list(model.parameters())
    samples = GPTSamples(IndexedDataset(a.data_path).token_stream(), spec.seq_length)
    ref.check_batches(opt_args, len(samples))

    records = []
    for k in range(1, iters + 1):
        t0 = time.perf_counter()
        lr = ref.lr_at(k - 1, opt_args)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=False)
        first = (k - 1) * B
        pairs = [samples[i] for i in range(first, first + b)]
        ids = torch.stack([torch.from_numpy(x) for x, _ in pairs])
        labels = torch.stack([torch.from_numpy(y) for _, y in pairs])
        loss = model.loss(ids, labels)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, CLIP)
        opt.step()
        loss_value = loss.item()
        seconds = time.perf_counter() - t0
        records.append({"iteration": k, "lm_loss": loss_value, "grad_norm": float(norm),
                        "ms_per_iter": seconds * 1e3,
                        "tokens_per_s": B * spec.seq_length / seconds})
    with open(a.out, "w") as f:
        json.dump({"torch": torch.__version__, "records": records}, f)


def worker_main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("init", "train"))
    p.add_argument("--spec", required=True)
    p.add_argument("--data-path", required=True)
    p.add_argument("--load", required=True)
    p.add_argument("--samples", type=int, default=0)
    p.add_argument("--warmup", type=int, default=0)
    p.add_argument("--iters", type=int, default=0)
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out")
    a = p.parse_args(argv)
    worker_init(a) if a.mode == "init" else worker_train(a)
    return 0


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def run(cmd, env=None, stdout_path=None):
    """Runs cmd to completion; on failure prints its output and exits."""
    with open(stdout_path or os.devnull, "w") as out:
        r = subprocess.run(cmd, env=env, stdout=out if stdout_path else subprocess.PIPE,
                           stderr=subprocess.PIPE if not stdout_path else subprocess.STDOUT, text=True)
    if r.returncode != 0:
        text = open(stdout_path).read() if stdout_path else (r.stdout or "") + (r.stderr or "")
        sys.exit(f"error: {shlex.join(cmd)} failed (exit {r.returncode}):\n{text[-4000:]}")
    return r


EXTRA_ENV = {}  # --env KEY=VALUE, for both sides


def thread_env(threads):
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(threads)
    env.update(EXTRA_ENV)
    return env


def write_spec(path, family):
    with open(path, "w") as f:
        f.write(f"# bench/train_vs_pytorch.py: {family}, vocab 4096 (random token ids)\n")
        f.write(f"family: {family}\n")
        for k, v in SIZES.items():
            f.write(f"{k}: {v}\n")
        f.write("hidden_dropout: 0.0\nattention_dropout: 0.0\n")  # PyTorch's side has none


def median_tps(records, warmup):
    measured = [r["tokens_per_s"] for r in records[warmup:]]
    return statistics.median(measured), min(measured), max(measured)


def measure_megac(m, a, work, rnd):
    metrics = os.path.join(work, f"{m['family']}-megac-{rnd}.jsonl")
    cmd = [os.path.join(m["out"], "train"), "--data-path", m["data"], "--load", m["init"],
           "--train-iters", str(a.warmup + a.iters), "--global-batch-size", str(a.micro_batch_size),
           "--lr", str(LR), "--clip-grad", str(CLIP), "--no-shuffle", "--metrics-file", metrics]
    run(cmd, env=thread_env(a.threads), stdout_path=os.path.join(work, f"{m['family']}-megac-{rnd}.log"))
    return read_metrics(metrics)


def measure_torch(m, a, work, rnd):
    out = os.path.join(work, f"{m['family']}-torch-{rnd}.json")
    cmd = [a.python, os.path.abspath(__file__), "--worker", "train", "--spec", m["spec"],
           "--data-path", m["data"], "--load", m["init"], "--warmup", str(a.warmup),
           "--iters", str(a.iters), "--micro-batch-size", str(a.micro_batch_size),
           "--threads", str(a.threads), "--out", out]
    run(cmd, env=thread_env(a.threads))
    with open(out) as f:
        got = json.load(f)
    m["torch_version"] = got["torch"]
    return got["records"]


def results_markdown(rows, info):
    lines = ["| model | megac tokens/s | PyTorch eager tokens/s | megac / PyTorch | megac ms/iter | "
             "PyTorch ms/iter |", "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['megac']:.0f} | {r['torch']:.0f} | **{r['ratio']:.2f}x** | "
                     f"{r['megac_ms']:.0f} | {r['torch_ms']:.0f} |")
    lines += [
        "",
        f"- date: {info['date']}; megac commit {info['git']}",
        f"- machine: {info['nproc']} CPUs (`nproc`), {info['cpu']}; {info['threads']} threads per run "
        f"(OMP_NUM_THREADS = OPENBLAS_NUM_THREADS = {info['threads']}{info['env']})",
        f"- PyTorch {info['torch']} (Python {info['python']}); megac links {info['blas']}; PyTorch uses the system BLAS (`update-alternatives --display libblas.so.3-x86_64-linux-gnu`) unless `--env LD_LIBRARY_PATH` says otherwise",
        f"- iterations: {info['warmup']} warm-up + {info['iters']} measured per run, {info['rounds']} "
        f"round(s); tokens/s = median over measured iterations (global batch {info['batch']} x seq 256)",
        f"- load: 1/5/15-min load average {info['load_before']} before, {info['load_after']} after; "
        f"other processes used ~{info['other_cpu_pct']:.0f}% of the machine's CPU time during the "
        f"measurement (ours {info['ours_cpu_pct']:.0f}%)",
        f"- iteration-1 loss check (same weights, same data): {info['loss_check']}",
        f"- command: `{info['command']}`",
    ]
    return "\n".join(lines)


def write_docs(markdown):
    replace_docs_block(DOCS, BEGIN, END, markdown)
    log(f"wrote the results into {os.path.relpath(DOCS, os.getcwd())}")


def blas_name(train):
    try:
        out = subprocess.run(["ldd", train], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if "blas" in line.lower():
                lib = line.split("=>")[-1].split("(")[0].strip()
                # The folder names the build (openblas-openmp vs openblas-pthread); the file names don't.
                return os.path.realpath(lib) if lib else line.split()[0]
    except OSError:
        pass
    return "unknown BLAS"


def main(argv):
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt2,llama", help="comma-separated families (gpt2, llama)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up iterations per run (not measured)")
    p.add_argument("--iters", type=int, default=12, help="measured iterations per run")
    p.add_argument("--rounds", type=int, default=2,
                   help="repeat megac/PyTorch pairs, alternating which goes first; medians pool all rounds")
    p.add_argument("--threads", type=int, default=2, help="threads for each side (default 2)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment for both sides (repeatable), e.g. GOMP_SPINCOUNT=10000")
    p.add_argument("--micro-batch-size", type=int, default=8)
    p.add_argument("--megac", default=os.path.join(REPO, "build", "bin", "megac"), help="default: build/bin/megac")
    p.add_argument("--python", default="/usr/bin/python3", help="Python with torch, for the PyTorch side")
    p.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (default: a temp dir, removed)")
    p.add_argument("--write-docs", action="store_true", help="rewrite the results block of docs/benchmarks.md")
    a = p.parse_args(argv)
    families = [f.strip() for f in a.models.split(",") if f.strip()]
    for f in families:
        if f not in ("gpt2", "llama"):
            p.error(f"--models: unknown family {f!r}")
    if a.warmup < 0 or a.iters < 1 or a.rounds < 1 or a.threads < 1:
        p.error("--warmup >= 0, --iters >= 1, --rounds >= 1, --threads >= 1")
    for kv in a.env:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            p.error(f"--env: expected KEY=VALUE, got {kv!r}")
        EXTRA_ENV[key] = value
    if not os.access(a.megac, os.X_OK):
        sys.exit(f"error: {a.megac} not found; build megac first (scripts/build.sh) or pass --megac")

    tmp = None
    if a.keep:
        work = os.path.abspath(a.keep)
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="megac-bench-")
        work = tmp.name

    log(f"bench: {', '.join(families)}: L={SIZES['num_layers']} h={SIZES['hidden_size']} "
        f"heads={SIZES['num_attention_heads']} s={SIZES['seq_length']} V={SIZES['vocab_size']}, "
        f"micro batch {a.micro_batch_size} (global {a.micro_batch_size}); {a.warmup} warm-up + "
        f"{a.iters} measured iterations x {a.rounds} round(s); {a.threads} threads"
        f"{''.join(' ' + kv for kv in a.env)}; work dir {work}")
    log(f"bench: data = random token ids < {SIZES['vocab_size']} (seed {DATA_SEED}), not text: "
        "the vocab only sets the embedding/LM-head sizes, so throughput is what counts, not the loss")

    # Set-up: specs, data, shared initial weights, compiled programs (none of it timed).
    models = []
    samples = (a.warmup + a.iters) * a.micro_batch_size
    for fam in families:
        m = {"family": fam, "spec": os.path.join(work, f"{fam}.yaml"), "data": os.path.join(work, f"{fam}-data"),
             "init": os.path.join(work, f"{fam}-init.safetensors"), "out": os.path.join(work, f"{fam}-out")}
        write_spec(m["spec"], fam)
        run([a.python, os.path.abspath(__file__), "--worker", "init", "--spec", m["spec"],
             "--data-path", m["data"], "--load", m["init"], "--samples", str(samples)],
            env=thread_env(a.threads))
        t0 = time.monotonic()
        run([a.megac, "compile", m["spec"], "--micro-batch-size", str(a.micro_batch_size), "-o", m["out"]])
        log(f"bench: {fam}: megac compile took {time.monotonic() - t0:.1f} s")
        m["megac_records"], m["torch_records"] = [], []
        models.append(m)

    # Measurement: one run at a time.
    load_before = loadavg()
    log(f"bench: load average before: {load_before}")
    meter = CpuMeter()
    for rnd in range(a.rounds):
        for m in models:
            order = (("megac", measure_megac), ("torch", measure_torch))
            if rnd % 2:
                order = order[::-1]
            for name, fn in order:
                t0 = time.monotonic()
                recs = fn(m, a, work, rnd)
                m[f"{name}_records"].append(recs)
                med, lo, hi = median_tps(recs, a.warmup)
                log(f"bench: {m['family']:5s} {'megac' if name == 'megac' else 'PyTorch':7s} round {rnd + 1}: "
                    f"{med:7.1f} tokens/s median (min {lo:.1f}, max {hi:.1f}), run took "
                    f"{time.monotonic() - t0:.1f} s")
    usage = meter.stop()
    load_after = loadavg()
    log(f"bench: load average after: {load_after}; other processes used ~{usage['other_cpu_pct']:.0f}% "
        f"of the machine's CPU time during the measurement (ours {usage['ours_cpu_pct']:.0f}%)")

    rows, checks = [], []
    for m in models:
        def pooled(key):
            tps = [r["tokens_per_s"] for recs in m[key] for r in recs[a.warmup:]]
            ms = [r["ms_per_iter"] for recs in m[key] for r in recs[a.warmup:]]
            return statistics.median(tps), statistics.median(ms)
        mt, mms = pooled("megac_records")
        tt, tms = pooled("torch_records")
        rows.append({"model": f"{m['family']} L4 h256 s256 V4096 b8", "megac": mt, "torch": tt,
                     "ratio": mt / tt, "megac_ms": mms, "torch_ms": tms})
        l_megac = m["megac_records"][0][0]["lm_loss"]
        l_torch = m["torch_records"][0][0]["lm_loss"]
        ok = abs(l_megac - l_torch) <= 1e-3 * max(1.0, abs(l_torch))
        checks.append(f"{m['family']} {l_megac:.5f} vs {l_torch:.5f}" + ("" if ok else " (MISMATCH)"))
        if not ok:
            log(f"bench: WARNING: {m['family']}: iteration-1 loss differs (megac {l_megac:.6f}, "
                f"PyTorch {l_torch:.6f}): the two runs may not train the same model")

    info = {
        "date": datetime.date.today().isoformat(), "git": git_rev(), "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu_model(), "threads": a.threads, "torch": models[0].get("torch_version", "?"),
        "python": subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                                 capture_output=True, text=True).stdout.strip(),
        "blas": blas_name(os.path.join(models[0]["out"], "train")),
        "warmup": a.warmup, "iters": a.iters, "rounds": a.rounds, "batch": a.micro_batch_size,
        "load_before": load_before, "load_after": load_after,
        "other_cpu_pct": usage["other_cpu_pct"], "ours_cpu_pct": usage["ours_cpu_pct"],
        "loss_check": "; ".join(checks),
        "env": "".join(f", {kv}" for kv in a.env),
        "command": shlex.join(["/usr/bin/python3", "bench/train_vs_pytorch.py"] + argv),
    }
    markdown = results_markdown(rows, info)
    print()
    print(markdown)
    if a.write_docs:
        write_docs(markdown)
    if tmp:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
