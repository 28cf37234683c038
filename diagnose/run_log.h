#pragma once
// RunLog: what a DeepSpeed training run printed, as far as `zeroplan diagnose` understands it. Filled
// by diagnose::parse_log (diagnose/log_parser.h) from one or more log files; every field is optional
// because real logs are partial (one rank only, truncated, another verbosity, another version).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace zeroplan::diagnose {

// One `time (ms) | ...` line of DeepSpeed's wall_clock_breakdown (deepspeed/utils/timer.py
// SynchronizedWallClockTimer.log, names from the *_TIMER constants at the top of that file). Micro
// lines carry fwd_microstep...step_microstep (every micro-step), global lines fwd...step (at each
// gradient-accumulation boundary). Values in milliseconds; negative = not printed.
struct TimerSample {
  int rank = -1;  // from a "[Rank N]" prefix; -1 unknown
  bool micro = false;
  double fwd_ms = -1, bwd_ms = -1, bwd_inner_ms = -1, bwd_allreduce_ms = -1, step_ms = -1;
  int line = 0;
};

// One row of the comms logger's summary (deepspeed/utils/comms_logging.py CommsLogger.log_all):
// op, message size (convert_size: 1024-based, per rank for all_gather/reduce_scatter), count, total
// and average latency (ms), algbw and busbw averages (Gbps = 1e9 bits/s, calc_bw_log).
struct CommRow {
  std::string op;
  int64_t message_bytes = 0;
  int64_t count = 0;
  double total_ms = 0, avg_ms = 0, algbw_gbps = 0, busbw_gbps = 0;
  int line = 0;
};

// see_memory_usage (deepspeed/runtime/utils.py): "MA x GB Max_MA x GB CA x GB Max_CA x GB" (GiB,
// rounded to 2 decimals) after a caller-chosen label line, and "CPU Virtual Memory: used = x GB,
// percent = y%". Also ThroughputTimer's "MemAllocated=xGB, MaxMemAllocated=yGB" (utils/timer.py).
struct MemorySample {
  std::string label;
  double ma_gib = -1, max_ma_gib = -1, ca_gib = -1, max_ca_gib = -1;
  int line = 0;
};

// A CUDA out-of-memory message (PyTorch c10/cuda/CUDACachingAllocator.cpp). Two formats: PyTorch >= 2.1
// "Tried to allocate X GiB. GPU N has a total capacity of T GiB of which F GiB is free. ... Of the
// allocated memory A GiB is allocated by PyTorch, and R GiB is reserved by PyTorch but unallocated."
// and the older "Tried to allocate X MiB (GPU N; T GiB total capacity; A GiB already allocated; F MiB
// free; R GiB reserved in total by PyTorch)". Bytes; -1 when not in the message.
struct OomEvent {
  int64_t tried_bytes = -1, total_bytes = -1, free_bytes = -1, allocated_bytes = -1,
          reserved_unallocated_bytes = -1;
  int gpu = -1;
  int rank = -1;
  int line = 0;
  std::string text;  // the line, trimmed to 300 characters
  std::string
      context;  // the closest DeepSpeed/PyTorch frame seen before it (e.g. "stage3.py ... _optimizer_step")
};

// NCCL_DEBUG=INFO evidence (NCCL src/transport/*.cc, src/init.cc): which transports the channels use,
// whether NVLS is on, the NIC, the channel count. One example line per finding is kept as evidence.
struct NcclInfo {
  std::string version;
  std::map<std::string, int64_t> transports;  // "P2P", "SHM", "NET/IB", "NET/Socket", "CollNet", ... -> lines
  std::map<std::string, std::string> evidence;  // finding -> first line that shows it
  std::vector<std::string> nics;                // "mlx5_0:1", "eth0"
  bool nvls = false;
  bool p2p_disabled = false;
  int channels = -1;
  int nranks = -1;
};

// DeepSpeed's pinned host memory (0.19.x utils/pin_memory_tracker.py, INFO): "[pinned-memory TAG] 1.234 GB
// pinned across N allocations" (log_summary, after ZeRO-3's optimizer and parameter-offload init) and
// "[pinned-memory checkpoint] crossed 32.000 GB: 40.000 GB pinned across N allocations". Per process;
// sizes 1024-based (_fmt_bytes).
struct PinnedSample {
  std::string tag;  // "ZeRO-3 optimizer init", "checkpoint", or "" for an untagged summary
  int64_t bytes = -1;
  int64_t allocations = -1;
  int rank = -1;
  int line = 0;
};

struct FlopsProfile {
  std::map<std::string, std::string> fields;  // "fwd latency" -> "74.73 ms", as printed
  double fwd_latency_ms = -1, bwd_latency_ms = -1, step_latency_ms = -1, iter_latency_ms = -1;
  int world_size = -1;
};

struct RunLog {
  // Sources.
  std::vector<std::string> files;
  int64_t lines = 0, recognized_lines = 0;
  std::string deepspeed_version, torch_version, backend;  // backend: "nccl", "gloo", ...
  bool cpu_accelerator = false;

  // The engine's start-up dump (runtime/config.py DeepSpeedConfig.print): key -> value text, and the
  // user's JSON (print_user_config, "json = {...}") when it parsed.
  std::map<std::string, std::string> engine_config;
  std::optional<nlohmann::json> user_config;
  // zero_config's "key=value" pairs (the resolved DeepSpeedZeroConfig) when the dump has them.
  std::map<std::string, std::string> zero_config;
  int world_size = -1;

  std::vector<TimerSample> timers;
  std::vector<CommRow> comms;
  std::vector<MemorySample> memory;
  std::vector<PinnedSample> pinned;
  double cpu_vm_used_gb = -1, cpu_vm_percent = -1;
  std::vector<OomEvent> ooms;
  std::vector<double> samples_per_sec;       // ThroughputTimer CurrSamplesPerSec
  std::map<std::string, double> hf_metrics;  // train_runtime, train_samples_per_second, ...
  std::vector<double> losses;
  NcclInfo nccl;
  FlopsProfile flops;
  std::map<std::string, std::string>
      ds_report;  // "torch version" -> "2.1.0", "cpu_adam" -> "[NO] ....... [OKAY]"
  std::vector<int> ranks_seen;

  // What went wrong while reading: truncation, a JSON block that did not parse, a failed run.
  std::vector<std::string> notes;
  bool run_failed = false;
};

}  // namespace zeroplan::diagnose
