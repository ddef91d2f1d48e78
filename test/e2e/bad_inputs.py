"""The catalogue of bad inputs: every case (bad_inputs/*_cases.py) must exit non-zero (not by a
signal) without hanging, print a message matching its regex (naming the flag, key or file, the
value and the fix), print no sanitizer report, and leave nothing half-written: none of its
`absent` paths, and no temporary (*.tmp.*) anywhere in its scratch folder."""
import argparse
import glob
import importlib
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from e2e_util import MPI_ENV, make_license_corpus, run  # noqa: E402
from bad_inputs import files  # noqa: E402

# A hang guard, not a speed check: cases take 0.03 s (median) to 0.5 s (the slowest) on 2 cores.
TIME_LIMIT = 10.0
MINIMUM = 60
SANITIZER = re.compile(r"ERROR: (Address|Leak|Memory|Thread)Sanitizer|runtime error: |UndefinedBehaviorSanitizer")


class Context(dict):
    def fill(self, text, scratch):
        return text.format(scratch=scratch, **self) if isinstance(text, str) else text


def prepare(args):
    w = lambda *p: os.path.join(os.path.abspath(args.workdir), *p)
    args.megac, args.megac_opt = os.path.abspath(args.megac), os.path.abspath(args.megac_opt)
    args.spec, args.workdir = os.path.abspath(args.spec), os.path.abspath(args.workdir)
    ctx = Context(megac=args.megac, megac_opt=args.megac_opt, spec=args.spec, data=w("corpus"),
                  train=w("gpt2", "train"), train_dp2=w("gpt2-dp2", "train"), ckpt=w("ckpt"),
                  train_lora=w("gpt2-lora", "train"), lora_ckpt=w("lora-ckpt"), train_bert=w("bert", "train"),
                  source=os.path.dirname(os.path.dirname(HERE)))
    make_license_corpus(args.megac, w("corpus"))
    for name, plan in (("gpt2", []), ("gpt2-dp2", ["--dp", "2"]), ("gpt2-lora", ["--lora-rank", "2"])):
        # A sanitized megac links OUT/train with its sanitized runtime, under the same flags.
        run([args.megac, "compile", args.spec, "--micro-batch-size", "2", *plan, "-o", w(name)])
    run([args.megac, "compile", os.path.join(HERE, "specs", "bert-pp.yaml"), "--micro-batch-size", "2", "-o",
         w("bert")])
    shutil.rmtree(w("ckpt"), ignore_errors=True)
    # Two iterations, both saved: files of one can be swapped into the other.
    run([w("gpt2", "train"), "--data-path", w("corpus"), "--train-iters", "2", "--lr", "1e-3", "--save", w("ckpt"),
         "--save-interval", "1"])
    shutil.rmtree(w("lora-ckpt"), ignore_errors=True)  # LoRA on the checkpoint above
    run([w("gpt2-lora", "train"), "--data-path", w("corpus"), "--train-iters", "2", "--lr", "1e-3", "--load", w("ckpt"),
         "--save", w("lora-ckpt")])
    return ctx


def check(case, ctx, scratch):
    """Runs one case; returns a list of what was wrong."""
    os.makedirs(scratch)
    for rel, content in case.files.items():
        path = os.path.join(scratch, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if isinstance(content, files.Special):
            content.make(path, lambda text: ctx.fill(text, scratch))
            continue
        content = content(ctx) if callable(content) else content
        with open(path, "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())
    argv = [ctx.fill(a, scratch) for a in case.argv]
    # megac generate compiles into its own cache here, not the user's (~/.cache/megac).
    env = {**os.environ, "MEGAC_CACHE_DIR": os.path.join(scratch, "megac-cache"),
           **{k: ctx.fill(v, scratch) for k, v in case.env.items()}}
    start = time.time()
    try:
        p = subprocess.run(argv, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=TIME_LIMIT)
        out, code = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        return [f"still running after {TIME_LIMIT:.0f} s"], (e.stdout or b"").decode(errors="replace"), TIME_LIMIT
    seconds = time.time() - start
    problems = []
    if code == 0:
        problems.append("exit code 0")
    elif code < 0:
        problems.append(f"killed by signal {-code}")
    if not re.search(case.expect, out):
        problems.append(f"output does not match /{case.expect}/")
    if SANITIZER.search(out):
        problems.append("sanitizer report")
    for rel in case.absent:
        if os.path.lexists(ctx.fill(rel, scratch)):
            problems.append(f"left {rel}")
    temps = [os.path.relpath(p, scratch) for p in glob.glob(os.path.join(scratch, "**", "*.tmp.*"), recursive=True)]
    if temps:
        problems.append(f"left temporaries {temps}")
    return problems, out, seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--megac-opt", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", help="run only cases whose name contains this")
    ap.add_argument("--sanitize", action="store_true",
                    help="megac, megac-opt and their OUT/train are built under ASan + UBSan: abort on a report "
                         "(the sanitizer check runs this)")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    if args.sanitize:  # a report aborts the case, so it shows as a signal and a report
        # allow_user_poisoning=0: LLVM's allocator poisons in inline code that our instrumented
        # compiler and Debian's uninstrumented libMLIR share (scripts/sanitizer_check.sh says why).
        os.environ["ASAN_OPTIONS"] = "abort_on_error=1:detect_leaks=1:allow_user_poisoning=0"
        os.environ["UBSAN_OPTIONS"] = "print_stacktrace=1"
    ctx = prepare(args)
    cases = []
    for path in sorted(glob.glob(os.path.join(HERE, "bad_inputs", "*_cases.py"))):
        module = importlib.import_module("bad_inputs." + os.path.basename(path)[:-3])
        cases += module.cases()
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    failures = [f"duplicate case names {duplicates}"] if duplicates else []
    scratch_root = os.path.join(args.workdir, "cases")
    shutil.rmtree(scratch_root, ignore_errors=True)
    areas, failed, times = {}, 0, []
    for i, case in enumerate(cases):
        if args.only and args.only not in case.name:
            continue
        problems, out, seconds = check(case, ctx, os.path.join(scratch_root, f"{i:03d}"))
        times.append(seconds)
        areas[case.area] = areas.get(case.area, 0) + 1
        first_error = next((l for l in out.splitlines() if "error" in l.lower()), out.strip()[:200])
        print(f"{'ok  ' if not problems else 'FAIL'} [{case.area}] {case.name}: {first_error[:160]}")
        if problems:
            failed += 1
            failures.append(f"{case.name}: {'; '.join(problems)}\n    output: {out[-1500:]}")
    total = sum(areas.values())
    if times:
        times.sort()
        print(f"seconds a case: median {times[len(times) // 2]:.2f}, slowest {times[-1]:.2f} "
              f"(a case still running after {TIME_LIMIT:.0f} s is a hang)")
    print(f"{total} bad inputs over {len(areas)} areas: " + ", ".join(f"{a} {n}" for a, n in sorted(areas.items())))
    if not args.only and total < MINIMUM:
        failures.append(f"the catalogue has {total} cases; the issue asks for at least {MINIMUM}")
    for f in failures:
        print("FAIL: " + f)
    print(f"{total - failed} passed, {failed} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
