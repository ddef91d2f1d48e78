"""Checks a `megac simulate --trace` file against the schedule verifier's predicted bubble.

    check_trace.py TRACE.json --stages P --chunks V --microbatches M --compile-log LOG

(LOG: what `megac compile` printed for the same plan, with its "predicted bubble X%").

The trace must hold, for every pp stage, one forward and one backward span of each of its chunks
for each microbatch, never overlapping on a stage; its bubble, measured as the verifier defines it
((makespan - the busiest stage's compute) / that compute), must be the verifier's prediction
within 1.5 points (the verifier assumes equal chunks and backward = 2 x forward; the simulation
costs each chunk's own ops, the embedding and the loss included)."""
import argparse
import json
import re
import sys

ap = argparse.ArgumentParser()
ap.add_argument("trace")
ap.add_argument("--stages", type=int, required=True)
ap.add_argument("--chunks", type=int, required=True)
ap.add_argument("--microbatches", type=int, required=True)
ap.add_argument("--compile-log", required=True)
a = ap.parse_args()
with open(a.compile_log) as f:
    found = re.search(r"predicted bubble ([0-9.]+)% of compute", f.read())
if not found:
    sys.exit(f"FAIL {a.compile_log} has no 'predicted bubble X% of compute'")
a.predicted_bubble = float(found.group(1))

with open(a.trace) as f:
    events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
failed = 0


def fail(msg):
    global failed
    failed += 1
    print("FAIL " + msg)


spans = [e for e in events if e["cat"] in ("forward", "backward")]
busy, end = {}, {}
for stage in range(a.stages):
    mine = sorted((e for e in spans if e["pid"] == stage), key=lambda e: e["ts"])
    want = {(kind, c, m) for kind in ("forward", "backward") for c in range(stage, a.stages * a.chunks, a.stages)
            for m in range(a.microbatches)}
    have = {(e["cat"], e["args"]["chunk"], e["args"]["microbatch"]) for e in mine}
    if have != want or len(mine) != len(want):
        fail(f"stage {stage}: {len(mine)} spans, {len(want & have)} of the {len(want)} expected")
    for x, y in zip(mine, mine[1:]):
        if y["ts"] < x["ts"] + x["dur"] - 1e-6:
            fail(f"stage {stage}: {y['name']} starts before {x['name']} ends")
    busy[stage] = sum(e["dur"] for e in mine)
    end[stage] = max((e["ts"] + e["dur"] for e in mine), default=0)
    tail = [e for e in events if e["pid"] == stage and e["cat"] in ("optimizer", "dp_communication")]
    if not tail or min(e["ts"] for e in tail) < end[stage] - 1e-6:
        fail(f"stage {stage}: the optimizer step must follow its last backward")
fwd = [e["dur"] for e in spans if e["cat"] == "forward"]
bwd = [e["dur"] for e in spans if e["cat"] == "backward"]
ratio = (sum(bwd) / len(bwd)) / (sum(fwd) / len(fwd))
measured = 100 * (max(end.values()) - max(busy.values())) / max(busy.values())
print(f"trace: {len(spans)} chunk spans on {a.stages} stages; backward / forward {ratio:.2f}; "
      f"bubble {measured:.1f}% of the busiest stage's compute, the verifier predicts {a.predicted_bubble:.1f}%")
if abs(measured - a.predicted_bubble) > 1.5:
    fail(f"the trace's bubble {measured:.1f}% is not the verifier's {a.predicted_bubble:.1f}% (within 1.5 points)")
print(f"{failed} failed")
sys.exit(1 if failed else 0)
