// Reasons behind a recommendation. Every sentence quotes numbers from evaluated plans (the
// recommendation, the best plan of each other stage, and what-if plans evaluated here with one
// knob changed), so a user can check each claim against the table or by re-running with that knob.
#include "planner/reasons.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/checked.h"
#include "planner/checkpoint_offload.h"
#include "planner/cpu_optimizer.h"
#include "planner/expert_parallel.h"
#include "planner/hpz.h"
#include "planner/memory_model.h"
#include "planner/muon.h"
#include "planner/parallel.h"
#include "planner/search.h"
#include "planner/sequence_parallel.h"
#include "planner/tensor_parallel.h"
#include "planner/tensor_parallel_choice.h"
#include "planner/tiled_mlp.h"
#include "planner/time_model.h"
#include "planner/zero3_leaf.h"

namespace zeroplan::planner {
namespace {

std::string gb(int64_t bytes) {
  return fmt::format("{:.1f} GB", static_cast<double>(bytes) / 1e9);
}
std::string ms(double s) {
  if (s < 0.0995) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.0f} ms", s * 1e3);
}
std::string tps(double t) {
  return fmt::format("{:.0f} tokens/s", t);
}
std::string pct(double a, double b) {  // change of a relative to b, signed
  return fmt::format("{:+.0f}%", b > 0 ? (a / b - 1.0) * 100.0 : 0.0);
}

std::string link_names(const Workload& w) {
  const auto& c = w.cluster;
  if (c.world_size() <= 1) return "no link (one GPU)";
  if (c.nodes > 1 && c.gpus_per_node > 1)
    return fmt::format("{} inside the nodes and {} between them", c.intra_node.name, c.inter_node.name);
  if (c.nodes > 1) return c.inter_node.name;
  return c.intra_node.name;
}

const char* ckpt_name(Checkpointing c) {
  switch (c) {
    case Checkpointing::None:
      return "no activation checkpointing";
    case Checkpointing::Selective:
      return "selective activation checkpointing";
    case Checkpointing::Full:
      return "full activation checkpointing";
  }
  return "";
}

const char* offload_name(Offload o) {
  switch (o) {
    case Offload::None:
      return "none";
    case Offload::CPU:
      return "cpu";
    case Offload::NVMe:
      return "nvme";
  }
  return "";
}

bool uses_offload(const ZeroConfig& z) {
  return z.offload_optimizer != Offload::None || z.offload_param != Offload::None;
}

Category largest_category(const MemoryBreakdown& m) {
  int best = 0;
  for (int c = 1; c < kNumCategories; ++c)
    if (m.at_peak[c] > m.at_peak[best]) best = c;
  return static_cast<Category>(best);
}

std::string peak_sentence(const Plan& p) {
  if (p.memory.peak <= p.capacity_bytes && !p.save.host_ok)
    // planner/save_phase.h: it trains, and dies at its first save.
    return fmt::format(
        "{} per GPU, which fits, but saving it needs {} more host RAM on node 0 (torch.save's copies and the "
        "16-bit model) beyond the {} training holds there, more than the node has: the run would die at its "
        "first save. Set stage3_gather_16bit_weights_on_model_save false and convert the DeepSpeed "
        "checkpoint "
        "offline (zero_to_fp32.py), or pass --host-mem if the node has more",
        gb(p.memory.peak), gb(p.save.host_bytes_node0), gb(p.memory.host_per_node));
  const Category c = largest_category(p.memory);
  return fmt::format("{} per GPU of {} usable ({} of it {})", gb(p.memory.peak), gb(p.capacity_bytes),
                     gb(p.memory.at_peak[static_cast<int>(c)]), category_name(c));
}

std::string step_sentence(const Plan& p) {
  const StepTime& t = p.time;
  return fmt::format(
             "compute {} (forward {}, backward {}, recompute {}, optimizer {}), communication {} of which {} "
             "exposed, "
             "offload {}",
             ms(t.compute_s), ms(t.forward_s), ms(t.backward_s), ms(t.recompute_s), ms(t.optimizer_s),
             ms(t.communication_s), ms(t.exposed_communication_s), ms(t.offload_s)) +
         (t.hooked_module_calls > 0
              ? fmt::format(", stage-3 module hooks {} of host time of which {} exposed", ms(t.hook_host_s),
                            ms(t.hook_overhead_s))
              : std::string());
}

// Share of the step above which the stage-3 hook overhead gets its own reason.
constexpr double kHookReasonShare = 0.05;

// DeepSpeed stage 3's per-module hooks, when they are a visible part of the step (time_model.cpp
// "stage3_hooks" in planner/data/time_model.json): what they are and what hides or removes them.
std::string hook_sentence(const Plan& p) {
  const StepTime& t = p.time;
  return fmt::format(
      "DeepSpeed's stage-3 hooks run on {} module passes per step ({} of host time; DeepSpeed issues "
      "#1174, #5047); {} of it ({:.0f}% of the step) is not hidden behind GPU compute. More tokens per "
      "micro-step hide it; fewer hooked modules remove it (deepspeed.utils.set_z3_leaf_modules on the "
      "decoder layer class, or stage3_module_granularity_threshold, DeepSpeed >= 0.16.0, fetch a layer "
      "as one unit).",
      t.hooked_module_calls, ms(t.hook_host_s), ms(t.hook_overhead_s),
      t.step_s > 0 ? t.hook_overhead_s / t.step_s * 100 : 0.0);
}

// Why `rec` beats `other` (another stage's best plan), in one sentence.
std::string compare_stage(const Workload& w, const Plan& rec, const Plan& other) {
  const int k = other.zero.stage;
  if (!other.fits)
    return fmt::format("ZeRO-{} does not fit: its best candidate ({}) needs {}.", k,
                       describe_config(other.zero), peak_sentence(other));
  if (rec.tokens_per_s <= 0 || other.tokens_per_s >= rec.tokens_per_s * 0.995) {
    const int offloads_other =
        (other.zero.offload_optimizer != Offload::None) + (other.zero.offload_param != Offload::None);
    const int offloads_rec =
        (rec.zero.offload_optimizer != Offload::None) + (rec.zero.offload_param != Offload::None);
    if (offloads_other > offloads_rec)
      return fmt::format(
          "ZeRO-{} is about as fast ({}, {}) but only with offload ({}); zeroplan prefers fewer offloads "
          "unless they "
          "gain more than 3%, because host-memory pressure and CPU contention are not in the time model.",
          k, tps(other.tokens_per_s), pct(other.tokens_per_s, rec.tokens_per_s), describe_config(other.zero));
    return fmt::format("ZeRO-{} is about as fast ({}, {}); its peak is {} per GPU against {} here.", k,
                       tps(other.tokens_per_s), pct(other.tokens_per_s, rec.tokens_per_s),
                       gb(other.memory.peak), gb(rec.memory.peak));
  }
  const double slower = (1.0 - other.tokens_per_s / rec.tokens_per_s) * 100.0;
  // Per-token time of each part, to name what makes the difference.
  auto per_tok = [](double seconds, const Plan& p) {
    const double tokens = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len);
    return tokens > 0 ? seconds / tokens : 0.0;
  };
  const double d_comp = per_tok(other.time.compute_s, other) - per_tok(rec.time.compute_s, rec);
  const double d_comm =
      per_tok(other.time.exposed_communication_s, other) - per_tok(rec.time.exposed_communication_s, rec);
  const double d_off = per_tok(other.time.offload_s, other) - per_tok(rec.time.offload_s, rec);
  const int64_t tok_other = other.zero.micro_batch * other.zero.grad_accum * other.rank_seq_len();
  const int64_t tok_rec = rec.zero.micro_batch * rec.zero.grad_accum * rec.rank_seq_len();
  const double d_hook = per_tok(other.time.hook_overhead_s, other) - per_tok(rec.time.hook_overhead_s, rec);
  std::string why;
  if (d_hook > d_comp && d_hook > d_comm && d_hook > d_off) {
    why = fmt::format(
        "DeepSpeed's stage-3 hooks on its {} module passes per step leave {} of host time not hidden behind "
        "compute ({:.0f}% of its step)",
        other.time.hooked_module_calls, ms(other.time.hook_overhead_s),
        other.time.step_s > 0 ? other.time.hook_overhead_s / other.time.step_s * 100 : 0.0);
  } else if (d_comm >= d_comp && d_comm >= d_off) {
    why = fmt::format("it exposes {} of communication per step over {} ({} in total), against {} here",
                      ms(other.time.exposed_communication_s), link_names(w), ms(other.time.communication_s),
                      ms(rec.time.exposed_communication_s));
  } else if (d_off >= d_comp) {
    why = fmt::format("it spends {} per step on offload (PCIe transfers and CPU Adam), against {} here",
                      ms(other.time.offload_s), ms(rec.time.offload_s));
  } else {
    why = fmt::format("its compute takes {} for {} tokens per GPU, against {} for {} here",
                      ms(other.time.compute_s), tok_other, ms(rec.time.compute_s), tok_rec);
  }
  if (tok_other < tok_rec && (d_off > d_comp || d_comm > d_comp))
    why += fmt::format(
        "; its memory allows only micro-batch {} (here {}), so these per-step costs are shared by {} tokens "
        "per GPU "
        "instead of {}",
        other.zero.micro_batch, rec.zero.micro_batch, tok_other, tok_rec);
  std::string batch;
  if (other.zero.checkpointing != rec.zero.checkpointing ||
      (tok_other != tok_rec && d_comp >= d_off && d_comp >= d_comm))
    batch = fmt::format(" Its best plan uses micro-batch {} with {}.", other.zero.micro_batch,
                        ckpt_name(other.zero.checkpointing));
  return fmt::format("ZeRO-{} is {:.0f}% slower ({}): {}.{}", k, slower, tps(other.tokens_per_s), why, batch);
}

