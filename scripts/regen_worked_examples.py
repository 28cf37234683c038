#!/usr/bin/env python3
"""Re-runs every `$ zeroplan ...` console block of docs/worked-examples.md and replaces its output.

Usage: python3 scripts/regen_worked_examples.py [path/to/zeroplan] [--check]

The `check` examples read the configs the document shows: slow_zero3.json (the JSON block of example
3) and its three one-knob variants, written into a temporary folder that is the commands' working
directory (tests/ is linked there for the diagnose example). A non-zero exit code is appended as
"(exit code N)", as the document prints it. --check only reports which blocks differ (exit 1 if any).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "worked-examples.md")


def write_configs(doc, where):
    blocks = re.findall(r"```json\n(.*?)```", doc, re.S)
    slow = next(json.loads(b) for b in blocks if "stage3_prefetch_bucket_size" in b)
    variants = {"slow_zero3.json": {}}
    # Example 3's steps, each on top of the previous one (the document's prose names them).
    variants["zero3_prefetch.json"] = {"stage3_prefetch_bucket_size": 5e7}
    variants["zero3_prefetch_overlap.json"] = dict(variants["zero3_prefetch.json"], overlap_comm=True)
    variants["zero3_prefetch_overlap_buckets.json"] = dict(variants["zero3_prefetch_overlap.json"],
                                                           reduce_bucket_size=5e8)
    for name, change in variants.items():
        cfg = json.loads(json.dumps(slow))
        cfg["zero_optimization"].update(change)
        with open(os.path.join(where, name), "w") as f:
            json.dump(cfg, f, indent=2)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    check = "--check" in sys.argv
    binary = os.path.abspath(args[0] if args else os.path.join(ROOT, "build", "zeroplan"))
    doc = open(DOC).read()
    with tempfile.TemporaryDirectory() as tmp:
        write_configs(doc, tmp)
        os.symlink(os.path.join(ROOT, "tests"), os.path.join(tmp, "tests"))
        differ = []

        def rerun(match):
            body = match.group(1)
            cmd = body.split("\n", 1)[0]
            argv = cmd[2:].split()
            if argv[0] != "zeroplan":
                return match.group(0)
            r = subprocess.run([binary] + argv[1:], capture_output=True, text=True, cwd=tmp)
            out = (r.stdout + r.stderr).rstrip("\n")
            if r.returncode != 0:
                out += f"\n(exit code {r.returncode})"
            new = f"```console\n{cmd}\n{out}\n```"
            if new != match.group(0):
                differ.append(cmd)
            return new

        fresh = re.sub(r"```console\n(.*?)```", rerun, doc, flags=re.S)
    for cmd in differ:
        print(("differs: " if check else "updated: ") + cmd)
    if check:
        sys.exit(1 if differ else 0)
    with open(DOC, "w") as f:
        f.write(fresh)


if __name__ == "__main__":
    main()
