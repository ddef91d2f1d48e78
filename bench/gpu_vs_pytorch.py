#!/usr/bin/env python3
"""Training throughput on one GPU: megac's OUT/train vs PyTorch bf16, same model, same data.

Runs ON THE LENT GPU MACHINE, from the repo root, with gpu/ carried (scripts/gpu_prepare.sh
compiled the programs there is no megac to compile them with):
    python3 bench/gpu_vs_pytorch.py                         # GPT-2 124M (mb 8) and 1.3B (mb 4), ~5 min
    python3 bench/gpu_vs_pytorch.py --configs 124m --mb-124m 16
    python3 bench/gpu_vs_pytorch.py --configs tiny --rounds 1   # smoke run, seconds
    scripts/gpu_check.sh bench -- --configs 1.3b            # the same through the check script

For each config (examples/gpt2-124m.yaml, examples/gpt2-1.3b.yaml; global batch = one micro batch,
so no accumulation):
  1. bench/gpu_torch_side.py init writes random token ids < V (fixed seed) and the reference's seeded initial weights
     (test/reference/model.init_weights) as safetensors, so both sides train the same model
     (OUT/train --load checks every name and shape) on the same samples in the same order;
  2. OUT/train (build-gpu/bin/bench-NAME-mbMB, from gpu/bench-NAME-mbMB/main.cu, built first
     through `scripts/gpu_check.sh build-program`) runs W warm-up + N measured iterations, with
     --bf16 when its --help lists the flag (else fp32, and the table says so); tokens/s is the
     median of its --metrics-file's per-iteration tokens_per_s over the N;
  3. PyTorch trains the same model in a separate process (bench/gpu_torch_side.py train): a
     GPT-2 with the reference's parameter names (its model.Transformer builds its causal mask on the CPU, so it
     cannot run on CUDA as it is), fp32 master weights, torch.autocast(bfloat16), fused
     scaled-dot-product attention, AdamW (fused if available), clip 1.0, the same linear lr
     schedule; each iteration (batch copy + forward + backward + clip + step + reading loss and
     norm) is timed on the host after the GPU finishes it.
The sides run one after the other, never at once, and alternate which goes first from round to
round. MFU = 72 B s l h^2 (1 + s/6h + V/12lh) / iteration time / peak (the compiler's GEMM count
for GPT-2, lib/Frontend/ModelFlops.cpp, which the runtime's log line uses),
peak from --peak-tflops or the GPU's name (H100 SXM and H200: 989 TFLOP/s bf16 dense).
Writes gpu_bench.md (a fragment for docs/benchmarks.md) and gpu_bench.json to --out-dir
(default: $OUT when set, else gpu/results).
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
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_util import git_rev, log, read_metrics, replace_docs_block  # noqa: E402

REFERENCE = os.path.join(REPO, "test", "reference")
DOCS = os.path.join(REPO, "docs", "benchmarks.md")
DEFAULT_BUILD_DIR = os.path.join(REPO, "build-gpu")  # scripts/gpu_check.sh's one build
BEGIN, END = "<!-- gpu-results:begin -->", "<!-- gpu-results:end -->"
CONFIGS = {  # name: spec, default micro batch, warm-up, measured iterations
    "124m": ("examples/gpt2-124m.yaml", 8, 5, 30),
    "1.3b": ("examples/gpt2-1.3b.yaml", 4, 3, 15),
    "tiny": ("examples/gpt2-tiny.yaml", 2, 2, 5),
}
PEAKS = (("H200", 989.0), ("H100", 989.0), ("A100", 312.0))  # bf16 dense, facts.md
TORCH_SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu_torch_side.py")
from gpu_torch_side import CLIP, LR  # noqa: E402  (the same optimizer settings on both sides)


def millions(n):
    return f"{n / 1e6:.0f} M" if n >= 1e7 else f"{n / 1e6:.2f} M"


def model_flops(spec, batch):
    """Model FLOPs per iteration (no recompute): lib/Frontend/ModelFlops.cpp's count for GPT-2."""
    B, s, l, h, V = batch, spec.seq_length, spec.num_layers, spec.hidden_size, spec.vocab_size
    return 72.0 * B * s * l * h * h * (1 + s / (6.0 * h) + V / (12.0 * l * h))


