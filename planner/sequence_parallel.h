#pragma once
// Ulysses sequence parallelism as DeepSpeed runs it for HF models (issue 27): the ALST recipe's
// UlyssesSPAttentionHF (deepspeed/runtime/sequence_parallel/ulysses_sp.py, DeepSpeed >= 0.17.0, PR
// #7268), registered as transformers' attention function, with the batch cut along the sequence
// (UlyssesSPDataLoaderAdapter).
//
// What a rank of an SP group of size sp does per attention layer and micro-step (ulysses_sp.py
// UlyssesSPAttentionHF.forward, 0.19.8):
//  - outside attention it holds seq/sp tokens of the same micro-batch: every per-token tensor (saved
//    activations, logits, GEMM rows) is at TrainingSpec::rank_seq_len(), which the memory and operator
//    models read directly;
//  - it all-gathers the position_ids (dist.all_gather, one call);
//  - _combine_local_sequences: three all_to_all_single calls (_DimZeroAllToAll) turn its q, k and v
//    [seq/sp tokens, all heads] into [seq, heads/sp]; KV heads fewer than sp are first repeated
//    sp/kv times (kv_replication_factor), so each rank gets one whole KV head;
//  - the attention kernel runs over the whole sequence for its heads (op_model.cpp LayerOps);
//  - _partition_global_sequence: one all_to_all_single turns the output back into [seq/sp, all heads];
//  - backward: _DimZeroAllToAll.backward runs one all-to-all for each of the four; a checkpointed
//    layer's recompute runs the forward's five calls again.
// All of them are synchronous on the compute stream (dist.all_to_all_single without async_op): the
// next kernel waits, so their time is exposed.
//
// ZeRO partitions over the sequence-data-parallel group (SP x DP = every rank when TP is 1:
// layout/parallel_layout.h zero()), so model states are those of the same world without SP. What SP
// changes in ZeRO: the engine's communication_data_type becomes seq_parallel_communication_data_type,
// whose 0.19.8 default is fp32 (runtime/constants.py SEQ_PARALLEL_COMMUNICATION_DATA_TYPE_DEFAULT,
// engine.py _configure_distributed_model), and gradient reductions move fp32 (gradient_reduce_bytes
// below). Recorded (tests/deepspeed/fixtures-sp, docs/conformance-sp.md): model states byte-identical to
// the same world without SP, the all-to-alls and gathers call for call, the reductions in fp32.
#include <cstdint>
#include <string>
#include <vector>

#include "planner/ds_runtime_collectives.h"
#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// The element size of ZeRO's gradient reduction: `usual` (the model dtype) without SP; under SP 4 at
// stages 1-2 (stage_1_and_2.py allreduce_bucket: `if pg_correctness_test or self.sequence_parallel_size >
// 1: communication_data_type = torch.float32`) and at stages 0 and 3 unless z.seq_parallel_comm_fp32 is
// off (engine.py allreduce_bucket and stage3.py __avg_scatter_* take engine.communication_data_type;
// stage 3 also allocates its IPG bucket in it: recorded 2,000,000,000 B for the default 5e8 elements).
int64_t gradient_reduce_bytes(const Workload& w, const ZeroConfig& z, int64_t usual);

// Why DeepSpeed cannot run this workload with Ulysses SP of w.train.sequence_parallel (one sentence
// naming the flag and what to change), or "" when it can or SP is 1. The layout's own rules (heads,
// KV heads and sequence divisible, sp dividing the GPUs) are layout::validate's.
std::string sequence_parallel_refusal(const Workload& w);

struct SequenceParallelCosts {
  int sp = 1;
  int64_t layers = 0;              // attention layers
  int64_t q_bytes = 0;             // one q (or output) all_to_all_single: micro * seq/sp * heads * d * elem
  int64_t kv_bytes = 0;            // one k or v all_to_all_single, after the KV replication
  int64_t position_ids_bytes = 0;  // the gathered position_ids: micro * seq int64
  int64_t a2a_calls_per_step = 0;
  int64_t gather_calls_per_step = 0;
  int64_t a2a_bytes_per_step = 0;  // bus bytes one rank sends (nccl-tests factor (n-1)/n)
  double time_s = 0;               // all of them per step
  // Saved k and v beyond the rank's seq/sp share when sp exceeds the KV heads (each rank keeps one whole
  // replicated head over the whole sequence), per layer.
  int64_t kv_replication_bytes_per_layer = 0;
  int64_t buffer_bytes = 0;  // the layer in flight: q, k, v send buffers and their received copies
};

// Costs for the workload's SP size; a default object (sp 1) without SP.
SequenceParallelCosts sequence_parallel_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z);

// Applied by estimate_memory before finalize(): the all-to-all buffers of the layer in flight, the
// replicated KV heads' saved bytes, o_proj's input copy and the fp32 copy of a gradient bucket that
// stages 0-2 make to reduce it (stage 3 allocates its bucket in fp32 instead: memory_model.cpp).
void apply_sequence_parallel_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                    MemoryBreakdown& m);

// Applied by estimate_time: the all-to-alls and position_ids gathers as one collective entry, all
// exposed. Leaves step_s to the caller.
void apply_sequence_parallel_time(const Workload& w, const ModelStats& s, const ZeroConfig& z, StepTime& t);

// The SP group's calls of one optimizer step, in issue order per micro-step and layer.
std::vector<CollectiveCall> sequence_parallel_calls(const Workload& w, const ZeroConfig& z);

}  // namespace zeroplan::planner
