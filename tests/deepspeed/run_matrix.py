#!/usr/bin/env python3
"""Records conformance fixtures for a list of cases (default: all of cases.ORDER, in priority order).

    python tests/deepspeed/run_matrix.py                       # all cases -> tests/deepspeed/fixtures/<ds>/
    python tests/deepspeed/run_matrix.py --only 'llama-gqa_s*_n2_bf16_default' --skip-existing
    python tests/deepspeed/run_matrix.py --out-dir /tmp/rerecord   # for scripts/ds_conformance.sh
    python tests/deepspeed/run_matrix.py --set sp              # Ulysses SP cases -> tests/deepspeed/fixtures-sp/<ds>/
    python tests/deepspeed/run_matrix.py --set tiled           # TiledMLP cases -> tests/deepspeed/fixtures-tiled/<ds>/
    python tests/deepspeed/run_matrix.py --set tp              # AutoTP cases -> tests/deepspeed/fixtures-tp/<ds>/
    python tests/deepspeed/run_matrix.py --set hpz             # ZeRO++ hpZ cases -> tests/deepspeed/fixtures-hpz/<ds>/

Each case's ranks are forked from this process, which imports the stack once (the same parent
state as `harness.py --case NAME`; `--subprocess` runs one harness.py process per case instead). A fixture is written with
sorted keys and one-space indentation, without the run's wall times (kept separately in
<out-dir>/../timings-<ds>.json so that a re-recording diffs clean). A case DeepSpeed refuses or that
crashes is written to failures-<ds>.json with the error's last lines instead of a fixture.
"""
import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import cases  # noqa: E402
import harness  # noqa: E402  (installs the counting allocator before any tensor exists)


def ds_version():
    out = subprocess.run([sys.executable, "-c", "import importlib.metadata as m; print(m.version('deepspeed'))"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append", help="fnmatch pattern(s) over case names")
    ap.add_argument("--out-dir")
    ap.add_argument("--skip-existing", action="store_true")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--subprocess", action="store_true",
                    help="one harness.py process per case (default: fork each case's ranks from this process)")
    ap.add_argument("--set", choices=("default", "sp", "tiled", "tp", "hpz", "muon", "zenflow"), default="default",
                    help="sp: the Ulysses sequence-parallel cases (cases.SP_ORDER), default folder fixtures-sp/<ds>/; "
                         "tiled: the TiledMLP cases (cases.TILED_ORDER), default folder fixtures-tiled/<ds>/; "
                         "tp: the AutoTP cases (cases.TP_ORDER), default folder fixtures-tp/<ds>/; "
                         "hpz: the ZeRO++ hpZ cases (cases.HPZ_ORDER), default folder fixtures-hpz/<ds>/; "
                         "muon: DeepSpeed's Muon cases (cases.MUON_ORDER), default folder fixtures-muon/<ds>/; "
                         "zenflow: the ZenFlow cases (cases.ZENFLOW_ORDER), default folder fixtures-zenflow/<ds>/")
    args = ap.parse_args()
    ver = ds_version()
    order, folder = {"sp": (cases.SP_ORDER, "fixtures-sp"), "tiled": (cases.TILED_ORDER, "fixtures-tiled"),
                     "tp": (cases.TP_ORDER, "fixtures-tp"), "hpz": (cases.HPZ_ORDER, "fixtures-hpz"),
                     "muon": (cases.MUON_ORDER, "fixtures-muon"),
                     "zenflow": (cases.ZENFLOW_ORDER, "fixtures-zenflow"),
                     "default": (cases.ORDER, "fixtures")}[args.set]
    out_dir = args.out_dir or os.path.join(HERE, folder, ver)
    os.makedirs(out_dir, exist_ok=True)
    meta_dir = os.path.dirname(os.path.abspath(out_dir))
    timings_path = os.path.join(meta_dir, f"timings-{ver}.json")
    failures_path = os.path.join(meta_dir, f"failures-{ver}.json")
    timings = json.load(open(timings_path)) if os.path.exists(timings_path) else {}
    failures = json.load(open(failures_path)) if os.path.exists(failures_path) else {}
    names = [n for n in order if not args.only or any(fnmatch.fnmatch(n, p) for p in args.only)]
    for i, name in enumerate(names):
        path = os.path.join(out_dir, f"{name}.json")
        if args.skip_existing and os.path.exists(path):
            continue
        tmp = path + ".tmp"
        t0 = time.time()
        if args.subprocess:
            proc = subprocess.run([sys.executable, os.path.join(HERE, "harness.py"), "--case", name, "--out", tmp],
                                  capture_output=True, text=True, timeout=args.timeout + 60, cwd=REPO)
            ok, err = proc.returncode == 0 and os.path.exists(tmp), (proc.stderr or proc.stdout)
            res = json.load(open(tmp)) if ok else None
        else:
            # in this process: the stack is imported once and each case forks its ranks from here
            try:
                res, ok, err = harness.run_case(cases.CASES[name], timeout=args.timeout), True, ""
            except Exception as e:  # noqa: BLE001 (recorded as a failure with its message)
                res, ok, err = None, False, str(e)
        wall = round(time.time() - t0, 1)
        if os.path.exists(tmp):
            os.remove(tmp)
        if not ok:
            tail = "\n".join(err.strip().splitlines()[-25:])
            failures[name] = {"error_tail": tail}
            print(f"[{i + 1}/{len(names)}] {name}: FAILED ({wall}s)\n{tail}", flush=True)
        else:
            t = res.pop("timing_s", {})
            t["process_wall"] = wall
            timings[name] = t
            failures.pop(name, None)
            with open(path, "w") as f:
                f.write(json.dumps(res, indent=1, sort_keys=True) + "\n")
            print(f"[{i + 1}/{len(names)}] {name}: ok ({wall}s)", flush=True)
        with open(timings_path, "w") as f:
            f.write(json.dumps(timings, indent=1, sort_keys=True) + "\n")
        with open(failures_path, "w") as f:
            f.write(json.dumps(failures, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