class MemorySampler:
    """Most GPU memory in use (nvidia-smi, once a second) while a run goes on: both sides alike."""

    def __init__(self):
        self.max_mib, self._stop = None, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self):
        while not self._stop.is_set():
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                      "-i", "0"], capture_output=True, text=True, timeout=10).stdout
                self.max_mib = max(self.max_mib or 0, int(out.split()[0]))
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                return
            self._stop.wait(1.0)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return None if self.max_mib is None else round(self.max_mib / 1024, 1)


def attempt(cmd, log_path, timeout):
    """Runs cmd (output to log_path); returns None or why it failed."""
    with open(log_path, "w") as f:
        try:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout} s"
    if r.returncode == 0:
        return None
    lines = [l for l in open(log_path).read().splitlines() if l.strip()]
    return f"exit {r.returncode}: {lines[-1][:160] if lines else 'no output'}"


def busy_gpu_processes():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10).stdout
        return [l.strip() for l in out.splitlines() if l.strip()]
    except (OSError, subprocess.SubprocessError):
        return []


def median_over(records, warmup, key):
    vals = [r[key] for r in records[warmup:] if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def ensure_program(name, mb, a):
    """The OUT/train of this config and micro batch: build-gpu/bin/bench-NAME-mbMB, which
    `scripts/gpu_check.sh build-program` builds in its one build (a no-op when up to date). With
    another --build-dir, the program already built there."""
    prog = f"bench-{name}-mb{mb}"
    binary = os.path.join(a.build_dir, "bin", prog)
    if os.path.abspath(a.build_dir) != DEFAULT_BUILD_DIR:
        if not os.access(binary, os.X_OK):
            sys.exit(f"error: {binary} not found (--build-dir {a.build_dir} is used as it is)")
        return binary
    if not any(os.path.isfile(os.path.join(a.programs, prog, f)) for f in ("main.cu", "main.cpp")):
        ready = sorted(d for d in os.listdir(a.programs) if d.startswith(f"bench-{name}-mb")) \
            if os.path.isdir(a.programs) else []
        sys.exit(f"error: {a.programs}/{prog} not found: micro batch {mb} was not compiled by "
                 f"scripts/gpu_prepare.sh (there: {', '.join(ready) or 'none'})")
    log(f"bench: building {prog} (scripts/gpu_check.sh build-program {prog})")
    r = subprocess.run([os.path.join(REPO, "scripts", "gpu_check.sh"), "build-program", prog])
    if r.returncode != 0 or not os.access(binary, os.X_OK):
        sys.exit(f"error: building {prog} failed; see gpu/results/build-{prog}.log")
    return binary


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default="124m,1.3b", help="comma-separated: 124m, 1.3b, tiny")
    p.add_argument("--mb-124m", type=int, default=CONFIGS["124m"][1], help="micro batch for 124m (compiled in)")
    p.add_argument("--mb-1.3b", dest="mb_1_3b", type=int, default=CONFIGS["1.3b"][1], help="micro batch for 1.3b")
    p.add_argument("--warmup", type=int, help="warm-up iterations per run (default per config)")
    p.add_argument("--iters", type=int, help="measured iterations per run (default per config)")
    p.add_argument("--rounds", type=int, default=2, help="megac/PyTorch pairs, the order alternating")
    p.add_argument("--peak-tflops", type=float, help="bf16 dense peak of one GPU (default: from its name)")
    p.add_argument("--megac-bf16", choices=("auto", "on", "off"), default="auto",
                   help="pass --bf16 to OUT/train (auto: when its --help lists it)")
    p.add_argument("--compile", action="store_true", help="also time torch.compile (skipped if it fails or is slow)")
    p.add_argument("--compile-timeout", type=int, default=300, help="seconds for a whole torch.compile run")
    p.add_argument("--run-timeout", type=int, default=300, help="seconds for any other run")
    p.add_argument("--programs", default=os.path.join(REPO, "gpu"), help="scripts/gpu_prepare.sh's folder")
    p.add_argument("--build-dir", default=DEFAULT_BUILD_DIR,
                   help="where the programs are (BUILD_DIR/bin/NAME); the default is scripts/gpu_check.sh's "
                        "build, which the bench builds them in")
    p.add_argument("--device", default="cuda", help="torch device (cpu: smoke test of this script only)")
    p.add_argument("--python", default=sys.executable, help="Python with torch for the PyTorch side")
    p.add_argument("--out-dir", default=os.environ.get("OUT") or os.path.join(REPO, "gpu", "results"))
    p.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (data, weights, logs)")
    p.add_argument("--write-docs", action="store_true", help=f"replace {BEGIN}...{END} in docs/benchmarks.md")
    p.add_argument("--docs-from", metavar="GPU_BENCH_MD",
                   help="on the megac machine: put a gpu_bench.md brought back from the GPU machine "
                        f"between {BEGIN} and {END} in docs/benchmarks.md, and do nothing else")
    a = p.parse_args(argv)
    a.names = [c.strip() for c in a.configs.split(",") if c.strip()]
    if not a.names:
        p.error(f"--configs: name at least one config ({', '.join(CONFIGS)})")
    for n in a.names:
        if n not in CONFIGS:
            p.error(f"--configs: unknown config {n!r} (known: {', '.join(CONFIGS)})")
    if a.rounds < 1 or (a.iters is not None and a.iters < 1) or (a.warmup is not None and a.warmup < 0):
        p.error("--rounds >= 1, --iters >= 1, --warmup >= 0")
    return a


