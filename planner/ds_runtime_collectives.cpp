// The collective calls of one DeepSpeed step; see ds_runtime_collectives.h. Rules (DeepSpeed 0.19.8):
//  - stage 0 (FP16_Optimizer / plain optimizer): engine.py allreduce_gradients ->
//    buffered_allreduce_fallback -> allreduce_no_retain: gradients of module.parameters() in order,
//    a bucket flushed (allreduce_bucket: one all_reduce in communication_data_type) once its numel
//    EXCEEDS elements_per_buffer = MEMORY_OPT_ALLREDUCE_SIZE (5e8), at the accumulation boundary only.
//  - stages 1/2 (stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads): a gradient that
//    would overflow reduce_bucket_size first flushes the bucket (reduce_ipg_grads -> allreduce_bucket,
//    one all_reduce per flush); one larger than the bucket is reduced alone (extra_large_param_to_reduce).
//    Stage 2 reduces every micro-step, stage 1 at the boundary. Step: has_overflow (1-byte all_reduce),
//    get_grad_norm_direct (fp32 scalar all_reduce), all_gather_into_tensor_dp_groups of the updated
//    16-bit partition (utils.py; one call per group when torch has all_gather_into_tensor).
//  - stage 3: gradients go to the IPG bucket in backward order; `bucket.elements + param.ds_numel >
//    reduce_bucket_size and bucket.elements > 0` flushes first (stage3.py
//    reduce_independent_p_g_buckets_and_remove_grads), so a bucket holds whole parameters and is never
//    split; each flush is one reduce_scatter of the padded partitions (reduce_scatter_coalesced);
//    the epilogue flushes the rest. Step: get_grad_norm_direct (fp64 scalar all_reduce), then _post_step
//    all-gathers the persistent parameters, one all_gather per parameter (partition_parameters.py
//    _allgather_params_coalesced loops `for param_idx, param in enumerate(param_list)`).
//    Parameter gathers: partitioned_param_coordinator.py fetch_sub_module gathers a module's
//    unavailable parameters in ONE coalesced call (__all_gather_params -> all_gather_coalesced), then
//    prefetches the next parameters of the trace up to stage3_prefetch_bucket_size (capped by
//    max_live_parameters minus those available) in one more call; the root module (no parameters of
//    its own) is fetched first, so its prefetch gathers the first bucket of the trace.
#include "planner/ds_runtime_collectives.h"

#include <algorithm>
#include <string>

#include "common/checked.h"
#include "planner/ds_runtime.h"

