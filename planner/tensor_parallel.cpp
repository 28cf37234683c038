// DeepSpeed AutoTP training (tensor_parallel.autotp_size); see tensor_parallel.h.
#include "planner/tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/checked.h"
#include "planner/comm_model.h"

namespace zeroplan::planner {

namespace {

// Rank 0's share of n near-evenly split rows (tp_shard.py get_shard_size with tp_grain_size 1:
// n // tp, plus one for the ranks below n % tp).
int64_t near_even_rank0(int64_t n, int tp) {
  return n / tp + (n % tp > 0 ? 1 : 0);
}

// Row-parallel all-reduces per layer and micro-step: o_proj's and down_proj's in the forward and, under
// full activation checkpointing, o_proj's again in the recompute. transformers checkpoints with
// torch.utils.checkpoint(use_reentrant=False), whose recompute stops once every saved tensor the backward
// needs is rebuilt (early stopping), before down_proj's output, which nothing saves (recorded: 13
// backward all-reduces at 2 layers, 11 without checkpointing). Selective recomputes only the attention
// core, which holds no TP linear.
// A reentrant recompute (TrainingSpec::checkpoint_reentrant, deepspeed_checkpointing) re-runs the whole
// layer, down_proj's all-reduce included.
int64_t row_allreduces_per_layer(const Workload& w, const ZeroConfig& z) {
  if (z.checkpointing != Checkpointing::Full) return 2;
  return w.train.checkpoint_reentrant || w.train.deepspeed_checkpointing ? 4 : 3;
}

// Per-head q_norm / k_norm (Qwen3, Gemma-3): the HF tp_plan marks them "replicated_with_grad_allreduce",
// so AutoTP registers a hook that all-reduces each one's gradient in the TP group as the backward computes
// it (auto_tp.py register_replicated_grad_hooks; recorded in fixtures-tp qwen3: 2 per layer of head_dim x
// 2 B, k_norm's before k_proj's input-gradient all-reduce, q_norm's before q_proj's).
bool qk_norm_grad_hooks(const models::ModelSpec& m) {
  return m.qk_norm == models::QkNorm::PerHead;
}

}  // namespace

std::string tensor_parallel_refusal(const Workload& w, int tp) {
  if (tp <= 1) return "";
  const models::ModelSpec& m = w.full_model();
  if (m.params_only)
    return fmt::format(
        "--tp {} needs the architecture (which linears AutoTP splits); use --model instead of --params", tp);
  if (w.train.deepspeed_version != DeepSpeedVersion::V0_19_8)
    return fmt::format(
        "--tp {}: AutoTP training is modelled as DeepSpeed 0.19.8 runs it (HF tp_plan sharding, recorded in "
        "tests/deepspeed/fixtures-tp); use --deepspeed-version 0.19.8",
        tp);
  if (w.train.sequence_parallel > 1)
    return fmt::format("--tp {} with --sp {}: tensor and sequence parallelism together are not modelled yet",
                       tp, w.train.sequence_parallel);
  if (w.train.method != Method::Full)
    return fmt::format("--tp {} with --method lora/qlora is not modelled yet; use --method full", tp);
  if (w.train.tiled_mlp) return fmt::format("--tp {} with --kernels tiled-mlp is not modelled yet", tp);
  // Liger's fused linear cross-entropy reads the lm_head's weight directly, which AutoTP splits by
  // vocabulary; DeepSpeed's own Liger path needs a vocabulary-parallel head (TPTrainingConfig
  // vocab_parallel_ce_backend "liger"), which is not modelled.
  if (w.train.liger)
    return fmt::format(
        "--tp {} with --kernels liger: Liger's fused loss reads the lm_head weight, which AutoTP splits by "
        "vocabulary (DeepSpeed's vocab_parallel_ce_backend \"liger\" is not modelled); drop liger",
        tp);
  if (m.from_checkpoint())
    return fmt::format("--tp {} with a checkpoint's own tensors is not modelled yet; pass its config.json",
                       tp);
  if (m.has_linear_attention())
    return fmt::format(
        "--tp {}: AutoTP's split of {} layers (their input projections and depthwise conv1d) is not "
        "modelled; use --tp 1",
        tp, m.layers_of_kind(models::LayerKind::Mamba2) > 0 ? "Mamba-2" : "Gated DeltaNet");
  // What the rank model covers: separate q/k/v and gate/up linears of the Llama layout, which the
  // HF tp_plan splits colwise/rowwise as tensor_parallel.h lists. Other layouts take other AutoTP paths
  // (fused qkv: fused_LinearLayer; Phi-3's gate_up_proj: GateUpPack_LinearLayer; MoE experts: AutoEP
  // folding) that are not modelled.
  const char* why = nullptr;
  if (m.is_moe())
    why = "MoE experts (AutoTP folds with AutoEP there)";
  else if (m.layout != models::Layout::Llama || m.fused_qkv || m.fused_gate_up || m.parallel_attention)
    why = "fused or non-Llama projections (fused_LinearLayer / GateUpPack_LinearLayer paths)";
  else if (m.kv_lora_rank > 0 || m.q_lora_rank > 0)
    why = "multi-head latent attention";
  else if (m.qk_norm == models::QkNorm::FullWidth || m.qk_norm == models::QkNorm::HeadMatrix)
    why = "q/k norms over the whole projection width";
  else if (m.word_embed_proj_dim > 0 && m.word_embed_proj_dim != m.hidden_size)
    why = "an embedding projection";
  if (why != nullptr)
    return fmt::format("--tp {}: {} has {}, which zeroplan's AutoTP model does not cover yet; use --tp 1", tp,
                       m.name, why);
  return "";
}

models::ModelSpec tensor_parallel_rank_model(const models::ModelSpec& m, int tp) {
  models::ModelSpec r = m;
  if (tp <= 1 || m.params_only) return r;
  const int64_t heads = std::max<int64_t>(1, m.num_heads);
  const int64_t kv = m.kv_heads();
  // Attention: the projections' rows split by KV-head groups (tp_shard.py get_shard_size: a known
  // kv-head count and a size divisible by it). Rank 0 gets kv // tp groups, plus one when kv % tp > 0,
  // each holding heads / kv query heads and one KV head.
  const int64_t groups = kv / tp + (kv % tp > 0 ? 1 : 0);
  r.head_dim = m.head_width();
  r.num_heads = heads * groups / kv;
  r.num_kv_heads = groups;
  r.intermediate_size = near_even_rank0(m.intermediate_size, tp);
  // Untied: the lm_head's vocabulary rows split, the embedding replicated. Tied: the embedding and the
  // lm_head share one vocabulary shard (VocabParallelEmbedding / VocabParallelLinear, recorded:
  // embed_tokens [1024, 256] of [2048, 256] at tp 2) and the loss runs vocabulary-parallel
  // (_VocabParallelCrossEntropy), so the rank's logits are its shard's too.
  if (m.tie_word_embeddings)
    r.vocab_size = near_even_rank0(m.vocab_size, tp);
  else
    r.lm_head_rows = near_even_rank0(m.vocab_size, tp);
  return r;
}

void apply_tensor_parallel(Workload& w, int tp) {
  w.train.tensor_parallel = std::max(1, tp);
  if (tp <= 1) return;
  w.unsharded = std::make_shared<const models::ModelSpec>(w.model);
  w.model = tensor_parallel_rank_model(w.model, tp);
}

TensorParallelCosts tensor_parallel_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  TensorParallelCosts c;
  const int tp = w.train.tensor_parallel;
  if (tp <= 1 || w.model.params_only) return c;
  const models::ModelSpec& full = w.full_model();
  c.tp = tp;
  c.layers = std::max<int64_t>(1, full.num_layers);
  const int64_t elem = s.mem.act_elem_bytes;
  const int64_t tokens = checked_mul(std::max<int64_t>(1, z.micro_batch), w.train.rank_seq_len());
  c.hidden_bytes = checked_mul(checked_mul(tokens, full.hidden_size), elem);
  c.logits_shard_bytes = checked_mul(checked_mul(tokens, near_even_rank0(full.vocab_size, tp)), elem);
  const int64_t accum = std::max<int64_t>(1, z.grad_accum);
  // Per micro-step: 2 row-parallel all-reduces per layer and forward pass, 5 column-parallel input-
  // gradient all-reduces per layer in the backward, and the lm_head's gather (forward) and
  // input-gradient all-reduce (backward).
  // A tied model: the vocabulary-parallel embedding all-reduces its output (one more forward call), the
  // logits are not gathered, and the vocabulary-parallel loss all-reduces three fp32 per-token scalars
  // (max logit, sum of exponentials, target logit) over the shifted tokens.
  const bool tied = full.tie_word_embeddings;
  const int64_t per_micro =
      checked_add(checked_mul(c.layers, row_allreduces_per_layer(w, z) + 5), tied ? 2 : 1);
  c.allreduce_calls_per_step = checked_mul(per_micro, accum);
  c.gather_calls_per_step = tied ? 0 : accum;
  c.loss_allreduce_calls_per_step = tied ? checked_mul(3, accum) : 0;
  c.norm_grad_calls_per_step = qk_norm_grad_hooks(full) ? checked_mul(checked_mul(2, c.layers), accum) : 0;
  c.norm_grad_bytes = checked_mul(full.head_width(), elem);
  c.loss_scalar_bytes = checked_mul(
      checked_mul(std::max<int64_t>(1, z.micro_batch), std::max<int64_t>(1, w.train.rank_seq_len() - 1)), 4);
  const CommTopology t = contiguous_group_topology(w.cluster, tp);
  const int64_t gathered = checked_mul(c.logits_shard_bytes, tp);
  c.time_s = static_cast<double>(c.allreduce_calls_per_step) *
                 collective_time_s(t, CollectiveKind::AllReduce, c.hidden_bytes) +
             static_cast<double>(c.gather_calls_per_step) *
                 collective_time_s(t, CollectiveKind::AllGather, gathered) +
             static_cast<double>(c.loss_allreduce_calls_per_step) *
                 collective_time_s(t, CollectiveKind::AllReduce, c.loss_scalar_bytes) +
             static_cast<double>(c.norm_grad_calls_per_step) *
                 collective_time_s(t, CollectiveKind::AllReduce, c.norm_grad_bytes);
  c.bytes_per_rank_per_step = checked_add(
      checked_add(
          checked_mul(c.allreduce_calls_per_step,
                      bus_bytes_per_rank(CollectiveKind::AllReduce, tp, c.hidden_bytes)),
          checked_mul(c.gather_calls_per_step, bus_bytes_per_rank(CollectiveKind::AllGather, tp, gathered))),
      checked_add(checked_mul(c.loss_allreduce_calls_per_step,
                              bus_bytes_per_rank(CollectiveKind::AllReduce, tp, c.loss_scalar_bytes)),
                  checked_mul(c.norm_grad_calls_per_step,
                              bus_bytes_per_rank(CollectiveKind::AllReduce, tp, c.norm_grad_bytes))));
  return c;
}

