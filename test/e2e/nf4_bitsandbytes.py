"""NF4 against bitsandbytes (pinned, build/pyenv): megac's quantization (runtime/src/nf4.cpp, by
the megart-nf4 tool) of random weights gives bitsandbytes' packed bytes, block absmax and
double-quantized statistics exactly, and its dequantization bitsandbytes' dequantize_4bit; its
8-bit dynamic map is create_dynamic_map's within 2 ulp (see below).

bitsandbytes 0.47.0 wants torch >= 2.2 and its package does not import over Debian's torch 1.13,
so the test runs the library's own code without its package: the NF4 kernels of its default
backend (backends/default/ops.py, the CPU path of quantize_4bit / dequantize_4bit) executed with
a stand-in for the op registration (and dequantize_4bit's code indices made int64, which torch
1.13 needs to index with), its create_dynamic_map (functional.py), and its compiled CPU
library (libbitsandbytes_cpu.so) for the 8-bit blockwise quantization double quantization uses,
put together as functional.quantize_4bit(compress_statistics=True) does: offset = mean(absmax),
quantize_blockwise(absmax - offset, blocksize=256)."""
import argparse
import ast
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

BLOCK = 64


def bitsandbytes_parts():
    spec = importlib.util.find_spec("bitsandbytes")  # finds the package without importing it
    if spec is None:
        sys.exit("bitsandbytes is not installed: run scripts/python_env.sh (pinned in "
                 "scripts/requirements-test-nodeps.txt)")
    root = os.path.dirname(spec.origin)
    # torch 1.13 has no torch._check; the kernels use it for argument checks only.
    for name in ("_check", "_check_is_size"):
        if not hasattr(torch, name):
            setattr(torch, name, lambda *args, **kwargs: None)
    utils_spec = importlib.util.spec_from_file_location("bnb_backend_utils", os.path.join(root, "backends", "utils.py"))
    utils = importlib.util.module_from_spec(utils_spec)
    utils_spec.loader.exec_module(utils)
    kernels = {}
    source = open(os.path.join(root, "backends", "default", "ops.py")).read()
    source = source.replace("from ..._ops import register_kernel\n", "").replace("from ..utils import CODE\n", "")
    # torch 1.13 indexes with int64 tensors only (torch 2 also takes the int32 codes dequantize_4bit makes).
    patched = source.replace("out_dq = torch.empty(A.size(0) * 2, dtype=torch.int32, device=A.device)",
                             "out_dq = torch.empty(A.size(0) * 2, dtype=torch.int64, device=A.device)")
    if patched == source:
        sys.exit("bitsandbytes/backends/default/ops.py changed: update this test's torch 1.13 patch")
    source = patched
    scope = {"register_kernel": lambda name, device: (lambda f: kernels.setdefault(name, f)), "CODE": utils.CODE,
             "__name__": "bnb_default_ops"}
    exec(compile(source, "bitsandbytes/backends/default/ops.py", "exec"), scope)
    functional = open(os.path.join(root, "functional.py")).read()
    tree = ast.parse(functional)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "create_dynamic_map")
    scope = {"torch": torch}
    exec(compile(ast.Module(body=[node], type_ignores=[]), "bitsandbytes/functional.py", "exec"), scope)
    lib = ctypes.CDLL(os.path.join(root, "libbitsandbytes_cpu.so"))
    return kernels, scope["create_dynamic_map"], lib