using Knob = KnobEffect;

// ZeRO++'s knobs for knob_effects: hpZ turned on or off, and qwZ / qgZ where they buy time.
void add_zeropp_effects(const Workload& w, const ModelStats& s, const SearchOptions& opts, const Plan& rec,
                        std::vector<KnobEffect>& out) {
  auto eval = [&](const ZeroConfig& z) { return evaluate_plan(w, s, z, opts.memory_margin); };
  // ZeRO++ hpZ (planner/hpz.h) on several nodes: a node-wide secondary partition keeps the backward's
  // gathers on the node's link, for a second copy of the parameters split over the node; and turning it
  // off where the plan has it.
  if (rec.zero.stage == 3 && rec.zero.ep_size == 1) {
    const int world = w.cluster.world_size();
    const int has = rec.zero.hpz(world);
    for (int h : has > 1 ? std::vector<int>{1} : hpz_candidates(w)) {
      if (h == has || (h > 1 && rec.zero.offload_param != Offload::None)) continue;
      ZeroConfig z = rec.zero;
      z.hpz_partition_size = h;
      Plan p = eval(z);
      const int64_t more = p.memory.peak - rec.memory.peak;
      out.push_back(
          {fmt::format("zero_hpz_partition_size {} ({}, peak {}{}/GPU)", h, h > 1 ? "ZeRO++ hpZ" : "hpZ off",
                       more >= 0 ? "+" : "-", gb(more >= 0 ? more : -more)),
           std::move(p)});
    }
  }
  // ZeRO++ qwZ / qgZ (planner/zeropp_quant.h) on several nodes, where the plan has them off and they
  // would be faster: quantized gathers, and (without AutoEP, which DeepSpeed refuses with it) quantized
  // gradient all-to-alls. They change the numerics, so they are offered only where they buy time.
  if (rec.zero.stage == 3 && w.cluster.nodes > 1) {
    const auto offer = [&](ZeroConfig z, const char* what) {
      Plan p = eval(z);
      if (p.tokens_per_s > rec.tokens_per_s) out.push_back({what, std::move(p)});
    };
    if (!rec.zero.quantized_weights) {
      ZeroConfig z = rec.zero;
      z.quantized_weights = true;
      offer(z, "zero_quantized_weights (ZeRO++ qwZ: int8 parameter gathers)");
    }
    if (!rec.zero.quantized_gradients && rec.zero.ep_size <= 1) {
      ZeroConfig z = rec.zero;
      z.quantized_gradients = true;
      offer(z, "zero_quantized_gradients (ZeRO++ qgZ: int4 gradient all-to-alls)");
    }
  }
}

}  // namespace

// One-knob variants of a plan, evaluated. Knobs the user fixed are included: this is where a user
// learns what their own choice costs.
std::vector<KnobEffect> knob_effects(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                                     const Plan& rec) {
  std::vector<Knob> out;
  auto eval = [&](const ZeroConfig& z) { return evaluate_plan(w, s, z, opts.memory_margin); };
  {
    ZeroConfig z = rec.zero;
    z.overlap_comm = !z.overlap_comm;
    out.push_back({fmt::format("overlap_comm {}", z.overlap_comm ? "on" : "off"), eval(z)});
  }
  for (int64_t b : kSearchBucketSizes) {
    if (b == rec.zero.reduce_bucket_size) continue;
    ZeroConfig z = rec.zero;
    z.reduce_bucket_size = b;
    z.allgather_bucket_size = b;
    out.push_back({fmt::format("reduce_bucket_size {:.0e}", static_cast<double>(b)), eval(z)});
  }
  if (!w.train.global_batch) {
    ZeroConfig z = rec.zero;
    z.grad_accum = rec.zero.grad_accum * 4;
    out.push_back({fmt::format("--grad-accum {} (global batch {})", z.grad_accum,
                               z.micro_batch * z.grad_accum * data_parallel_size(w)),
                   eval(z)});
  }
  // Checkpointing and micro-batch: the best micro-batch for each other checkpointing mode, same
  // stage and offload (a restricted search).
  for (Checkpointing c : {Checkpointing::None, Checkpointing::Selective, Checkpointing::Full}) {
    if (c == rec.zero.checkpointing) continue;
    Workload v = w;
    v.train.checkpointing = c;
    SearchOptions o = opts;
    o.stage = rec.zero.stage;
    o.offload_optimizer = rec.zero.offload_optimizer;
    o.offload_param = rec.zero.offload_param;
    o.hpz_choices = {rec.zero.hpz_partition_size};
    o.hpz_auto = false;
    const SearchResult r = search_plans(v, s, o);
    if (!r.best_per_stage.empty())
      out.push_back({fmt::format("--checkpointing {} (micro-batch {})",
                                 c == Checkpointing::None   ? "none"
                                 : c == Checkpointing::Full ? "full"
                                                            : "selective",
                                 r.best_per_stage[0].zero.micro_batch),
                     r.best_per_stage[0]});
  }
  if (w.train.micro_batch && !w.train.global_batch) {
    Workload v = w;
    v.train.micro_batch.reset();
    SearchOptions o = opts;
    o.stage = rec.zero.stage;
    o.hpz_choices = {rec.zero.hpz_partition_size};
    o.hpz_auto = false;
    const SearchResult r = search_plans(v, s, o);
    if (!r.best_per_stage.empty() && r.best_per_stage[0].zero.micro_batch != rec.zero.micro_batch)
      out.push_back({fmt::format("micro-batch {} instead of the fixed {}",
                                 r.best_per_stage[0].zero.micro_batch, rec.zero.micro_batch),
                     r.best_per_stage[0]});
  }
  if (rec.zero.stage == 3 && rec.zero.prefetch_bucket_size == 0) {
    ZeroConfig z = rec.zero;
    z.prefetch_bucket_size = ZeroConfig::deepspeed_defaults(3).prefetch_bucket_size;
    out.push_back({fmt::format("stage3_prefetch_bucket_size {:.0e} (prefetch on)",
                               static_cast<double>(z.prefetch_bucket_size)),
                   eval(z)});
  }
  if (rec.zero.stage == 3) {
    // zero_optimization.memory_efficient_linear: torch's own linear lets a non-reentrant checkpoint skip
    // the MLP output GEMM in the recompute (and biases fold into addmm), but keeps released weights
    // gathered through the forward (op_model.cpp, memory_model.cpp).
    ZeroConfig z = rec.zero;
    z.memory_efficient_linear = !z.memory_efficient_linear;
    out.push_back(
        {fmt::format("memory_efficient_linear {}", z.memory_efficient_linear ? "true" : "false"), eval(z)});
  }
  if (rec.zero.stage == 3) {
    // HF Trainer "auto" (transformers integrations/deepspeed.py): persistence threshold 10*h.
    ZeroConfig z = rec.zero;
    z.param_persistence_threshold = 10 * std::max<int64_t>(1, w.model.hidden_size);
    if (z.param_persistence_threshold != rec.zero.param_persistence_threshold)
      out.push_back(
          {fmt::format("stage3_param_persistence_threshold {}", z.param_persistence_threshold), eval(z)});
  }
  add_zeropp_effects(w, s, opts, rec, out);
  return out;
}

