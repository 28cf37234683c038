// The memory model: every buffer a DeepSpeed ZeRO rank holds, with the phases in which it is live.
// docs/memory-model.md explains each formula; the comments cite the code or paper each one models.
//
// Conventions: Psi = parameters, Psi_t = trainable, N = data-parallel degree (world size: zeroplan
// plans pure data parallelism), sizes in bytes. Model states follow the ZeRO paper (Rajbhandari et
// al. 2020, §5.1 and Table 1): mixed-precision Adam keeps 2Psi (16-bit params) + 2Psi (16-bit grads)
// + K*Psi with K = 12 (fp32 master params, Adam momentum and variance), split per stage:
//   stage 0: (2+2+K)Psi; stage 1: 2Psi + 2Psi + K*Psi/N; stage 2: 2Psi + (2+K)Psi/N;
//   stage 3: (2+2+K)Psi/N.
// Runtime buffers follow DeepSpeed v0.16 (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py,
// partition_parameters.py, partitioned_param_coordinator.py; bf16_optimizer.py and
// fp16/fused_optimizer.py for stage 0).
//
// Shape (issue 25): estimate_memory computes the plan's sizes once (StatesContext) and hands them to
// one policy per DeepSpeed runtime path -- add_plain_optimizer, add_fp16_optimizer, add_bf16_optimizer,
// add_zero12_optimizer (+ add_zero12_offload_host), add_stage3_states -- each adding the named buffers
// with their lifetimes; activations (add_activations) and overhead (add_overhead) plug in beside them,
// and estimate_memory then settles the phases' moments and the totals.
#include "planner/memory_model.h"

#include <algorithm>
#include <string_view>

#include "common/checked.h"
#include "planner/checkpoint_offload.h"
#include "planner/ds_runtime.h"
#include "planner/engine_runtime.h"
#include "planner/expert_parallel.h"
#include "planner/liger_chunk.h"
#include "planner/muon.h"
#include "planner/parallel.h"
#include "planner/sequence_parallel.h"
#include "planner/tensor_parallel.h"
#include "planner/tiled_mlp.h"
#include "planner/zero3_leaf.h"

namespace zeroplan::planner {

namespace {

constexpr uint8_t kFwdBwd = kForward | kBackward;

// NCCL_BUFFSIZE default: 4 MiB (4194304 bytes) per connection buffer of the Simple protocol
// (NCCL docs, "Environment Variables": NCCL_BUFFSIZE, default 4194304).
constexpr int64_t kNcclBuffSize = 4 * 1024 * 1024;

// Channels NCCL opens for a ring over this link. Assumption (stated in docs/memory-model.md): NCCL
// picks its channel count from the topology search; we take 2 over PCIe and 16 over NVLink/NVSwitch,
// the counts NCCL_DEBUG=INFO typically reports ("N coll channels") on such systems.
int64_t nccl_channels(const hw::LinkProfile& link) {
  switch (link.kind) {
    case hw::LinkKind::NVSwitch:
    case hw::LinkKind::NVLink:
      return 16;
    default:
      return 2;
  }
}

// HF transformers writes checkpoints in shards of at most max_shard_size = "5GB"
// (modeling_utils.py save_pretrained default); loading under zero.Init reads one shard at a time on
// every rank (_load_state_dict_into_zero3_model).
constexpr int64_t kCheckpointShardBytes = 5'000'000'000;

// deepspeed/runtime/zero/offload_config.py (v0.16): DeepSpeedZeroOffloadOptimizerConfig.buffer_count
// = 4; DeepSpeedZeroOffloadParamConfig.buffer_count = 5 and buffer_size = 1e8 elements.
constexpr int64_t kNvmeOptimizerBufferCount = 4;
constexpr int64_t kNvmeParamBufferCount = 5;
constexpr int64_t kNvmeParamBufferSize = 100'000'000;

struct Stage3Sizes;

// A buffer DeepSpeed frees by the end of the step (not there after it), whose share of the backward is
// `moment` (Buffer::Moment).
void freed_by_step(Buffer& b, Buffer::Moment moment) {
  b.after_step = false;
  b.backward_moment = moment;
}

// What the model-state policies below read: the plan's sizes and its DeepSpeed runtime path, computed
// once by estimate_memory.
struct StatesContext {
  const Workload& w;
  const MemoryStats& m;
  const ZeroConfig& z;
  int64_t N;   // ZeRO partition degree (planner/parallel.h)
  int64_t pe;  // bytes of a parameter element: 2 (16-bit), 4 (fp32 training)
  bool fp32;
  int64_t psi_t;  // trainable parameters
  int stage;
  bool off_opt, off_param, pinned;
  int64_t frozen16, frozen_q;  // LoRA's frozen 16-bit elements, QLoRA's NF4 bytes
  int64_t padded_t, part_t;    // stage 1/2 flat buffer padded to 2N, and its 1/N
  RuntimePath path;
  bool engine;  // zeroplan's native engine (planner/engine_runtime.h), not DeepSpeed
  EngineGradientRules engine_rules;
  uint8_t full_grad_phases;
  Buffer::Moment full_grad_moment;

  // The optimizer's element sizes (planner/zero_config.h master_bytes / moment_bytes) and the names of
  // the master and its gradient in that dtype.
  int64_t master_bytes() const { return planner::master_bytes(z); }
  int64_t moment_bytes() const { return planner::moment_bytes(z, w.train.deepspeed_version); }
  const char* master_name() const {
    return z.bf16_master_weights ? "bf16 master params (partition)" : "fp32 master params (partition)";
  }
  const char* master_grad_name() const {
    return z.bf16_master_weights ? "bf16 gradient partition" : "fp32 gradient partition";
  }
  // With a bf16 master over a bf16 model, the step's `.to(master dtype)` of the flat 16-bit gradient
  // partition returns that tensor itself: no separate fp32 copy exists.
  bool master_is_16bit() const { return z.bf16_master_weights && pe == 2; }

