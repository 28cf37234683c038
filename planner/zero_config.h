#pragma once
// ZeroConfig: one candidate DeepSpeed configuration, with DeepSpeed's *code* defaults
// (deepspeed/runtime/zero/config.py, v0.16; sizes in elements, not bytes).
#include <algorithm>
#include <cstdint>

#include "planner/ds_runtime.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

struct ZeroConfig {
  int stage = 0;
  Offload offload_optimizer = Offload::None;
  Offload offload_param = Offload::None;  // stage 3 only
  int64_t micro_batch = 1;
  int64_t grad_accum = 1;
  Checkpointing checkpointing = Checkpointing::None;

  // deepspeed/runtime/zero/config.py (v0.16) defaults:
  int64_t reduce_bucket_size = 500'000'000;     // ZERO_REDUCE_BUCKET_SIZE default 5e8 elements
  int64_t allgather_bucket_size = 500'000'000;  // allgather_bucket_size default 5e8 elements
  bool overlap_comm = false;                    // default False, set True for stage 3 (config.py validator)
  bool contiguous_gradients = true;             // default True
  bool reduce_scatter = true;                   // default True
  // use_multi_rank_bucket_allreduce default True (0.19.8 runtime/zero/config.py): stage 1/2 all-reduce
  // each whole bucket; False: each gradient slice is dist.reduce'd to the rank owning it.
  bool use_multi_rank_bucket_allreduce = true;
  int64_t prefetch_bucket_size = 50'000'000;      // stage3_prefetch_bucket_size default 5e7 (docs say 5e8)
  int64_t param_persistence_threshold = 100'000;  // stage3_param_persistence_threshold default 1e5
  int64_t max_live_parameters = 1'000'000'000;    // stage3_max_live_parameters default 1e9
  int64_t max_reuse_distance = 1'000'000'000;     // stage3_max_reuse_distance default 1e9
  int64_t sub_group_size = 1'000'000'000;         // sub_group_size default 1e9
  // data_types.grad_accum_dtype (runtime/config.py; unset = Default, resolved per version by
  // planner::runtime_path): decides stage 0's wrapper and stage 1's BF16_Optimizer.
  GradAccumDtype grad_accum_dtype = GradAccumDtype::Default;
  bool zero_init = true;   // HF Trainer with a stage-3 config uses zero.Init (deepspeed.zero.Init)
  bool pin_memory = true;  // offload_*.pin_memory (DeepSpeed default False; we emit True)
  // Expert-parallel size (DeepSpeed AutoEP, ds_config expert_parallel.autoep_size;
  // planner/expert_parallel.h). 1: the HF MoE experts are ordinary parameters (no AutoEP).
  int ep_size = 1;
  // zero_optimization.leaf_module read for the model's MoE blocks (configs/check.cpp); Auto defers
  // to TrainingSpec::moe_leaf (planner/zero3_leaf.h effective_moe_leaf). Stage 3 only.
  MoeLeaf moe_leaf = MoeLeaf::Auto;
  // zero_optimization.memory_efficient_linear (runtime/zero/config.py, default true): stage 3 replaces
  // torch.nn.functional.linear by zero3_linear_wrap (op_model.h RuntimeKernels, memory_model.cpp).
  // The search copies TrainingSpec::memory_efficient_linear (--memory-efficient-linear); `check`
  // reads the user's config.
  bool memory_efficient_linear = true;
  // bf16.bf16_master_weights_and_grads and bf16.bf16_optimizer_states (DeepSpeed >= 0.18.3,
  // runtime/precision_config.py; runtime/base_optimizer.py _configure_master_weights): the ZeRO
  // optimizer's master partition and its gradient in bf16 instead of fp32, and with the second also
  // Adam's two moments. Stages 1-3 only; without bf16 optimizer states DeepSpeed requires optimizer
  // offload with DeepSpeedCPUAdam (configs/check.cpp says so). They change the numerics, so the
  // search never turns them on by itself.
  bool bf16_master_weights = false;
  bool bf16_optimizer_states = false;
  // optimizer.type "muon" (runtime/zero/muon/muon_optimizer.py MuonWithAuxAdam; planner/muon.h): the
  // matrices keep one momentum (and DeepSpeed's staged copy of it) instead of Adam's two moments, and the
  // step orthogonalizes them. Set from TrainingSpec::muon by the search, from the config by `check`.
  bool muon = false;
  // zero_optimization.stage3_gather_16bit_weights_on_model_save (runtime/zero/config.py, default False):
  // whether save_16bit_model (HF Trainer.save_model) gathers the stage-3 model on rank 0
  // (planner/save_phase.h). zeroplan's emitted stage-3 configs set it true; `check` reads the user's.
  bool gather_16bit_weights_on_model_save = false;
  // seq_parallel_communication_data_type (runtime/config.py; default "fp32", runtime/constants.py
  // SEQ_PARALLEL_COMMUNICATION_DATA_TYPE_DEFAULT): under Ulysses SP the engine's communication_data_type
  // becomes it (engine.py), so stages 0 and 3 reduce gradients in fp32 unless the config says
  // "bf16"/"fp16" (false here); stages 1-2 use fp32 whatever it says (planner/sequence_parallel.h).
  bool seq_parallel_comm_fp32 = true;
  // ZeRO++ hierarchical partitioning, zero_optimization.zero_hpz_partition_size (runtime/zero/config.py,
  // default 1; read at stage 3 only: stage3.py DeepSpeedZeroOptimizer_Stage3). Each released parameter
  // keeps a second partition split over hpz consecutive ranks (partition_parameters.py
  // _partition_param_sec), which later gathers read inside that group (all_gather_coalesced
  // use_secondary_tensor). Planned by planner/hpz.h.
  int hpz_partition_size = 1;
  // The hpZ group size DeepSpeed builds: stage 3 only, clamped to the world (utils/groups.py
  // _create_zero_param_parallel_group `min(group_size, world_size)`).
  int hpz(int world) const { return stage == 3 ? std::clamp(hpz_partition_size, 1, std::max(1, world)) : 1; }
  // ZeRO++ qwZ and qgZ, zero_optimization.zero_quantized_weights / zero_quantized_gradients
  // (runtime/zero/config.py, default False; read at stage 3 only). Planned by planner/zeropp_quant.h.
  bool quantized_weights = false;
  bool quantized_gradients = false;
  // qwZ in force: stage 3's parameter gathers send int8 plus fp32 scales.
  bool qwz() const { return stage == 3 && quantized_weights; }
  // qgZ in force: stage3.py __avg_scatter_grads takes all_to_all_quant_reduce only when
  // world / GPUs per node > 1 (`num_nodes > 1`); on one node it runs the plain reduce-scatter.
  bool qgz(int nodes) const { return stage == 3 && quantized_gradients && nodes > 1; }
  // Whether stage 3 runs DeepSpeed's zero3_linear_wrap (the rule the time and memory models share).
  bool zero3_linear_wrap() const { return stage == 3 && memory_efficient_linear; }

  // DeepSpeed's defaults for `stage` (overlap_comm is True for stage 3).
  static ZeroConfig deepspeed_defaults(int stage);
};

// Bytes per element of the ZeRO optimizer's master partition and of its gradient: runtime/
// base_optimizer.py _configure_master_weights returns torch.bfloat16 under bf16_master_weights_and_grads,
// torch.float32 otherwise (stage_1_and_2.py / stage3.py create single_partition_of_fp32_groups /
// fp32_partitioned_groups_flat and their .grad in that dtype, also in fp32 training).
int64_t master_bytes(const ZeroConfig& z);
// Adam's exp_avg + exp_avg_sq per element: torch/FusedAdam create them like the master they update (bf16
// under bf16_optimizer_states); an offloaded optimizer's DeepSpeedCPUAdam keeps fp32 moments unless built
// with fp32_optimizer_states=False, which 0.19.8's engine does under bf16_optimizer_states (engine.py
// get_optimizer_configuration) and 0.18.9's does not (its default True).
int64_t moment_bytes(const ZeroConfig& z, DeepSpeedVersion v);

}  // namespace zeroplan::planner