namespace {

// The checkpoints in host memory (planner/checkpoint_offload.h), where DeepSpeed can do it for this
// stack and the user left it open: the plan that then fits, or "".
// The smallest Ulysses SP size (planner/sequence_parallel.h) under which a plan fits on the same GPUs, as
// "--sp N: plan (tokens/s)", or "" (already SP, expert parallelism asked, or none fits).
std::string fit_with_sequence_parallel(const Workload& w, const SearchOptions& opts) {
  if (w.train.sequence_parallel > 1 || w.train.tensor_parallel > 1 || w.model.params_only ||
      (opts.ep && *opts.ep > 1))
    return "";
  for (int sp = 2; sp <= w.cluster.world_size(); sp *= 2) {
    Workload v = w;
    v.train.sequence_parallel = sp;
    if (!layout::validate(w.cluster.nodes, w.cluster.gpus_per_node, {1, sp, 1}, layout_facts(v)).empty() ||
        !sequence_parallel_refusal(v).empty() ||
        (v.train.global_batch && *v.train.global_batch % data_parallel_size(v) != 0))
      continue;
    const SearchResult fr = search_plans(v, compute_model_stats(v), opts);
    if (fr.recommendation)
      return fmt::format("--sp {} (Ulysses: each GPU holds {} of the {} tokens): {} ({})", sp,
                         v.train.rank_seq_len(), w.train.seq_len, describe_config(fr.recommendation->zero),
                         tps(fr.recommendation->tokens_per_s));
  }
  return "";
}

// The smallest AutoTP size (planner/tensor_parallel.h) inside a node under which a plan fits on the same
// GPUs, as "--tp N: plan (tokens/s)", or "" (already TP or SP, expert parallelism asked, a model the TP
// model does not cover, or none fits).
std::string fit_with_tensor_parallel(const Workload& w, const SearchOptions& opts) {
  for (int tp : tensor_parallel_sizes(w, opts)) {
    if (tp == 1) continue;
    Workload v = w;
    apply_tensor_parallel(v, tp);
    const SearchResult fr = search_plans(v, compute_model_stats(v), opts);
    if (fr.recommendation)
      return fmt::format(
          "--tp {} (AutoTP: each GPU holds 1/{} of every layer's projections; ZeRO over {} ranks): {} ({})",
          tp, tp, data_parallel_size(v), describe_config(fr.recommendation->zero),
          tps(fr.recommendation->tokens_per_s));
  }
  return "";
}

std::string fit_with_checkpoint_offload(const Workload& w, const ModelStats& s, const SearchOptions& opts) {
  if (w.train.checkpoint_offload != CheckpointOffload::None || !s.mem.act.known ||
      !checkpoint_offload_available(w.train))
    return {};
  Workload v = w;
  v.train.checkpoint_offload = CheckpointOffload::Cpu;
  const SearchResult fr = search_plans(v, s, opts);
  if (!fr.recommendation) return {};
  return fmt::format("--checkpoint-offload cpu (layer inputs in host memory): {} ({})",
                     describe_config(fr.recommendation->zero), tps(fr.recommendation->tokens_per_s));
}

// The best plan of a stage that misses by the least: the larger of its GPU peak over the usable memory
// and its node's host memory (with what its checkpoint save adds on node 0, planner/save_phase.h) over
// the node's RAM. Null when there is none.
const Plan* closest_plan(const Workload& w, const SearchResult& r) {
  const Plan* closest = nullptr;
  const int64_t host = w.cluster.host_memory_bytes_per_node;
  auto over = [host](const Plan& p) {
    const double gpu =
        static_cast<double>(p.memory.peak) / static_cast<double>(std::max<int64_t>(1, p.capacity_bytes));
    const double h = host > 0 ? static_cast<double>(p.memory.host_per_node + p.save.host_bytes_node0) /
                                    static_cast<double>(host)
                              : 0.0;
    return std::max(gpu, h);
  };
  for (const Plan& p : r.best_per_stage)
    if (closest == nullptr || over(p) < over(*closest)) closest = &p;
  return closest;
}

// What would fit instead, each a change the user can make: without the fixed options, the checkpoints
// in host memory, Ulysses SP, more GPUs, LoRA/QLoRA, a shorter sequence.
std::vector<std::string> what_would_fit(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                                        const Plan* closest) {
  std::vector<std::string> would;
  // Options the user fixed that block a fit.
  if (opts.offload_optimizer || opts.offload_param || opts.stage || w.train.checkpointing) {
    SearchOptions o;
    o.memory_margin = opts.memory_margin;
    Workload v = w;
    v.train.checkpointing.reset();
    const SearchResult fr = search_plans(v, s, o);
    if (fr.recommendation)
      would.push_back(fmt::format("without the fixed stage/offload/checkpointing options: {} ({})",
                                  describe_config(fr.recommendation->zero),
                                  tps(fr.recommendation->tokens_per_s)));
  }
  if (std::string c = fit_with_checkpoint_offload(w, s, opts); !c.empty()) would.push_back(std::move(c));
  if (std::string c = fit_with_sequence_parallel(w, opts); !c.empty()) would.push_back(std::move(c));
  if (std::string c = fit_with_tensor_parallel(w, opts); !c.empty()) would.push_back(std::move(c));
  // More GPUs of the same kind.
  for (int factor = 2; factor <= 64; factor *= 2) {
    // Fill nodes up to the GPU class's typical server size, then add nodes.
    Workload v = w;
    const int total = w.cluster.world_size() * factor;
    int per = std::max(w.cluster.gpus_per_node, std::min(total, std::max(1, w.cluster.gpu.gpus_per_node)));
    if (total % per != 0) per = w.cluster.gpus_per_node;
    v.cluster.gpus_per_node = per;
    v.cluster.nodes = total / per;
    if (v.train.global_batch) v.train.global_batch = *v.train.global_batch * factor;
    const ModelStats vs = compute_model_stats(v);
    const SearchResult fr = search_plans(v, vs, opts);
    if (fr.recommendation) {
      would.push_back(fmt::format("{} GPUs ({}{}x{}): {} ({})", v.cluster.world_size(),
                                  v.cluster.nodes > 1 ? fmt::format("{}x", v.cluster.nodes) : "",
                                  v.cluster.gpus_per_node, v.cluster.gpu.name,
                                  describe_config(fr.recommendation->zero),
                                  tps(fr.recommendation->tokens_per_s)));
      break;
    }
  }
  // Parameter-efficient fine-tuning.
  if (w.train.method == Method::Full && !s.compute.params_only) {
    for (Method m : {Method::LoRA, Method::QLoRA}) {
      Workload v = w;
      v.train.method = m;
      const ModelStats vs = compute_model_stats(v);
      const SearchResult fr = search_plans(v, vs, opts);
      if (fr.recommendation) {
        would.push_back(fmt::format("--method {} (rank {}): {} ({})", to_string(m), w.train.lora_rank,
                                    describe_config(fr.recommendation->zero),
                                    tps(fr.recommendation->tokens_per_s)));
        break;
      }
    }
  }
  // A shorter sequence when activations dominate.
  if (closest->memory.category(Category::Activations) > closest->memory.peak / 3 && w.train.seq_len > 256 &&
      (w.train.seq_len / 2) % std::max(1, w.train.sequence_parallel) == 0) {
    Workload v = w;
    v.train.seq_len = w.train.seq_len / 2;
    const ModelStats vs = compute_model_stats(v);
    const SearchResult fr = search_plans(v, vs, opts);
    if (fr.recommendation)
      would.push_back(
          fmt::format("--seq-len {}: {}", v.train.seq_len, describe_config(fr.recommendation->zero)));
  }
  return would;
}

void explain_no_fit(const Workload& w, const ModelStats& s, const SearchOptions& opts, SearchResult& r) {
  const Plan* closest = closest_plan(w, r);
  if (closest == nullptr) return;
  const int64_t host = w.cluster.host_memory_bytes_per_node;
  const bool gpu_fits = closest->memory.peak <= closest->capacity_bytes;
  std::string msg = fmt::format("Nothing fits on {} x {} ({} usable per GPU after the {:.0f}% margin",
                                w.cluster.world_size(), w.cluster.gpu.name, gb(closest->capacity_bytes),
                                opts.memory_margin * 100);
  if (host > 0) msg += fmt::format(", {} of host memory per node", gb(host));
  const bool only_save =
      gpu_fits && !closest->save.host_ok && (host <= 0 || closest->memory.host_per_node <= host);
  if (only_save)
    msg += fmt::format("): the closest plan, {}, needs {}.", describe_config(closest->zero),
                       peak_sentence(*closest));
  else if (gpu_fits)
    msg += fmt::format(
        "): the closest plan, {}, fits in GPU memory ({}) but needs {} of host memory per node.",
        describe_config(closest->zero), gb(closest->memory.peak), gb(closest->memory.host_per_node));
  else
    msg += fmt::format("): the closest plan, {}, needs {}.", describe_config(closest->zero),
                       peak_sentence(*closest));
  const std::vector<std::string> would = what_would_fit(w, s, opts, closest);
  if (would.empty()) {
    msg += " Nothing within 64x the GPUs, LoRA/QLoRA or a shorter sequence fits either.";
  } else {
    msg += " What would fit:";
    for (size_t i = 0; i < would.size(); ++i) msg += fmt::format("{} {}", i == 0 ? "" : ";", would[i]);
    msg += ".";
  }
  r.no_fit_reason = msg;
  r.reasons.push_back(msg);
}

// MoE models: HF experts under ZeRO against DeepSpeed AutoEP expert parallelism (planner/expert_parallel.h),
// each side's best plan over all stages, with what EP changes per rank and what its all-to-alls cost.
std::string expert_parallel_sentence(const Workload& w, const ModelStats& s, const SearchResult& r) {
  if (!r.ep_refusal.empty())
    return fmt::format("Expert parallelism (DeepSpeed AutoEP) was not searched: {}.", r.ep_refusal);
  if (!r.best_with_ep || !r.best_without_ep) return "";
  const Plan& e = *r.best_with_ep;
  const Plan& h = *r.best_without_ep;
  const ExpertParallelCosts c = expert_parallel_costs(w, s, e.zero);
  const int64_t pe = s.mem.param_elem_bytes;
  std::string states;
  if (e.zero.stage < 3)
    states = fmt::format(
        "its unpartitioned 16-bit weights{} shrink from {} to {}, while the experts' optimizer "
        "states (partitioned over the N/ep = {} expert-data-parallel ranks instead of N) stay "
        "total/N per rank",
        e.zero.stage <= 1 ? " and gradients" : "", gb(checked_mul(pe, s.mem.total_params)),
        gb(checked_mul(pe, c.local_params)), w.cluster.world_size() / c.ep);
  else
    states = fmt::format(
        "ZeRO-3 partitions hold total/N either way, but each rank gathers only its local experts "
        "(stage-3 gathers and reduce-scatters move {:.0f}% of the bytes)",
        c.local_fraction * 100);
  std::string msg = fmt::format(
      "Expert parallelism: with ep {} (DeepSpeed AutoEP, ds_config expert_parallel.autoep_size) each rank "
      "holds {} of "
      "the {} experts per MoE layer: {}; its {} all-to-alls per step ({} per MoE layer per micro-batch, "
      "{:.1f} MB "
      "each for {} tokens x top-{}) cost {}, all exposed.",
      c.ep, w.model.num_experts / c.ep, w.model.num_experts, states,
      c.a2a_calls_per_step + c.count_calls_per_step,
      c.moe_layers > 0 ? (c.a2a_calls_per_step + c.count_calls_per_step) / c.moe_layers /
                             std::max<int64_t>(1, e.zero.grad_accum)
                       : 0,
      static_cast<double>(c.a2a_bytes) / 1e6, e.zero.micro_batch * w.train.seq_len, w.model.experts_per_token,
      ms(c.a2a_time_s));
  const bool ep_wins = e.fits != h.fits ? e.fits : e.tokens_per_s > h.tokens_per_s;
  if (e.fits && !h.fits)
    msg += fmt::format(" Only with it does a plan fit ({}: {} per GPU; without it the closest needs {}).",
                       describe_config(e.zero), gb(e.memory.peak), gb(h.memory.peak));
  else if (!e.fits && !h.fits)
    msg += fmt::format(
        " Neither fits (with ep {}: {} per GPU, {} of host memory per node; without: {} per GPU, {} "
        "of host memory per node).",
        c.ep, gb(e.memory.peak), gb(e.memory.host_per_node), gb(h.memory.peak), gb(h.memory.host_per_node));
  else if (h.fits && !e.fits)
    msg += fmt::format(" It does not fit ({} per GPU); HF experts under ZeRO do.", gb(e.memory.peak));
  else {
    // Why: the step components that differ most between the two plans.
    std::string why;
    if (ep_wins && h.time.offload_s > e.time.offload_s + 0.05 * h.time.step_s)
      why = fmt::format(
          "without it only an offloading plan fits, which spends {} per step on offload (here {})",
          ms(h.time.offload_s), ms(e.time.offload_s));
    else if (ep_wins && e.zero.micro_batch > h.zero.micro_batch)
      why = fmt::format("its smaller weights leave room for micro-batch {} (without: {})", e.zero.micro_batch,
                        h.zero.micro_batch);
    else if (ep_wins)
      why = fmt::format("ZeRO's collectives move {:.0f}% of the bytes ({} exposed here, {} without)",
                        c.local_fraction * 100, ms(e.time.exposed_communication_s),
                        ms(h.time.exposed_communication_s));
    else
      why = fmt::format("the all-to-alls ({}) cost more than the smaller weights and ZeRO traffic save",
                        ms(c.a2a_time_s));
    msg += fmt::format(" {} ({} vs {} for HF experts under ZeRO, {}): {}.",
                       ep_wins ? "It is faster" : "It is slower", tps(e.tokens_per_s), tps(h.tokens_per_s),
                       describe_config(h.zero), why);
  }
  // The HF side at ZeRO-3: its MoE blocks as leaves (one gather per block) or not (per-expert gathers),
  // both ways from planner/zero3_leaf.h.
  const Plan& z3 = h.zero.stage == 3 ? h : e;
  if (z3.zero.stage == 3 && z3.zero.ep_size == 1) {
    const MoeLeafCosts lc = moe_leaf_costs(w, s, z3.zero);
    const bool same = lc.leaf.gather_calls == lc.not_leaf.gather_calls &&
                      std::abs(static_cast<double>(lc.leaf.peak_bytes - lc.not_leaf.peak_bytes)) <=
                          1e-3 * static_cast<double>(std::max<int64_t>(1, lc.not_leaf.peak_bytes));
    if (lc.applies && same)
      msg += fmt::format(
          " At ZeRO-3 without it, MoE blocks as leaves or not (--z3-leaf-moe) cost the same here: {} "
          "gathers per step either way (the experts are one fused module per block).",
          lc.leaf.gather_calls);
    else if (lc.applies)
      msg += fmt::format(
          " At ZeRO-3 without it, MoE blocks as leaves (--z3-leaf-moe on; DeepSpeed's default here: {}) take "
          "{} "
          "gathers per step ({} of collectives, peak {}) against {} gathers ({}, peak {}) expert by expert.",
          lc.auto_is_leaf ? "leaf" : "not leaf", lc.leaf.gather_calls, ms(lc.leaf.comm_time_s),
          gb(lc.leaf.peak_bytes), lc.not_leaf.gather_calls, ms(lc.not_leaf.comm_time_s),
          gb(lc.not_leaf.peak_bytes));
  }
  msg += " AutoEP routes dropless (no capacity factor); the all-to-all sizes assume balanced routing.";
  return msg;
}

// --allow bf16-master (planner/plan.h): what the bf16 master weights and optimizer states buy against
// the best plan with fp32 masters, and the numerics they change.
// TiledMLP (planner/tiled_mlp.h): what it saves and what it costs.
std::string tiled_mlp_sentence(const Workload& w, const Plan& rec) {
  if (!w.train.tiled_mlp) return "";
  const int64_t tokens = rec.zero.micro_batch * w.train.rank_seq_len();
  const int64_t e = w.train.precision == Precision::FP32 ? 4 : 2;
  const int64_t widths = tiled_mlp_intermediate_widths(w.model);
  return fmt::format(
      "TiledMLP ({} shards of the {} tokens per micro-step): each layer's MLP saves only its input, not its "
      "{} "
      "intermediate bytes per token ({} per micro-step over the {} layers without checkpointing), and runs "
      "its "
      "forward again in the backward, shard by shard.",
      tiled_mlp_shards(w), tokens, widths * e,
      gb(checked_mul(checked_mul(widths * e, tokens), w.model.num_layers)), w.model.num_layers);
}

// Ulysses SP (planner/sequence_parallel.h): what the rank holds, what the all-to-alls cost, and what stays
// as without SP.
std::string sequence_parallel_sentence(const Workload& w, const ModelStats& s, const Plan& rec) {
  const int sp = w.train.sequence_parallel;
  if (sp <= 1) return "";
  const SequenceParallelCosts c = sequence_parallel_costs(w, s, rec.zero);
  const int64_t heads = std::max<int64_t>(1, w.model.num_heads);
  return fmt::format(
      "Sequence parallelism: Ulysses sp {} (DeepSpeed UlyssesSPAttentionHF, sequence_parallel_size {}) gives "
      "each GPU {} of each {}-token sequence outside attention, so its activations are those of {} tokens "
      "({} saved per micro-step); inside attention all-to-alls hand it the whole sequence for {} of the {} "
      "heads. "
      "They cost {} calls per step moving {} per GPU in {}, all exposed (synchronous all_to_all_single "
      "over {}). ZeRO still partitions over all {} GPUs, and the {} data-parallel ranks make the global "
      "batch {} sequences; DeepSpeed reduces their gradients in fp32 under SP "
      "(seq_parallel_communication_data_type's default), which the gradient reduction's time includes.",
      sp, sp, w.train.rank_seq_len(), w.train.seq_len, w.train.rank_seq_len(),
      gb(rec.memory.saved_activation_bytes()), heads / sp, heads,
      c.a2a_calls_per_step + c.gather_calls_per_step, gb(c.a2a_bytes_per_step), ms(c.time_s),
      sp <= w.cluster.gpus_per_node ? w.cluster.intra_node.name : w.cluster.inter_node.name,
      w.cluster.world_size(), data_parallel_size(w), rec.global_batch);
}

// ZeRO++ hpZ (planner/hpz.h): what the secondary partition costs and what it buys, against the same plan
// with hpZ off.
// --optimizer muon (planner/muon.h): what Muon holds against AdamW for the same configuration, and what its
// Newton-Schulz step costs.
std::string muon_sentence(const Workload& w, const ModelStats& s, const Plan& rec) {
  if (!rec.zero.muon) return "";
  const MuonHoldings h = muon_holdings(w.model, data_parallel_size(w));
  ZeroConfig adam = rec.zero;
  adam.muon = false;
  const Plan a = evaluate_plan(w, s, adam, 0.0);
  const int64_t os = rec.memory.category(Category::OptimizerStates);
  const int64_t oa = a.memory.category(Category::OptimizerStates);
  const int64_t staged = (w.train.precision == Precision::FP32 ? 4 : 2) * h.momentum_largest;
  return fmt::format(
      "Optimizer: DeepSpeed's Muon (--optimizer muon). {:.1f}B of the {:.1f}B parameters (the hidden "
      "matrices) "
      "keep one momentum in the gradient dtype plus DeepSpeed's staged copy of it, over the whole matrices "
      "each rank's partition touches, instead of Adam's two fp32 moments; the embeddings, head and norms "
      "stay "
      "on Adam. Optimizer states take {} per GPU at the peak against {} with AdamW, plus the staged copy {}, "
      "and the step orthogonalizes up to {} matrices per GPU by Newton-Schulz: optimizer {} against {} with "
      "AdamW. Muon changes the training itself (learning rates do not carry over from AdamW).",
      static_cast<double>(h.muon_params) / 1e9, static_cast<double>(h.muon_params + h.adam_params) / 1e9,
      gb(os), gb(oa), gb(staged), h.matrices_largest, ms(rec.time.optimizer_s), ms(a.time.optimizer_s));
}

std::string hpz_sentence(const Workload& w, const ModelStats& s, const SearchOptions& opts, const Plan& rec) {
  const int world = w.cluster.world_size();
  const int h = rec.zero.hpz(world);
  if (h <= 1) return "";
  ZeroConfig off = rec.zero;
  off.hpz_partition_size = 1;
  const Plan base = evaluate_plan(w, s, off, opts.memory_margin);
  const CollectiveCost* a = find_collective(base.time, kStage3BackwardGathersName);
  const CollectiveCost* b = find_collective(rec.time, kStage3BackwardGathersName);
  const int nodes_spanned = (h + w.cluster.gpus_per_node - 1) / std::max(1, w.cluster.gpus_per_node);
  return fmt::format(
      "ZeRO++ hpZ: zero_hpz_partition_size {} keeps a second copy of the parameters split over each group of "
      "{} "
      "consecutive GPUs ({}), {} per GPU until the optimizer step; the backward's parameter gathers read it "
      "{}{}, while the first micro-step's forward still gathers over all {} GPUs (the step drops the copy). "
      "Against the same plan with hpZ off: peak {} -> {}, {} -> {} ({}).",
      h, h, nodes_spanned == 1 ? "one node" : fmt::format("{} nodes", nodes_spanned),
      gb(rec.memory.peak - base.memory.peak),
      nodes_spanned == 1 ? "over the node's link" : "inside the group",
      a != nullptr && b != nullptr ? fmt::format(" ({} -> {} per step)", ms(a->time_s), ms(b->time_s))
                                   : std::string(),
      world, gb(base.memory.peak), gb(rec.memory.peak), tps(base.tokens_per_s), tps(rec.tokens_per_s),
      pct(rec.tokens_per_s, base.tokens_per_s));
}

// ZeRO++ qwZ / qgZ (planner/zeropp_quant.h): what the quantized calls send and cost against the same plan
// without them.
std::string zeropp_quant_sentence(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                                  const Plan& rec) {
  const bool qwz = rec.zero.qwz(), qgz = rec.zero.qgz(w.cluster.nodes);
  if (!qwz && !qgz) return "";
  ZeroConfig off = rec.zero;
  off.quantized_weights = off.quantized_gradients = false;
  const Plan base = evaluate_plan(w, s, off, opts.memory_margin);
  std::string parts;
  const auto compare = [&](const char* name, const char* what, const char* rec_name = nullptr) {
    const CollectiveCost* a = find_collective(base.time, name);
    const CollectiveCost* b = find_collective(rec.time, rec_name != nullptr ? rec_name : name);
    if (a == nullptr || b == nullptr) return;
    parts += fmt::format("{}{} {} -> {} per GPU per step, {} -> {} ({} -> {} exposed)",
                         parts.empty() ? "" : "; ", what, gb(a->bytes_per_rank), gb(b->bytes_per_rank),
                         ms(a->time_s), ms(b->time_s), ms(a->exposed_s), ms(b->exposed_s));
  };
  if (qwz) {
    compare(kStage3ForwardGathersName, "forward gathers");
    compare(kStage3BackwardGathersName, "backward gathers");
  }
  if (qgz) compare(kStage3ReduceScatterName, "gradient reduction", kStage3QgzName);
  return fmt::format(
      "ZeRO++ {}: {}. The quantize and dequantize kernels add {} of GPU work per step. Against the same plan "
      "without them: {} -> {} ({}). Priced from DeepSpeed 0.19.8's code (planner/zeropp_quant.h); their CUDA "
      "kernels were not recorded, and int8 weights / int4 gradients change the numerics.",
      qwz && qgz ? "qwZ + qgZ"
      : qwz      ? "qwZ (zero_quantized_weights)"
                 : "qgZ (zero_quantized_gradients)",
      parts, ms(rec.time.compute_s - base.time.compute_s), tps(base.tokens_per_s), tps(rec.tokens_per_s),
      pct(rec.tokens_per_s, base.tokens_per_s));
}

// AutoTP (planner/tensor_parallel.h): what the shard saves against the same plan at tp 1 on the same GPUs,
// component by component, and why it saves no more (DeepSpeed#7684: ZeRO already divided the optimizer
// states over every GPU; the residual stream stays whole on every rank), then what its calls cost.
std::string tensor_parallel_sentence(const Workload& w, const ModelStats& s, const Plan& rec) {
  const int tp = w.train.tensor_parallel;
  if (tp <= 1 || w.model.params_only) return "";
  const TensorParallelCosts c = tensor_parallel_costs(w, s, rec.zero);
  Workload one = w;
  one.model = w.full_model();
  one.unsharded.reset();
  one.train.tensor_parallel = 1;
  const ModelStats s1 = compute_model_stats(one);
  const MemoryBreakdown m1 = estimate_memory(one, s1, rec.zero);
  // Each component at its largest over the phases: the GPU buffers of the category alive in it.
  const auto at = [](const MemoryBreakdown& m, Category k) {
    int64_t most = 0;
    for (uint8_t phase : {uint8_t(kForward), uint8_t(kBackward), uint8_t(kStep)}) {
      int64_t sum = 0;
      for (int i = 0; i < m.num_gpu; ++i) {
        const Buffer& b = m.gpu[static_cast<size_t>(i)];
        if (b.category == k && (b.phases & phase)) sum += b.bytes;
      }
      most = std::max(most, sum);
    }
    return most;
  };
  const std::string states =
      fmt::format("parameters {} -> {}, gradients {} -> {}, optimizer states {} -> {}",
                  gb(at(m1, Category::Parameters)), gb(at(rec.memory, Category::Parameters)),
                  gb(at(m1, Category::Gradients)), gb(at(rec.memory, Category::Gradients)),
                  gb(at(m1, Category::OptimizerStates)), gb(at(rec.memory, Category::OptimizerStates)));
  // ZeRO already divided the optimizer states over every GPU at tp 1; at tp the rank's 1/tp of the layers
  // goes over world/tp ranks (the same share) and its whole embeddings and norms over fewer ranks.
  const int64_t o1 = at(m1, Category::OptimizerStates), ot = at(rec.memory, Category::OptimizerStates);
  const std::string opt_trend =
      ot > o1 + o1 / 50   ? "grow (the whole embeddings and norms are partitioned over fewer ranks)"
      : ot + o1 / 50 < o1 ? "shrink (ZeRO did not divide them over every GPU at tp 1)"
                          : "stay the same (ZeRO had already divided them over every GPU)";
  const int64_t kv = w.full_model().kv_heads();
  const std::string idle =
      tp > kv ? fmt::format(
                    " With {} KV heads, GPUs {}-{} of each TP group hold no attention shard (DeepSpeed "
                    "warns and goes on): attention does not speed up past tp {}.",
                    kv, kv, tp - 1, kv)
              : std::string();
  return fmt::format(
      "Tensor parallelism: AutoTP tp {} (tensor_parallel.autotp_size) splits q/k/v, gate/up (rows) and "
      "o_proj, down_proj (columns) and the {} over each group of {} GPUs; embeddings and norms stay whole. "
      "Against the same ZeRO-{} plan and micro-batch at tp 1 (peak {}), this one peaks at {}: {}; ZeRO now "
      "partitions the rank's shard over "
      "{} ranks instead of the whole model over {}, so the optimizer states {}. "
      "Saved activations {} -> {}: the residual stream (norm inputs, residuals, the linears' inputs) stays "
      "whole on every rank; only the attention and MLP inner tensors split. Its {} calls per step in the TP "
      "group move {} per GPU and take {}, all exposed (synchronous all-reduces: tp_overlap_comm is off), and "
      "the global batch is {} sequences over {} data-parallel ranks.{}",
      tp,
      w.full_model().tie_word_embeddings ? "tied vocabulary (embedding and lm_head share one shard)"
                                         : "lm_head's vocabulary",
      tp, rec.zero.stage, gb(m1.peak), gb(rec.memory.peak), states, layout_of(w, rec.zero).zero(),
      w.cluster.world_size(), opt_trend, gb(m1.saved_activation_bytes()),
      gb(rec.memory.saved_activation_bytes()),
      c.allreduce_calls_per_step + c.gather_calls_per_step + c.loss_allreduce_calls_per_step +
          c.norm_grad_calls_per_step,
      gb(c.bytes_per_rank_per_step), ms(c.time_s), rec.global_batch, data_parallel_size(w), idle);
}

std::string bf16_master_sentence(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                                 const Plan& rec) {
  SearchOptions o = opts;
  o.allow_bf16_master = false;
  const SearchResult fp32 = search_plans(w, s, o);
  const Plan* base = fp32.recommendation ? &*fp32.recommendation : nullptr;
  const int64_t states = rec.memory.at_peak[static_cast<size_t>(Category::OptimizerStates)];
  if (!rec.zero.bf16_master_weights) {
    return fmt::format(
        "bf16 master weights + optimizer states (--allow bf16-master) were searched and not chosen: fp32 "
        "masters are as fast or faster here{}.",
        base ? "" : " (nothing fits either way)");
  }
  std::string msg = fmt::format(
      "bf16 master weights, gradients and Adam states (--allow bf16-master; DeepSpeed "
      "bf16.bf16_master_weights_and_grads + bf16_optimizer_states): the optimizer states take {} per GPU "
      "(6 bytes per parameter of the partition instead of 12)",
      gb(states));
  if (base)
    msg += fmt::format("; the best plan with fp32 masters ({}) reaches {} ({}) at peak {}",
                       describe_config(base->zero), tps(base->tokens_per_s),
                       pct(base->tokens_per_s, rec.tokens_per_s), gb(base->memory.peak));
  else
    msg += "; with fp32 masters nothing fits";
  msg +=
      ". This changes the numerics: every update is applied to a bf16 weight and the moments keep bf16's 8 "
      "significant bits, so small updates round away; compare the loss curve with an fp32-master run.";
  return msg;
}

// Multi-node plans on a network the user did not state: the same configuration with half the
// inter-node bandwidth (half the NICs), said only where it moves the step by kNetworkReasonShare or more.
// Why: the published DeepSpeed rows of planner/data/calibration/deepspeed_runs.json do not name their
// network, and on the H100 default they were +24% too fast; half of it (fitted on their ds_fit rows)
// brings their held-out rows to +2.4% (docs/time-model.md, "DeepSpeed runs"). The network is the largest
// unknown of a multi-node plan, so the report shows how much this one hangs on it.
constexpr double kNetworkReasonShare = 0.05;  // 5%: inside it the calibration band (~8%) dominates anyway

std::string network_sentence(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                             const Plan& rec) {
  const hw::ClusterSpec& c = w.cluster;
  if (c.nodes < 2 || c.network_stated || c.nics_per_node < 2 || rec.time.step_s <= 0) return {};
  Workload half = w;
  half.cluster.nics_per_node = c.nics_per_node / 2;
  const Plan p = evaluate_plan(half, s, rec.zero, opts.memory_margin);
  if (p.time.step_s < rec.time.step_s * (1 + kNetworkReasonShare)) return {};
  return fmt::format(
      "The network matters here: between nodes this plan assumes {} x {}, the {} profile's default. "
      "With half that bandwidth ({} x {}, or a fabric of half the speed) the same configuration takes {} "
      "per step, {} ({}). Name your fabric with --network and --nics.",
      c.nics_per_node, c.inter_node.name, c.gpu.name, half.cluster.nics_per_node, c.inter_node.name,
      ms(p.time.step_s), tps(p.tokens_per_s), pct(p.tokens_per_s, rec.tokens_per_s));
}

// --checkpoint-offload cpu (planner/checkpoint_offload.h): where the checkpoints went, what waiting for
// them costs, and what the best plan without the offload reaches.
std::string checkpoint_offload_sentence(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                                        const Plan& rec) {
  const CheckpointOffloadPlan off =
      checkpoint_offload_plan(w.train, s.mem.act.num_layers, rec.zero.checkpointing);
  if (!off.active || !s.mem.act.known) return {};
  const int64_t on_host =
      checked_mul(checked_mul(off.host_checkpoints, s.mem.act.layer_input_per_sample), rec.zero.micro_batch);
  std::string out = fmt::format(
      "Checkpoint offload: {} of the {} layer inputs ({} per GPU) wait in {} host memory ({} per node); "
      "{} copies per step take {}, {} of it not hidden behind compute ({}).",
      off.host_checkpoints, s.mem.act.num_layers, gb(on_host), off.pinned ? "pinned" : "pageable",
      gb(checked_mul(on_host, w.cluster.gpus_per_node)), rec.time.checkpoint_copies,
      ms(rec.time.checkpoint_copy_s), ms(rec.time.checkpoint_offload_s),
      off.async ? "DeepSpeed's offload engine copies out on a side stream but copies back only when a "
                  "layer's backward asks"
                : "blocking .cpu() and .to(device) copies on the compute stream");
  Workload kept = w;
  kept.train.checkpoint_offload = CheckpointOffload::None;
  const SearchResult no = search_plans(kept, s, opts);
  if (no.recommendation)
    out += fmt::format(" Without it the best plan ({}) reaches {} ({}).",
                       describe_config(no.recommendation->zero), tps(no.recommendation->tokens_per_s),
                       pct(no.recommendation->tokens_per_s, rec.tokens_per_s));
  else
    out += " Without it nothing fits.";
  return out;
}

}  // namespace

