// Expert parallelism (DeepSpeed 0.19.8 AutoEP); what is modelled and why in expert_parallel.h.
#include "planner/expert_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string_view>

#include "common/checked.h"
#include "planner/comm_model.h"

namespace zeroplan::planner {
namespace {

// deepspeed/module_inject/auto_ep_presets/*.py (0.19.8): PRESET_NAME and hf_model_types of each preset
// registered in registry.py _PRESET_MODULES (qwen3_moe.py covers qwen2_moe too; qwen3_5_moe.py matches the
// text backbone's model_type "qwen3_5_moe_text" only, and names the vision-language "qwen3_5_moe" in its
// unsupported_hf_model_type_notes: "pass the text-backbone model/config").
struct Preset {
  std::string_view model_type;
  const char* preset;
};
constexpr Preset kPresets[] = {
    {"mixtral", "mixtral"},         {"qwen3_moe", "qwen3_moe"},
    {"qwen2_moe", "qwen3_moe"},     {"qwen3_5_moe_text", "qwen3_5_moe"},
    {"deepseek_v2", "deepseek_v2"}, {"deepseek_v3", "deepseek_v3"},
    {"minimax_m3", "minimax_m3"},
};

int64_t expert_width(const models::ModelSpec& m) {
  return m.moe_intermediate_size > 0 ? m.moe_intermediate_size : m.intermediate_size;
}

}  // namespace

const char* autoep_preset(const models::ModelSpec& m) {
  for (const Preset& p : kPresets)
    if (p.model_type == m.model_type) return p.preset;
  return nullptr;
}

int64_t routed_expert_parameters(const models::ModelSpec& m) {
  if (!m.is_moe() || m.params_only) return 0;
  // Gated experts (Mixtral w1/w3/w2, Qwen/DeepSeek gate_proj/up_proj/down_proj; transformers 5 stores
  // them fused as gate_up_proj [E, 2f, h] and down_proj [E, h, f]): 3 * h * f each, no biases.
  return checked_mul(checked_mul(m.num_moe_layers(), m.num_experts),
                     checked_mul(3 * m.hidden_size, expert_width(m)));
}

std::string expert_parallel_refusal(const Workload& w, int ep) {
  if (ep <= 1) return "";
  const models::ModelSpec& m = w.model;
  const int n = w.cluster.world_size();
  if (!m.is_moe())
    return fmt::format("--ep {} needs a mixture-of-experts model; {} has no routed experts", ep, m.name);
  if (w.train.deepspeed_version != DeepSpeedVersion::V0_19_8)
    return fmt::format(
        "--ep {}: expert parallelism is modelled for DeepSpeed 0.19.8's AutoEP only "
        "(ds_config \"expert_parallel\"); use --deepspeed-version 0.19.8",
        ep);
  if (autoep_preset(m) == nullptr)
    return fmt::format(
        "--ep {}: DeepSpeed 0.19.8's AutoEP has no preset for model_type '{}' (presets: mixtral, qwen2_moe, "
        "qwen3_moe, qwen3_5_moe_text, deepseek_v2, deepseek_v3, minimax_m3); native deepspeed.moe.layer.MoE "
        "would "
        "need the model's MoE blocks rewritten, which zeroplan does not model",
        ep, m.model_type);
  if (w.train.method != Method::Full)
    return fmt::format(
        "--ep {} with --method {}: LoRA adapters on AutoEP's replaced expert weights are not "
        "modelled; use --method full or drop --ep",
        ep, to_string(w.train.method));
  if (n % ep != 0)
    return fmt::format(
        "--ep {} must divide the {} GPUs (groups.py _ensure_divisibility(world_size, ep_size))", ep, n);
  if (m.num_experts % ep != 0)
    return fmt::format(
        "--ep {} must divide the {} routed experts per layer (auto_ep_config.py "
        "validate_autoep_post_detection: num_experts % autoep_size == 0)",
        ep, m.num_experts);
  return "";
}

std::vector<int> expert_parallel_candidates(const Workload& w) {
  std::vector<int> out;
  const int g = std::gcd(static_cast<int>(std::min<int64_t>(w.model.num_experts, 1 << 20)),
                         std::max(1, w.cluster.gpus_per_node));
  for (int ep = 2; ep <= g; ++ep)
    if (g % ep == 0 && expert_parallel_refusal(w, ep).empty()) out.push_back(ep);
  return out;
}

ExpertParallelCosts expert_parallel_costs(const Workload& w, const ModelStats& s, const ZeroConfig& z) {
  ExpertParallelCosts c;
  if (z.ep_size <= 1) return c;
  const models::ModelSpec& m = w.model;
  c.ep = z.ep_size;
  c.moe_layers = m.num_moe_layers();
  c.expert_params = routed_expert_parameters(m);
  const int64_t total = std::max<int64_t>(1, s.mem.total_params);
  c.local_params = total - c.expert_params + c.expert_params / c.ep;
  c.local_fraction = static_cast<double>(c.local_params) / static_cast<double>(total);
  // Uniform routing (the load-balancing loss's aim): each rank's T = micro * seq tokens go to top-k
  // experts, T*k rows leave per MoE layer and T*k rows arrive. Dropless (AutoEP has no capacity
  // factor): the real maximum over ranks is higher when routing is skewed.
  c.rows_per_micro =
      checked_mul(checked_mul(z.micro_batch, w.train.seq_len), std::max<int64_t>(1, m.experts_per_token));
  c.a2a_bytes = checked_mul(checked_mul(c.rows_per_micro, m.hidden_size), s.mem.act_elem_bytes);
  c.count_bytes = 4 * m.num_experts;  // int32 [ep_size * E_local] (auto_ep_layer.py send_counts)
  const int64_t accum = std::max<int64_t>(1, z.grad_accum);
  // Per MoE layer and micro-step: forward dispatch + combine (_AllToAllV.forward x2), backward the two
  // reversed (_AllToAllV.backward x2); full checkpointing re-runs the forward (2 more + a count exchange).
  const int64_t fwd_passes = z.checkpointing == Checkpointing::Full ? 2 : 1;
  c.a2a_calls_per_step = checked_mul(checked_mul(c.moe_layers, accum), 2 * fwd_passes + 2);
  c.count_calls_per_step = checked_mul(checked_mul(c.moe_layers, accum), fwd_passes);
  // The all-to-all topology of one expert-parallel group. groups.py _create_expert_and_data_parallel
  // (legacy path, mp_size 1): expert-parallel groups are consecutive ranks [i*ep, (i+1)*ep), so a group
  // of ep <= gpus_per_node stays on one node's link. An all-to-all moves (n-1)/n of each rank's
  // S bytes (nccl-tests PERFORMANCE.md: alltoall busbw factor (n-1)/n).
  const CommTopology t = contiguous_group_topology(w.cluster, c.ep);
  c.a2a_time_s = static_cast<double>(c.a2a_calls_per_step) *
                     collective_time_s(t, CollectiveKind::AllToAll, c.a2a_bytes) +
                 static_cast<double>(c.count_calls_per_step) *
                     collective_time_s(t, CollectiveKind::AllToAll, c.count_bytes);
  // The layer in flight holds its permuted send rows and the received rows (T*k x h each).
  c.buffer_bytes = checked_mul(2, c.a2a_bytes);
  return c;
}

void apply_expert_parallel_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                  MemoryBreakdown& mb) {
  if (z.ep_size <= 1) return;
  const ExpertParallelCosts c = expert_parallel_costs(w, s, z);
  for (int i = 0; i < mb.num_gpu; ++i) {
    Buffer& b = mb.gpu[static_cast<size_t>(i)];
    const std::string_view nm = b.name;
    const bool state = b.category == Category::Parameters || b.category == Category::Gradients ||
                       b.category == Category::OptimizerStates || nm.find("gradient all-reduce") != nm.npos ||
                       nm == "fp32 gradient copies at step";
    // Partitioned buffers hold total/N either way (experts/ep over N/ep ranks); buckets, staging and
    // gathered/persistent stage-3 buffers are not model-sized.
    const bool not_full = nm.find("partition") != nm.npos || nm.find("bucket") != nm.npos ||
                          nm.find("staging") != nm.npos || nm.find("one at a time") != nm.npos ||
                          nm.find("persistent") != nm.npos || nm.find("gathered") != nm.npos ||
                          nm.find("largest") != nm.npos || nm.find("frozen") != nm.npos;
    if (state && !not_full)
      b.bytes = static_cast<int64_t>(std::llround(static_cast<double>(b.bytes) * c.local_fraction));
  }
  // ZeRO-3: AutoEP's local expert weights are new tensors, w1/w3/w2 each [E/ep, f, h] (gate_up_impl
  // "separate", the default: auto_ep_config.py). One at or below stage3_param_persistence_threshold is a
  // persistent parameter: every rank keeps it whole beside its partition (recorded: qwen3_moe tiny N=4 ep=2,
  // 3 x 65,536-element weights x 2 layers = 786,432 bytes more than without AutoEP). With N/ep = 1 the
  // partition is the whole tensor and nothing is added (recorded at N=2).
  const int64_t local_tensor = (w.model.num_experts / c.ep) * w.model.hidden_size * expert_width(w.model);
  if (z.stage == 3 && w.cluster.world_size() / c.ep > 1 && local_tensor <= z.param_persistence_threshold)
    mb.add_gpu(
        "persistent AutoEP expert weights", Category::Parameters,
        checked_mul(checked_mul(3 * c.moe_layers, local_tensor), s.mem.param_elem_bytes), kAllPhases,
        "AutoEP w1/w3/w2 [E/ep, f, h] under stage3_param_persistence_threshold: kept whole on every rank");
  mb.add_gpu("expert all-to-all send + receive rows", Category::Buffers, c.buffer_bytes, kForward | kBackward,
             "AutoEP (auto_ep_layer.py _AllToAllV): 2 x micro*seq*top_k rows x hidden, uniform routing");
}

