#pragma once
// The flags every planning command shares (plan, check, validate), kept as the user typed them, and
// the one function that turns them into a planner::Workload. Numbers are parsed as text so that
// "7e9", "0", "-1", "1.5", "nan" and "1e30" all get one clear message (common/checked.h).
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "planner/plan.h"
#include "planner/training_spec.h"

namespace zeroplan::cli {

// --seq-len's upper bound, 2^25 tokens; --max-seq searches up to it. Published long-context training
// reaches 15M tokens (ALST: Llama-8B on 4 x 8 H100 with Ulysses SP 32, arXiv 2506.13996) and contexts
// 10M (Llama 4 Scout); 4M, the bound before, cut the 4-node answer short.
inline constexpr int64_t kMaxSeqLen = 33'554'432;

struct PlanFlags {
  std::string model;   // --model: alias, zoo name or config.json path
  std::string params;  // --params N (model known by its count only)
  std::string gpus;    // --gpus 4xA40 | 2x8xH100 | path.json
  std::string stage;   // --stage 0..3
  std::string ep;      // --ep N: expert-parallel size (DeepSpeed AutoEP; searched for MoE models when absent)
  std::string micro_batch, seq_len = "2048", grad_accum, global_batch;
  std::string precision = "bf16";  // bf16|fp16|fp32
  std::string method = "full";     // full|lora|qlora
  std::string lora_rank = "16";
  std::string lora_targets;                      // comma-separated HF module names
  std::string offload_optimizer, offload_param;  // none|cpu|nvme (searched when absent)
  std::string checkpointing;                     // none|selective|full (searched when absent)
  std::string attention = "flash";               // flash|eager
  std::string kernels;                           // comma list: sdpa|fa2|flash|eager|liger
  // --tp / --sp (parallel layout; TP > 1 not modelled yet); "" = not given (1; --max-seq searches SP).
  std::string tp = "1", sp;
  // --hpz N|auto: ZeRO++ hierarchical partitioning (zero_hpz_partition_size) at stage 3; "" = 1.
  std::string hpz;
  // --qwz / --qgz on|off: ZeRO++ quantized weight gathers / gradient reduction at stage 3 (zeropp_quant.h).
  std::string qwz = "off", qgz = "off";
  std::string deepspeed_version = "0.19.8";  // modelled DeepSpeed release (planner/ds_runtime.h)
  std::string torch_version = "2.11";  // --torch-version: decides SDPA's kernel (planner/torch_version.h)
  std::string z3_leaf_moe = "auto";    // ZeRO-3 leaf MoE blocks: auto|on|off (planner/zero3_leaf.h)
  std::string checkpoint_impl = "non-reentrant";  // non-reentrant|reentrant|deepspeed
  std::string
      checkpoint_offload;  // none|cpu (planner/checkpoint_offload.h); "" = none, searched by --max-seq
  std::string memory_efficient_linear = "on";  // ZeRO-3 zero_optimization.memory_efficient_linear: on|off
  std::string intra_link, network, host_mem, nvme_bw, nvme_capacity, nics, gpu_mem;  // cluster overrides
  std::string memory_margin = "0.05";
  std::string host_speed = "1";
  int cpu_threads = 0;  // --cpu-threads: OpenMP threads per rank for the host optimizer step (0 = not given)
                        // // --host-speed: host single-thread speed vs the reference host
  // --allow LIST: levers that change the numerics, searched only when the user allows them
  // (bf16-master: DeepSpeed's bf16 master weights, gradients and optimizer states).
  std::string allow;
  // --optimizer adamw|muon: the optimizer the plan prices (DeepSpeed's Muon: planner/muon.h).
  std::string optimizer = "adamw";
  // --freeze vision: a vision-language model's tower and projector frozen (planner/vision.h).
  std::string freeze;
  // --images-per-sample N, --image-size H[xW]: images through the frozen vision tower (planner/vision.h).
  std::string images_per_sample, image_size;
  bool json = false;
  bool explain = false;
  bool explain_time = false;  // --explain-time: per-operator step time of the focus plan
  bool max_seq = false;       // --max-seq: the longest sequence that fits (cli/cmd_max_seq.cpp)
  std::string compare;        // --compare deepspeed
  std::string emit;           // --emit ds_config.json
  std::string html;           // --html report.html (cli/html_report.h)
  bool hf_auto = false;
  bool emit_optimizer = false;  // --emit-optimizer: add optimizer + scheduler sections
  bool force = false;
};

// Registers the shared flags on `app` (the top-level app; subcommands see them via fallthrough).
void add_plan_flags(CLI::App& app, PlanFlags& f);

// Validates every flag and builds the workload; throws UserError with one clear sentence.
planner::Workload build_workload(const PlanFlags& f);
planner::SearchOptions build_search_options(const PlanFlags& f);

}  // namespace zeroplan::cli