std::string describe_config(const ZeroConfig& z) {
  std::string s = fmt::format("ZeRO-{}, micro-batch {} x grad-accum {}, {}", z.stage, z.micro_batch,
                              z.grad_accum, ckpt_name(z.checkpointing));
  if (z.offload_optimizer != Offload::None)
    s += fmt::format(", optimizer offload {}", offload_name(z.offload_optimizer));
  if (z.offload_param != Offload::None)
    s += fmt::format(", parameter offload {}", offload_name(z.offload_param));
  if (z.ep_size > 1) s += fmt::format(", expert parallel {} (AutoEP)", z.ep_size);
  if (z.stage == 3 && z.hpz_partition_size > 1) s += fmt::format(", ZeRO++ hpZ {}", z.hpz_partition_size);
  if (z.bf16_master_weights)
    s += z.bf16_optimizer_states ? ", bf16 master weights + optimizer states" : ", bf16 master weights";
  s += fmt::format(", reduce_bucket_size {:.0e}, overlap_comm {}", static_cast<double>(z.reduce_bucket_size),
                   z.overlap_comm ? "on" : "off");
  return s;
}

// Long context with eager attention (issue 13 item 5): the saved scores grow as s^2 per layer
// (memory_stats.cpp: layer_full - layer_selective is the quadratic core), flash/SDPA keeps the
// activations linear in s. Said whenever the scores outweigh the linear part of a layer.
std::string eager_scores_warning(const Workload& w, const ModelStats& s) {
  const int64_t core = s.mem.act.layer_full_per_sample - s.mem.act.layer_selective_per_sample;
  if (core <= 0 || core <= s.mem.act.layer_selective_per_sample) return {};
  return fmt::format(
      "Warning: eager attention materialises the s x s scores: {} per sample per layer at seq {} "
      "(grows as s^2), more than the {} of everything else the layer saves{}.",
      gb(core), w.train.seq_len, gb(s.mem.act.layer_selective_per_sample),
      s.compute.sdpa_supported ? "; --attention flash keeps activation memory linear in s"
                               : " (this model's HF code has no SDPA/flash path)");
}

