#pragma once
// The ZeRO engine: one Llama-style training run, sharded across the ranks of a Runtime exactly as
// DeepSpeed's ZeRO stages 0-3 shard it, measuring its own memory (executor/memory.h),
// communication (Communicator counters) and time per phase. Walkthrough in docs/executor.md.
//
// The engine sizes every tensor from the ModelSpec's fields and its own code paths; it never calls
// the planner (the comparison in `zeroplan validate` is only worth something if the two accounts
// are independent).
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/memory.h"
#include "layout/parallel_layout.h"
#include "models/model_spec.h"

namespace zeroplan::exec {

// The DeepSpeed knobs the engine follows (deepspeed/runtime/zero/config.py names; sizes in elements).
struct ZeroSettings {
  int stage = 0;
  bool offload_optimizer = false;  // fp32 master + Adam states (+ fp32 grads) in the host tier, CPU Adam
  int64_t reduce_bucket_size = 500'000'000;
  int64_t allgather_bucket_size = 500'000'000;
  bool overlap_comm = false;  // stages 1/2: second gradient bucket
  int64_t prefetch_bucket_size = 50'000'000;
  int64_t param_persistence_threshold = 100'000;
  int64_t max_live_parameters = 1'000'000'000;
  int64_t max_reuse_distance = 1'000'000'000;
  int64_t sub_group_size = 1'000'000'000;
  // Stage 3, MoE: the sparse block is one leaf module (router and experts fetched and released
  // together: DeepSpeed >= 0.18's default leaf_module classes, or deepspeed.utils.set_z3_leaf_modules);
  // false: each submodule on its own (the router `gate`, then `experts` with both its tensors).
  bool moe_leaf = true;
};

// LoRA with PEFT's semantics (peft/tuners/lora/layer.py, LoraConfig defaults): rank 0 trains every
// parameter. Otherwise each targeted decoder nn.Linear W [out, in] is frozen and gets lora_A [r, in]
// (kaiming-uniform, i.e. U(+-1/sqrt(in))) and lora_B [out, r] (zeros), y = x W^T + (alpha/r) (x A^T) B^T,
// lora_dropout 0 (PEFT's default: nn.Identity). Everything else (embeddings, norms, lm_head) is frozen.
// Only the adapters have gradients and optimizer states; ZeRO flattens and partitions only them
// (DeepSpeed builds its optimizer groups from requires_grad parameters), while stage 3 also
// partitions and gathers the frozen weights (zero.Init partitions every parameter).
struct LoraSettings {
  int64_t rank = 0;
  float alpha = 8.0f;                // PEFT LoraConfig.lora_alpha default
  std::vector<std::string> targets;  // q_proj k_proj v_proj o_proj gate_proj up_proj down_proj; empty or
                                     // "all-linear" = all seven (PEFT all-linear excludes lm_head)
};

struct RunConfig {
  models::ModelSpec model;  // Llama-style decoder (RMSNorm, rotary, gated SiLU MLP, no biases, untied)
  ZeroSettings zero;
  LoraSettings lora;
  bool mixed_precision = true;  // bf16 params/grads/activations + fp32 master; false: fp32 throughout
  int64_t micro_batch = 1;
  int64_t seq_len = 32;
  int64_t grad_accum = 1;
  bool checkpointing = false;  // full activation checkpointing: keep only each layer's input
  int steps = 2;
  // The parallel layout (layout/parallel_layout.h, issue 25): the engine runs its data-parallel
  // collectives (gradient reduction, ZeRO partitions, parameter gathers) in the rank's DP group, made by
  // Communicator::split. tp > 1 is DeepSpeed AutoTP (issue 26; docs/executor.md "Tensor
  // parallelism"): q/k/v/gate/up_proj and lm_head column-parallel, o/down_proj row-parallel,
  // embeddings and norms replicated, activation collectives in the rank's TP group (a second split),
  // ZeRO over the DP group on each rank's shard; dense models without LoRA, clipping or sp > 1. SP
  // shards nothing yet (the Ulysses issue): with sp above 1 each DP group trains its own replica; the
  // CLI refuses it. ep must stay 1 (the engine's MoE layers are not expert-parallel).
  layout::LayoutSizes parallel;
  bool fixed_batch = false;  // every step trains on the same global batch
  float lr = 1e-3f;
  float weight_decay = 0.0f;
  float gradient_clipping = 0.0f;  // DeepSpeed "gradient_clipping"; 0 = off
  uint64_t seed = 1234;
  float rope_theta = 10000.0f;  // HF LlamaConfig default rope_theta
  float rms_eps = 1e-5f;        // Llama-2 config.json rms_norm_eps
  // Tests: start from these parameter values (flat, model order, unpadded; the trainable parameters
  // only, i.e. the adapters with LoRA) instead of the seeded init.
  const std::vector<float>* initial_params = nullptr;
  // Tests: record the averaged, unclipped fp32 gradient of the first step (world size 1, stage 0).
  bool capture_first_grads = false;
  // Copy the trained fp32 parameters back into RunResult::final_params (the tests compare them).
  // `validate` reports memory, time and traffic only and turns it off: the copy is the whole model in
  // fp32 on the host, 65 GB of host RAM for a 13B plan (docs/validation.md, 2026-11-26: refused).
  bool export_params = true;
  // Progress (issue 30, item 5): rank 0 calls it after each optimizer step with the number of steps
  // done (cli/progress.h shows it on a terminal). Empty: nothing is called.
  std::function<void(int steps_done)> on_step;
};

struct PhaseSeconds {
  double forward = 0, backward = 0, step = 0;
};

// One rank's account of the last step (peaks reset at its start, so it is the steady state:
// stage 3 prefetches only once the module trace is complete, DeepSpeed's first step does not).
struct RankMeasurement {
  int rank = 0;
  TierUsage device;               // peaks per category, overall peak + phase, per-phase peaks
  TierUsage host;                 // the offload tier
  int64_t alignment_bytes = 0;    // extra bytes from 256-byte allocation rounding (not in any category)
  CommCounters comm;              // collectives of the last step, bus-factor bytes per kind
  int64_t comm_bytes = 0;         // bytes this rank sent in the last step, excluding scalar_comm_bytes
  int64_t scalar_comm_bytes = 0;  // the gradient-norm scalar all-reduce (clipping), reported apart
  std::array<CommCounters, kNumStepPhases> comm_by_phase{};  // the last step's collectives by phase
  // Tensor parallelism (tp > 1): the last step's collectives in the rank's TP group (AutoTP's
  // activation all-reduces and the logits all-gather), total and by phase; not in comm / comm_bytes.
  CommCounters tp_comm;
  std::array<CommCounters, kNumStepPhases> tp_comm_by_phase{};
  int64_t num_parameters = 0;  // trainable elements this rank holds before ZeRO: its TP shard
  PhaseSeconds seconds;        // wall time per phase in the last step
  // Named buffers of the engine's own account, for line-by-line comparison:
  int64_t gradient_bucket_bytes = 0;       // one reduce bucket (reduce_bucket_size x 16-bit)
  int num_gradient_buckets = 0;            // 2 with overlap_comm in stages 1/2
  int64_t gathered_params_peak_bytes = 0;  // stage 3: peak of gathered (non-persistent) params
  // What the engine's caching pool took from the backend over the whole run (live + cached blocks,
  // 256-byte rounded): the physical footprint, >= the logical peak; the excess is fragmentation.
  int64_t reserved_device_bytes = 0;
  int64_t reserved_host_bytes = 0;
};

struct RunResult {
  std::vector<RankMeasurement> ranks;
  std::vector<double> loss_per_step;     // global mean loss of each step (before its update)
  std::vector<float> final_params;       // fp32 master (or fp32 params), flat model order, unpadded
                                         // (tp > 1: the TP shards put back into the whole weights)
  std::vector<float> first_grads;        // when capture_first_grads
  int64_t num_parameters = 0;            // the engine's own count of trainable parameters (whole model)
  int64_t num_frozen_parameters = 0;     // LoRA: the frozen base weights, norms, embeddings, lm_head
  std::vector<std::string> param_names;  // trainable parameters
  std::vector<int64_t> param_offsets;    // into final_params
};

// Checks that the engine can run `cfg` (model family, precision, stage/offload combination);
// throws UserError with what to change otherwise.
void check_run_config(const RunConfig& cfg, int world_size);

// Runs `cfg` on every local rank of `rt` (one thread per rank) and gathers the measurements.
RunResult run_training(const RunConfig& cfg, Runtime& rt);

// The engine's flat parameter layout (make_layout) as element counts: every parameter's numel and
// whether it is frozen (LoRA), in layout order. Lets executor/admission.h size a run before it
// allocates anything.
struct LayoutSizes {
  std::vector<int64_t> numel;
  std::vector<bool> frozen;
  int64_t total = 0, frozen_total = 0;
};
LayoutSizes layout_sizes(const RunConfig& cfg);

}  // namespace zeroplan::exec