def side_command(side, c, a, out):
    """The command line of one measured run: OUT/train, or the PyTorch side (eager or compiled)."""
    if side == "megac":
        return [c["train"], "--data-path", c["data"], "--load", c["init"], "--train-iters",
                str(c["warmup"] + c["iters"]), "--global-batch-size", str(c["mb"]), "--lr", str(LR),
                "--clip-grad", str(CLIP), "--no-shuffle", "--metrics-file", out,
                "--peak-tflops", str(c["peak"])] + (["--bf16"] if c["bf16"] else [])
    return [a.python, TORCH_SIDE, "train", "--spec", c["spec"], "--data-path", c["data"], "--load", c["init"],
            "--warmup", str(c["warmup"]), "--iters", str(c["iters"]), "--micro-batch-size", str(c["mb"]),
            "--device", a.device, "--out", out] + (["--compile"] if side == "compile" else [])


def summarize(runs, c):
    """Medians over the measured iterations of all rounds of one side."""
    w = c["warmup"]
    pooled = [r for got in runs for r in got["records"][w:]]
    tps = statistics.median(r["tokens_per_s"] for r in pooled)
    s = {"tokens_per_s": tps, "ms_per_iter": statistics.median(r["ms_per_iter"] for r in pooled),
         # from the median tokens/s, so that the MFU ratio is the tokens/s ratio
         "tflops": c["flops"] * tps / c["tokens_per_iter"] / 1e12, "first_loss": runs[0]["records"][0]["lm_loss"],
         "per_round": [median_over(g["records"], w, "tokens_per_s") for g in runs],
         "gpu_memory_gib": max((g["gpu_memory_gib"] or 0) for g in runs) or None}
    s["mfu"] = s["tflops"] / c["peak"]
    for k in ("attention", "optimizer", "max_memory_gib"):
        if k in runs[0]:
            s[k] = runs[0][k]
    if "tflops_per_gpu" in runs[0]["records"][0]:  # OUT/train's own figure, same formula: should agree
        s["runtime_tflops"] = median_over(pooled, 0, "tflops_per_gpu")
    return s