namespace {

// How the CPU optimizer step was priced (planner/cpu_optimizer.h): the launcher decides its threads.
std::string cpu_threads_note(const Workload& w, const Plan& rec) {
  if (rec.zero.offload_optimizer != Offload::CPU) return {};
  const int stage = rec.zero.stage;
  if (w.train.cpu_threads > 0)
    return fmt::format(
        " The CPU optimizer step is priced at {} OpenMP thread{} per rank ({:.2f} ns per "
        "parameter, DeepSpeed 0.19.8 as measured; --cpu-threads).",
        w.train.cpu_threads, w.train.cpu_threads == 1 ? "" : "s",
        cpu_optimizer_ns_per_param(stage, w.train.cpu_threads));
  // Stage 3 was measured at 4 and 16 threads (its 1-thread figure is derived: planner/cpu_optimizer.h).
  const int low = stage >= 3 ? 4 : 1;
  return fmt::format(
      " CPU Adam is priced at 2e9 parameters/s per node; DeepSpeed's host step measured {:.2f} ns "
      "per parameter at {} OpenMP thread{} per rank against {:.2f} at 16 (torchrun and accelerate "
      "launch set 1 per rank): pass --cpu-threads to price your launcher's.",
      cpu_optimizer_ns_per_param(stage, low), low, low == 1 ? "" : "s",
      cpu_optimizer_ns_per_param(stage, 16));
}

// Pinned host memory (offload_*.pin_memory, DeepSpeed's default and zeroplan's emitted value): page-locked,
// never swapped out, and counted against the memlock limit (DeepSpeed 0.19.8 utils/pin_memory_tracker.py;
// runtime/zero/offload_config.py: "Disable only on hosts with tight memlock limits (ulimit -l)"). NVIDIA's
// NGC container docs run containers with --ulimit memlock=-1 for the same reason.
std::string pinned_note(const Workload& w, const Plan& rec) {
  const int64_t node = rec.memory.host_pinned_per_node;
  if (node <= 0) return "";
  const int64_t per_process = rec.memory.host_pinned_per_process(w.cluster.gpus_per_node);
  return fmt::format(
      " It pins {} of host memory per node ({} per process): page-locked memory cannot be swapped out and "
      "counts against the memlock limit, so `ulimit -l` must be unlimited or above {} (containers: --ulimit "
      "memlock=-1); pin_memory false lifts that, at pageable copy speed ({:.0f} instead of {:.0f} GB/s "
      "here).",
      gb(node), gb(per_process), gb(per_process), w.cluster.gpu.host_pageable_GBps,
      w.cluster.gpu.host_pinned_GBps);
}

// Offload: needed, or chosen for speed, or not needed.
std::string offload_sentence(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                             const Plan& rec) {
  if (uses_offload(rec.zero)) {
    SearchOptions o = opts;
    o.offload_optimizer = Offload::None;
    o.offload_param = Offload::None;
    const SearchResult no = search_plans(w, s, o);
    const Plan* best_fit = no.recommendation ? &*no.recommendation : nullptr;
    if (best_fit == nullptr) {
      const Plan* closest = nullptr;
      for (const Plan& p : no.best_per_stage)
        if (closest == nullptr || p.memory.peak < closest->memory.peak) closest = &p;
      return (
          fmt::format("Offload is needed: without it nothing fits (the closest, {}, needs {}). Here it costs "
                      "{} per step ({:.0f}% "
                      "of the step) in PCIe transfers and CPU Adam not hidden behind compute.{}{}",
                      closest ? describe_config(closest->zero) : std::string("?"),
                      closest ? peak_sentence(*closest) : "?", ms(rec.time.offload_s),
                      rec.time.step_s > 0 ? rec.time.offload_s / rec.time.step_s * 100 : 0.0,
                      cpu_threads_note(w, rec), pinned_note(w, rec)));
    } else {
      return (
          fmt::format("Offload is not required, but it frees GPU memory for micro-batch {}: the best plan "
                      "without offload ({}) "
                      "reaches {} ({}), while offload costs {} per step here.{}{}",
                      rec.zero.micro_batch, describe_config(best_fit->zero), tps(best_fit->tokens_per_s),
                      pct(best_fit->tokens_per_s, rec.tokens_per_s), ms(rec.time.offload_s),
                      cpu_threads_note(w, rec), pinned_note(w, rec)));
    }
  } else {
    return (
        fmt::format("No {}offload is needed: the plan leaves {} of GPU memory unused.",
                    w.train.checkpoint_offload != CheckpointOffload::None ? "optimizer or parameter " : "",
                    gb(rec.capacity_bytes - rec.memory.peak)));
  }
}

// Why the 16-bit model is not gathered on save: stage 3 with stage3_gather_16bit_weights_on_model_save
// off (rank 0's host RAM), and where the weights come from then; "" otherwise.
std::string save_sentence(const Workload& w, const ModelStats& s, const Plan& rec) {
  if (rec.zero.stage != 3 || rec.zero.gather_16bit_weights_on_model_save) return "";
  return fmt::format(
      "Saving: stage3_gather_16bit_weights_on_model_save is off, because gathering the {} 16-bit model "
      "into "
      "rank 0's host memory would not fit beside the {} training holds per node; the HF Trainer then saves "
      "DeepSpeed's checkpoint ({} on disk) and the weights come from zero_to_fp32.py, offline.",
      gb(checked_mul(w.train.precision == Precision::FP32 ? 4 : 2, s.mem.total_params)),
      gb(rec.memory.host_per_node), gb(rec.save.checkpoint_total_bytes));
}

// The micro-batch and what limits it: memory (the next size does not fit) or speed; or the global
// batch as asked; "" where the user fixed the micro-batch alone.
std::string micro_batch_sentence(const Workload& w, const ModelStats& s, const SearchOptions& opts,
                                 const Plan& rec) {
  if (!w.train.micro_batch && !w.train.global_batch) {
    ZeroConfig z = rec.zero;
    z.micro_batch += 1;
    const Plan next = evaluate_plan(w, s, z, opts.memory_margin);
    if (!next.fits) {
      const int64_t grow =
          next.memory.category(Category::Activations) - rec.memory.category(Category::Activations);
      return fmt::format(
          "Micro-batch {} is the largest that fits with this configuration: {} would need {} of {} usable "
          "(activations grow by {} per sample of {} tokens).",
          rec.zero.micro_batch, z.micro_batch, gb(next.memory.peak), gb(next.capacity_bytes), gb(grow),
          w.train.seq_len);
    }
    return fmt::format("Micro-batch {} is the fastest found; micro-batch {} also fits but reaches only {}.",
                       rec.zero.micro_batch, z.micro_batch, tps(next.tokens_per_s));
  }
  if (w.train.global_batch)
    return fmt::format("Global batch {} = micro-batch {} x grad-accum {} x {} {}, as asked.",
                       rec.global_batch, rec.zero.micro_batch, rec.zero.grad_accum, data_parallel_size(w),
                       w.train.sequence_parallel > 1 ? "data-parallel ranks" : "GPUs");
  return "";
}

// Appends the one-knob advice: the variants that fit and are faster (at most three), the setting that
// would cost most if changed, or, with nothing faster, what limits the step.
void add_knob_advice(const Workload& w, const ModelStats& s, const SearchOptions& opts, const Plan& rec,
                     std::vector<std::string>& reasons) {
  // What to change: every one-knob variant that fits and is at least 2% faster, fastest first; and
  // the knob that would cost the most if changed the wrong way.
  std::vector<Knob> knobs = knob_effects(w, s, opts, rec);
  std::sort(knobs.begin(), knobs.end(),
            [](const Knob& a, const Knob& b) { return a.plan.tokens_per_s > b.plan.tokens_per_s; });
  std::string faster;
  int listed = 0;
  for (const Knob& k : knobs) {
    if (!k.plan.fits || k.plan.tokens_per_s < rec.tokens_per_s * 1.02 || listed >= 3) continue;
    faster +=
        fmt::format("{}{} -> {} ({}, step {})", listed == 0 ? "" : "; ", k.what, tps(k.plan.tokens_per_s),
                    pct(k.plan.tokens_per_s, rec.tokens_per_s), ms(k.plan.time.step_s));
    ++listed;
  }
  if (!faster.empty()) reasons.push_back("To go faster: " + faster + ".");
  const Knob* worst = nullptr;
  for (const Knob& k : knobs)
    if (k.plan.fits && k.plan.tokens_per_s < rec.tokens_per_s * 0.9 &&
        (worst == nullptr || k.plan.tokens_per_s < worst->plan.tokens_per_s))
      worst = &k;
  if (worst != nullptr)
    reasons.push_back(fmt::format("Keep this setting: {} would drop to {} ({}).", worst->what,
                                  tps(worst->plan.tokens_per_s),
                                  pct(worst->plan.tokens_per_s, rec.tokens_per_s)));
  const double step = rec.time.step_s;
  if (faster.empty() && step > 0) {
    if (rec.time.exposed_communication_s > 0.15 * step)
      reasons.push_back(fmt::format(
          "No knob within this search speeds it up by 2% or more; exposed communication ({:.0f}% of the step "
          "over {}) "
          "is the limit: a faster interconnect or more tokens per step (larger global batch) would help.",
          rec.time.exposed_communication_s / step * 100, link_names(w)));
    else
      reasons.push_back(
          fmt::format("No knob within this search speeds it up by 2% or more; the step is {:.0f}% GPU "
                      "compute at MFU {:.0f}%.",
                      rec.time.compute_s / step * 100, rec.mfu * 100));
  }
}

}  // namespace