void apply_expert_parallel_time(const Workload& w, const ModelStats& s, const ZeroConfig& z, StepTime& t) {
  if (z.ep_size <= 1) return;
  const ExpertParallelCosts c = expert_parallel_costs(w, s, z);
  double comm = 0, exposed = 0;
  int64_t bytes = 0;
  for (int i = 0; i < t.num_collectives; ++i) {
    CollectiveCost& cc = t.collectives[static_cast<size_t>(i)];
    cc.bytes_per_rank =
        static_cast<int64_t>(std::llround(static_cast<double>(cc.bytes_per_rank) * c.local_fraction));
    cc.time_s *= c.local_fraction;
    // A message of the whole model (the step-end all-gather) becomes the local parameters; buckets stay.
    cc.message_bytes = std::min(cc.message_bytes, checked_mul(c.local_params, s.mem.param_elem_bytes));
    cc.exposed_s *= c.local_fraction;
    comm += cc.time_s;
    exposed += cc.exposed_s;
    bytes += cc.bytes_per_rank;
  }
  if (t.num_collectives < kMaxCollectives) {
    CollectiveCost& a = t.collectives[static_cast<size_t>(t.num_collectives++)];
    a.group = "expert_parallel";
    a.group_size = c.ep;
    a.name = "expert all-to-all dispatch + combine (AutoEP)";
    a.kind = CollectiveKind::AllToAll;
    a.count = c.a2a_calls_per_step + c.count_calls_per_step;
    a.message_bytes = c.a2a_bytes;
    a.bytes_per_rank = checked_add(
        checked_mul(c.a2a_calls_per_step, bus_bytes_per_rank(CollectiveKind::AllToAll, c.ep, c.a2a_bytes)),
        checked_mul(c.count_calls_per_step,
                    bus_bytes_per_rank(CollectiveKind::AllToAll, c.ep, c.count_bytes)));
    a.time_s = c.a2a_time_s;
    a.exposed_s =
        c.a2a_time_s;  // synchronous: the experts' GEMMs wait for the dispatch, the next op for the combine
    comm += a.time_s;
    exposed += a.exposed_s;
    bytes += a.bytes_per_rank;
  }
  t.communication_s = comm;
  t.exposed_communication_s = exposed;
  t.comm_bytes_per_rank = bytes;
}

