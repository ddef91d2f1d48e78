"""Compile time is linear in layers: compiles the spec at SMALL and LARGE layers (--no-build,
best of two runs each) and fails if the time grows by more than --max-ratio (linear gives
LARGE / SMALL, quadratic its square). Also checks the larger program's memory plan: no two
buffers alive at the same time overlap in the arena."""
import argparse
import bisect
import os
import re
import subprocess
import sys
import time


def compile_layers(args, layers):
    with open(args.spec) as f:
        text = re.sub(r"(?m)^num_layers:.*$", f"num_layers: {layers}", f.read())
    spec = os.path.join(args.workdir, f"layers{layers}.yaml")
    with open(spec, "w") as f:
        f.write(text)
    out = os.path.join(args.workdir, f"out{layers}")
    best = None
    for _ in range(2):
        start = time.perf_counter()
        subprocess.run([args.megac, "compile", spec, "-o", out, "--no-build"], check=True, stdout=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return best, out


def check_plan(path):
    """Every function's buffers: alive together -> disjoint in memory."""
    functions, current = {}, None
    for line in open(path):
        if m := re.match(r"^@(\S+): (\d+) buffers in (\d+) bytes", line):
            current = functions.setdefault(m.group(1), (int(m.group(3)), []))
        elif current and (m := re.match(r"^\s+\S+\s+offset\s+(\d+)\s+bytes\s+(\d+)\s+ops\s+(\d+)\.\.(\d+)", line)):
            offset, size, first, last = map(int, m.groups())
            current[1].append((first, last, offset, offset + (size + 63) // 64 * 64))
    largest = 0
    for name, (arena, buffers) in functions.items():
        largest = max(largest, len(buffers))
        # Sweep over time: the buffers alive at each step are disjoint, so a new one only needs
        # checking against its neighbours by offset.
        events = sorted([(b[0], 1, i) for i, b in enumerate(buffers)] + [(b[1] + 1, 0, i) for i, b in enumerate(buffers)])
        alive = []  # (begin, end, buffer), by offset
        for _, starts, i in events:
            first, last, begin, end = buffers[i]
            if not starts:
                alive.pop(bisect.bisect_left(alive, (begin, end, i)))
                continue
            if end > arena:
                sys.exit(f"@{name}: buffer {i} ends at {end}, past the arena ({arena} bytes)")
            k = bisect.bisect_left(alive, (begin, end, i))
            for j in (k - 1, k):
                if 0 <= j < len(alive) and begin < alive[j][1] and alive[j][0] < end and end > begin:
                    sys.exit(f"@{name}: buffers {alive[j][2]} and {i} are alive together and overlap in memory")
            alive.insert(k, (begin, end, i))
    return largest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--megac", required=True)
    ap.add_argument("--spec", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--large", type=int, default=4000)
    ap.add_argument("--max-ratio", type=float, default=8.0)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    small, _ = compile_layers(args, args.small)
    large, out = compile_layers(args, args.large)
    buffers = check_plan(os.path.join(out, "memory-plan.txt"))
    ratio = large / small
    print(f"{args.small} layers: {small:.2f} s; {args.large} layers: {large:.2f} s; ratio {ratio:.1f} "
          f"(linear {args.large / args.small:.0f}, quadratic {(args.large / args.small) ** 2:.0f}); "
          f"largest function {buffers} buffers, memory plan consistent")
    if ratio > args.max_ratio:
        sys.exit(f"compile time grew {ratio:.1f}x for {args.large / args.small:.0f}x the layers (limit {args.max_ratio})")


if __name__ == "__main__":
    main()
