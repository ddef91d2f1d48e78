"""Exact resume: 20 iterations straight against 10 (stopped by --exit-interval, saved) plus 10
resumed with --load. Iterations 11-20 must give bit-identical losses and grad norms, and the
iteration-20 checkpoints bit-identical weights, AdamW moments and training state, for each plan
and precision given: shuffled data, warmup + cosine, clipping, gradient accumulation (4
microbatches per dp rank on one rank, 2 with dp 2), programs compiled with --bf16 (16-bit
activations) and with --fp16 (dynamic loss scaling, a short window, so the scale grows, overflows and backs off within the run).

Then resume across plans: the checkpoint tp2 x pp2 saved at iteration 10 is resumed at each
--cross plan; iterations 11-20 must equal the straight single-rank run within 1e-5 relative."""
import argparse
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_util import MPI_ENV, make_corpus_for, metrics, relative, run  # noqa: E402
from plan_parity import plan_flags  # noqa: E402

GLOBAL_BATCH = "8"
TRAIN = ["--train-iters", "20", "--global-batch-size", GLOBAL_BATCH, "--lr", "2e-3", "--min-lr", "2e-4",
         "--lr-decay-style", "cosine", "--lr-warmup-iters", "3", "--weight-decay", "0.1",
         "--clip-grad", "0.5", "--seed", "5", "--log-interval", "5"]
PRECISION = {
    "bf16": ["--bf16"],
    # From 2^20 doubling every 2 clean iterations: overflows (skips) and back-offs happen in the run.
    "fp16": ["--fp16", "--initial-loss-scale", "1048576", "--loss-scale-window", "2", "--hysteresis", "2"],
    "fp32": [],
}
CROSS_TOLERANCE = 1e-5


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def state_without_args(path):
    """train_state.json less "args" (the flags differ: --load, --exit-interval)."""
    with open(path) as f:
        state = json.load(f)
    state.pop("args")
    return state


class Runner:
    def __init__(self, megac, spec, workdir):
        self.megac, self.spec, self.workdir = megac, spec, workdir
        self.programs = {}

    def w(self, *p):
        return os.path.join(self.workdir, *p)

    def program(self, plan, precision):
        """OUT/train for `plan` ('single' or plan_parity's names) in `precision`, compiled once."""
        if (plan, precision) not in self.programs:
            flags, world = ([], 1) if plan == "single" else plan_flags(plan)
            if "--global-batch-size" in flags:  # plan_parity's batch; ours is GLOBAL_BATCH
                i = flags.index("--global-batch-size")
                flags = flags[:i] + flags[i + 2:]
            if "--pp" in flags:
                flags += ["--global-batch-size", GLOBAL_BATCH]
            if precision != "fp32":  # compiled in; the run flag must then agree
                flags += ["--" + precision]
            out = self.w(f"prog-{plan.replace(':', '-')}-{precision}")
            run([self.megac, "compile", self.spec, "--micro-batch-size", "2", "-o", out] + flags)
            self.programs[(plan, precision)] = (os.path.join(out, "train"), world)
        return self.programs[(plan, precision)]

    def train(self, plan, name, extra, precision="fp32"):
        """Runs `plan`'s `precision` program with TRAIN + extra, metrics in NAME.jsonl; returns the log."""
        binary, world = self.program(plan, precision)
        launch = ["mpirun", "-np", str(world), "--oversubscribe"] if world > 1 else []
        out = run(launch + [binary] + TRAIN + ["--data-path", self.w("corpus"),
                                               "--metrics-file", self.w(name + ".jsonl")] + extra,
                  env=MPI_ENV if world > 1 else {"OMP_NUM_THREADS": "1"})
        with open(self.w(name + ".log"), "w") as f:
            f.write(out)
        return out

    def fresh(self, name):
        shutil.rmtree(self.w(name), ignore_errors=True)
        return self.w(name)


