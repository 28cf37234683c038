#pragma once
// TrainingSpec: what the user trains (precision, method, batch, sequence, checkpointing) and
// Workload = ModelSpec x TrainingSpec x ClusterSpec, the planner's input.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwprofiles/cluster.h"
#include "models/model_spec.h"

namespace zeroplan::planner {

enum class Precision { BF16, FP16, FP32 };
enum class Method { Full, LoRA, QLoRA };
enum class Offload { None, CPU, NVMe };
enum class Checkpointing { None, Selective, Full };
enum class Attention { Flash, Eager };
// The DeepSpeed release whose runtime the planner models (planner/ds_runtime.h: what differs between
// them, each rule citing the release's code, read from its PyPI sdist). Default: the newest.
enum class DeepSpeedVersion : uint8_t { V0_16_9, V0_18_9, V0_19_8 };
inline constexpr DeepSpeedVersion kNewestDeepSpeed = DeepSpeedVersion::V0_19_8;
// Where the step runs: Cuda adds the CUDA context and NCCL communicator buffers (planner/memory_model.cpp)
// and flash-attention saved tensors; Cpu is DeepSpeed's CPU accelerator (DS_ACCELERATOR=cpu, gloo), the
// runtime the conformance fixtures are recorded on (tests/deepspeed/): no context, no NCCL buffers.
enum class Runtime : uint8_t { Cuda, Cpu };
// Whose training code runs the step. HfDeepSpeed: HF transformers' modules under DeepSpeed (every
// plan a user gets). ZeroplanEngine: zeroplan's own native executor (executor/engine.cpp), which
// `zeroplan validate` runs: the same ZeRO partitioning, buckets and collectives (DeepSpeed 0.16.9's
// paths), but fused kernels that save other tensors than PyTorch's autograd and a few documented
// differences in gradient buffers; planner/engine_runtime.h models them (issue 12 item 6).
enum class Implementation : uint8_t { HfDeepSpeed, ZeroplanEngine };

std::string to_string(Precision);
std::string to_string(Method);
std::string to_string(Offload);
std::string to_string(Checkpointing);
std::string to_string(Attention);

// ZeRO-3 leaf modules for HF MoE blocks (zero_optimization.leaf_module, or
// deepspeed.utils.set_z3_leaf_modules): a leaf block is fetched, released and reduced as ONE module
// (parameter_offload.py _register_deepspeed_module stops at it; stage3.py reduces its gradients from one
// full backward hook). Auto: DeepSpeed's default, leaf for the classes in
// leaf_module_config.py DEFAULT_LEAF_MODULE_CLASSES (0.18.9 and 0.19.8: Mixtral, Qwen2-MoE, Qwen3-MoE
// sparse blocks; 0.16.9 has no default). On: every MoE block a leaf. Off: none
// (`"leaf_module": {"classes": []}`). planner/zero3_leaf.h.
enum class MoeLeaf { Auto, On, Off };

// --checkpoint-offload: where the fully checkpointed layers' inputs wait for the backward
// (planner/checkpoint_offload.h). Cpu: host memory, through DeepSpeed's activation offload.
enum class CheckpointOffload : uint8_t { None, Cpu };

struct TrainingSpec {
  Precision precision = Precision::BF16;
  Method method = Method::Full;
  int64_t lora_rank = 16;
  std::vector<std::string> lora_targets;  // empty = all linear projections in decoder layers
  int64_t seq_len = 2048;                 // the sequence, in tokens (what --seq-len says)
  // --sp: Ulysses sequence parallelism as DeepSpeed runs it for HF models (>= 0.17.0:
  // runtime/sequence_parallel/ulysses_sp.py UlyssesSPAttentionHF, the ALST recipe; planner/
  // sequence_parallel.h). Each rank of an SP group holds seq_len / sequence_parallel tokens of the same
  // sequences everywhere except inside attention, where all-to-alls give it the whole sequence for
  // heads / sequence_parallel heads. 1 = none.
  int sequence_parallel = 1;
  // --tp: DeepSpeed AutoTP's tensor_parallel.autotp_size (planner/tensor_parallel.h). Under TP > 1 the
  // Workload's model is one TP rank's shard and Workload::unsharded the model as given. 1 = none.
  int tensor_parallel = 1;
  // The tokens of each sequence one rank processes outside attention: what every per-token size (saved
  // activations, logits, GEMM rows) is counted over.
  int64_t rank_seq_len() const { return seq_len / (sequence_parallel > 1 ? sequence_parallel : 1); }
  // --kernels tiled-mlp: DeepSpeed's TiledMLP (runtime/sequence_parallel/ulysses_sp.py, the ALST recipe
  // monkey-patches the model's MLP forward with it): the MLP runs shard by shard along the sequence,
  // under no_grad in the forward, saving only its input; the backward recomputes each shard with grad.
  // Dense MLPs only (planner/memory_stats.cpp mlp_saved, planner/op_model.cpp).
  bool tiled_mlp = false;
  // Its shard count; 0 = the recipe's ceil(tokens / hidden) (the TiledMLP docstring's
  // tiled_mlp_forward, over the rank's seq/sp tokens).
  int64_t tiled_mlp_shards = 0;
  // Fixed by the user when set; searched otherwise.
  std::optional<int64_t> micro_batch;
  std::optional<int64_t> grad_accum;
  std::optional<int64_t> global_batch;
  std::optional<Checkpointing> checkpointing;
  Attention attention = Attention::Flash;
  DeepSpeedVersion deepspeed_version = kNewestDeepSpeed;
  Runtime runtime = Runtime::Cuda;
  Implementation implementation = Implementation::HfDeepSpeed;
  // --z3-leaf-moe: the training script's ZeRO-3 leaf setting for HF MoE blocks (set_z3_leaf_modules).
  MoeLeaf moe_leaf = MoeLeaf::Auto;
  // --checkpoint-impl: how the training script checkpoints its decoder layers. false (default):
  // torch.utils.checkpoint(use_reentrant=False), what transformers 5.x's gradient_checkpointing_enable
  // passes when given no kwargs (modeling_utils.py _activation_checkpointing_enable, 5.24); its
  // recompute stops early (torch/utils/checkpoint.py set_checkpoint_early_stop, default on), see
  // ComputeStats::recompute_early_stop. true: use_reentrant=True (transformers 4.35-4.x's default
  // when no kwargs are given, and deepspeed.checkpointing), which re-runs the whole layer.
  bool checkpoint_reentrant = false;
  // --checkpoint-impl deepspeed: the layers call deepspeed.checkpointing.checkpoint (reentrant; Megatron-
  // DeepSpeed), so ds_config's activation_checkpointing section acts (runtime/activation_checkpointing/
  // checkpointing.py configure): its cpu_checkpointing is checkpoint_offload, its partition_activations
  // below. Under the HF Trainer's gradient_checkpointing (torch.utils.checkpoint) that section does nothing.
  bool deepspeed_checkpointing = false;
  // activation_checkpointing.partition_activations with deepspeed.checkpointing: each checkpoint split
  // over the model-parallel group (1 here); with cpu_checkpointing it takes the blocking copy path.
  bool partition_activations = false;
  CheckpointOffload checkpoint_offload = CheckpointOffload::None;
  // --memory-efficient-linear: DeepSpeed zero_optimization.memory_efficient_linear (default true,
  // runtime/zero/config.py): under stage 3, zero.Init swaps torch.nn.functional.linear for
  // zero3_linear_wrap (runtime/zero/linear.py). false keeps torch's own linear, as PyTorch FSDP does.
  bool memory_efficient_linear = true;
  // --freeze vision: the vision tower and projector of a vision-language model frozen (requires_grad
  // False; planner/vision.h), as LLaMA-Factory does by default (src/llamafactory/hparams/
  // finetuning_args.py: freeze_vision_tower and freeze_multi_modal_projector default True). Without it they
  // train with the language tower, as the HF Trainer trains every parameter that requires grad.
  bool freeze_vision = false;
  // --images-per-sample / --image-size: the images each sample carries through a frozen vision tower
  // (planner/vision.h), each image_h x image_w pixels. 0 = text only.
  int64_t images_per_sample = 0;
  int64_t image_h = 0, image_w = 0;
  // --optimizer muon: DeepSpeed's Muon (ds_config optimizer.type "muon"; planner/muon.h) instead of AdamW.
  // Modelled at ZeRO stages 1-2 with the optimizer on the GPU, full training of a dense model.
  bool muon = false;
  // Which data-parallel rank's memory is modelled. DeepSpeed's partitions are not equal: stage 1/2's
  // grads_in_partition holds every parameter that overlaps the rank's partition whole
  // (stage_1_and_2.py copy_grads_in_partition sums params_in_partition), so ranks holding a parameter
  // that straddles a partition boundary hold more. Unset: the rank holding the most (the one that runs
  // out of memory first); 0: rank 0, which the conformance harness records (tests/deepspeed).
  std::optional<int> modelled_rank;
  // Whether rank 0's holdings are the ones to price (else the rank holding the most).
  bool models_rank0() const { return modelled_rank.value_or(-1) == 0; }
  // --kernels liger: the HF Trainer's `use_liger_kernel=True` (transformers integrations/liger.py ->
  // liger_kernel.transformers apply_liger_kernel_to_<family>: fused linear cross-entropy, RMSNorm,
  // SwiGLU, RoPE). Memory: the fused linear cross-entropy (liger_kernel/ops/fused_linear_cross_entropy.py),
  // which never materialises the b*s*V logits nor their fp32 log-probabilities (issue 24 item 3). Time:
  // all four, each one Triton kernel in place of transformers' eager chain, and the head's backward GEMMs
  // run inside the forward (planner/op_model.cpp). Off: transformers' own loss (fp32 logits).
  bool liger = false;
  // --kernels fa3: attn_implementation="flash_attention_3" (transformers integrations/flash_attention.py
  // with the flash_attn_3 package; FlashAttention-3 runs on Hopper only, Shah et al. 2024). Same saved
  // tensors as FlashAttention-2 (output + logsumexp); its kernel rate is the paper's FA3 bars
  // (planner/data/time_model.json "flash3_hopper"). Off: transformers' default attn_implementation
  // "sdpa", whose kernel PyTorch picks (torch_version below).
  bool flash_attention_3 = false;
  // --kernels fa2: attn_implementation="flash_attention_2" (the flash-attn package): FlashAttention-2
  // whatever SDPA would pick. Same saved tensors as SDPA's flash and cuDNN kernels (output + logsumexp).
  bool flash_attention_2 = false;
  // --torch-version: the PyTorch release, major * 100 + minor. It decides SDPA's kernel: from 2.11 on
  // Hopper SDPA runs cuDNN's fused attention unforced (planner/data/time_model.json "sdpa_backend",
  // measured on an H100 with torch 2.11). Default 2.11: the release line current with DeepSpeed 0.19.8.
  int torch_version = 211;
  // --host-speed: the training host's single-thread speed relative to the reference host the host
  // figures were measured on (planner/data/time_model.json "host" and "stage3_hooks": a 16-vCPU
  // Intel Xeon VM beside an H100, 2026-11-26). Host times are divided by it: 2 = a host whose Python
  // dispatch runs twice as fast. They show only where the host bounds a pass (short micro-steps).
  double host_speed = 1.0;
  // --cpu-threads: the OpenMP threads each rank's host optimizer step runs on (OMP_NUM_THREADS; torchrun
  // and accelerate set 1, DeepSpeed's launcher every core, --bind_cores_to_rank cores / ranks:
  // planner/cpu_optimizer.h). 0 = not given: the earlier per-node assumption (planner/time_model.cpp).
  int cpu_threads = 0;
  bool operator==(const TrainingSpec&) const = default;  // operator_totals' cache key (op_model.h)
};

struct Workload {
  models::ModelSpec model;
  TrainingSpec train;
  hw::ClusterSpec cluster;
  // Under AutoTP (train.tensor_parallel > 1): the model as the user gave it; `model` is then rank 0's
  // shard (planner/tensor_parallel.h apply_tensor_parallel). Null without TP.
  std::shared_ptr<const models::ModelSpec> unsharded;
  const models::ModelSpec& full_model() const { return unsharded ? *unsharded : model; }
};

}  // namespace zeroplan::planner