std::vector<CollectiveCall> expert_parallel_calls(const Workload& w, const ZeroConfig& z) {
  std::vector<CollectiveCall> out;
  if (z.ep_size <= 1) return out;
  const models::ModelSpec& m = w.model;
  const int64_t elem = w.train.precision == Precision::FP32 ? 4 : 2;
  const int64_t rows = z.micro_batch * w.train.seq_len * std::max<int64_t>(1, m.experts_per_token);
  const int64_t bytes = rows * m.hidden_size * elem;
  auto add = [&](Phase ph, int64_t b, int64_t eb, const char* caller) {
    CollectiveCall c;
    c.phase = ph;
    c.kind = CollectiveKind::AllToAll;
    c.bytes = b;
    c.elem_bytes = eb;
    c.group_size = z.ep_size;
    c.caller = caller;
    out.push_back(c);
  };
  const int64_t layers = m.num_moe_layers();
  for (int64_t mi = 0; mi < std::max<int64_t>(1, z.grad_accum); ++mi) {
    for (int pass = 0; pass < (z.checkpointing == Checkpointing::Full ? 2 : 1); ++pass) {
      // The forward (pass 0) runs in the forward phase; the recomputed forward in the backward.
      const Phase ph = pass == 0 ? kForward : kBackward;
      for (int64_t l = 0; l < layers; ++l) {
        add(ph, 4 * m.num_experts, 4, "_split_plan_from_expert_counts");
        add(ph, bytes, elem, "_AllToAllV.forward");
        add(ph, bytes, elem, "_AllToAllV.forward");
      }
    }
    for (int64_t l = 0; l < layers; ++l) {
      add(kBackward, bytes, elem, "_AllToAllV.backward");
      add(kBackward, bytes, elem, "_AllToAllV.backward");
    }
  }
  return out;
}

int64_t native_moe_capacity(int64_t tokens, int64_t experts, int k, double capacity_factor,
                            int64_t min_capacity) {
  const double f = capacity_factor * (k <= 1 ? 1.0 : static_cast<double>(k));
  const auto cap = static_cast<int64_t>(
      std::ceil(static_cast<double>(tokens) / static_cast<double>(std::max<int64_t>(1, experts)) * f));
  return std::max(cap, min_capacity);
}

}  // namespace zeroplan::planner
