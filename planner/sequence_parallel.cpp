// Ulysses sequence parallelism (DeepSpeed UlyssesSPAttentionHF); see sequence_parallel.h.
#include "planner/sequence_parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/checked.h"
#include "planner/comm_model.h"
#include "planner/compute_stats.h"
#include "planner/ds_runtime_collectives.h"

namespace zeroplan::planner {

namespace {

// Forward passes over the attention wrapper per micro-step: the forward, and the recompute of a
// checkpointed layer (full: the whole layer; selective: the attention core, which is the wrapper
// UlyssesSPAttentionHF replaced, all-to-alls included).
int64_t forward_passes(const ZeroConfig& z) {
  return z.checkpointing == Checkpointing::None ? 1 : 2;
}

}  // namespace

int64_t gradient_reduce_bytes(const Workload& w, const ZeroConfig& z, int64_t usual) {
  if (w.train.sequence_parallel <= 1) return usual;
  if (z.stage == 1 || z.stage == 2 || z.seq_parallel_comm_fp32) return 4;
  return usual;
}

std::string sequence_parallel_refusal(const Workload& w) {
  const int sp = w.train.sequence_parallel;
  if (sp <= 1) return "";
  const models::ModelSpec& m = w.model;
  if (w.train.deepspeed_version == DeepSpeedVersion::V0_16_9)
    return fmt::format(
        "--sp {}: DeepSpeed 0.16.9 has no Ulysses sequence parallelism for HF models "
        "(UlyssesSPAttentionHF arrived in 0.17.0); use --deepspeed-version 0.18.9 or newer",
        sp);
  if (m.params_only)
    return fmt::format(
        "--sp {} needs the architecture (heads, KV heads, layers); use --model instead of --params", sp);
  // UlyssesSPAttentionHF replaces the attention function only (ulysses_sp.py
  // register_with_transformers); a Gated DeltaNet layer would run its recurrence over the rank's
  // seq/sp tokens alone, starting from a zero state at every shard.
  if (m.has_linear_attention())
    return fmt::format(
        "--sp {}: {} has {} layers, and DeepSpeed's Ulysses wraps only softmax attention "
        "(ulysses_sp.py UlyssesSPAttentionHF): those layers would each see a slice of the sequence",
        sp, m.name, m.layers_of_kind(models::LayerKind::Mamba2) > 0 ? "Mamba-2" : "Gated DeltaNet");
  if (w.train.implementation == Implementation::ZeroplanEngine)
    return fmt::format("--sp {}: the executor runs data parallelism only; validate with --sp 1", sp);
  // ulysses_sp.py register_with_transformers: "eager" is refused (it materialises a 4D mask, which SP
  // discards); the model must run an SDPA or flash attention path.
  if (w.train.attention == Attention::Eager)
    return fmt::format(
        "--sp {}: DeepSpeed's Ulysses refuses eager attention (ulysses_sp.py: \"eager attn_implementation "
        "isn't currently supported\"); use --attention flash",
        sp);
  if (hf_attention_path(m) == HfAttentionPath::Eager)
    return fmt::format(
        "--sp {}: {} runs eager attention in transformers (its class has no SDPA path; zeroplan models "
        "that), which DeepSpeed's Ulysses refuses (ulysses_sp.py: \"eager attn_implementation isn't "
        "currently supported\")",
        sp, m.name);
  if (hf_attention_explicit_mask(m))
    return fmt::format(
        "--sp {}: {} attends through an explicit mask, which Ulysses drops (it relies on is_causal over "
        "the gathered position_ids); not supported",
        sp, m.name);
  // Multi-head latent attention has different q/k and v head sizes; UlyssesSPAttentionHF takes one
  // attn_head_size for q, k and v (its required shapes).
  if (m.kv_lora_rank > 0)
    return fmt::format(
        "--sp {}: {} uses multi-head latent attention (q/k and v head sizes differ), which "
        "UlyssesSPAttentionHF's single head size does not cover",
        sp, m.name);
  return "";
}

SequenceParallelCosts sequence_parallel_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  SequenceParallelCosts c;
  const int sp = w.train.sequence_parallel;
  if (sp <= 1 || w.model.params_only) return c;
  const models::ModelSpec& m = w.model;
  c.sp = sp;
  c.layers = std::max<int64_t>(1, m.num_layers);
  const int64_t elem = s.mem.act_elem_bytes;
  const int64_t heads = std::max<int64_t>(1, m.num_heads);
  const int64_t d = m.head_width();
  const int64_t kv = m.kv_heads();
  // _combine_local_sequences: KV heads fewer than sp are repeat_interleave'd kv_replication_factor =
  // sp / kv times first, so the k and v sent hold max(kv, sp) heads.
  const int64_t kv_sent = std::max<int64_t>(kv, sp);
  const int64_t tokens = checked_mul(std::max<int64_t>(1, z.micro_batch), w.train.rank_seq_len());
  c.q_bytes = checked_mul(checked_mul(tokens, heads * d), elem);
  c.kv_bytes = checked_mul(checked_mul(tokens, kv_sent * d), elem);
  // forward: dist.all_gather of the int64 position_ids, then q, k, v and the output.
  c.position_ids_bytes = checked_mul(checked_mul(tokens, sp), 8);
  const int64_t accum = std::max<int64_t>(1, z.grad_accum);
  const int64_t passes = forward_passes(z);
  const int64_t per_layer_a2a = 4 * passes + 4;  // forward (and recompute) 4 each, backward 4
  c.a2a_calls_per_step = checked_mul(checked_mul(c.layers, accum), per_layer_a2a);
  c.gather_calls_per_step = checked_mul(checked_mul(c.layers, accum), passes);
  const CommTopology t = contiguous_group_topology(w.cluster, sp);
  const double pass_s = 2.0 * collective_time_s(t, CollectiveKind::AllToAll, c.q_bytes) +
                        2.0 * collective_time_s(t, CollectiveKind::AllToAll, c.kv_bytes);
  const double passes_per_step = static_cast<double>(checked_mul(checked_mul(c.layers, accum), passes + 1));
  c.time_s =
      passes_per_step * pass_s + static_cast<double>(c.gather_calls_per_step) *
                                     collective_time_s(t, CollectiveKind::AllGather, c.position_ids_bytes);
  c.a2a_bytes_per_step = checked_add(
      checked_mul(checked_mul(checked_mul(c.layers, accum), passes + 1),
                  checked_add(checked_mul(2, bus_bytes_per_rank(CollectiveKind::AllToAll, sp, c.q_bytes)),
                              checked_mul(2, bus_bytes_per_rank(CollectiveKind::AllToAll, sp, c.kv_bytes)))),
      checked_mul(c.gather_calls_per_step,
                  bus_bytes_per_rank(CollectiveKind::AllGather, sp, c.position_ids_bytes)));
  // Saved k and v when sp > kv: each rank keeps one replicated head over the whole sequence
  // (micro * seq * d per tensor), where the per-token count has its seq/sp tokens x kv heads.
  if (sp > kv) {
    const int64_t whole = checked_mul(checked_mul(std::max<int64_t>(1, z.micro_batch), w.train.seq_len), d);
    const int64_t share = checked_mul(tokens, kv * d);
    c.kv_replication_bytes_per_layer = checked_mul(checked_mul(2, whole - share), elem);
  }
  // The layer in flight: the contiguous send copies of q, k and v and the tensors received (empty_like
  // of each, ulysses_sp.py _DimZeroAllToAll.forward), before the received ones become the kernel's
  // inputs.
  c.buffer_bytes = checked_mul(2, checked_add(c.q_bytes, checked_mul(2, c.kv_bytes)));
  return c;
}

