#!/usr/bin/env python3
"""One line per recorded fixture: wrapper, model states, peak, and collectives per phase (calls/largest/total).

    python tests/deepspeed/summarize.py [fixtures/0.19.8] [--markdown]
"""
import collections
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def mb(x):
    return f"{x / 1e6:.2f}"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    md = "--markdown" in sys.argv
    d = args[0] if args else os.path.join(HERE, "fixtures", "0.19.8")
    rows = []
    for path in sorted(glob.glob(os.path.join(d, "*.json"))):
        f = json.load(open(path))
        ms = f["model_states"]
        comm = collections.OrderedDict()
        for c in f["collectives"]:
            k = (c["phase"][0], c["op"])
            n, big, tot = comm.get(k, (0, 0, 0))
            comm[k] = (n + 1, max(big, c.get("bytes", 0)), tot + c.get("bytes", 0))
        cs = " ".join(f"{p}:{op}x{n}(max {mb(b)},sum {mb(t)})" for (p, op), (n, b, t) in comm.items())
        rows.append((f["name"], f["engine"]["optimizer_wrapper"], f["engine"].get("grad_accum_dtype"),
                     mb(ms["parameters"]), mb(ms["gradients"]), mb(ms["optimizer_states"]),
                     mb(f["model_states_before_step"]["gradients"]) if f.get("model_states_before_step") else "",
                     mb(f["peak_bytes"]["overall"]), mb(f["saved_activations"]["total"]), cs))
    hdr = ("case", "wrapper", "gacc", "params MB", "grads MB", "optim MB", "grads@step MB", "peak MB", "saved MB",
           "collectives (phase:op x calls, bytes MB)")
    if md:
        print("| " + " | ".join(hdr) + " |")
        print("|" + "---|" * len(hdr))
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        for r in rows:
            print("  ".join(str(x) for x in r))


if __name__ == "__main__":
    main()