def blockwise(lib, fn, code, a, scales, out, blocksize, n):
    ptr = lambda t: ctypes.c_void_p(t.data_ptr())
    getattr(lib, fn)(ptr(code), ptr(a), ptr(scales), ptr(out), ctypes.c_longlong(blocksize), ctypes.c_longlong(n))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nf4-tool", required=True, help="build/runtime/megart-nf4")
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    kernels, create_dynamic_map, lib = bitsandbytes_parts()
    quantize, dequantize = kernels["bitsandbytes::quantize_4bit"], kernels["bitsandbytes::dequantize_4bit"]

    # Weights with a scale per block (so the absmax statistics vary), 4 statistics blocks of 256
    # (the last partial) and a last NF4 block of 32 elements.
    torch.manual_seed(0)
    n = BLOCK * (3 * 256 + 10) + 32
    x = torch.randn(n) * torch.rand(n // BLOCK + 1).repeat_interleave(BLOCK)[:n] * 0.1
    raw = os.path.join(args.workdir, "weights.f32")
    x.numpy().astype("<f4").tofile(raw)
    failures = []

    def check(what, ours, theirs):
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        same = ours.shape == theirs.shape and np.array_equal(ours, theirs)
        differ = "" if same else f" ({int((ours != theirs).sum()) if ours.shape == theirs.shape else 'shape'} differ)"
        print(f"{'ok  ' if same else 'FAIL'} {what}: {theirs.size} values {'equal' if same else 'differ'}{differ}")
        if not same:
            failures.append(what)

    def ours(double, suffix, dtype):
        return np.fromfile(os.path.join(args.workdir, f"nf4-{double}{suffix}"), dtype=dtype)

    for double in (0, 1):
        out = subprocess.run([args.nf4_tool, raw, str(BLOCK), str(double), os.path.join(args.workdir, f"nf4-{double}")],
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"megart-nf4 failed: {out.stderr}")
        print(f"megart-nf4 (double quantization {'on' if double else 'off'}): {out.stdout.strip()}")

    packed, absmax = quantize(x, BLOCK, "nf4", torch.uint8)
    check("packed NF4 bytes", ours(0, ".packed", np.uint8), packed.reshape(-1).numpy())
    check("block absmax", ours(0, ".absmax", np.float32), absmax.numpy())
    dequantized = dequantize(packed, absmax, BLOCK, "nf4", x.shape, torch.float32)
    check("dequantize_4bit", ours(0, ".dequantized", np.float32), dequantized.numpy())

    # create_dynamic_map builds its table with torch.linspace, whose vectorised CPU kernel adds
    # the step lane by lane from a base that depends on the machine's vector width, then takes
    # midpoints: the last two bits are the machine's. megac's table (the scalar linspace) must be
    # within 2 ulp of it, in the same order; the statistics are then checked with
    # megac's table as the code the library's kernels take (bitsandbytes stores the table with
    # the statistics, QuantState.state2.code).
    theirs_map = create_dynamic_map().numpy()
    map_ours = ours(1, ".dynamic_map", np.float32)
    ulps = np.abs(map_ours.view(np.int32).astype(np.int64) - theirs_map.view(np.int32).astype(np.int64))
    ok = map_ours.shape == (256,) and int(ulps.max()) <= 2 and np.all(np.diff(map_ours) > 0)
    print(f"{'ok  ' if ok else 'FAIL'} dynamic map: 256 values ascending, within {int(ulps.max())} ulp of "
          f"create_dynamic_map's on this machine ({int((ulps > 0).sum())} differ in the last bits)")
    if not ok:
        failures.append("dynamic map")
    dynamic = torch.from_numpy(map_ours.copy())
    # The offset is torch's float32 mean of the absmax, a vectorised sum whose last bit depends on
    # the machine's vector width: megac's (a double sum rounded once) must be within 1 ulp, and
    # the library then quantizes megac's offset, so the checks after it are exact on any machine.
    offset_ours = ours(1, ".offset", np.float32)
    offset_ulps = abs(int(offset_ours.view(np.int32)[0]) - int(absmax.mean().reshape(1).numpy().view(np.int32)[0]))
    print(f"{'ok  ' if offset_ulps <= 1 else 'FAIL'} double quantization offset: within {offset_ulps} ulp of "
          f"torch's mean of the absmax")
    if offset_ulps > 1:
        failures.append("double quantization offset")
    offset = torch.from_numpy(offset_ours.copy())[0]
    centred = (absmax - offset).contiguous()
    codes = torch.empty(centred.numel(), dtype=torch.uint8)
    scales = torch.empty((centred.numel() + 255) // 256)
    blockwise(lib, "cquantize_blockwise_cpu_fp32", dynamic, centred, scales, codes, 256, centred.numel())
    check("packed NF4 bytes, double quantization", ours(1, ".packed", np.uint8), packed.reshape(-1).numpy())
    check("double quantization absmax codes", ours(1, ".absmax_codes", np.uint8), codes.numpy())
    check("double quantization scales", ours(1, ".absmax_scales", np.float32), scales.numpy())
    restored = torch.empty(centred.numel())
    blockwise(lib, "cdequantize_blockwise_cpu_fp32", dynamic, codes, scales, restored, 256, centred.numel())
    dequantized = dequantize(packed, restored + offset, BLOCK, "nf4", x.shape, torch.float32)
    check("dequantize_4bit, double quantization", ours(1, ".dequantized", np.float32), dequantized.numpy())
    if failures:
        sys.exit(f"FAIL: {', '.join(failures)}")


if __name__ == "__main__":
    main()