void apply_sequence_parallel_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                    MemoryBreakdown& mb) {
  if (w.train.sequence_parallel <= 1) return;
  const SequenceParallelCosts c = sequence_parallel_costs(w, s, z);
  if (c.sp <= 1) return;
  mb.add_gpu("Ulysses all-to-all send + receive (q, k, v)", Category::Buffers, c.buffer_bytes,
             kForward | kBackward,
             "ulysses_sp.py _combine_local_sequences: contiguous q/k/v send copies + all_to_all outputs, one "
             "layer at a time");
  // Saved per layer beyond what a rank with seq/sp tokens saves without SP (recorded: +32,768 B per
  // layer at sp 2 = micro 2 x 32 tokens x 256 x 2 B; at sp 4 also K and V twice their share):
  //  - o_proj's input: without SP it shares storage with the attention kernel's saved output; under SP
  //    it is the new tensor _partition_global_sequence returns (rearrange + reshape .contiguous()),
  //    while the kernel keeps its [seq, heads/sp] output;
  //  - the replicated KV heads (sp > kv).
  // Without checkpointing every layer keeps them from the forward; under full checkpointing only the
  // layer being recomputed (backward); selective recomputes the attention core, whose saved inputs are
  // the replicated K and V, while o_proj's input stays saved.
  const int64_t o_copy = c.q_bytes;
  const bool full = z.checkpointing == Checkpointing::Full;
  const uint8_t from_forward = full ? uint8_t(kBackward) : uint8_t(kForward | kBackward);
  Buffer& o = mb.add_gpu("Ulysses o_proj input copy (saved)", Category::Activations,
                         checked_mul(full ? 1 : c.layers, o_copy), from_forward,
                         "ulysses_sp.py _partition_global_sequence: the output back in [seq/sp, heads] as a "
                         "new contiguous tensor, o_proj's saved input");
  o.backward_moment = Buffer::Moment::Start;
  if (c.kv_replication_bytes_per_layer > 0) {
    const bool all_layers = z.checkpointing == Checkpointing::None;
    Buffer& kv =
        mb.add_gpu("Ulysses replicated KV heads (saved)", Category::Activations,
                   checked_mul(all_layers ? c.layers : 1, c.kv_replication_bytes_per_layer),
                   all_layers ? uint8_t(kForward | kBackward) : uint8_t(kBackward),
                   "ulysses_sp.py kv_replication_factor = sp / kv: one whole KV head per rank over the "
                   "sequence");
    kv.backward_moment = Buffer::Moment::Start;
  }
  // Stages 0-2 reduce a 16-bit gradient bucket through an fp32 copy (`tensor.to(communication_data_type)`
  // in engine.py / stage_1_and_2.py allreduce_bucket), alive with the gradients at the end of the backward
  // (recorded: backward peaks 8,918,016 B = 4 x 2,229,504 gradient elements above the same run without
  // SP). Stage 0's bucket holds up to 5e8 elements (engine.py MEMORY_OPT_ALLREDUCE_SIZE), stages 1-2's
  // reduce_bucket_size, each plus the parameter that crosses its end.
  const int64_t grad_elem = s.mem.param_elem_bytes;
  if (z.stage <= 2 && s.mem.trainable_params > 0 && gradient_reduce_bytes(w, z, grad_elem) > grad_elem) {
    const int64_t bucket = z.stage == 0 ? 500'000'000 : z.reduce_bucket_size;
    const int64_t elems =
        std::min(s.mem.trainable_params, checked_add(bucket, s.mem.trainable_tensors.largest_numel()));
    Buffer& b = mb.add_gpu("gradient bucket fp32 copy for the reduction (Ulysses SP)", Category::Buffers,
                           checked_mul(4, elems), kBackward,
                           "allreduce_bucket: tensor.to(float32), seq_parallel_communication_data_type");
    b.backward_moment = Buffer::Moment::End;
    b.after_step = false;
  }
}

