"""What the end-to-end scripts share: running a command or failing loudly, the training flags
of the parity checks, reading and comparing metrics files, and the corpus every Debian machine
has."""
import atexit
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile


# mpirun as root (CI's containers), more ranks than cores, one OpenMP thread per rank, and Open
# MPI's ob1 messaging, which starts a job in 0.1 s where UCX takes 0.3 s (the tests start hundreds).
# Each test script's mpiruns keep their session folders in a folder of its own: two tests running
# at once (ctest -j2) shared /tmp/ompi.<host>.<uid>, and one mpirun's cleanup could remove it while
# the other's created its session there ("A call to mkdir was unable to create the desired
# directory").
_MPI_SESSIONS = tempfile.mkdtemp(prefix="megac-ompi-")
atexit.register(shutil.rmtree, _MPI_SESSIONS, True)
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMP_NUM_THREADS": "1", "OMPI_MCA_pml": "ob1",
           "OMPI_MCA_orte_tmpdir_base": _MPI_SESSIONS}


# OUT/train flags of the parity and precision checks: 10 iterations of global batch 8.
TRAIN = ["--train-iters", "10", "--global-batch-size", "8", "--lr", "1e-3", "--min-lr", "1e-4",
         "--lr-decay-style", "cosine", "--lr-warmup-iters", "2", "--weight-decay", "0.1",
         "--clip-grad", "1.0", "--no-shuffle"]


def train_flags(steps, lr=None):
    """TRAIN with --train-iters `steps` (and --lr `lr` with --min-lr 0 when given)."""
    flags = list(TRAIN)
    flags[flags.index("--train-iters") + 1] = str(steps)
    if lr is not None:
        flags[flags.index("--lr") + 1] = lr
        flags[flags.index("--min-lr") + 1] = "0"
    return flags


def relative(a, b):
    return abs(a - b) / max(abs(b), 1e-12)


def run(cmd, env=None):
    """Runs cmd; exits with its output if it fails."""
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})
    if result.returncode != 0:
        sys.exit(f"command failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout[-3000:]}")
    return result.stdout


def metrics(path):
    """The per-iteration objects of an OUT/train --metrics-file."""
    with open(path) as f:
        return [json.loads(line) for line in f]


def make_license_corpus(megac, prefix):
    """/usr/share/common-licenses (read at run time, nothing downloaded) as a byte-level dataset."""
    cmd = [megac, "data", "--split-paragraphs", "--output-prefix", prefix]
    for path in sorted(glob.glob("/usr/share/common-licenses/*")):
        if os.path.isfile(path) and not os.path.islink(path):
            cmd += ["--input", path]
    run(cmd)


def license_files():
    return [p for p in sorted(glob.glob("/usr/share/common-licenses/*")) if os.path.isfile(p) and not os.path.islink(p)]


def make_wordpiece_corpus(megac, prefix, vocab_size=2000):
    """The license texts as a WordPiece dataset (`megac data --tokenizer-type BertWordPieceLowerCase`)
    over a vocabulary made here without a library: BERT's special tokens, every character alone and
    as a ##continuation, then the most frequent lower-cased words. Returns the vocab file."""
    import collections
    import re as _re
    words, chars = collections.Counter(), set()
    for path in license_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read().lower()
        words.update(_re.findall(r"[a-z0-9]+", text))
        chars.update(c for c in text if not c.isspace())
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += sorted(chars) + ["##" + c for c in sorted(chars)]
    vocab += [w for w, _ in words.most_common() if len(w) > 1][:max(0, vocab_size - len(vocab))]
    path = prefix + "-vocab.txt"
    with open(path, "w") as f:
        f.write("\n".join(vocab) + "\n")
    cmd = [megac, "data", "--tokenizer-type", "BertWordPieceLowerCase", "--vocab-file", path, "--split-paragraphs",
           "--output-prefix", prefix]
    for text in license_files():
        cmd += ["--input", text]
    run(cmd)
    return path


def make_corpus_for(megac, spec, prefix):
    """The corpus a spec trains on: WordPiece (with [MASK]) for a masked LM (BERT), else the
    license texts' bytes."""
    import yaml
    with open(spec) as f:
        family = yaml.safe_load(f).get("family")
    if family in ("bert", "megatron_bert"):
        make_wordpiece_corpus(megac, prefix)
    else:
        make_license_corpus(megac, prefix)