namespace zeroplan::planner {

namespace {

// engine.py: MEMORY_OPT_ALLREDUCE_SIZE = 500000000 (allreduce_gradients' default bucket_size).
constexpr int64_t kMemoryOptAllreduceSize = 500'000'000;

int64_t elem_bytes_of(Precision p) { return p == Precision::FP32 ? 4 : 2; }

// HF decoder layers whose __init__ registers self_attn and mlp before their norms
// (modeling_llama.py LlamaDecoderLayer.__init__: self_attn, mlp, input_layernorm,
// post_attention_layernorm; the same in the Mistral/Qwen2/Qwen3/Mixtral/Gemma/Phi-3 modeling files),
// so module.parameters() lists a layer's norms last although the inventory lists them in execution
// order.
bool norms_registered_last(const std::string& model_type) {
  for (const char* t : {"llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gemma",
                        "gemma2", "gemma3", "gemma3_text", "phi3"})
    if (model_type == t) return true;
  return false;
}

// Trainable parameter tensors (numel) in module.parameters() order (the order of DeepSpeed's
// gradient and persistent-parameter lists), from the model inventory; LoRA adapters are not in the
// inventory, so LoRA falls back to the size table (order unknown: listed in docs/conformance.md).
std::vector<int64_t> trainable_numels_in_order(const Workload& w, const ModelStats& s) {
  std::vector<int64_t> out;
  if (w.train.method == Method::Full && !w.model.params_only) {
    const bool reorder = norms_registered_last(w.model.model_type);
    for (const auto& layer : w.model.inventory()) {
      std::vector<int64_t> norms;
      for (const auto& t : layer.tensors) {
        if (reorder && layer.is_decoder_layer && t.is_norm)
          norms.push_back(t.numel());
        else
          out.push_back(t.numel());
      }
      out.insert(out.end(), norms.begin(), norms.end());
    }
    return out;
  }
  const TensorSizeTable& t = s.mem.trainable_tensors;
  for (size_t i = 0; i < t.numel.size(); ++i)
    for (int64_t k = 0; k < t.count[i]; ++k) out.push_back(t.numel[i]);
  return out;
}

// One module of the stage-3 trace: its own parameters (numel), in forward order.
struct Module {
  std::vector<int64_t> params;
};

// Modules in forward order: the inventory's tensors grouped by owning module (name minus the last
// component), preceded by the root module, which owns no parameters.
std::vector<Module> modules_in_order(const Workload& w) {
  std::vector<Module> mods(1);  // root
  std::string last;
  for (const auto& layer : w.model.inventory())
    for (const auto& t : layer.tensors) {
      const auto dot = t.name.rfind('.');
      const std::string owner = dot == std::string::npos ? t.name : t.name.substr(0, dot);
      if (owner != last || mods.size() == 1) mods.push_back({});
      last = owner;
      mods.back().params.push_back(t.numel());
    }
  return mods;
}

// Greedy bucketing shared by stages 1-3: flush when the next gradient would overflow the bucket
// (and the bucket is not empty). Returns the numel of each flush, in order.
std::vector<int64_t> bucket_flushes(const std::vector<int64_t>& grads_in_order, int64_t bucket,
                                    int64_t (*padded)(int64_t, int64_t), int64_t n) {
  std::vector<int64_t> flushes;
  int64_t elems = 0, payload = 0;
  for (int64_t g : grads_in_order) {
    if (elems > 0 && elems + g > bucket) {
      flushes.push_back(payload);
      elems = payload = 0;
    }
    elems += g;
    payload += padded(g, n);
  }
  if (elems > 0) flushes.push_back(payload);
  return flushes;
}

int64_t unpadded(int64_t g, int64_t) { return g; }
// reduce_scatter_coalesced pads every tensor to ceil(numel/N) per rank.
int64_t padded_to_n(int64_t g, int64_t n) { return ceil_div(g, n) * n; }

}  // namespace

std::vector<CollectiveCall> deepspeed_collectives(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  std::vector<CollectiveCall> out;
  const int n = std::max(1, w.cluster.world_size());
  const int64_t N = n;
  const int stage = std::clamp(z.stage, 0, 3);
  const int64_t accum = std::max<int64_t>(1, z.grad_accum);
  const bool off_opt = stage >= 1 && z.offload_optimizer != Offload::None;
  const RuntimePath path = runtime_path(w.train.deepspeed_version, stage, w.train.precision, z.grad_accum_dtype, off_opt);
  if (path.wrapper == OptimizerWrapper::Unsupported) return out;
  // engine.py communication_data_type: the config's value, else fp16/bf16 when enabled, else fp32.
  const int64_t comm = elem_bytes_of(w.train.precision);
  auto add = [&](Phase ph, CollectiveKind k, int64_t bytes, int64_t eb, const char* caller) {
    out.push_back(CollectiveCall{ph, k, bytes, eb, n, caller});
  };

  const std::vector<int64_t> grads = trainable_numels_in_order(w, s);
  std::vector<int64_t> backward_order(grads.rbegin(), grads.rend());

  if (path.wrapper == OptimizerWrapper::Basic || path.wrapper == OptimizerWrapper::FP16Optimizer ||
      path.wrapper == OptimizerWrapper::BF16Optimizer) {
    // allreduce_no_retain: append, then flush when numel > elements_per_buffer.
    int64_t numel = 0;
    for (int64_t g : grads) {
      numel += g;
      if (numel > kMemoryOptAllreduceSize) {
        add(kBackward, CollectiveKind::AllReduce, numel * comm, comm, "DeepSpeedEngine.allreduce_bucket");
        numel = 0;
      }
    }
    if (numel > 0) add(kBackward, CollectiveKind::AllReduce, numel * comm, comm, "DeepSpeedEngine.allreduce_bucket");
    // Plain fp32 optimizer with gradient_clipping (HF Trainer default max_grad_norm 1.0; recorded runs
    // use 1.0): engine.py _take_model_step -> clip_fp32_gradients -> runtime/utils.py clip_grad_norm_,
    // one fp32 all_reduce of the norm (recorded in llama-gqa_s0_n*_fp32_default).
    if (path.wrapper == OptimizerWrapper::Basic) add(kStep, CollectiveKind::AllReduce, 4, 4, "clip_grad_norm_");
    if (path.wrapper == OptimizerWrapper::BF16Optimizer) {
      // bf16_optimizer.py step -> update_lp_params -> all_gather_dp_groups of the bf16 partitions.
      const int64_t part = ceil_div(ceil_div(s.mem.trainable_params, 2 * N) * 2 * N, N);
      if (N > 1) add(kStep, CollectiveKind::AllGather, part * 2, 2, "all_gather_into_tensor_dp_groups");
    }
    return out;
  }

  if (path.wrapper == OptimizerWrapper::ZeroStage1And2) {
    const std::vector<int64_t> f = bucket_flushes(backward_order, z.reduce_bucket_size, unpadded, N);
    const int64_t reductions = stage == 2 ? accum : 1;
    for (int64_t m = 0; m < reductions; ++m)
      for (int64_t b : f)
        add(kBackward, CollectiveKind::AllReduce, b * comm, comm, "DeepSpeedZeroOptimizer.allreduce_bucket");
    // has_overflow's 1-byte all_reduce only in 16-bit training (recorded: absent in the fp32 runs).
    if (w.train.precision != Precision::FP32)
      add(kStep, CollectiveKind::AllReduce, 1, 1, "DeepSpeedZeroOptimizer.has_overflow");
    add(kStep, CollectiveKind::AllReduce, 4, 4, "DeepSpeedZeroOptimizer.get_grad_norm_direct");
    // utils.py all_gather_into_tensor_dp_groups: `if dp_world_size == 1: continue`.
    const int64_t part = ceil_div(s.mem.trainable_params, 2 * N) * 2;
    if (N > 1) add(kStep, CollectiveKind::AllGather, part * comm, comm, "all_gather_into_tensor_dp_groups");
    return out;
  }

  // ---- stage 3
  const int64_t thr = z.param_persistence_threshold;
  // partition_parameters.py all_gather_coalesced and _allgather_params_coalesced:
  // `if all(self._partition_world_size(param) == 1 ...): return _no_gather_coalesced(params)`, so a
  // world of one issues no parameter gathers.
  const bool gathers = N > 1;
  if (!w.model.params_only) {
    const std::vector<Module> mods = modules_in_order(w);
    int64_t nonpersist_total = 0;
    for (const Module& m : mods)
      for (int64_t p : m.params)
        if (p > thr) nonpersist_total += p;
    // Forward gathers with a complete trace. Parameters gathered stay available while the live total
    // is within max_live_parameters and their next use within max_reuse_distance; when the whole model
    // fits both, nothing is released between forward and backward (partitioned_param_coordinator.py
    // release_sub_module / __params_to_release), so the backward gathers nothing.
    const bool all_kept = nonpersist_total <= z.max_live_parameters && nonpersist_total <= z.max_reuse_distance;
    auto forward_pass = [&](Phase ph) {
      // queue = non-persistent parameters in trace order
      std::vector<int64_t> queue;
      for (const Module& m : mods)
        for (int64_t p : m.params)
          if (p > thr) queue.push_back(p);
      size_t next = 0;        // queue position of the first not yet gathered parameter
      size_t consumed = 0;    // parameters used so far (trace position)
      for (const Module& m : mods) {
        int64_t own = 0, own_part = 0;
        size_t k = 0;
        for (int64_t p : m.params)
          if (p > thr) {
            ++k;
            if (consumed + k > next) {  // not gathered yet
              own += p;
              own_part += ceil_div(p, N);
            }
          }
        if (own > 0 && gathers) {
          add(ph, CollectiveKind::AllGather, own_part * comm, comm, "_dist_allgather_fn");
          next = std::max(next, consumed + k);
        }
        consumed += k;
        if (z.prefetch_bucket_size > 0) {
          const int64_t cap = std::min(z.prefetch_bucket_size, z.max_live_parameters);
          int64_t numel = 0, part = 0;
          while (next < queue.size() && numel < cap) {
            numel += queue[next];
            part += ceil_div(queue[next], N);
            ++next;
          }
          if (part > 0 && gathers) add(ph, CollectiveKind::AllGather, part * comm, comm, "_dist_allgather_fn");
        }
      }
    };
    for (int64_t m = 0; m < accum; ++m) {
      forward_pass(kForward);
      if (!all_kept && gathers) {
        // ASSUMPTION (listed in docs/conformance.md): when parameters are released, the backward
        // re-gathers each module's non-persistent parameters in reverse order, one call per module.
        for (auto it = mods.rbegin(); it != mods.rend(); ++it) {
          int64_t part = 0;
          for (int64_t p : it->params)
            if (p > thr) part += ceil_div(p, N);
          if (part > 0) add(kBackward, CollectiveKind::AllGather, part * comm, comm, "_dist_allgather_fn");
        }
      }
      for (int64_t b : bucket_flushes(backward_order, z.reduce_bucket_size, padded_to_n, N))
        add(kBackward, CollectiveKind::ReduceScatter, b * comm, comm, "_torch_reduce_scatter_fn");
    }
  }
  add(kStep, CollectiveKind::AllReduce, 8, 8, "DeepSpeedZeroOptimizer_Stage3.get_grad_norm_direct");
  // _post_step: persistent parameters, one all_gather each (in module order).
  for (int64_t g : grads)
    if (gathers && g <= thr) add(kStep, CollectiveKind::AllGather, ceil_div(g, N) * comm, comm, "Init._allgather_params_coalesced");
  return out;
}

}  // namespace zeroplan::planner