def exact_resume(r, plan, precision):
    tag = f"{plan}-{precision}"
    extra = PRECISION[precision]
    straight, split = r.fresh(tag + "-straight"), r.fresh(tag + "-split")
    r.train(plan, tag + "-straight", extra + ["--save", straight, "--save-interval", "10"], precision)
    first = r.train(plan, tag + "-first", extra + ["--save", split, "--exit-interval", "10"], precision)
    r.train(plan, tag + "-resumed", extra + ["--load", split, "--save", split], precision)
    failures = []
    if "exiting at iteration 10 of 20: --exit-interval 10" not in first:
        failures.append("the first half did not stop at iteration 10")
    a = metrics(r.w(tag + "-straight.jsonl"))[10:]
    b = metrics(r.w(tag + "-resumed.jsonl"))
    if [m["iteration"] for m in b] != list(range(11, 21)):
        failures.append(f"the resumed run logged iterations {[m['iteration'] for m in b]}, not 11-20")
    keys = ["lm_loss", "grad_norm", "lr", "consumed_samples", "skipped_iterations"] + \
        (["loss_scale"] if precision == "fp16" else [])
    for x, y in zip(a, b):
        for k in keys:
            if x.get(k) != y.get(k):
                failures.append(f"iteration {x['iteration']}: {k} straight {x.get(k)!r} resumed {y.get(k)!r}")
    for f in ("model.safetensors", "optimizer.safetensors"):
        if file_bytes(os.path.join(straight, "iter_0000020", f)) != file_bytes(os.path.join(split, "iter_0000020", f)):
            failures.append(f"iteration 20: {f} differs")
    sa = state_without_args(os.path.join(straight, "iter_0000020", "train_state.json"))
    sb = state_without_args(os.path.join(split, "iter_0000020", "train_state.json"))
    if sa != sb:
        failures.append(f"iteration 20: train_state.json differs: {sa} vs {sb}")
    skipped = sum(m["skipped_iterations"] for m in metrics(r.w(tag + "-straight.jsonl")))
    scales = sorted({m.get("loss_scale") for m in a})
    detail = f", {skipped} skipped, loss scales {scales[0]:.0f}..{scales[-1]:.0f}" if precision == "fp16" else ""
    print(f"exact resume {plan} {precision}: iterations 11-20 of 10 + save + 10 vs 20 straight: "
          f"{len(b)} iterations, losses and grad norms {'bit-identical' if not failures else 'DIFFER'}; "
          f"iteration-20 weights, moments and state {'bit-identical' if not failures else 'DIFFER'}{detail}")
    return [f"{tag}: {f}" for f in failures]


def cross_plan(r, source, targets):
    """Saved at `source` after 10 iterations, resumed at each target; compared to single rank."""
    saved = r.fresh(f"cross-{source}")
    r.train(source, f"cross-{source}-first", ["--save", saved, "--exit-interval", "10"])
    reference = metrics(r.w("single-fp32-straight.jsonl"))[10:]
    failures = []
    for target in targets:
        resumed = r.fresh(f"cross-{source}-to-{target}")
        shutil.copytree(saved, resumed)
        r.train(target, f"cross-{source}-to-{target}", ["--load", resumed, "--save", resumed])
        ours = metrics(r.w(f"cross-{source}-to-{target}.jsonl"))
        worst = max(max(relative(x["lm_loss"], y["lm_loss"]), relative(x["grad_norm"], y["grad_norm"]))
                    for x, y in zip(ours, reference))
        ok = [m["iteration"] for m in ours] == list(range(11, 21)) and worst <= CROSS_TOLERANCE
        print(f"resume across plans: saved at {source} (iteration 10), resumed at {target}: iterations 11-20 "
              f"vs single rank straight: max relative difference {worst:.2e} (bound {CROSS_TOLERANCE:g}) "
              f"{'ok' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"cross {source} -> {target}: {worst:.2e}")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--plans", required=True, help="plans for exact resume, e.g. single,tp2pp2dp2")
    ap.add_argument("--precisions", default="bf16,fp16")
    ap.add_argument("--cross-from", default="", help="the plan that saves, e.g. tp2pp2")
    ap.add_argument("--cross-to", default="", help="the plans that resume, e.g. dp2,pp4vpp2,single")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    r = Runner(args.megac, args.spec, args.workdir)
    make_corpus_for(args.megac, args.spec, r.w("corpus"))
    failures = []
    for plan in args.plans.split(","):
        for precision in args.precisions.split(","):
            failures += exact_resume(r, plan, precision)
    if args.cross_from:
        failures += exact_resume(r, "single", "fp32")  # the straight single-rank reference
        failures += cross_plan(r, args.cross_from, args.cross_to.split(","))
    for f in failures:
        print("FAIL: " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