void explain(const Workload& w, const ModelStats& s, const SearchOptions& opts, SearchResult& r) {
  r.reasons.clear();
  r.no_fit_reason.clear();
  if (!r.recommendation) {
    explain_no_fit(w, s, opts, r);
    if (const std::string e = expert_parallel_sentence(w, s, r); !e.empty()) r.reasons.push_back(e);
    if (auto warn = eager_scores_warning(w, s); !warn.empty()) r.reasons.push_back(warn);
    return;
  }
  const Plan& rec = *r.recommendation;
  r.reasons.push_back(
      fmt::format("Predicted {} ({:.0f} per GPU), {} per step, MFU {:.0f}%, peak {} of {} usable per GPU.",
                  tps(rec.tokens_per_s), rec.tokens_per_s_per_gpu, ms(rec.time.step_s), rec.mfu * 100,
                  gb(rec.memory.peak), gb(rec.capacity_bytes)));
  r.reasons.push_back(fmt::format("Its step: {}.", step_sentence(rec)));
  if (rec.time.step_s > 0 && rec.time.hook_overhead_s >= kHookReasonShare * rec.time.step_s)
    r.reasons.push_back(hook_sentence(rec));
  for (const Plan& p : r.best_per_stage)
    if (p.zero.stage != rec.zero.stage) r.reasons.push_back(compare_stage(w, rec, p));
  // The layout's and the levers' sentences, each "" where it does not apply, in this order.
  for (std::string q :
       {expert_parallel_sentence(w, s, r), sequence_parallel_sentence(w, s, rec),
        tensor_parallel_sentence(w, s, rec), hpz_sentence(w, s, opts, rec),
        zeropp_quant_sentence(w, s, opts, rec), muon_sentence(w, s, rec), tiled_mlp_sentence(w, rec),
        network_sentence(w, s, opts, rec), checkpoint_offload_sentence(w, s, opts, rec)})
    if (!q.empty()) r.reasons.push_back(std::move(q));
  if (opts.allow_bf16_master) r.reasons.push_back(bf16_master_sentence(w, s, opts, rec));
  if (std::string q = save_sentence(w, s, rec); !q.empty()) r.reasons.push_back(std::move(q));

  r.reasons.push_back(offload_sentence(w, s, opts, rec));

  if (auto warn = eager_scores_warning(w, s); !warn.empty()) r.reasons.push_back(warn);

  // The micro-batch and what limits it.
  if (std::string q = micro_batch_sentence(w, s, opts, rec); !q.empty()) r.reasons.push_back(std::move(q));

  add_knob_advice(w, s, opts, rec, r.reasons);
}

}  // namespace zeroplan::planner
