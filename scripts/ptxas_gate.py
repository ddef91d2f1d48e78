#!/usr/bin/env python3
"""The CUDA kernels' resource gate (issue [21]), from ptxas's own report (`nvcc -Xptxas -v`, one
file per .cu, written by the build: runtime/cuda/CMakeLists.txt, target ptxas-reports):

- no spills: 0 bytes spill stores and 0 bytes spill loads in every function;
- static shared memory within sm_90's 48 KiB per block (dynamic shared memory is the launch's:
  kernels_attention.cu static_asserts it against sm_90's 227 KiB);
- registers within the 255 a thread can hold.

    python3 scripts/ptxas_gate.py REPORT_DIR [--arch sm_90]

Prints one line per violation and a summary (kernels, the most registers and static shared memory,
and which kernel), exits 1 on a violation or on a report with no function in it (a failed compile).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

STATIC_SMEM_LIMIT = 48 * 1024  # bytes per block without the dynamic opt-in (every sm_XX since sm_20)
REGISTER_LIMIT = 255

ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '(sm_\d+)'")
PROPERTIES = re.compile(r"ptxas info\s*: Function properties for (\S+)")
SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"ptxas info\s*: Used (\d+) registers(?:.*?, (\d+) bytes smem)?")


def read_report(path, arch):
    """[(function, spill stores, spill loads, registers or None, smem or None)] of one report."""
    functions = {}

    def properties(name):
        return functions.setdefault(name, {"stores": 0, "loads": 0, "registers": None, "smem": None})

    current = None  # the function the next lines describe
    entry = None    # the entry function being compiled for `arch`
    in_arch = True  # whether the lines are of `arch`'s compile (the last entry function's)
    for line in open(path, errors="replace"):
        if m := ENTRY.search(line):
            in_arch = m.group(2) == arch
            entry = m.group(1) if in_arch else None
            continue
        if m := PROPERTIES.search(line):
            current = m.group(1) if in_arch else None
            continue
        if (m := SPILLS.search(line)) and current:
            f = properties(current)
            f["stores"], f["loads"] = int(m.group(2)), int(m.group(3))
            continue
        if (m := USED.search(line)) and entry:
            f = properties(entry)
            f["registers"], f["smem"] = int(m.group(1)), int(m.group(2) or 0)
            entry = None
    return functions


def readable(names):
    """C++ names for the mangled ones (c++filt where it is installed)."""
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reports", help="the directory of ptxas reports (*.txt)")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    files = sorted(f for f in os.listdir(args.reports) if f.endswith(".txt"))
    if not files:
        sys.exit(f"ptxas gate: no report (*.txt) in {args.reports}; build the ptxas-reports target first")
    violations, kernels = [], 0
    most_registers, most_smem = (0, ""), (0, "")
    for name in files:
        functions = read_report(os.path.join(args.reports, name), args.arch)
        names = readable(list(functions))
        functions = {names[f]: p for f, p in functions.items()}
        entries = {f: p for f, p in functions.items() if p["registers"] is not None}
        if not entries:
            violations.append(f"{name}: no kernel compiled for {args.arch} (a failed compile? the report is "
                              f"{os.path.join(args.reports, name)})")
        kernels += len(entries)
        for function, p in functions.items():
            where = f"{name}: {function}"
            if p["stores"] or p["loads"]:
                violations.append(f"{where}: {p['stores']} bytes spill stores, {p['loads']} bytes spill loads "
                                  "(none allowed: fewer live values or a smaller tile)")
            if p["registers"] is None:
                continue
            if p["registers"] > REGISTER_LIMIT:
                violations.append(f"{where}: {p['registers']} registers, more than {REGISTER_LIMIT}")
            if p["smem"] > STATIC_SMEM_LIMIT:
                violations.append(f"{where}: {p['smem']} bytes of static shared memory, more than {args.arch}'s "
                                  f"{STATIC_SMEM_LIMIT} per block (use dynamic shared memory, opted in)")
            most_registers = max(most_registers, (p["registers"], function))
            most_smem = max(most_smem, (p["smem"], function))
    for v in violations:
        print(f"FAIL {v}")
    print(f"ptxas gate ({args.arch}): {kernels} kernels in {len(files)} files; {len(violations)} violations; "
          f"most registers {most_registers[0]} ({most_registers[1]}), most static shared memory "
          f"{most_smem[0]} bytes ({most_smem[1]})")
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    main()