void apply_sequence_parallel_time(const Workload& w, const ModelStats& s, const ZeroConfig& z, StepTime& t) {
  if (w.train.sequence_parallel <= 1) return;
  const SequenceParallelCosts c = sequence_parallel_costs(w, s, z);
  if (c.sp <= 1) return;
  // Synchronous all_to_all_single on the compute stream: exposed in full.
  append_exposed_collective(t, CollectiveCost{.name = "Ulysses all-to-alls (q,k,v,out) + position gathers",
                                              .kind = CollectiveKind::AllToAll,
                                              .count = c.a2a_calls_per_step + c.gather_calls_per_step,
                                              .message_bytes = c.q_bytes,
                                              .bytes_per_rank = c.a2a_bytes_per_step,
                                              .time_s = c.time_s,
                                              .group = "sequence_parallel",
                                              .group_size = c.sp});
}

std::vector<CollectiveCall> sequence_parallel_calls(const Workload& w, const ZeroConfig& z) {
  std::vector<CollectiveCall> out;
  const int sp = w.train.sequence_parallel;
  if (sp <= 1 || w.model.params_only) return out;
  const models::ModelSpec& m = w.model;
  const int64_t elem = w.train.precision == Precision::FP32 ? 4 : 2;
  const int64_t heads = std::max<int64_t>(1, m.num_heads);
  const int64_t d = m.head_width();
  const int64_t tokens = std::max<int64_t>(1, z.micro_batch) * w.train.rank_seq_len();
  const int64_t q = tokens * heads * d * elem;
  const int64_t kv = tokens * std::max<int64_t>(m.kv_heads(), sp) * d * elem;
  auto add = [&](Phase ph, CollectiveKind k, int64_t bytes, int64_t eb, const char* caller, int mi) {
    out.push_back(group_call(ph, k, bytes, eb, sp, caller, mi));
  };
  const int64_t layers = std::max<int64_t>(1, m.num_layers);
  for (int64_t mi = 0; mi < std::max<int64_t>(1, z.grad_accum); ++mi) {
    const int micro = static_cast<int>(mi);
    for (int64_t pass = 0; pass < forward_passes(z); ++pass) {
      // The forward (pass 0) runs in the forward phase; the recomputed forward in the backward.
      const Phase ph = pass == 0 ? kForward : kBackward;
      for (int64_t l = 0; l < layers; ++l) {
        add(ph, CollectiveKind::AllGather, tokens * 8, 8, "UlyssesSPAttentionHF.forward (position_ids)",
            micro);
        add(ph, CollectiveKind::AllToAll, q, elem, "_combine_local_sequences (q)", micro);
        add(ph, CollectiveKind::AllToAll, kv, elem, "_combine_local_sequences (k)", micro);
        add(ph, CollectiveKind::AllToAll, kv, elem, "_combine_local_sequences (v)", micro);
        add(ph, CollectiveKind::AllToAll, q, elem, "_partition_global_sequence", micro);
      }
    }
    // Backward, layers in reverse: the output's all-to-all first, then v, k, q (autograd order).
    for (int64_t l = 0; l < layers; ++l) {
      add(kBackward, CollectiveKind::AllToAll, q, elem, "_DimZeroAllToAll.backward (output)", micro);
      add(kBackward, CollectiveKind::AllToAll, kv, elem, "_DimZeroAllToAll.backward (v)", micro);
      add(kBackward, CollectiveKind::AllToAll, kv, elem, "_DimZeroAllToAll.backward (k)", micro);
      add(kBackward, CollectiveKind::AllToAll, q, elem, "_DimZeroAllToAll.backward (q)", micro);
    }
  }
  return out;
}

}  // namespace zeroplan::planner
