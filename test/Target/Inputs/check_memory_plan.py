"""Compiles the spec at --layers layers (--no-build) and checks its memory plan: no two buffers
alive at the same time overlap, and none runs past its arena. How compile time grows with the
layers is measured by bench/compile_time.py, not here."""
import argparse
import bisect
import os
import re
import subprocess
import sys


def compile_layers(args, layers):
    with open(args.spec) as f:
        text = re.sub(r"(?m)^num_layers:.*$", f"num_layers: {layers}", f.read())
    spec = os.path.join(args.workdir, f"layers{layers}.yaml")
    with open(spec, "w") as f:
        f.write(text)
    out = os.path.join(args.workdir, f"out{layers}")
    subprocess.run([args.megac, "compile", spec, "-o", out, "--no-build"], check=True, stdout=subprocess.DEVNULL)
    return out


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
    ap.add_argument("--layers", type=int, default=4000)
    ap.add_argument("--min-buffers", type=int, default=0, help="fail if no function has this many buffers")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    out = compile_layers(args, args.layers)
    buffers = check_plan(os.path.join(out, "memory-plan.txt"))
    if buffers < args.min_buffers:
        sys.exit(f"the largest function has {buffers} buffers, fewer than --min-buffers {args.min_buffers}")
    print(f"{args.layers} layers: largest function {buffers} buffers, memory plan consistent")


if __name__ == "__main__":
    main()
