// The checkpoint save's disk and host memory (planner/save_phase.h).
#include "planner/save_phase.h"

#include <algorithm>

#include "common/checked.h"
#include "planner/ds_runtime.h"
#include "planner/parallel.h"

namespace zeroplan::planner {

SaveEstimate estimate_save(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                           int64_t training_host_per_node) {
  SaveEstimate e;
  const MemoryStats& m = s.mem;
  const int64_t psi = m.total_params, psi_t = m.trainable_params;
  if (psi <= 0) return e;
  const bool fp32 = w.train.precision == Precision::FP32;
  const int64_t pe = fp32 ? 4 : 2;
  // ASSUMPTION: every parameter partitioned over the ZeRO group; AutoEP's expert parameters, partitioned over
  // their expert-data-parallel group instead (planner/expert_parallel.h), are not told apart here.
  const int64_t N = std::max<int64_t>(1, layout_of(w, z).zero());
  const bool off_opt = z.stage >= 1 && z.offload_optimizer != Offload::None;
  const RuntimePath path =
      runtime_path(w.train.deepspeed_version, z.stage, w.train.precision, z.grad_accum_dtype, off_opt);
  // The optimizer's tensors per element (planner/zero_config.h): the master and Adam's two moments.
  const int64_t master = master_bytes(z);
  const int64_t moments = moment_bytes(z, w.train.deepspeed_version);
  const bool partitioned = z.stage >= 1 || path.wrapper == OptimizerWrapper::BF16Optimizer;
  // One rank's partition: stages 1/2 (and BF16_Optimizer) pad the flat buffer to 2N elements
  // (stage_1_and_2.py / bf16_optimizer.py); stage 3 partitions each tensor, ~Psi_t / N.
  const int64_t part = z.stage == 3 ? ceil_div(psi_t, N) : ceil_div(psi_t, 2 * N) * 2;

  // ---- DeepSpeed's checkpoint files (recorded: *_save fixtures, tensor bytes + a few KB of pickle).
  if (z.stage == 3) {
    e.checkpoint_model_file_bytes = 0;  // zero_pp_rank_*_model_states.pt: no weights (12 KB recorded)
  } else if (partitioned) {
    // the module's 16-bit state dict (LoRA: exclude_frozen_parameters, the adapters; ASSUMPTION as below)
    e.checkpoint_model_file_bytes = checked_mul(pe, w.train.method == Method::Full ? psi : psi_t);
  } else {
    // Stage 0 without ZeRO: the optimizer's state is saved with the module (FP16_Optimizer: fp32 master
    // + moments; fp32 training: the moments only).
    e.checkpoint_model_file_bytes = checked_add(checked_mul(pe, psi), checked_mul(fp32 ? 8 : 12, psi_t));
  }
  if (partitioned) e.checkpoint_optim_file_bytes = checked_mul(master + moments, part);
  e.checkpoint_total_bytes = checked_add(e.checkpoint_model_file_bytes,
                                         partitioned ? checked_mul(N, e.checkpoint_optim_file_bytes) : 0);
  // ---- the 16-bit model file. LoRA/QLoRA: ASSUMPTION, the adapters only (PEFT's save_pretrained writes
  // the trainable adapter weights, and the HF Trainer saves DeepSpeed checkpoints of PEFT models with
  // exclude_frozen_parameters); not recorded, so the frozen base never blocks a plan here.
  const bool model16 = z.stage < 3 || z.gather_16bit_weights_on_model_save;
  const int64_t saved16 = w.train.method == Method::Full ? psi : psi_t;
  e.model16_file_bytes = model16 ? checked_mul(pe, saved16) : 0;

  // ---- host RAM on node 0 beyond training's (GPU runs; on CPU ranks the tensors are host memory already
  // and torch.save copies nothing).
  const bool gpu = w.train.runtime == Runtime::Cuda;
  const int64_t ranks_on_node = std::min<int64_t>(N, std::max(1, w.cluster.gpus_per_node));
  // Rank 0's module state dict at stages 0-2: the 16-bit parameters are views of one flat buffer
  // (stage_1_and_2.py bit16_groups_flat, FP16_Optimizer fp16_groups_flat), which torch.save copies whole.
  const int64_t module_storage = gpu && z.stage < 3 ? checked_mul(pe, psi_t) : 0;
  if (gpu) {
    // Each rank's largest optimizer storage, copied to the host one at a time: the flat master and each
    // moment tensor (stage 3: per sub group of sub_group_size elements). Already on the host when offloaded.
    const int64_t sub = z.stage == 3 ? std::min(z.sub_group_size, part) : part;
    // (fp32 training without ZeRO keeps per-parameter moments: its largest tensor.)
    const int64_t unpartitioned = fp32 ? m.trainable_tensors.largest_numel() : psi_t;
    const int64_t largest_opt =
        off_opt ? 0 : checked_mul(std::max(master, moments / 2), partitioned ? sub : unpartitioned);
    e.checkpoint_host_bytes_node0 = partitioned ? checked_add(checked_mul(ranks_on_node - 1, largest_opt),
                                                              std::max(largest_opt, module_storage))
                                                : std::max(largest_opt, module_storage);
  }
  // save_16bit_model on rank 0: at stage 3 the gathered model kept on the host (recorded on CPU ranks:
  // llama-gqa_s3_n2_bf16_save, 2 x Psi plus gloo's staging of the gathers); at stages 0-2 torch.save's
  // copy of the flat 16-bit buffer.
  e.model16_host_bytes_node0 = !model16 ? 0 : z.stage == 3 ? checked_mul(pe, saved16) : module_storage;
  e.host_bytes_node0 = std::max(e.checkpoint_host_bytes_node0, e.model16_host_bytes_node0);
  const int64_t cap = w.cluster.host_memory_bytes_per_node;
  e.host_ok = cap <= 0 || checked_add(training_host_per_node, e.host_bytes_node0) <= cap;
  return e;
}

}  // namespace zeroplan::planner