def library_check_args(doc, library):
    """The command line of the checks of OUT/train against a library in build/pyenv (--megac,
    --python: build/pyenv's, --spec, --workdir); makes the work folder and the license corpus in
    it. Returns (args, corpus prefix)."""
    import argparse
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--megac", required=True)
    ap.add_argument("--python", required=True, help=f"build/pyenv's python ({library} installed)")
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    corpus = os.path.join(a.workdir, "corpus")
    make_license_corpus(a.megac, corpus)
    return a, corpus


# Runs under a library's python (build/pyenv) for the life of a test script: each line on stdin
# is a job {code, args}, run as `python -c code args...` would run it (sys.argv, __main__, its
# stdout captured), answered by one line {stdout} or {error}. torch and transformers import once
# (about 4 s) instead of once per check: e2e-hf-folders makes 26 such calls.
_WORKER = r"""
import contextlib, io, json, os, sys, traceback
# Replies on a descriptor of their own: what a library writes to descriptor 1 from C goes to stderr.
replies = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
for line in sys.stdin:
    job = json.loads(line)
    sys.argv = ["-c"] + job["args"]
    out, err = io.StringIO(), io.StringIO()
    reply = {}
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(job["code"], "<python_json>", "exec"), {"__name__": "__main__"})
    except SystemExit as e:
        if e.code not in (None, 0):
            reply["error"] = f"{err.getvalue()[-2000:]}exit: {e.code}"
    except BaseException:
        reply["error"] = err.getvalue()[-2000:] + traceback.format_exc()
    reply["stdout"] = out.getvalue()
    replies.write(json.dumps(reply) + "\n")
    replies.flush()
"""
_workers = {}


def _worker(python):
    proc = _workers.get(python)
    if proc is None or proc.poll() is not None:
        proc = subprocess.Popen([python, "-c", _WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        _workers[python] = proc
        atexit.register(proc.kill)
    return proc


def python_json(python, code, args, what):
    """Runs `code` under `python` with `args` (in one worker process per python, see _WORKER) and
    returns the JSON it prints; exits naming `what` with its errors if it fails."""
    proc = _worker(python)
    proc.stdin.write(json.dumps({"code": code, "args": [str(a) for a in args]}) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        sys.exit(f"{what} failed: the {python} worker ended (exit {proc.wait()})")
    reply = json.loads(line)
    if "error" in reply:
        sys.exit(f"{what} failed:\n{reply['error'][-3000:]}")
    return json.loads(reply["stdout"])


def compare_metrics(test_path, ref_path, tolerance, names, what, keys=("lm_loss", "grad_norm"), steps=10):
    """Per-step relative difference of `keys` between two --metrics-file outputs, which must both
    hold `steps` iterations. Returns (ok, report): cuda_parity.py, mixed_precision.py and
    scripts/gpu_compare.py (the GPU session) share it."""
    test, ref = metrics(test_path), metrics(ref_path)
    if len(test) != steps or len(ref) != steps:
        return False, f"expected {steps} iterations each, got {names[0]} {len(test)} {names[1]} {len(ref)}"
    lines, worst, failed = [], 0.0, False
    for a, b in zip(test, ref):
        for key in keys:
            if a[key] is None or b[key] is None:  # the metrics file writes NaN as null
                failed = True
                lines.append(f"iteration {b['iteration']}: {key} {names[0]} {a[key]} {names[1]} {b[key]}")
                continue
            err = relative(a[key], b[key])
            worst = max(worst, err)
            if err > tolerance:
                failed = True
                lines.append(f"iteration {b['iteration']}: {key} {names[0]} {a[key]:.9g} {names[1]} {b[key]:.9g} "
                             f"(rel {err:.2e})")
    lines.append(f"{what}, {steps} steps: worst relative difference {worst:.2e} (tolerance {tolerance:g})")
    return not failed, "\n".join(lines)


def dropout_free_spec(source, path):
    """Copies the spec `source` to `path` with hidden and attention dropout 0 (a training step's
    forward is then the eval-mode model libraries compare with); returns its seq_length."""
    with open(source) as f, open(path, "w") as g:
        g.write(f.read() + "\nhidden_dropout: 0.0\nattention_dropout: 0.0\n")
    return next(int(line.split(":")[1]) for line in open(path) if line.startswith("seq_length:"))