void apply_tensor_parallel_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                  MemoryBreakdown& mb) {
  // Untied: nothing beyond the rank model's own sizes. GatherFromTensorParallelRegion.forward holds the
  // lm_head's shard, the all_gather_into_tensor buffer of tp padded shards and the torch.cat result
  // together, i.e. (tp + 1) shards beside the logits; the loss that follows upcasts the logits to fp32 (2
  // tp shards) beside them, so the head's peak is the loss's as without TP. Recorded: the forward peaks
  // of fixtures-tp match the memory model without a gather buffer (with one of (tp + 1) shards, 3.3-5.5%
  // above).
  if (w.train.tensor_parallel <= 1 || w.model.params_only || !w.full_model().tie_word_embeddings) return;
  // Tied: the vocabulary-parallel loss (deepspeed/sequence/cross_entropy.py) beyond the transformers loss
  // the memory model counts (fp32 upcast and log-probabilities): its __call__ shifts the logits with
  // `logits[..., :-1, :].contiguous()` (a 16-bit copy of the shard), and _VocabParallelCrossEntropy.forward
  // holds `logits - global_max` (fp32) beside the upcast and exp_logits. Recorded (llama-tied tp 2): the
  // forward peak 765,430 B above the model without it; this is 774,144 B there.
  const int64_t rows =
      checked_mul(std::max<int64_t>(1, z.micro_batch), std::max<int64_t>(1, w.train.rank_seq_len() - 1));
  const int64_t elems = checked_mul(rows, w.model.vocab_size);  // the rank's vocabulary shard
  mb.add_gpu("AutoTP vocab-parallel loss: shifted logits copy + fp32 (logits - max)", Category::Buffers,
             checked_mul(elems, s.mem.act_elem_bytes + 4), kForward,
             "sequence/cross_entropy.py: logits[..., :-1, :].contiguous() and logits - global_max")
      .forward_moment = Buffer::ForwardMoment::Head;
}

