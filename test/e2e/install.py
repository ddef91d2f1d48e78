"""An installed megac works without the trees it was built from.

    install.py --build BUILD --source SRC

Installs BUILD into a temporary prefix P (`cmake --install`), then checks that P/bin/megac
--print-paths resolves every path under P and none in SRC or BUILD, and, from a folder outside
both, with both hidden (empty file systems mounted over them in a private mount namespace, where
the system allows one: root, or user namespaces): megac data with the byte tokenizer; megac
compile of P's examples/gpt2-tiny.yaml, which builds OUT/train against P's runtime; 2 training
iterations; megac generate from the checkpoint (P's tokenizer script); where megac was built with
CUDA, megac compile --target cuda (P's CUDA runtime); megac simulate --cluster dgx-h100 (P's
clusters/). Everything it writes is in P and the folder, removed at the end.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

# A few paragraphs of text for the byte tokenizer: enough 33-byte samples for 2 iterations.
TEXT = "The quick brown fox jumps over the lazy dog. " * 40


def inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder + os.sep)


def hiding_command(trees):
    """A command prefix that runs a command with each of `trees` replaced by an empty tmpfs, or
    None where this system refuses a private mount namespace."""
    # Inner trees first: once the outer one is covered the inner path no longer exists.
    trees = sorted({os.path.realpath(t) for t in trees}, key=len, reverse=True)
    mounts = " && ".join(f"mount -t tmpfs megac-hidden '{t}'" for t in trees)
    script = f"{mounts} && exec \"$@\""
    for unshare in (["unshare", "--mount"], ["unshare", "--mount", "--map-root-user"]):
        cmd = unshare + ["sh", "-c", script, "sh"]
        probe = subprocess.run(cmd + ["test", "!", "-e", os.path.join(trees[-1], "CMakeLists.txt")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if probe.returncode == 0:
            return cmd
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="the build tree to install from")
    ap.add_argument("--source", required=True, help="the source tree it was built from")
    a = ap.parse_args()
    trees = [a.build, a.source]

    work = tempfile.mkdtemp(prefix="megac-install-")
    if any(inside(work, t) for t in trees):
        sys.exit(f"install: the temporary folder {work} is inside a tree it must hide; set TMPDIR elsewhere")
    prefix, cwd = os.path.join(work, "prefix"), os.path.join(work, "run")
    os.makedirs(cwd)
    megac = os.path.join(prefix, "bin", "megac")
    hide = hiding_command(trees)
    env = {k: v for k, v in os.environ.items() if k != "MEGAC_PYTHON"}  # the installed default
    env.update({"OMP_NUM_THREADS": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "MEGAC_CACHE_DIR": os.path.join(work, "cache")})  # generate's programs: not in the home folder

    def run(cmd, hidden=True):
        full = (hide or []) + cmd if hidden else cmd
        result = subprocess.run(full, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            sys.exit(f"install: failed ({result.returncode}): {' '.join(cmd)}\n{result.stdout[-3000:]}")
        return result.stdout

    try:
        run(["cmake", "--install", a.build, "--prefix", prefix], hidden=False)

        # Every resolved path lies in P; the Python (not installed) is outside the trees.
        paths = dict(line.split(": ", 1) for line in run([megac, "--print-paths"]).splitlines())
        if paths.get("layout") != "installed":
            sys.exit(f"install: {megac} --print-paths says layout {paths.get('layout')!r}, not 'installed'")
        for name, path in paths.items():
            if name in ("layout", "tokenizer-python") or path == "(none)":
                continue
            if not inside(path, prefix):
                sys.exit(f"install: {name} is {path}, outside the prefix {prefix}")
            if not os.path.exists(path):
                sys.exit(f"install: {name} is {path}, which the install did not make")
        if paths["python-env"] != "(none)" or any(inside(paths["tokenizer-python"], t) for t in trees):
            sys.exit(f"install: the installed megac runs Python from a tree: {paths}")

        with open(os.path.join(cwd, "text.txt"), "w") as f:
            f.write(TEXT)
        run([megac, "data", "--input", "text.txt", "--output-prefix", "corpus"])
        spec = os.path.join(prefix, "share", "megac", "examples", "gpt2-tiny.yaml")
        run([megac, "compile", spec, "--micro-batch-size", "2", "-o", "out"])
        with open(os.path.join(cwd, "out", "CMakeLists.txt")) as f:
            if os.path.join(prefix, "share", "megac", "runtime") not in f.read():
                sys.exit("install: OUT/CMakeLists.txt does not build the installed runtime's source")
        trained = run(["out/train", "--data-path", "corpus", "--train-iters", "2", "--global-batch-size", "2",
                       "--lr", "1e-3", "--save", "ckpt"])
        if "iteration        2/       2" not in trained:
            sys.exit(f"install: OUT/train did not log iteration 2:\n{trained[-2000:]}")
        generated = run([megac, "generate", "ckpt", "--prompt", "The", "--max-new-tokens", "4", "--top-k", "1"])
        # stderr says whether the program was compiled or reused; the continuation is on a line of its own
        if not any(line.startswith("The") for line in generated.splitlines()):
            sys.exit(f"install: megac generate printed no continuation of the prompt:\n{generated}")
        if paths["cuda-runtime-library"] != "(none)":  # built with the CUDA toolkit: nvcc and P's CUDA runtime
            run([megac, "compile", spec, "--target", "cuda", "--micro-batch-size", "2", "-o", "out-cuda"])
        simulated = run([megac, "simulate", spec, "--cluster", "dgx-h100", "--global-batch-size", "8"])
        if "dgx-h100" not in simulated:
            sys.exit(f"install: megac simulate does not name the cluster:\n{simulated}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    how = "with the source and build trees hidden" if hide else \
        "with the trees in place (no private mount namespace here: --print-paths checked alone)"
    print(f"install: the installed megac compiled, trained 2 iterations, generated and simulated {how}")


if __name__ == "__main__":
    main()