def run_config(name, a, work, load_spec):
    """Set-up, then the alternating rounds; returns (table row, device info, any required run failed)."""
    spec_path, mb, warmup, iters = CONFIGS[name]
    mb = {"124m": a.mb_124m, "1.3b": a.mb_1_3b}.get(name, mb)
    spec = load_spec(os.path.join(REPO, spec_path))
    w = lambda x: os.path.join(work, f"{name}-{x}")  # noqa: E731
    c = {"spec": os.path.join(REPO, spec_path), "mb": mb, "data": w("data"), "init": w("init.safetensors"),
         "warmup": warmup if a.warmup is None else a.warmup, "iters": iters if a.iters is None else a.iters,
         "train": ensure_program(name, mb, a), "flops": model_flops(spec, mb),
         "tokens_per_iter": mb * spec.seq_length}
    helptext = subprocess.run([c["train"], "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True).stdout
    c["bf16"] = a.megac_bf16 == "on" or (a.megac_bf16 == "auto" and "--bf16" in helptext)

    # Set-up (not timed): data, shared initial weights, what the device is.
    t0 = time.monotonic()
    err = attempt([a.python, TORCH_SIDE, "init", "--spec", c["spec"], "--data-path", c["data"], "--load", c["init"],
                   "--samples", str((c["warmup"] + c["iters"]) * mb), "--device", a.device, "--out", w("info.json")],
                  w("init.log"), a.run_timeout)
    if err:
        sys.exit(f"error: {name}: set-up failed ({err}); see {w('init.log')}")
    info = json.load(open(w("info.json")))
    gpu = info.get("gpu", "")
    c["peak"] = a.peak_tflops or next((v for k, v in PEAKS if k in gpu and "PCIe" not in gpu and "NVL" not in gpu),
                                      None)
    if not c["peak"]:
        sys.exit(f"error: no bf16 peak known for {gpu or a.device!r}: pass --peak-tflops")
    log(f"bench: {name}: {millions(info['params'])} parameters, micro batch {mb} x seq {spec.seq_length}, "
        f"{c['flops'] / 1e12:.3g} TFLOP per iteration; {c['warmup']} warm-up + {c['iters']} measured x "
        f"{a.rounds} round(s); megac {'bf16' if c['bf16'] else 'fp32 (OUT/train has no --bf16)'}; "
        f"set-up {time.monotonic() - t0:.0f} s")

    sides = ["megac", "torch"] + (["compile"] if a.compile else [])
    runs, errors, failed = {s: [] for s in sides}, {}, False
    for rnd in range(a.rounds):
        for side in sides if rnd % 2 == 0 else sides[::-1]:
            if side in errors:  # failed before: do not spend the time again
                continue
            if busy_gpu_processes():
                log(f"bench: WARNING: other processes on the GPU: {busy_gpu_processes()}")
            out = w(f"{side}-{rnd}.json")
            if os.path.exists(out):  # OUT/train appends to a metrics file
                os.remove(out)
            t0, mem = time.monotonic(), MemorySampler()
            err = attempt(side_command(side, c, a, out), w(f"{side}-{rnd}.log"),
                          a.compile_timeout if side == "compile" else a.run_timeout)
            gib = mem.stop()
            if err:
                errors[side] = err
                log(f"bench: {name} {side}: FAILED ({err}); log {w(f'{side}-{rnd}.log')}")
                failed |= side != "compile"  # torch.compile is optional
                continue
            got = {"records": read_metrics(out)} if side == "megac" else json.load(open(out))
            got["gpu_memory_gib"] = gib
            runs[side].append(got)
            log(f"bench: {name} {side:7s} round {rnd + 1}: "
                f"{median_over(got['records'], c['warmup'], 'tokens_per_s'):.0f} tokens/s median, "
                f"run {time.monotonic() - t0:.0f} s")

    row = {"config": name, "params": info["params"], "micro_batch": mb, "seq": spec.seq_length,
           "megac_precision": "bf16" if c["bf16"] else "fp32", "flops_per_iter": c["flops"],
           "peak_tflops": c["peak"], "warmup": c["warmup"], "iters": c["iters"], "rounds": a.rounds}
    for side in sides:
        row[side] = {"error": errors[side]} if side in errors else summarize(runs[side], c)
    m, t = row["megac"], row["torch"]
    if "error" not in m and "error" not in t:
        row["ratio"] = m["tokens_per_s"] / t["tokens_per_s"]
        diff = abs(m["first_loss"] - t["first_loss"]) / abs(t["first_loss"])
        row["loss_check"] = f"{m['first_loss']:.4f} vs {t['first_loss']:.4f}" + \
            ("" if diff < 2e-2 else " (MISMATCH: the two runs may not train the same model)")
    return row, info, failed


def main(argv):
    a = parse_args(argv)
    if a.docs_from:
        write_docs(open(a.docs_from).read().rstrip("\n"))
        return 0
    sys.path.insert(0, REFERENCE)
    from spec import load_spec  # needs PyYAML: the GPU image has it

    tmp = None if a.keep else tempfile.TemporaryDirectory(prefix="megac-gpu-bench-")
    work = os.path.abspath(a.keep) if a.keep else tmp.name
    os.makedirs(work, exist_ok=True)
    os.makedirs(a.out_dir, exist_ok=True)
    rows, info, failed = [], {}, False
    for name in a.names:
        row, info, bad = run_config(name, a, work, load_spec)
        rows.append(row)
        failed |= bad
        # After every config: a call stopped at its time limit keeps what was measured.
        md = markdown(rows, info, a, argv)
        with open(os.path.join(a.out_dir, "gpu_bench.md"), "w") as f:
            f.write(md + "\n")
        with open(os.path.join(a.out_dir, "gpu_bench.json"), "w") as f:
            json.dump({"rows": rows, "info": info, "argv": argv}, f, indent=1)
    print("\n" + md)
    log(f"bench: wrote gpu_bench.md and gpu_bench.json to {a.out_dir}")
    if a.write_docs:
        write_docs(md)
    if tmp:
        tmp.cleanup()
    return 1 if failed else 0


def markdown(rows, info, a, argv):
    def cell(s, key, fmt):
        return fmt.format(s[key]) if "error" not in s and s.get(key) is not None else "—"
    lines = ["| model | micro batch | megac precision | megac tokens/s | megac MFU | PyTorch bf16 tokens/s | "
             "PyTorch MFU | megac / PyTorch |" + (" torch.compile tokens/s | torch.compile MFU |" if a.compile else ""),
             "|---|---:|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if a.compile else "")]
    for r in rows:
        m, t = r["megac"], r["torch"]
        line = (f"| GPT-2 {r['config']} ({millions(r['params'])}) | {r['micro_batch']} | {r['megac_precision']} | "
                f"{cell(m, 'tokens_per_s', '{:.0f}')} | {cell(m, 'mfu', '{:.1%}')} | {cell(t, 'tokens_per_s', '{:.0f}')} | "
                f"{cell(t, 'mfu', '{:.1%}')} | " + (f"**{r['ratio']:.2f}x** |" if "ratio" in r else "— |"))
        if a.compile:
            c = r["compile"]
            line += f" {cell(c, 'tokens_per_s', '{:.0f}')} | {cell(c, 'mfu', '{:.1%}')} |"
        lines.append(line)
    lines.append("")
    gpu = info.get("gpu", a.device)
    lines.append(f"- date: {datetime.date.today().isoformat()}; megac commit {git_rev()}; "
                 f"{gpu} ({info.get('memory_gib', '?')} GiB, sm {info.get('sm', '?')}); PyTorch {info.get('torch')} "
                 f"(CUDA {info.get('cuda')})")
    for r in rows:
        m, t = r["megac"], r["torch"]
        errs = [f"{side} failed: {r[side]['error']}" for side in ("megac", "torch", "compile")
                if side in r and "error" in r[side]]
        parts = [f"{r['flops_per_iter'] / 1e12:.3g} TFLOP/iteration, peak {r['peak_tflops']:.0f} TFLOP/s",
                 f"{r['warmup']} warm-up + {r['iters']} measured iterations x {r['rounds']} round(s)"]
        for side, label in (("megac", "megac"), ("torch", "PyTorch"), ("compile", "torch.compile")):
            s = r.get(side)
            if s and "error" not in s:
                extra = [f"per-round tokens/s {' / '.join(f'{x:.0f}' for x in s['per_round'])}"]
                if s.get("gpu_memory_gib"):
                    extra.append(f"GPU memory {s['gpu_memory_gib']} GiB (nvidia-smi)")
                if s.get("runtime_tflops"):
                    extra.append(f"{s['tflops']:.3g} TFLOP/s here, {s['runtime_tflops']:.3g} in its own metrics")
                if s.get("attention"):
                    extra.append(f"attention {s['attention']}, AdamW {s['optimizer']}")
                parts.append(f"{label}: {', '.join(extra)}")
        if "loss_check" in r:
            parts.append(f"iteration-1 loss megac vs PyTorch {r['loss_check']}")
        lines.append(f"- {r['config']}: " + "; ".join(parts + errs))
    lines.append(f"- command: `{shlex.join(['python3', 'bench/gpu_vs_pytorch.py'] + argv)}`")
    return "\n".join(lines)


def write_docs(md):
    replace_docs_block(DOCS, BEGIN, END, md)
    log(f"bench: wrote the results into {DOCS}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
