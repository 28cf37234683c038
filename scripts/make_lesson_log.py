#!/usr/bin/env python3
"""Writes tests/diagnose/lesson/lesson_zero3_4xA40.log, the *constructed* log of docs/worked-examples.md
section 4 (a 4xA40 ZeRO-3 run 3x slower than expected). Every line has the format DeepSpeed 0.19.8 prints
(copied from the real logs in tests/diagnose/*.log: logger prefix, config dump, print_user_config JSON,
timer lines, comms logger table) or NCCL prints (INFO lines of NVIDIA/nccl#1817); the numbers are
illustrative, from the arithmetic written in the doc (2.2 GB/s busbw all-gathers, prefetch 0), NOT measured.
"""
import pathlib

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests/diagnose/lesson/lesson_zero3_4xA40.log"

lines = []
P = "[2026-11-24 09:14:{:02d},{:03d}] [INFO] [{}] "
t = [0]


def L(src, msg):
    t[0] += 7
    lines.append(P.format(10 + (t[0] // 1000) % 50, t[0] % 1000, src) + msg)


for r in range(4):
    lines.append(f"gpu-node:2211:{2300+r} [{r}] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.")
lines.append("gpu-node:2211:2300 [0] NCCL INFO NCCL version 2.21.5+cuda12.4")
for c in range(2):
    for r in range(4):
        lines.append(f"gpu-node:2211:{2300+r} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{r}] -> {(r+1)%4}[{(r+1)%4}] via SHM/direct/direct")
L("comm.py:908:init_distributed", "Initializing TorchBackend in DeepSpeed with backend nccl")
L("logging.py:123:log_dist", "[Rank 0] DeepSpeed info: version=0.19.8, git-hash=unknown, git-branch=unknown")
L("stage3.py:218:__init__", "Reduce bucket size 500000000")
L("stage3.py:219:__init__", "Prefetch bucket size 0")
L("config.py:674:print", "DeepSpeedEngine configuration:")
L("config.py:678:print", "  bfloat16_config .............. enabled=True immediate_grad_update=False check_grad_overflow=True")
L("config.py:678:print", "  gradient_accumulation_steps .. 1")
L("config.py:678:print", "  train_batch_size ............. 16")
L("config.py:678:print", "  train_micro_batch_size_per_gpu  4")
L("config.py:678:print", "  wall_clock_breakdown ......... True")
L("config.py:678:print", "  world_size ................... 4")
L("config.py:678:print", "  zero_config .................. stage=3 contiguous_gradients=True reduce_scatter=True reduce_bucket_size=500000000 allgather_partitions=True allgather_bucket_size=500000000 overlap_comm=True offload_param=None offload_optimizer=None sub_group_size=1000000000 prefetch_bucket_size=0 param_persistence_threshold=100000 max_live_parameters=1000000000 max_reuse_distance=1000000000")
L("config.py:678:print", "  zero_optimization_stage ...... 3")
L("config.py:664:print_user_config", "  json = {")
lines += ['    "train_micro_batch_size_per_gpu": 4, ', '    "gradient_accumulation_steps": 1, ', '    "bf16": {', '        "enabled": true', '    }, ',
          '    "wall_clock_breakdown": true, ', '    "comms_logger": {', '        "enabled": true', '    }, ',
          '    "zero_optimization": {', '        "stage": 3, ', '        "stage3_prefetch_bucket_size": 0', '    }', '}']
fwd = [5961.2, 5948.7, 5957.3, 5950.1, 5952.8]
inner = [13452.6, 13440.2, 13447.9, 13439.5, 13446.1]
red = [341.7, 339.2, 342.5, 340.8, 341.1]
stp = [45.3, 44.9, 45.6, 45.1, 45.2]
for i in range(5):
    L("logging.py:123:log_dist", f"[Rank 0] step={i+1}, skipped=0, lr=[2e-05], mom=[(0.9, 0.999)]")
    lines.append(f"[Rank 0] time (ms) | fwd_microstep: {fwd[i]:.2f} | bwd_microstep: {inner[i]+red[i]:.2f} | bwd_inner_microstep: {inner[i]:.2f} | bwd_allreduce_microstep: {red[i]:.2f} | step_microstep: {stp[i]:.2f}")
    lines.append(f"[Rank 0] time (ms) | fwd: {fwd[i]:.2f} | bwd: {inner[i]+red[i]:.2f} | bwd_inner: {inner[i]:.2f} | bwd_allreduce: {red[i]:.2f} | step: {stp[i]:.2f}")
L("utils.py:781:see_memory_usage", "after step 5")
L("utils.py:782:see_memory_usage", "MA 14.21 GB         Max_MA 33.87 GB         CA 35.02 GB         Max_CA 35 GB ")
hdr = ["Comm. Op", "Message Size", "Count", "Total Latency(ms)", "Avg Latency(ms)", "tput_avg (Gbps)", "busbw_avg (Gbps)"]
lines.append("".join(f"{h: <20}" for h in hdr))


def row(size, count, avg, tput, bus):
    return f"{' ': <20}{size: <20}{count: <20}{count*avg: <20.2f}{avg: <20.2f}{tput: <20.2f}{bus: <20.2f}"


# 3 passes x 32 layers x (4 attention | 3 MLP) gathers x 5 steps; busbw 2.2 GB/s = 17.6 Gbps,
# algbw = busbw / (3/4) = 23.47 Gbps (comms_logging.calc_bw_log for all_gather over 4 ranks).
lines.append("all_gather_into_tensor")
lines.append(row("8.0 MB", 1920, 11.44, 23.47, 17.60))
lines.append(row("21.5 MB", 1440, 30.74, 23.47, 17.60))
lines.append("reduce_scatter_tensor")
lines.append(row("238.42 MB", 70, 341.0, 23.47, 17.60))
lines.append("all_reduce")
lines.append(row("4.0 B", 5, 0.41, 0.00, 0.00))
OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text("\n".join(lines) + "\n")