void apply_tensor_parallel_time(const Workload& w, const ModelStats& s, const ZeroConfig& z, StepTime& t) {
  if (w.train.tensor_parallel <= 1) return;
  const TensorParallelCosts c = tensor_parallel_costs(w, s, z);
  if (c.tp <= 1) return;
  // dist.all_reduce without async_op on the compute stream (tp_overlap_comm false): exposed in full.
  append_exposed_collective(
      t, CollectiveCost{.name = "AutoTP all-reduces (row outputs, column input grads) + logits gather",
                        .kind = CollectiveKind::AllReduce,
                        .count = c.allreduce_calls_per_step + c.gather_calls_per_step +
                                 c.loss_allreduce_calls_per_step + c.norm_grad_calls_per_step,
                        .message_bytes = c.hidden_bytes,
                        .bytes_per_rank = c.bytes_per_rank_per_step,
                        .time_s = c.time_s,
                        .group = "tensor_parallel",
                        .group_size = c.tp});
}

std::vector<CollectiveCall> tensor_parallel_calls(const Workload& w, const ZeroConfig& z) {
  std::vector<CollectiveCall> out;
  const int tp = w.train.tensor_parallel;
  if (tp <= 1 || w.model.params_only) return out;
  const models::ModelSpec& full = w.full_model();
  const int64_t elem = w.train.precision == Precision::FP32 ? 4 : 2;
  const int64_t tokens = std::max<int64_t>(1, z.micro_batch) * w.train.rank_seq_len();
  const int64_t hidden = tokens * full.hidden_size * elem;
  const int64_t shard = tokens * near_even_rank0(full.vocab_size, tp) * elem;
  auto add = [&](Phase ph, CollectiveKind k, int64_t bytes, const char* caller, int mi) {
    out.push_back(group_call(ph, k, bytes, elem, tp, caller, mi));
  };
  const int64_t layers = std::max<int64_t>(1, full.num_layers);
  const bool tied = full.tie_word_embeddings;
  const bool qk_hooks = qk_norm_grad_hooks(full);
  const int64_t norm_grad = full.head_width() * elem;
  const int64_t loss_scalars =
      std::max<int64_t>(1, z.micro_batch) * std::max<int64_t>(1, w.train.rank_seq_len() - 1) * 4;
  for (int64_t mi = 0; mi < std::max<int64_t>(1, z.grad_accum); ++mi) {
    const int micro = static_cast<int>(mi);
    if (tied)
      add(kForward, CollectiveKind::AllReduce, hidden, "RowParallel.forward (VocabParallelEmbedding)", micro);
    for (int64_t l = 0; l < layers; ++l) {
      add(kForward, CollectiveKind::AllReduce, hidden, "RowParallel.forward (o_proj)", micro);
      add(kForward, CollectiveKind::AllReduce, hidden, "RowParallel.forward (down_proj)", micro);
    }
    if (tied) {
      for (int i = 0; i < 3; ++i) {
        add(kForward, CollectiveKind::AllReduce, loss_scalars, "_VocabParallelCrossEntropy.forward", micro);
        out.back().elem_bytes = 4;
      }
    } else {
      add(kForward, CollectiveKind::AllGather, shard, "GatherFromTensorParallelRegion.forward (lm_head)",
          micro);
    }
    add(kBackward, CollectiveKind::AllReduce, hidden, "ColumnParallel.backward (lm_head)", micro);
    // Backward, layers in reverse; a fully checkpointed layer first re-runs its forward up to its MLP
    // (o_proj's all-reduce), then its MLP's two column layers and attention's three.
    for (int64_t l = 0; l < layers; ++l) {
      if (row_allreduces_per_layer(w, z) > 2)
        add(kBackward, CollectiveKind::AllReduce, hidden, "RowParallel.forward (o_proj, recompute)", micro);
      if (row_allreduces_per_layer(w, z) > 3)
        add(kBackward, CollectiveKind::AllReduce, hidden, "RowParallel.forward (down_proj, recompute)",
            micro);
      add(kBackward, CollectiveKind::AllReduce, hidden, "ColumnParallel.backward (up_proj)", micro);
      add(kBackward, CollectiveKind::AllReduce, hidden, "ColumnParallel.backward (gate_proj)", micro);
      add(kBackward, CollectiveKind::AllReduce, hidden, "ColumnParallel.backward (v_proj)", micro);
      if (qk_hooks)
        add(kBackward, CollectiveKind::AllReduce, norm_grad, "register_replicated_grad_hooks (k_norm)",
            micro);
      add(kBackward, CollectiveKind::AllReduce, hidden, "ColumnParallel.backward (k_proj)", micro);
      if (qk_hooks)
        add(kBackward, CollectiveKind::AllReduce, norm_grad, "register_replicated_grad_hooks (q_norm)",
            micro);
      add(kBackward, CollectiveKind::AllReduce, hidden, "ColumnParallel.backward (q_proj)", micro);
    }
  }
  return out;
}

}  // namespace zeroplan::planner