  // The policies, one per DeepSpeed runtime path (definitions below), and what plugs in beside them.
  void add_flat_parameters(MemoryBreakdown& out) const;
  void add_stage0_allreduce_copy(MemoryBreakdown& out) const;
  void add_plain_optimizer(MemoryBreakdown& out) const;
  void add_fp16_optimizer(MemoryBreakdown& out) const;
  void add_bf16_optimizer(MemoryBreakdown& out) const;
  void add_zero12_optimizer(MemoryBreakdown& out) const;
  void add_zero12_gradients(MemoryBreakdown& out, const char* gip_name, int64_t gip_bytes) const;
  void add_zero12_optimizer_states(MemoryBreakdown& out, bool compact) const;
  void add_muon_states(MemoryBreakdown& out) const;
  int64_t add_zero12_offload_host(MemoryBreakdown& out) const;  // returns the bytes swapped to NVMe
  int64_t add_stage3_states(MemoryBreakdown& out) const;        // returns the bytes swapped to NVMe
  Stage3Sizes stage3_sizes() const;
  void add_transient_parameter_gradient(MemoryBreakdown& out) const;
  void add_activations(MemoryBreakdown& out) const;
  void add_layer_checkpoints(MemoryBreakdown& out, int64_t b) const;  // full checkpointing's inputs
  void add_loss(MemoryBreakdown& out, int64_t b, bool liger) const;   // the loss's tensors
  void add_overhead(MemoryBreakdown& out) const;
  int64_t host_load_per_rank() const;
  void settle_backward_moments(MemoryBreakdown& out) const;
};

// Stage 0's all-reduce of the 16-bit gradients (plain and FP16_Optimizer paths): engine.py flattens a
// bucket of them first.
void StatesContext::add_stage0_allreduce_copy(MemoryBreakdown& out) const {
  // DeepSpeed's engine also does it with one rank (recorded: llama-gqa_s0_n1_bf16_default's backward
  // all_reduce of 4,459,008 B from allreduce_bucket, and a backward peak of baseline + 2 x 2Psi).
  if (stage == 0 && (N > 1 || !engine) && (!engine || engine_rules.allreduce_copies_gradients) &&
      (path.wrapper == OptimizerWrapper::Basic || path.wrapper == OptimizerWrapper::FP16Optimizer)) {
    // engine.py allreduce_bucket: `tensor = self.flatten(bucket)`, a flat copy of the gradients of
    // a bucket (allreduce_no_retain: up to MEMORY_OPT_ALLREDUCE_SIZE = 5e8 elements plus the
    // parameter that crosses it) in their dtype, alive during the all-reduce at the end of backward.
    // Recorded: llama-gqa_s0_n2_{bf16,fp32}_default backward peak = baseline + gradients + this copy.
    const int64_t grad_elem = pe;
    const int64_t largest = m.trainable_tensors.largest_numel();
    freed_by_step(out.add_gpu("gradient all-reduce flat copy", Category::Buffers,
                              checked_mul(grad_elem, std::min(psi_t, checked_add(500'000'000, largest))),
                              kBackward, "engine.py allreduce_bucket: flatten(bucket) of the gradients"),
                  Buffer::Moment::End);
  }
}

// No wrapper: fp32 training without ZeRO, the optimizer on the module's own fp32 parameters.
void StatesContext::add_plain_optimizer(MemoryBreakdown& out) const {
  if (engine && engine_rules.stage0_flat_grads_persistent) {
    out.add_gpu("fp32 gradients (flat, allocated once)", Category::Gradients, checked_mul(4, padded_t),
                kAllPhases, "engine setup(): param.grad of every parameter in one padded flat buffer");
  } else {
    freed_by_step(out.add_gpu("fp32 gradients", Category::Gradients, checked_mul(4, psi_t), full_grad_phases,
                              "4Psi: fp32 training without ZeRO (torch optimizer on fp32 params)"),
                  full_grad_moment);
  }
  out.add_gpu("Adam momentum + variance", Category::OptimizerStates, checked_mul(8, psi_t), kAllPhases,
              "8Psi: Adam exp_avg + exp_avg_sq in fp32; no master copy in fp32 training");
}

// runtime/bf16_optimizer.py BF16_Optimizer (stage 0/1 with fp32 gradient accumulation).
void StatesContext::add_bf16_optimizer(MemoryBreakdown& out) const {
  // bf16_optimizer.py BF16_Optimizer._setup_for_real_optimizer: fp32_groups_gradients_flat (fp32
  // gradients of the whole padded flat, every rank), fp32_groups_flat_partition (this rank's
  // fp32 master, padded/N) and the inner optimizer's exp_avg/exp_avg_sq on that partition.
  // No IPG bucket: gradients go straight into the fp32 buffer (DeepSpeed 0.16: stage 0 default
  // bf16; >= 0.18: stage 0/1 with grad_accum_dtype fp32).
  out.add_gpu("fp32 gradient accumulation buffer", Category::Gradients, checked_mul(4, padded_t), kAllPhases,
              "BF16_Optimizer fp32_groups_gradients_flat: 4 x padded Psi")
      .ds_name = "optimizer.fp32_groups_gradients_flat";
  out.add_gpu("fp32 master params (partition)", Category::OptimizerStates, checked_mul(4, part_t), kAllPhases,
              "BF16_Optimizer fp32_groups_flat_partition: 4 x padded Psi / N")
      .ds_name = "optimizer.fp32_groups_flat_partition";
  out.add_gpu("Adam momentum + variance (partition)", Category::OptimizerStates, checked_mul(8, part_t),
              kAllPhases, "inner optimizer exp_avg + exp_avg_sq on the fp32 partition");
  // bfloat16 config immediate_grad_update defaults to False (precision_config.py), so autograd's
  // bf16 param.grad live through the whole backward and are added into the fp32 buffer only in
  // BF16_Optimizer.backward_epilogue (engine.py _backward_epilogue).
  // DeepSpeed 0.16.9 at stage 0 keeps them after the step as well (recorded in
  // tests/deepspeed/fixtures-other-versions/0.16.9/llama-gqa_s0_*_bf16_*: gradient storages
  // 13,377,024 B = fp32 buffer + bf16 grads before and after the step); its stage 1 and 0.19.8
  // free them (recorded: 8,918,016 B after the step).
  const bool kept = w.train.deepspeed_version == DeepSpeedVersion::V0_16_9 && stage == 0;
  if (engine && stage == 0 && engine_rules.stage0_immediate_grad_update) {
    const int64_t largest = m.trainable_tensors.largest_numel();
    out.add_gpu("16-bit gradient (immediate update, one at a time)", Category::Gradients,
                checked_mul(pe, largest), kBackward,
                "engine grad_slot/grad_ready: each bf16 grad is added to the fp32 buffer and freed")
        .after_step = false;
  } else {
    // Alive into the step: DeepSpeed frees them in step(), not in the epilogue (recorded
    // model_states_before_step of llama-gqa_s1_n{1,2,4}_bf16_gaccfp32, 0.18.9 and 0.19.8: 6Psi
    // of gradient storages = the fp32 buffer + these).
    Buffer& grads =
        out.add_gpu("16-bit gradients (until the step)", Category::Gradients, checked_mul(pe, psi_t),
                    kept     ? uint8_t(kAllPhases)
                    : engine ? uint8_t(kBackward)
                             : uint8_t(kBackward | kStep),
                    "bf16 param.grad, accumulated into fp32 at the end of backward, freed in step()");
    grads.after_step = kept;
    if (!kept) grads.backward_moment = Buffer::Moment::End;
  }
  if (!engine || engine_rules.allreduce_copies_gradients) {  // also with one rank: the engine still
                                                             // calls all_reduce (recorded in
                                                             // llama-gqa_s1_n1_bf16_gaccfp32)
    // The engine all-reduces the fp32 gradient buffer (get_grads_for_reduction: one flat tensor,
    // which flatten_dense_tensors views without a copy) in communication_data_type: allreduce_bucket's
    // `tensor.to(self.communication_data_type)` is a 16-bit copy, alive with the bf16 grads at the
    // end of backward. Recorded: llama-gqa_s1_n{2,4}_bf16_gaccfp32 backward peak = baseline + 2 x 2Psi.
    freed_by_step(
        out.add_gpu("gradient all-reduce 16-bit copy", Category::Buffers, checked_mul(pe, psi_t), kBackward,
                    "engine.py allreduce_bucket: fp32 gradients cast to the communication dtype"),
        Buffer::Moment::End);
  }
}

// runtime/fp16/fused_optimizer.py FP16_Optimizer (stage 0 in 16 bits).
void StatesContext::add_fp16_optimizer(MemoryBreakdown& out) const {
  // fp16/fused_optimizer.py FP16_Optimizer.__init__: fp16_groups_flat (the 16-bit params, whose
  // .data become views of it) and fp32_groups_flat = fp16_groups_flat.clone().float(), both
  // unpartitioned; FusedAdam's exp_avg/exp_avg_sq on the fp32 flat. The engine all-reduces the
  // 16-bit param.grad (engine.py buffered_allreduce_fallback); DeepSpeed >= 0.18 runs bf16
  // without ZeRO here too (DDP_BFLOAT16).
  freed_by_step(out.add_gpu("16-bit gradients", Category::Gradients, checked_mul(2, psi_t), full_grad_phases,
                            "param.grad in the model dtype, 2Psi (freed by step: zero_grad)"),
                full_grad_moment);
  out.add_gpu("fp32 master params", Category::OptimizerStates, checked_mul(4, psi_t), kAllPhases,
              "FP16_Optimizer fp32_groups_flat: 4Psi, every rank")
      .ds_name = "optimizer.fp32_groups_flat";
  out.add_gpu("Adam momentum + variance", Category::OptimizerStates, checked_mul(8, psi_t), kAllPhases,
              "FusedAdam exp_avg + exp_avg_sq on the fp32 flat: 8Psi, every rank");
  // FP16_Optimizer.step: `p.grad.to(fp32)` for every parameter, then _flatten_dense_tensors of that
  // list: two fp32 copies of all gradients exist together.
  out.add_gpu("fp32 gradient copies at step", Category::Buffers, checked_mul(8, psi_t), kStep,
              "FP16_Optimizer.step: per-param fp32 grads + their flat copy (8Psi)")
      .after_step = false;
}

// runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer, ZeRO stages 1 and 2 (GPU side).
// Stages 1/2: the full or partitioned gradients, and the reduction's transient copies
// (add_zero12_optimizer's comment says which holds what).
void StatesContext::add_zero12_gradients(MemoryBreakdown& out, const char* gip_name,
                                         int64_t gip_bytes) const {
  if (stage == 1) {
    // DeepSpeed: the full gradients live until the boundary's reduction, which copies each into
    // the IPG bucket (or reduces it in place) and keeps only the partition for the step. The
    // step phase is the boundary's step.
    // With optimizer offload the reduction copies the partition to the host instead
    // (async_inplace_copy_grad_to_fp32_buffer_from_gpu; host buffers below); recorded
    // llama-gqa_s1_n2_bf16_offloadopt: no 16-bit gradients left when the step begins.
    const bool ds = !engine;
    const uint8_t phases = !ds                ? full_grad_phases
                           : z.grad_accum > 1 ? uint8_t(kForward | kBackward)
                                              : uint8_t(kBackward);
    freed_by_step(out.add_gpu(fp32 ? "fp32 gradients" : "16-bit gradients", Category::Gradients,
                              checked_mul(pe, psi_t), phases, "stage 1: full gradients (ZeRO paper 2Psi)"),
                  full_grad_moment);
    if (ds && !off_opt)
      out.add_gpu(gip_name, Category::Gradients, gip_bytes, kStep,
                  "stage 1: grads_in_partition after the boundary reduction, parameters in the partition "
                  "whole")
          .after_step = false;
    // The same buffer while the boundary reduction runs: an early reduce_ipg_grads allocates
    // grads_in_partition whole (copy_grads_in_partition) while the full 16-bit gradients not yet
    // copied into the IPG bucket are alive. Traced (issue 23, llama-gqa_s1_n2_bf16_rbs50k, 0.19.8 and
    // 0.16.9: the allocator around the optimizer's reduction calls): +2,360,320 B inside the second
    // reduce_ipg_grads, the recorded backward peak (a 50,000-element bucket). With a bucket that takes
    // every gradient in one flush (llama-gqa_s1_n2_bf16_default) the gradients are in the bucket, their
    // own storage released, before the partition exists: no overlap there. Between the two, the overlap
    // is the partition less the gradients the first flush moved out, pe x min(bucket, Psi). Kept apart
    // from the Gradients category: the ZeRO paper's steady-state 2Psi of stage-1 gradients (Table 1)
    // is the full gradients; this is the transient overlap at the end of the backward.
    const int64_t overlap =
        std::max<int64_t>(0, gip_bytes - checked_mul(pe, std::min(z.reduce_bucket_size, psi_t)));
    if (ds && !off_opt && z.contiguous_gradients && overlap > 0)
      freed_by_step(out.add_gpu("grads_in_partition during the boundary reduction", Category::Buffers,
                                overlap, kBackward,
                                "stage 1: copy_grads_in_partition allocates the partition while gradients "
                                "not yet moved into the bucket are alive"),
                    Buffer::Moment::End);
  } else if (!off_opt) {
    // Stage 2 without contiguous gradients (DeepSpeed's engine): each param.grad stays whole until its
    // bucket is flushed, and the flush (reduce_ipg_grads -> buffered_reduce_fallback ->
    // allreduce_bucket) flattens the bucket's gradients into one more copy while they are alive.
    // Recorded (llama-gqa_s2_n2_bf16_nocontig, 0.19.8, a bucket larger than the model): the backward
    // peaks at the baseline + 2 x 2Psi, the gradients and their flat copy, with grads_in_partition
    // not yet alive beside them. With one flush (the bucket takes every gradient) and no accumulation
    // the partition therefore leaves the backward; with several flushes, or micro-steps after the
    // first, it is alive beside the next bucket (not recorded: kept at the backward's end).
    const bool flush_grads = !engine && !z.contiguous_gradients && stage == 2;
    const int64_t bucket_grads =
        std::min(psi_t, checked_add(z.reduce_bucket_size, m.trainable_tensors.largest_numel()));
    const bool one_flush = flush_grads && bucket_grads >= psi_t && z.grad_accum == 1;
    out.add_gpu(gip_name, Category::Gradients, gip_bytes, one_flush ? uint8_t(kStep) : full_grad_phases,
                "stage 2: grads_in_partition, the parameters overlapping the partition whole")
        .after_step = false;
    if (flush_grads)
      for (const char* name : {"16-bit gradients awaiting the bucket flush", "bucket flush flat copy"})
        freed_by_step(out.add_gpu(name, Category::Buffers, checked_mul(pe, bucket_grads), kBackward,
                                  "contiguous_gradients false: param.grads wait for their bucket's flush, "
                                  "which flattens them"),
                      Buffer::Moment::End);
  }
  if (stage == 1 && !engine && !z.contiguous_gradients && !off_opt) {
    // Without contiguous gradients the boundary reduction goes through the engine's fallback
    // (reduce_gradients -> buffered_reduce_fallback -> allreduce_bucket): a flat copy of the gradients of
    // each reduce_bucket_size chunk (plus the parameter that crosses it), alive with every full
    // gradient. Traced (llama-gqa_s1_n2_bf16_nocontig, 0.19.8, the allocator around those calls):
    // +4,459,018 B inside allreduce_bucket on top of the 2Psi gradients, the recorded backward peak.
    const int64_t largest = m.trainable_tensors.largest_numel();
    freed_by_step(
        out.add_gpu(
            "boundary reduction flat copy", Category::Buffers,
            checked_mul(pe, std::min(psi_t, checked_add(z.reduce_bucket_size, largest))), kBackward,
            "contiguous_gradients false: buffered_reduce_fallback's flatten of a bucket of gradients"),
        Buffer::Moment::End);
  }
  if (stage == 1 && engine && engine_rules.stage1_grads_in_partition && !off_opt) {
    freed_by_step(
        out.add_gpu(fp32 ? "fp32 gradient partition" : "16-bit gradient partition", Category::Gradients,
                    checked_mul(pe, part_t), uint8_t(kBackward | kStep),
                    "engine reduce_at_boundary: grads_in_partition from the boundary reduction to the step"),
        Buffer::Moment::End);
  }
}

// Stages 1/2 with the optimizer on the GPU: the master partition, Adam's moments and the step's copies.
void StatesContext::add_zero12_optimizer_states(MemoryBreakdown& out, bool compact) const {
  if (off_opt) return;
  const PartitionHoldings& held = m.params_in_partition;
  if (z.muon) {
    add_muon_states(out);
  } else {
    // single_partition_of_fp32_groups (`.clone().float()` of the rank's flat partition, also in
    // fp32 training) + Adam exp_avg, exp_avg_sq.
    out.add_gpu(master_name(), Category::OptimizerStates, checked_mul(master_bytes(), part_t), kAllPhases,
                "stage_1_and_2.py single_partition_of_fp32_groups: 4 (bf16 master: 2) x padded Psi / N")
        .ds_name = "optimizer.single_partition_of_fp32_groups";
    out.add_gpu("Adam momentum + variance (partition)", Category::OptimizerStates,
                checked_mul(moment_bytes(), part_t), kAllPhases,
                "K*Psi/N with the master above, K=12 (ZeRO paper; stage_1_and_2.py; bf16 states: 4 bytes)");
  }
  // initialize_optimizer_states allocates the fp32 grad partition and frees it again; step()
  // re-creates it from the 16-bit partition for the optimizer step: flat_grad_partition =
  // self.flatten(self.averaged_gradients[i]) (a flat copy of the partition's slices of
  // grads_in_partition, in the model dtype), then `.to(fp32)` while that copy is alive. The
  // compact fp32 buffer (0.19) is used as it is (_get_preflattened_grad_partition, `.to` of an
  // fp32 tensor is the tensor itself); in fp32 training the flat copy is the fp32 partition.
  // Recorded (issue 23): llama-gqa_s{1,2}_n2_bf16 step peak - baseline = grads_in_partition
  // 2,360,320 + flat copy 2,229,504 + fp32 copy 4,459,008 (+ 8 B of scalars).
  if (!compact && !master_is_16bit()) {
    Buffer& b = out.add_gpu("fp32 gradient partition at step", Category::Buffers, checked_mul(4, part_t),
                            kStep, "stage_1_and_2.py step: single_grad_partition .to(fp32), 4Psi/N");
    b.after_step = false;
    if (!engine) b.step_moment = Buffer::StepMoment::Update;
  }
  if (!engine && !compact && !fp32) {
    Buffer& b =
        out.add_gpu("16-bit flat gradient partition at step", Category::Buffers, checked_mul(pe, part_t),
                    kStep, "stage_1_and_2.py step: flatten(averaged_gradients), alive during its .to(fp32)");
    b.after_step = false;
    b.step_moment = Buffer::StepMoment::Update;
  }
  if (!engine && !m.params_only) {
    // step() -> scaled_global_norm -> get_grad_norm_direct, before the flat copies above exist:
    // `torch.linalg.vector_norm(g.data.double())` per gradient view of the partition (the .double()
    // since DeepSpeed 0.14 at least; 0.19.8 writes .to(get_norm_dtype()), fp64 wherever the device
    // has it), so one fp64 copy of the largest parameter's share of the partition is alive at a
    // time. Measured with the harness's allocator (llama-gqa_s1_n4_bf16_default, rank 0: the
    // embedding's 524,288 elements, +4,194,312 B inside scaled_global_norm, which is that step's
    // peak).
    // (Without the parameter order -- QLoRA -- the largest trainable tensor, at most the partition; a
    // params-only model, whose tensors are unknown, gets none.)
    const int64_t largest = m.trainable_tensors.largest_numel();
    const int64_t piece = !held.valid              ? std::min(part_t, largest)
                          : w.train.models_rank0() ? held.rank0_piece
                                                   : held.largest_piece;
    Buffer& b =
        out.add_gpu("fp64 gradient copy for the norm", Category::Buffers, checked_mul(8, piece), kStep,
                    "stage_1_and_2.py get_grad_norm_direct: g.double() of the largest parameter's "
                    "share of the partition, one at a time");
    b.after_step = false;
    b.step_moment = Buffer::StepMoment::Norm;
  }
}

// Muon at stages 1-2 (planner/muon.h): two param groups, each partitioned on its own; the Adam group keeps
// its two fp32 moments, the Muon group one momentum over the whole matrices overlapping the rank's
// partition, in the gradient dtype, and DeepSpeed's staged copy of it. Recorded byte for byte
// (tests/deepspeed/fixtures-muon: llama-gqa_s2_n2_bf16_muon rank 0 holds gate/up of both layers and the
// first down_proj, 655,360 elements: momentum and staged copy 1,310,720 B each).
void StatesContext::add_muon_states(MemoryBreakdown& out) const {
  const MuonHoldings h = muon_holdings(w.model, N);
  const int64_t held = w.train.models_rank0() ? h.momentum_rank0 : h.momentum_largest;
  out.add_gpu(master_name(), Category::OptimizerStates,
              checked_mul(master_bytes(), h.muon_partition + h.adam_partition), kAllPhases,
              "stage_1_and_2.py single_partition_of_fp32_groups: 4 x (Muon group + Adam group partitions)")
      .ds_name = "optimizer.single_partition_of_fp32_groups";
  out.add_gpu(
      "Adam momentum + variance (Adam group partition)", Category::OptimizerStates,
      checked_mul(moment_bytes(), h.adam_partition), kAllPhases,
      "MuonWithAuxAdam's Adam half (embeddings, head, norms, biases): exp_avg + exp_avg_sq of its partition");
  out.add_gpu("Muon momentum (whole matrices in the partition)", Category::OptimizerStates,
              checked_mul(pe, held), kAllPhases,
              "stage_1_and_2.py _muon_momentum_buffer: sum of the held matrices' numel, gradient dtype");
  // (DeepSpeed's optimizer._muon_pending_momentum holds it beside the group's master partition:
  // known_exceptions.json buffer_attributes.)
  out.add_gpu("Muon staged momentum", Category::Buffers, checked_mul(pe, held), kAllPhases,
              "stage_1_and_2.py _muon_staging_momentum: a copy committed after the step, kept");
}

void StatesContext::add_zero12_optimizer(MemoryBreakdown& out) const {
  // ZeRO stages 1/2 (DeepSpeedZeroOptimizer). Stage 1 keeps full 16-bit gradients until the
  // accumulation boundary's reduction; stage 2 reduces them as they come. What the step keeps is
  // the rank's gradient partition, freed at the end of step():
  //  - grads_in_partition (copy_grads_in_partition), in the model dtype, holding every parameter
  //    that overlaps the rank's partition WHOLE (params_in_partition, get_partition_info), so a
  //    rank holding a parameter that straddles a partition boundary holds more than 2Psi/N;
  //    recorded (model_states_before_step, issue 23 items 3 and 4): llama-gqa at N = 2 / 4
  //    2,360,320 / 1,179,648 B where 2Psi/N is 2,229,504 / 1,114,752 B, at stage 1 as at 2.
  //  - with grad_accum_dtype fp32 over 16-bit weights (_use_compact_grad_partition_buffer), instead
  //    an fp32 buffer of exactly the partition (_build_compact_grad_partition_buffer:
  //    torch.zeros(partition_size, fp32)); recorded llama-gqa_s2_n{1,2,4}_bf16_gaccfp32: 4 x padded
  //    Psi / N.
  // DeepSpeed's engine only (zeroplan's native engine keeps its own rules below).
  // (_use_compact_grad_partition_buffer is new in 0.19: 0.16.9 and 0.18.9 keep grads_in_partition in
  // the model dtype, recorded in fixtures-other-versions/*/llama-gqa_s2_n*_bf16_gaccfp32.)
  const bool compact = !engine && !fp32 && path.grad_accum == Precision::FP32 &&
                       w.train.deepspeed_version == DeepSpeedVersion::V0_19_8;
  const PartitionHoldings& held = m.params_in_partition;
  const int64_t held_numel = !held.valid ? part_t : (w.train.models_rank0() ? held.rank0 : held.largest);
  const int64_t gip_bytes = compact ? checked_mul(4, part_t) : checked_mul(pe, engine ? part_t : held_numel);
  const char* gip_name = compact ? "fp32 gradient partition (compact)"
                         : fp32  ? "fp32 gradient partition"
                                 : "16-bit gradient partition";
  add_zero12_gradients(out, gip_name, gip_bytes);
  // Trainable parameters that received no gradient (a vision tower that saw no image: planner/vision.h):
  // independent_gradient_partition_epilogue's get_all_grad_tensors gives each of them among the rank's
  // params_in_partition a torch.zeros_like(param, dtype=gradient_accumulation_dtype), whole, which
  // averaged_gradients holds until the step (not on the compact-buffer or offload paths). Recorded
  // qwen2_5_vl_s{1,2}_n2_bf16_text (0.19.8): +580,480 B before the step = 2 B x the 290,240 tower and
  // merger parameters, all in rank 0's partition (the wrapper registers the tower first).
  const int64_t unused = !held.valid ? 0 : (w.train.models_rank0() ? held.unused_rank0 : held.unused_largest);
  if (!engine && !off_opt && !compact && unused > 0)
    out.add_gpu("zero gradients of parameters without one", Category::Gradients, checked_mul(pe, unused),
                kStep,
                "get_all_grad_tensors: torch.zeros_like for each trainable parameter in the partition that "
                "received no gradient")
        .after_step = false;
  add_zero12_optimizer_states(out, compact);
  // stage_1_and_2.py __init__: `self.contiguous_gradients = contiguous_gradients or self.cpu_offload`.
  if (z.contiguous_gradients || off_opt) {
    // DeepSpeedZeroOptimizer.backward: ipg_buffer = [torch.empty(reduce_bucket_size)], a second one
    // with overlap_comm; released after the reduction (_release_ipg_buffers).
    const int64_t nbuf = z.overlap_comm ? 2 : 1;
    // Stage 1 with accumulation: setup_buckets allocates it from the first micro-step's gradient
    // hooks and only the boundary's reduction releases it, so it stays through the micro-steps in
    // between (recorded llama-gqa_s1_n2_bf16_ga2: the second micro-step's forward peaks at the
    // bucket's 1 GB above the activations).
    const uint8_t ipg_phases =
        stage == 1 && z.grad_accum > 1 && !engine ? uint8_t(kAllPhases) : uint8_t(kBackward);
    out.add_gpu("gradient bucket (IPG)", Category::Buffers,
                checked_mul(checked_mul(pe, z.reduce_bucket_size), nbuf), ipg_phases,
                z.overlap_comm ? "2 x reduce_bucket_size elements (overlap_comm double buffer)"
                               : "reduce_bucket_size elements")
        .after_step = false;
  }
}

// Stage 3's partition arithmetic, shared by its policies below.
struct Stage3Sizes {
  int64_t thr;                // stage3_param_persistence_threshold
  int64_t t_part, f_part;     // trainable / frozen elements of this rank's partitions (padded per tensor)
  int64_t persist;            // elements of the persistent (small) parameters, whole
  int64_t q_elems;            // QLoRA's NF4 elements
  int64_t pers_part;          // partition elements of the persistent parameters
  int64_t param_part_bytes;   // the rank's non-persistent parameter partitions (NF4 as its bytes)
  bool plain;                 // no quantized weights: the partitions are fp16_partitioned_groups_flat
  int64_t frozen_part_bytes;  // LoRA/QLoRA frozen partitions
  bool views_of_partition;    // one rank: gathered parameters are views of the partition
  bool fetched_are_views;
};

// Stage 3's policies see the plan's context and its partition arithmetic.
struct Stage3Policy : StatesContext, Stage3Sizes {
  void add_partitions(MemoryBreakdown& out) const;  // parameters, gradient partition, optimizer states, IPG
  void add_hpz_secondary(MemoryBreakdown& out) const;  // ZeRO++ hpZ's secondary parameter partition
  void add_gathered(MemoryBreakdown& out) const;    // gathered parameters, forward and backward
  int64_t add_offload_host(MemoryBreakdown& out) const;  // host partitions; returns the bytes swapped to NVMe
};

Stage3Sizes StatesContext::stage3_sizes() const {
  // partition_parameters.py Init._partition_param: each parameter is padded to a multiple of N
  // (_padding_size) and split; parameters with numel <= stage3_param_persistence_threshold are
  // marked ds_persist (parameter_offload.py mark_persistent_parameters) and stay gathered on every
  // rank in addition to their partition.
  const int64_t thr = z.param_persistence_threshold;
  const int64_t t_part = m.trainable_tensors.partition_numel_above(thr, N) +
                         m.trainable_tensors.partition_numel_at_or_below(thr, N);
  const int64_t f_part =
      m.frozen_tensors.partition_numel_above(thr, N) + m.frozen_tensors.partition_numel_at_or_below(thr, N);
  // A persistent parameter stays gathered in the all-gather's buffer, whose storage is its partition
  // times N (partition_parameters.py _all_gather_sequential: `buffer_size = math.ceil(param.ds_numel /
  // world_size) * world_size`, `param.data = param_buffer.narrow(0, 0, param.ds_numel)`): ceil(numel / N) x N
  // elements, which differs from numel for sizes N does not divide (recorded: apertus_s3_n2_bf16_default,
  // xIELU's [1]-shaped scalars hold 2 elements each at N = 2).
  const int64_t persist = (m.trainable_tensors.partition_numel_at_or_below(thr, N) +
                           m.frozen_tensors.partition_numel_at_or_below(thr, N)) *
                          N;
  // QLoRA weights are stored in NF4 (the frozen table counts them as elements): replace their
  // 16-bit partition by the NF4 bytes / N.
  const int64_t q_elems = m.frozen_quantized_params;
  const int64_t pers_part = m.trainable_tensors.partition_numel_at_or_below(thr, N) +
                            m.frozen_tensors.partition_numel_at_or_below(thr, N);
  // The subtraction assumes the NF4 weights are non-persistent (true for any real model: a
  // quantized linear has more than the 1e5-element default threshold). In a tiny test model they
  // are persistent and already in pers_part: the 16-bit non-persistent part is then empty, not
  // negative (tiny-llama-micro --method qlora on 4 GPUs failed an internal check here).
  const int64_t param_part_bytes = checked_add(
      checked_mul(
          pe, std::max<int64_t>(0, t_part + std::max<int64_t>(0, f_part - ceil_div(q_elems, N)) - pers_part)),
      ceil_div(frozen_q, N));
  // Without frozen or quantized weights the partitions of all parameters (persistent ones
  // included) are exactly stage3.py's fp16_partitioned_groups_flat.
  // With frozen weights (LoRA) the flat holds the trainable parameters' partitions only (stage3.py
  // builds it from trainable_param_groups); the frozen partitions are their own ds_tensors.
  const bool plain = frozen_q == 0;
  const int64_t frozen_part_bytes = checked_add(
      checked_mul(pe, std::max<int64_t>(0, f_part - ceil_div(q_elems, N))), ceil_div(frozen_q, N));
  // With one rank a gathered parameter is a view of its partition: partition_parameters.py
  // all_gather_coalesced / _allgather_params_coalesced return _no_gather_coalesced when every
  // parameter's partition world size is 1, and NoGatherHandle sets `param.data =
  // param.ds_tensor.data.to(device).view(ds_shape)` (a no-op .to on the same device), so neither
  // the persistent parameters nor the fetched ones hold storage of their own (recorded:
  // llama-gqa_s3_n1 parameters = 2 * Psi, persistent_parameters the same flat's storage).
  // With offload_param the partition of a fetched parameter is on the host and that `.to(device)`
  // is a real copy: fetched parameters are then gathered storage as usual (persistent ones keep
  // their partition on the device, see above, and stay views).
  const bool views_of_partition = N == 1 && (!engine || engine_rules.single_rank_gathers_are_views);
  const bool fetched_are_views = views_of_partition && !off_param;
  return {thr,
          t_part,
          f_part,
          persist,
          q_elems,
          pers_part,
          param_part_bytes,
          plain,
          frozen_part_bytes,
          views_of_partition,
          fetched_are_views};
}

// ZeRO++ hpZ (zero_optimization.zero_hpz_partition_size = H > 1): every non-persistent parameter that is
// released keeps a second copy of itself split over H consecutive ranks (partition_parameters.py
// _partition_param_sec: torch.empty(aligned_size // H) on the remote device, pinned under pin_memory), and
// the optimizer step's _post_step drops the trainable ones (stage3.py invalidate_secondary_tensor). So
// during the forward the copies of the modules already run accumulate, and by the backward and the step
// every such parameter has one: ceil(numel / N) x N / H elements each. Frozen ones keep theirs throughout.
void Stage3Policy::add_hpz_secondary(MemoryBreakdown& out) const {
  const int64_t H = z.hpz(w.cluster.world_size());
  if (H <= 1) return;
  const int64_t per = N / H;  // H divides the world (layout/parallel_layout.cpp validate)
  const int64_t t_sec = checked_mul(m.trainable_tensors.partition_numel_above(thr, N), per);
  const int64_t f_sec = checked_mul(m.frozen_tensors.partition_numel_above(thr, N), per);
  const char* note = "ZeRO++ hpZ: ceil(numel/N) x N / hpz per released parameter (_partition_param_sec)";
  if (off_param) {
    // On the remote device, the host (Init remote_device = offload_param.device).
    if (t_sec > 0)
      out.add_host("hpZ secondary parameter partition", Category::Parameters, checked_mul(pe, t_sec), pinned,
                   note)
          .after_step = false;
    if (f_sec > 0)
      out.add_host("hpZ secondary partition (frozen parameters)", Category::Parameters,
                   checked_mul(pe, f_sec), pinned, note);
    return;
  }
  if (t_sec > 0)
    out.add_gpu("hpZ secondary parameter partition", Category::Parameters, checked_mul(pe, t_sec), kAllPhases,
                note)
        .after_step = false;
  if (f_sec > 0)
    out.add_gpu("hpZ secondary partition (frozen parameters)", Category::Parameters, checked_mul(pe, f_sec),
                kAllPhases, note);
  // The persistent parameters get one too, in the step only: step() begins with _partition_all_parameters,
  // which releases them (making the copy), and _post_step gathers them again over the ZeRO group and then
  // drops every trainable copy (recorded: +394,496 B in the step of llama-gqa_s3_n4_bf16_hpz2, 13 persistent
  // parameters of 98,624 partition elements in all, x 4 / 2 x 2 bytes).
  const int64_t p_sec = checked_mul(m.trainable_tensors.partition_numel_at_or_below(thr, N), per);
  if (p_sec > 0 && !views_of_partition)
    out.add_gpu("hpZ secondary partition of persistent parameters (step)", Category::Parameters,
                checked_mul(pe, p_sec), kStep, note)
        .after_step = false;
}

// Stage 3's partitions on the GPU: parameters, persistent parameters, gradient partition, optimizer
// states, the IPG bucket.
void Stage3Policy::add_partitions(MemoryBreakdown& out) const {
  if (!off_param) {
    out.add_gpu(fp32 ? "fp32 parameter partition" : "16-bit parameter partition", Category::Parameters,
                checked_add(param_part_bytes, checked_mul(pe, pers_part)) - frozen_part_bytes, kAllPhases,
                "stage 3: 2 x sum ceil(numel/N) per parameter (ZeRO paper 2Psi/N + padding)")
        .ds_name = plain ? "optimizer.fp16_partitioned_groups_flat" : nullptr;
    if (frozen_part_bytes > 0)
      out.add_gpu(
          "frozen parameter partitions", Category::Parameters, frozen_part_bytes, kAllPhases,
          w.train.method == Method::Full
              ? "parameters the model builds with requires_grad=False, partitioned, ceil(numel/N) each"
              : "LoRA/QLoRA: frozen weights partitioned by zero.Init, ceil(numel/N) each");
  }
  add_hpz_secondary(out);
  // Persistent parameters keep their partition on the GPU even with offload_param
  // (partition_parameters.py _partition_param: `if param.ds_persist: device = self.local_device`).
  if (off_param && pers_part > 0)
    out.add_gpu("persistent parameter partitions", Category::Parameters, checked_mul(pe, pers_part),
                kAllPhases, "ds_persist params keep their partition on the device with offload_param");
  // DeepSpeed's stage-3 step() begins with _partition_all_parameters(), which releases the persistent
  // parameters' whole copies too, and _post_step() gathers them again (every release since 0.16 at
  // least): they are alive after the step but at neither of its moments below. Measured with the
  // harness's allocator (llama-gqa_s3_n2_bf16_rbs50k, 0.19.8): -788,992 B in _partition_all_parameters,
  // +788,992 B after _post_step.
  if (persist > 0 && !views_of_partition) {
    Buffer& b =
        out.add_gpu("persistent small parameters", Category::Parameters, checked_mul(pe, persist), kAllPhases,
                    "params <= stage3_param_persistence_threshold stay whole on every rank");
    b.ds_name = plain ? "optimizer.persistent_parameters" : nullptr;
    if (!engine) b.step_moment = Buffer::StepMoment::Outside;
  }
  // Gradient partition: stage3.py grad_partitions_flat_buffer, sum of partition_numel() in the
  // gradient accumulation dtype (= the model dtype by default), on the CPU when the optimizer is
  // offloaded (self.device = cpu).
  if (!off_opt)
    out.add_gpu("gradient partition", Category::Gradients, checked_mul(pe, t_part), kAllPhases,
                "stage3.py grad_partitions_flat_buffer: 2Psi/N")
        .ds_name = "optimizer.grad_partitions_flat_buffer";
  if (!off_opt) {
    // A bf16 master over bf16 parameters is still a copy: stage3.py _create_fp32_partitions reuses the
    // 16-bit partition only when `fp16_partitioned_groups_flat[i].device == self.device`, a torch.device
    // compared with the string current_device_name(), which is False (torch 2.x: torch.device('cpu') ==
    // 'cpu' and torch.device('cuda:0') == 'cuda:0' are both False). Recorded:
    // llama-gqa_s3_n2_bf16_bf16master_bf16opt, optimizer states 6 x Psi/N.
    out.add_gpu(master_name(), Category::OptimizerStates, checked_mul(master_bytes(), t_part), kAllPhases,
                "stage3.py fp32_partitioned_groups_flat: 4Psi/N (bf16 master: 2Psi/N)")
        .ds_name = "optimizer.fp32_partitioned_groups_flat";
    out.add_gpu("Adam momentum + variance (partition)", Category::OptimizerStates,
                checked_mul(moment_bytes(), t_part), kAllPhases,
                "K*Psi/N with the master above, K=12 (ZeRO paper; bf16 states: 4 bytes)");
    // _prepare_fp32_grad_for_sub_group: one sub group's gradients converted to fp32 at a time,
    // `self.flatten(self.averaged_gradients[i]).to(fp32)`: the 16-bit flat copy is alive during its
    // .to (in fp32 training .to returns the flat copy itself). Measured (llama-gqa_s3_n2_bf16_rbs50k,
    // 0.19.8): +6,688,512 B inside _prepare_sub_group = 4,459,008 fp32 + 2,229,504 bf16 at N = 2.
    // With a bf16 master the .to returns the bf16 flat copy itself: no fp32 copy.
    const int64_t sub = std::min(z.sub_group_size, t_part);
    if (!master_is_16bit()) {
      Buffer& g32 =
          out.add_gpu("fp32 gradient of one sub-group at step", Category::Buffers, checked_mul(4, sub), kStep,
                      "4 x min(sub_group_size, partition) (stage3.py _prepare_fp32_grad_for_sub_group)");
      if (!engine) g32.step_moment = Buffer::StepMoment::Update;
    }
    if (!engine) {
      if (!fp32)
        out.add_gpu("16-bit flat gradient of one sub-group at step", Category::Buffers, checked_mul(pe, sub),
                    kStep,
                    "stage3.py _prepare_fp32_grad_for_sub_group: flatten(averaged_gradients), alive during "
                    "its .to")
            .step_moment = Buffer::StepMoment::Update;
      // _get_norm_groups -> get_grad_norm_direct, before the sub-groups: `g.to(get_norm_dtype())` per
      // parameter's gradient partition (fp64 wherever the device has it), one at a time. Measured:
      // +2,097,320 B inside _get_norm_groups at N = 2 (the embedding's 262,144-element partition x 8).
      const int64_t largest = m.params_only ? 0 : m.trainable_tensors.largest_numel();
      if (largest > 0)
        out.add_gpu("fp64 gradient copy for the norm", Category::Buffers,
                    checked_mul(8, ceil_div(largest, N)), kStep,
                    "stage3.py get_grad_norm_direct: .to(fp64) of the largest parameter's gradient partition")
            .step_moment = Buffer::StepMoment::Norm;
    }
  }
  if (z.contiguous_gradients)
    // In the communication dtype: fp32 under Ulysses SP (planner/sequence_parallel.h).
    out.add_gpu("gradient bucket (IPG)", Category::Buffers,
                checked_mul(gradient_reduce_bytes(w, z, pe), z.reduce_bucket_size), kAllPhases,
                "stage3.py ipg_buckets[dtype].buffer: one reduce_bucket_size buffer, allocated at init")
        .ds_name =
        w.train.deepspeed_version == DeepSpeedVersion::V0_16_9
            ? "optimizer._DeepSpeedZeroOptimizer_Stage3__ipg_bucket_flat_buffer"  // 0.16.9 stage3.py
            : "optimizer.ipg_buckets";
}

// Stage 3's gathered parameters in the forward and the backward.
void Stage3Policy::add_gathered(MemoryBreakdown& out) const {
  // Gathered parameters in flight: the current module's parameters plus prefetched ones up to
  // stage3_prefetch_bucket_size, never more than stage3_max_live_parameters
  // (partitioned_param_coordinator.py fetch_sub_module / __prefetch). At the forward->backward
  // turn, parameters whose next use is within stage3_max_reuse_distance stay gathered
  // (__params_to_release); we bound that by half the reuse distance (the forward tail is
  // reused in mirror order by the backward).
  // (persist counts the persistent tensors padded to N; when every tensor is persistent and N exceeds
  // their sizes, as in the reasons' "more GPUs" variants of a tiny model, the padded count passes the
  // total: nothing is non-persistent then.)
  const int64_t nonpersist_total = fetched_are_views
                                       ? 0
                                       : std::max<int64_t>(0, m.trainable_tensors.total_numel() +
                                                                  m.frozen_tensors.total_numel() - persist);
  // A ZeRO-3 leaf MoE block is fetched whole (planner/zero3_leaf.h): the largest module grows to it.
  const int64_t largest_fetch =
      moe_block_is_leaf(m.moe_block_class, effective_moe_leaf(w, z), w.train.deepspeed_version)
          ? std::max(m.largest_module_numel, m.largest_moe_block_numel)
          : m.largest_module_numel;
  const int64_t in_flight =
      std::min({nonpersist_total, largest_fetch + std::min(z.prefetch_bucket_size, z.max_live_parameters)});
  const int64_t reuse = std::min(
      {nonpersist_total, std::max(in_flight, std::min(z.max_reuse_distance / 2, z.max_live_parameters))});
  out.add_gpu("gathered parameters (forward)", Category::Buffers, checked_mul(pe, in_flight), kForward,
              "largest module + stage3_prefetch_bucket_size, capped by max_live_parameters");
  // The coalesced fetch's flat all-gather output (partition_parameters.py _all_gather_dtype:
  // flat_tensor = torch.empty(partition_sz * world_size)) outlives its copies: AllGatherCoalescedHandle
  // keeps it (self.partitions) while wait() builds each parameter with torch.cat, until the inflight
  // registry pops the fetch's last parameter. With prefetching that is the in-flight set above; traced
  // (llama-gqa_s3_n2_bf16_rbs50k, 0.19.8, module hooks with the harness's allocator): 3,670,016 B
  // allocated at the first fetch, alive next to the copies through the decoder until lm_head is
  // waited, so the forward peaks at the final norm. Without prefetch each fetch's handle is dropped
  // right after its copies (the prefetch0 fixtures agree without it).
  // Under ZeRO++ qwZ (planner/zeropp_quant.h) the handle keeps the int8 output (quantization.quantized_param,
  // 1 B per element) and the partitions are views of its fp16 dequantization (2 B): 3 B per element
  // whatever the training dtype (not recorded: CUDA-only kernels).
  if (!engine && !fetched_are_views && z.prefetch_bucket_size > 0)
    out.add_gpu(z.qwz() ? "coalesced all-gather buffers, int8 + fp16 dequantized (forward, qwZ)"
                        : "coalesced all-gather flat buffer (forward)",
                Category::Buffers, checked_mul(z.qwz() ? 3 : pe, in_flight), kForward,
                "AllGatherCoalescedHandle keeps the flat output until the fetch's last parameter is used")
        .forward_moment = Buffer::ForwardMoment::Body;
  // zero_optimization.memory_efficient_linear false: torch's own F.linear saves W^T, a view of the
  // gathered weight, and DeepSpeed releases a parameter by pointing param.data at an empty tensor
  // (partition_parameters.py), so the view keeps every released decoder weight's gathered storage
  // until its backward: by the end of the forward all of them are held besides the ones in flight
  // (at most every non-persistent parameter). DeepSpeed's zero3_linear_wrap saves the parameter
  // itself instead. Recorded (DeepSpeed 0.19.8, llama-gqa stage 3, N = 2, max live and reuse
  // distance 1e5 so that parameters are released): forward peak +1,572,864 B over the default
  // linear = gate/up/down of both layers, 786,432 bf16 elements (fixtures maxlive100k_nomel vs
  // maxlive100k); with the default reuse distance nothing is released and the peaks are equal.
  if (!z.memory_efficient_linear && !fetched_are_views) {
    const int64_t held =
        m.decoder_matmul_weights.total_numel() - m.decoder_matmul_weights.numel_at_or_below(thr);
    const int64_t extra = std::min(nonpersist_total, in_flight + held) - in_flight;
    if (extra > 0)
      out.add_gpu("gathered weights held by torch's linear", Category::Buffers, checked_mul(pe, extra),
                  kForward,
                  "memory_efficient_linear false: F.linear's saved W^T views keep released weights gathered");
  }
  out.add_gpu("gathered parameters (backward)", Category::Buffers, checked_mul(pe, reuse), kBackward,
              "kept for reuse: min(max_reuse_distance/2, max_live_parameters) elements");
}

// Stage 3 offload: the partitions on the host (or NVMe). Returns the bytes this rank swaps to NVMe.
int64_t Stage3Policy::add_offload_host(MemoryBreakdown& out) const {
  int64_t nvme_rank = 0;
  if (off_param) {
    out.add_host("16-bit parameter partition", Category::Parameters,
                 z.offload_param == Offload::CPU ? param_part_bytes : 0, pinned,
                 "offload_param: ds_tensor partitions in host memory");
    if (z.offload_param == Offload::NVMe) nvme_rank = checked_add(nvme_rank, param_part_bytes);
    if (z.offload_param == Offload::NVMe)
      out.add_host("parameter swap buffers (NVMe)", Category::Buffers,
                   checked_mul(checked_mul(kNvmeParamBufferCount, kNvmeParamBufferSize), pe), true,
                   "offload_param nvme: buffer_count 5 x buffer_size 1e8 elements (offload_config.py)");
  }
  if (off_opt) {
    out.add_host("gradient partition", Category::Gradients, checked_mul(pe, t_part), pinned,
                 "stage3.py grad_partitions_flat_buffer on the CPU with offload_optimizer")
        .ds_name = "optimizer.grad_partitions_flat_buffer";
    if (z.offload_optimizer == Offload::CPU) {
      out.add_host(master_name(), Category::OptimizerStates, checked_mul(master_bytes(), t_part), pinned,
                   "stage3.py fp32_partitioned_groups_flat on the host")
          .ds_name = "optimizer.fp32_partitioned_groups_flat";
      out.add_host("Adam momentum + variance (partition)", Category::OptimizerStates,
                   checked_mul(moment_bytes(), t_part), pinned,
                   "DeepSpeedCPUAdam exp_avg + exp_avg_sq on the host");
      out.add_host(master_grad_name(), Category::Gradients, checked_mul(master_bytes(), t_part), pinned,
                   "fp32_partitioned_groups_flat[i].grad on the host, in the master dtype");
    } else {
      // master + exp_avg + exp_avg_sq
      nvme_rank = checked_add(nvme_rank, checked_mul(master_bytes() + moment_bytes(), t_part));
      out.add_host("optimizer swap buffers (NVMe)", Category::Buffers,
                   checked_mul(checked_mul(kNvmeOptimizerBufferCount, std::min(z.sub_group_size, t_part)),
                               master_bytes()),
                   true,
                   "offload_optimizer nvme: buffer_count 4 x largest sub group in fp32 (optimizer_utils.py)");
    }
  }
  return nvme_rank;
}

// runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3 with partition_parameters.py and the parameter
// coordinator: partitions, gathered parameters, and what offload moves to the host. Returns the
// bytes this rank swaps to NVMe.
int64_t StatesContext::add_stage3_states(MemoryBreakdown& out) const {
  const Stage3Policy policy{*this, stage3_sizes()};
  policy.add_partitions(out);
  policy.add_gathered(out);
  return policy.add_offload_host(out);
}

// The one full parameter gradient autograd makes before the reduce hook takes it (stages 2, 3 and
// the no-accumulation 16-bit paths).
void StatesContext::add_transient_parameter_gradient(MemoryBreakdown& out) const {
  // Stages 2 and 3 keep no full gradients: autograd still materialises each parameter's full
  // gradient (param.grad) before the reduce hook copies it into the bucket and frees it
  // (stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads; stage3.py
  // reduce_independent_p_g_buckets_and_remove_grads), so the largest trainable tensor's gradient
  // (the embedding or lm_head: V*h) exists transiently in the backward.
  // (Stage 2 without contiguous gradients keeps every param.grad until its bucket's flush: counted
  // there, add_zero12_optimizer.)
  const bool kept_until_flush = !engine && stage == 2 && !z.contiguous_gradients && !off_opt;
  if (!m.params_only && !m.trainable_tensors.numel.empty() && !kept_until_flush &&
      (!engine || engine_rules.param_grad_materialised) &&
      (stage >= 2 || (full_grad_phases == kStep && path.wrapper != OptimizerWrapper::BF16Optimizer)))
    out.add_gpu("largest parameter gradient (transient)", Category::Buffers,
                checked_mul(pe, m.trainable_tensors.numel.back()), kBackward,
                "param.grad of the largest trainable tensor before its bucket copy");
}

// ZeRO-1/2 with offload_optimizer: what stage_1_and_2.py keeps on the host (and its device staging
// buffer). Returns the bytes this rank swaps to NVMe.
int64_t StatesContext::add_zero12_offload_host(MemoryBreakdown& out) const {
  int64_t nvme_rank = 0;
  // stage_1_and_2.py with cpu_offload: single_partition_of_fp32_groups and its .grad live in pinned
  // host memory; Adam states follow the fp32 partition (DeepSpeedCPUAdam).
  if (z.offload_optimizer == Offload::CPU) {
    out.add_host(master_name(), Category::OptimizerStates, checked_mul(master_bytes(), part_t), pinned,
                 "single_partition_of_fp32_groups on the host")
        .ds_name = "optimizer.single_partition_of_fp32_groups";
    out.add_host("Adam momentum + variance (partition)", Category::OptimizerStates,
                 checked_mul(moment_bytes(), part_t), pinned,
                 "DeepSpeedCPUAdam exp_avg + exp_avg_sq on the host");
  } else {
    // master + exp_avg + exp_avg_sq
    nvme_rank = checked_add(nvme_rank, checked_mul(master_bytes() + moment_bytes(), part_t));
    out.add_host("optimizer swap buffers (NVMe)", Category::Buffers,
                 checked_mul(checked_mul(kNvmeOptimizerBufferCount, part_t), master_bytes()), true,
                 "offload_optimizer nvme: buffer_count 4 x partition in fp32");
  }
  out.add_host(
      master_grad_name(), Category::Gradients, checked_mul(master_bytes(), part_t), pinned,
      "initialize_optimizer_states: single_partition_of_fp32_groups[i].grad pinned, in the master dtype");
  // stage_1_and_2.py __init__ with cpu_offload: a 16-bit copy of the partition for the upload after
  // the step (param_buffer_of_bit16_for_cpu_offload_groups), and one largest-parameter-sized 16-bit
  // gradient staging buffer on each side (temp_grad_buffer_for_cpu_offload / _for_gpu_offload,
  // `torch.zeros(largest_param_numel)`).
  out.add_host("16-bit partition upload buffer", Category::Buffers, checked_mul(pe, part_t), pinned,
               "param_buffer_of_bit16_for_cpu_offload_groups: 16-bit partition")
      .ds_name = "optimizer.param_buffer_of_bit16_for_cpu_offload_groups";
  const int64_t largest = m.trainable_tensors.largest_numel();
  if (!engine || engine_rules.offload_has_staging_buffers) {
    out.add_host("gradient staging buffer (host)", Category::Gradients, checked_mul(pe, largest), pinned,
                 "temp_grad_buffer_for_cpu_offload: largest parameter, 16-bit")
        .ds_name = "optimizer.temp_grad_buffer_for_cpu_offload";
    out.add_gpu("gradient staging buffer (device)", Category::Gradients, checked_mul(pe, largest), kAllPhases,
                "temp_grad_buffer_for_gpu_offload: largest parameter, 16-bit")
        .ds_name = "optimizer.temp_grad_buffer_for_gpu_offload";
  }
  if (z.grad_accum > 1)
    out.add_host("16-bit gradient accumulation", Category::Gradients, checked_mul(pe, part_t), pinned,
                 "accumulated_grads_in_cpu (async_accumulate_grad_in_cpu_via_gpu)");
  return nvme_rank;
}

// Full checkpointing keeps each decoder layer's input; with the checkpoints offloaded only a few stay
// on the GPU and the rest wait in host memory (planner/checkpoint_offload.h: DeepSpeed's offload
// engine, or its blocking copies).
void StatesContext::add_layer_checkpoints(MemoryBreakdown& out, int64_t b) const {
  const ActivationStats& a = m.act;
  const int64_t L = a.num_layers;
  const CheckpointOffloadPlan off = checkpoint_offload_plan(w.train, L, z.checkpointing);
  if (!off.active) {
    out.add_gpu("layer inputs (checkpoints)", Category::Activations,
                checked_mul(checked_mul(L, a.layer_input_per_sample), b), kFwdBwd,
                "full recomputation keeps each layer input 2sbh (Korthikanti Table 2)");
    return;
  }
  out.add_gpu("layer inputs (checkpoints, offloaded: on GPU)", Category::Activations,
              checked_mul(checked_mul(off.gpu_checkpoints, a.layer_input_per_sample), b), kFwdBwd,
              off.async ? "offload engine: the kept-last input and one in the forward stash"
                        : "blocking copies: the restored input of the layer being recomputed");
  out.add_host("offloaded layer inputs (checkpoints)", Category::Activations,
               checked_mul(checked_mul(off.host_checkpoints, a.layer_input_per_sample), b), off.pinned,
               off.async ? "offload_activations.py: every input but the kept-last, pinned"
                         : "checkpointing.py .cpu(): every layer input, pageable");
}

// The loss's tensors from the head on (the forward's loss moment): Liger's fused linear cross-entropy
// or transformers' own loss over fp32 logits.
void StatesContext::add_loss(MemoryBreakdown& out, int64_t b, bool liger) const {
  const ActivationStats& a = m.act;
  if (liger) {
    // Liger's fused linear cross-entropy (liger_kernel/ops/fused_linear_cross_entropy.py
    // fused_linear_cross_entropy_forward): the forward walks the b*s tokens in chunks of
    // next_power_of_2(ceil(BT / ceil(V / H))) rows, computes each chunk's logits (chunk x V in the
    // input dtype), the loss and the logits' gradient in place, and accumulates grad_input (BT x H,
    // input dtype) and, when the head trains, grad_weight (V x H, weight dtype) - both saved for the
    // backward, which only scales them. No b*s*V logits, fp32 upcast or log-probabilities.
    const int64_t bt = checked_mul(b, w.train.rank_seq_len());
    const int64_t h = std::max<int64_t>(1, w.model.hidden_size);
    const int64_t v = w.model.vocab_size;
    const int64_t chunk = liger_flce_chunk_rows(bt, v, h);
    const int64_t ea =
        a.logits_per_sample / std::max<int64_t>(1, checked_mul(v, w.train.rank_seq_len()));  // input dtype
    // These and the chunk below exist from the head on (the forward's loss moment).
    out.add_gpu("Liger FLCE input gradient (saved)", Category::Activations,
                checked_mul(checked_mul(bt, h), ea), kFwdBwd,
                "fused_linear_cross_entropy_forward grad_input: BT x H, saved for the backward")
        .forward_moment = Buffer::ForwardMoment::Head;
    if (w.train.method == Method::Full)  // LoRA: the head is frozen, weight_needs_grad is false
      out.add_gpu("Liger FLCE lm_head weight gradient (saved)", Category::Activations,
                  checked_mul(checked_mul(v, h), pe), kFwdBwd,
                  "fused_linear_cross_entropy_forward grad_weight: V x H in the weight dtype, saved")
          .forward_moment = Buffer::ForwardMoment::Head;
    out.add_gpu("Liger FLCE logits chunk (transient)", Category::Buffers,
                checked_mul(checked_mul(chunk, v), ea), kForward,
                "one chunk's logits, next_power_of_2(ceil(BT / ceil(V/H))) x V, overwritten by its gradient")
        .forward_moment = Buffer::ForwardMoment::Head;
  } else {
    // Both exist only from the head on: the forward's loss moment (Buffer::ForwardMoment).
    out.add_gpu("fp32 log-probabilities (loss)", Category::Activations,
                checked_mul(a.logprobs_fp32_per_sample, b), kFwdBwd,
                "cross_entropy's log_softmax saves b*s*V fp32 (transformers ForCausalLMLoss)")
        .forward_moment = Buffer::ForwardMoment::Head;
    out.add_gpu("logits + fp32 upcast", Category::Buffers,
                checked_mul(a.logits_per_sample + a.logits_fp32_upcast_per_sample, b), kForward,
                "lm_head output b*s*V and `logits.float()` at the loss (transient)")
        .forward_moment = Buffer::ForwardMoment::Head;
    out.add_gpu("loss gradients (fp32)", Category::Buffers,
                checked_mul(checked_mul(a.logprobs_fp32_per_sample, 2), b), kBackward,
                "grad of log-probs + grad of fp32 logits, b*s*V*4 each (transient)");
  }
}

// Saved activations and the loss's buffers of one micro-step (planner/memory_stats.h), by checkpointing mode.
void StatesContext::add_activations(MemoryBreakdown& out) const {
  const ActivationStats& a = m.act;
  const int64_t b = std::max<int64_t>(1, z.micro_batch);
  if (engine && a.known) {
    // The native engine's own activation buffers (planner/engine_runtime.cpp): its two maxima, each
    // in its phase; the loss gradient overwrites the logits in place, so there is no separate logits
    // or loss-gradient buffer. It has no selective mode (a selective plan runs without checkpointing).
    const EngineActivations ea = engine_activations(w, b, z.checkpointing == Checkpointing::Full);
    out.add_gpu("engine activations (forward maximum)", Category::Activations, ea.forward_peak, kForward,
                "executor/engine.cpp forward(): residual stream, per-layer acts, head, logits");
    out.add_gpu("engine activations (backward maximum)", Category::Activations, ea.backward_peak, kBackward,
                "executor/engine.cpp backward(): saved acts + the last layer's transient gradients");
  } else if (a.known) {
    const int64_t L = a.num_layers;
    switch (z.checkpointing) {
      case Checkpointing::None:
        out.add_gpu("layer activations", Category::Activations,
                    checked_mul(checked_mul(L, a.layer_full_per_sample) - a.first_layer_unsaved_per_sample -
                                    a.core_unsaved_per_sample,
                                b),
                    kFwdBwd, "saved tensors of every decoder layer (see memory_stats.cpp)");
        break;
      case Checkpointing::Selective:
        out.add_gpu(
            "layer activations (selective)", Category::Activations,
            checked_mul(checked_mul(L, a.layer_selective_per_sample) - a.first_layer_unsaved_per_sample, b),
            kFwdBwd, "attention core recomputed (Korthikanti et al. 2022 §5)");
        break;
      case Checkpointing::Full:
        add_layer_checkpoints(out, b);
        if (a.causal_mask_per_sample > 0)
          // Eager attention gets a 4-D causal mask [b, 1, s, s] in the compute dtype (Falcon's SDPA
          // call a boolean one; transformers masking_utils create_causal_mask); each checkpointed
          // layer keeps its call arguments, the mask among them: one storage for all layers.
          // Recorded: 16,384 B at b 2, s 64 in bf16 (llama-gqa_s2_n2_bf16_eager_gc vs _gc).
          out.add_gpu("causal mask (checkpoint argument)", Category::Activations,
                      checked_mul(a.causal_mask_per_sample, b), kFwdBwd,
                      "the [b, 1, s, s] mask every layer receives, kept by the checkpoints");
        out.add_gpu("recomputed layer working set", Category::Activations,
                    checked_mul(std::max(a.layer_full_per_sample, a.recomputed_layer_per_sample), b),
                    kBackward, "one layer's saved tensors, recomputed during its backward");
        break;
    }
    // LinearFunctionForZeroStage3 saves frozen linears' inputs (memory_stats.cpp); the layers' part
    // is recomputed under full checkpointing, the head's is not. DeepSpeed 0.19.8's zero.Init(module=)
    // (what deepspeed.initialize applies to a model built outside zero.Init) installs the override
    // (partition_parameters.py Init.__init__ -> _enable_mem_efficient_linear); 0.16.9 and 0.18.9 install
    // it only while a model is constructed inside `with zero.Init()` (patch_init_and_builtins), so a
    // model built before deepspeed.initialize keeps torch's linear (recorded: their stage-3 LoRA
    // fixtures save what stage 2 saves).
    if (z.zero3_linear_wrap() && w.train.deepspeed_version == DeepSpeedVersion::V0_19_8) {
      int64_t frozen = a.stage3_frozen_head_input_per_sample;
      if (z.checkpointing != Checkpointing::Full)
        frozen = checked_add(frozen, checked_mul(a.num_layers, a.stage3_frozen_linear_inputs_per_layer));
      if (frozen > 0)
        out.add_gpu("frozen linear inputs (ZeRO-3 linear)", Category::Activations, checked_mul(frozen, b),
                    kFwdBwd,
                    "zero3_linear_wrap saves every linear's input, frozen ones included (zero/linear.py)");
    }
    if (a.rope_tables > 0)
      out.add_gpu(
          "rotary cos/sin + position ids", Category::Activations, a.rope_tables, kFwdBwd,
          "[1, s, head_dim] cos and sin + [1, s] int64 positions, shared by the layers (memory_stats.cpp)");
    // Liger's fused linear cross-entropy saves its input gradient instead of the head's input (below).
    const bool liger = w.train.liger && !engine;
    const int64_t emb_head =
        checked_mul(a.embedding_per_sample + a.head_per_sample - (liger ? a.head_input_per_sample : 0), b);
    if (emb_head > 0)
      out.add_gpu("embedding + final norm / head inputs", Category::Activations, emb_head, kFwdBwd,
                  "final norm + lm_head input (and the embedding dropout mask of GPT-style models)");
    add_loss(out, b, liger);
  } else {
    out.add_gpu("activations (architecture unknown)", Category::Activations, 0, kFwdBwd,
                "--params gives no architecture: activations not modelled (use --model)");
  }

  if (m.largest_quantized_numel > 0)
    // bitsandbytes autograd/_functions.py MatMul4Bit: forward and backward each dequantize the NF4
    // weight to the compute dtype (F.dequantize_4bit) for the matmul; one weight at a time.
    out.add_gpu("dequantized NF4 weight (QLoRA)", Category::Buffers,
                checked_mul(2, m.largest_quantized_numel), kFwdBwd,
                "largest quantized linear in 16-bit, transient per matmul");
}

// The CUDA context and NCCL's buffers.
void StatesContext::add_overhead(MemoryBreakdown& out) const {
  // The CPU runtime (DeepSpeed's CPU accelerator, gloo: the conformance fixtures) has neither a CUDA
  // context nor NCCL communicator buffers; on CUDA they are added here from the GPU profile and NCCL's
  // documented buffer size.
  const bool cuda = w.train.runtime == Runtime::Cuda;
  if (cuda)
    out.add_gpu("CUDA context + cuBLAS workspace", Category::Overhead, w.cluster.gpu.cuda_context_bytes,
                kAllPhases, "GPU profile cuda_context_bytes");
  if (N > 1 && cuda) {
    // One communicator for the data-parallel group (DeepSpeed's world group is the DP group here).
    // Ring: each rank receives from one peer and sends to one per channel; Simple-protocol buffers of
    // NCCL_BUFFSIZE per connection. Inter-node rings add the network connections.
    int64_t channels = nccl_channels(w.cluster.intra_node);
    if (w.cluster.nodes > 1) channels = std::max<int64_t>(channels, 2);
    out.add_gpu("NCCL communicator buffers", Category::Overhead,
                checked_mul(checked_mul(kNcclBuffSize, channels), 2), kAllPhases,
                "NCCL_BUFFSIZE 4 MiB x channels x 2 ring peers (assumed channel count)");
  }
}

// Stages 0-2: the 16-bit (or fp32) working weights, and LoRA/QLoRA's frozen base weights, on every rank.
void StatesContext::add_flat_parameters(MemoryBreakdown& out) const {
  // The working weights: ZeRO 1/2 and BF16_Optimizer keep them as views of one padded flat buffer
  // (bit16_groups_flat / bf16_groups_flat), FP16_Optimizer as views of fp16_groups_flat (no padding:
  // _flatten_dense_tensors), the plain optimizer as the module's own tensors.
  const bool padded =
      path.wrapper == OptimizerWrapper::ZeroStage1And2 || path.wrapper == OptimizerWrapper::BF16Optimizer;
  const char* flat_name = path.wrapper == OptimizerWrapper::ZeroStage1And2  ? "optimizer.bit16_groups_flat"
                          : path.wrapper == OptimizerWrapper::BF16Optimizer ? "optimizer.bf16_groups_flat"
                          : path.wrapper == OptimizerWrapper::FP16Optimizer ? "optimizer.fp16_groups_flat"
                                                                            : nullptr;
  out.add_gpu(fp32 ? "fp32 parameters" : "16-bit parameters", Category::Parameters,
              checked_mul(pe, padded ? padded_t : psi_t), kAllPhases,
              fp32 ? "4 bytes x trainable params (fp32 training)"
                   : "2 bytes x trainable params (ZeRO paper 2Psi; flat buffer padded to 2N elements)")
      .ds_name = flat_name;
  // (Full fine-tuning: the parameters a model builds frozen, e.g. ERNIE-4.5-MoE's router correction biases.)
  if (frozen16 > 0)
    out.add_gpu(
        w.train.method == Method::Full ? "frozen parameters (16-bit)" : "frozen base weights (16-bit)",
        Category::Parameters, checked_mul(pe, frozen16), kAllPhases,
        w.train.method == Method::Full
            ? "parameters the model builds with requires_grad=False, replicated on every rank below stage 3"
            : "LoRA: frozen weights replicated on every rank below stage 3");
  if (frozen_q > 0)
    out.add_gpu("frozen base weights (NF4)", Category::Parameters, frozen_q, kAllPhases,
                "QLoRA NF4 + double-quantized constants, 4.127 bits/param (Dettmers et al. 2023 §3)");
}

// Host memory of one rank while the model loads (before deepspeed.initialize).
int64_t StatesContext::host_load_per_rank() const {
  // Without zero.Init every rank materialises the whole model on the host before deepspeed.initialize
  // moves it to the GPU (HF from_pretrained in the training dtype); with zero.Init (stage 3) each rank
  // keeps only its partition plus the checkpoint shard being read.
  const int64_t model_bytes = checked_add(checked_mul(pe, psi_t + frozen16), frozen_q);
  int64_t load_per_rank = model_bytes;
  if (stage == 3 && z.zero_init)
    load_per_rank = checked_add(ceil_div(model_bytes, N), std::min(model_bytes, kCheckpointShardBytes));
  return load_per_rank;
}

// Which moment of the backward each buffer belongs to (start: what the backward frees as it goes;
// end: what DeepSpeed allocates once gradients arrive).
void StatesContext::settle_backward_moments(MemoryBreakdown& out) const {
  // What lives only at the start of the backward: the saved activations (freed layer by layer as
  // the backward proceeds) and the loss gradients. What DeepSpeed allocates only once gradients
  // arrive belongs to its end (issue 23 item 5): the largest parameter gradient (the LM head's, made
  // after log_softmax's backward has freed its saved output), the stage-1/2 IPG bucket
  // (stage_1_and_2.py setup_buckets, from the first gradient hook) and stage 2's grads_in_partition
  // (allocated at the first bucket flush, copy_grads_in_partition). Recorded:
  // llama-gqa_s2_n4_bf16_nomultirank_rbs50k's backward peak is its start, log_softmax's backward:
  // saved activations + the fp32 gradients of the log-probabilities and logits, none of the three.
  // By name, without measuring every name and note first (their strlen was 3% of an evaluation): a
  // mismatch (or the end of `c`) usually stops the comparison at the first character.
  const auto starts_with = [](const char* c, std::string_view s) {
    for (const char ch : s)
      if (*c++ != ch) return false;
    return true;
  };
  const auto named = [&](const char* c, std::string_view s) {
    return starts_with(c, s) && c[s.size()] == '\0';
  };
  for (int i = 0; i < out.num_gpu; ++i) {
    Buffer& buf = out.gpu[static_cast<size_t>(i)];
    const char* nm = buf.name;
    // The loss's own tensors are freed by its backward, before any layer's; a checkpointed layer's
    // recomputed tensors exist only inside the layers' backward, so the two never meet (measured on an
    // H200, docs/validation.md "2026-11-28": TinyLlama at 32k and 64k tokens, max_memory_allocated
    // 31.55 and 47.63 GB where counting both together gave 34.34 and 53.28).
    if (named(nm, "loss gradients (fp32)") || named(nm, "fp32 log-probabilities (loss)"))
      buf.backward_moment = Buffer::Moment::LossStart;
    else if (named(nm, "recomputed layer working set"))
      buf.backward_moment = Buffer::Moment::Layers;
    else if (buf.category == Category::Activations)
      buf.backward_moment = Buffer::Moment::Start;
    // Stage 3 likewise for the transient gradient (an earlier reading kept it at the start: the
    // small-bucket recordings' backward looked 4-5% higher, which was gloo's staging and the
    // forward/step terms traced since, issue 23).
    const bool arrives_with_gradients =
        !engine && ((stage <= 2 && (named(nm, "largest parameter gradient (transient)") ||
                                    named(nm, "gradient bucket (IPG)") ||
                                    starts_with(buf.note, "stage 2: grads_in_partition"))) ||
                    (stage == 3 && named(nm, "largest parameter gradient (transient)")));
    if (arrives_with_gradients && buf.backward_moment == Buffer::Moment::Whole && !(buf.phases & kForward))
      buf.backward_moment = Buffer::Moment::End;
  }
}

// The plan's sizes and runtime path, computed once for the policies.
StatesContext states_context(const Workload& w, const MemoryStats& m, const ZeroConfig& z) {
  // ZeRO partitions over its group (SP x DP; planner/parallel.h), not over the world.
  const int64_t N = layout_of(w, z).zero();
  const int64_t pe = m.param_elem_bytes;  // 16-bit: 2, fp32 training: 4
  const bool fp32 = w.train.precision == Precision::FP32;
  const int64_t psi_t = m.trainable_params;
  const int stage = std::clamp(z.stage, 0, 3);
  const bool off_opt = stage >= 1 && z.offload_optimizer != Offload::None;
  const bool off_param = stage == 3 && z.offload_param != Offload::None;
  const bool pinned = z.pin_memory;

  // Frozen base weights (LoRA/QLoRA): no gradients, no optimizer states; replicated on every rank in
  // stages 0-2 (DeepSpeed only flattens requires_grad parameters into its groups:
  // stage_1_and_2.py `trainable_parameters = [param for param in param_group['params'] if
  // param.requires_grad]`), partitioned by zero.Init in stage 3.
  const int64_t frozen16 = m.frozen_16bit_params;
  const int64_t frozen_q = m.frozen_quantized_bytes;

  // Stage 1/2 and BF16_Optimizer flatten the trainable params padded to a multiple of
  // nccl_start_alignment_factor (2) x dp_world_size elements and give each rank 1/N of that
  // (stage_1_and_2.py __init__ `alignment = self.nccl_start_alignment_factor * dist.get_world_size(...)`;
  // bf16_optimizer.py _flatten_dense_tensors_aligned with the same factor).
  const int64_t padded_t = checked_mul(ceil_div(psi_t, 2 * N), 2 * N);
  const int64_t part_t = padded_t / N;
  const RuntimePath path =
      runtime_path(w.train.deepspeed_version, stage, w.train.precision, z.grad_accum_dtype, off_opt);
  // zeroplan validate's native engine (planner/engine_runtime.h): DeepSpeed 0.16.9's paths with the
  // documented differences below.
  const bool engine = w.train.implementation == Implementation::ZeroplanEngine;
  const EngineGradientRules engine_rules = engine_gradient_rules();
  // Full (unpartitioned) gradients of stages 0/1: autograd produces them during the backward while
  // the saved activations are freed, so they coexist with the step's buffers, not with the
  // activations; the backward phase holds the largest one (added below). With accumulation they
  // persist from the first micro-step on (engine.py: reduction only at the boundary).
  // Stage 0 all-reduces at the end of the backward with every gradient alive (engine.py
  // allreduce_gradients), so there they are counted in the backward too.
  const uint8_t full_grad_phases = z.grad_accum > 1 ? uint8_t(kAllPhases) : uint8_t(kBackward | kStep);
  const Buffer::Moment full_grad_moment = z.grad_accum > 1 ? Buffer::Moment::Whole : Buffer::Moment::End;
  return {w,
          m,
          z,
          N,
          pe,
          fp32,
          psi_t,
          stage,
          off_opt,
          off_param,
          pinned,
          frozen16,
          frozen_q,
          padded_t,
          part_t,
          path,
          engine,
          engine_rules,
          full_grad_phases,
          full_grad_moment};
}

}  // namespace

MemoryBreakdown estimate_memory(const Workload& w, const ModelStats& stats, const ZeroConfig& z) {
  MemoryBreakdown out;
  const StatesContext ctx = states_context(w, stats.mem, z);
  const int ranks_per_node = std::max(1, w.cluster.gpus_per_node);
  // Bytes this rank swaps to NVMe (ZeRO-Infinity: swap_tensor/ writes the offloaded fp32 master,
  // Adam states and, with offload_param, the 16-bit parameter partition to files on the drive).
  int64_t nvme_rank = 0;

  // ---------------------------------------------------------------- model states
  // One policy per DeepSpeed runtime path (planner/ds_runtime.h runtime_path), each adding its buffers.
  if (ctx.stage <= 2) {
    ctx.add_flat_parameters(out);
    ctx.add_stage0_allreduce_copy(out);
    switch (ctx.path.wrapper) {
      case OptimizerWrapper::Basic:
        ctx.add_plain_optimizer(out);
        break;
      case OptimizerWrapper::BF16Optimizer:
        ctx.add_bf16_optimizer(out);
        break;
      case OptimizerWrapper::FP16Optimizer:
        ctx.add_fp16_optimizer(out);
        break;
      case OptimizerWrapper::Unsupported:  // the plan is refused upstream (reasons)
        break;
      default:
        ctx.add_zero12_optimizer(out);
        break;
    }
  } else {
    nvme_rank = checked_add(nvme_rank, ctx.add_stage3_states(out));
  }

  ctx.add_transient_parameter_gradient(out);
  if (ctx.off_opt && ctx.stage <= 2) nvme_rank = checked_add(nvme_rank, ctx.add_zero12_offload_host(out));

  // ---------------------------------------------------------------- activations
  ctx.add_activations(out);

  // ---------------------------------------------------------------- overhead
  ctx.add_overhead(out);

  // ---------------------------------------------------------------- model load (host)
  out.host_load_per_node = checked_mul(ctx.host_load_per_rank(), ranks_per_node);

  ctx.settle_backward_moments(out);
  apply_expert_parallel_memory(w, stats, z, out);    // z.ep_size > 1 only (planner/expert_parallel.h)
  apply_sequence_parallel_memory(w, stats, z, out);  // --sp > 1 only (planner/sequence_parallel.h)
  apply_tiled_mlp_memory(w, stats, z, out);          // --kernels tiled-mlp only (planner/tiled_mlp.h)
  apply_tensor_parallel_memory(w, stats, z, out);    // --tp > 1 only (planner/tensor_parallel.h)
  out.finalize(ranks_per_node);
  out.nvme_per_node = checked_mul(nvme_rank, ranks_per_node);
  return out;
}

}  // namespace zeroplan::planner
