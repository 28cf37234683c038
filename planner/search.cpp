// The search (issue 4). Dimensions and rules:
//  - stage 0..3 (or the one fixed by --stage);
//  - offload_optimizer none|cpu (|nvme when the cluster has NVMe bandwidth) for stages 1-3
//    (DeepSpeed offloads the optimizer only with ZeRO, stage >= 1); offload_param for stage 3 only;
//  - micro-batch x gradient accumulation:
//      with --global-batch G: G must be a multiple of the world size W; every (micro, accum) with
//      micro * accum * W == G exactly (micro over the divisors of G/W), honouring a fixed micro or
//      accum;
//      without --global-batch: grad_accum = --grad-accum or 1 (we never invent a larger global batch
//      than the user asked for: accumulation changes the optimisation, not only the speed), and the
//      micro-batch is --micro-batch or searched over powers of two plus the largest that fits;
//  - checkpointing none|selective|full (unless fixed);
//  - reduce_bucket_size in {5e7, 2e8, 5e8} elements: 5e8 is DeepSpeed's default
//    (runtime/zero/config.py), 2e8 the value in DeepSpeed's own ZeRO tutorial configs, 5e7 a small
//    bucket for tight memory (DeepSpeed issues #3338/#724: bucket size moves memory and speed);
//  - overlap_comm off|on.
// A plan fits when its peak GPU memory <= capacity * (1 - memory_margin) and the node's host memory
// (when known) holds the host buffers. Objective: the highest tokens/s among plans that fit, where
// an offload must win by more than 3% (kOffloadPreference); ties go to the lower peak memory.
#include "planner/search.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/errors.h"
#include "planner/expert_parallel.h"
#include "planner/hpz.h"
#include "planner/invariants.h"
#include "planner/memory_model.h"
#include "planner/op_model.h"
#include "planner/parallel.h"
#include "planner/reasons.h"
#include "planner/time_model.h"

namespace zeroplan::planner {
namespace {

// The micro-batch search stops here: far beyond any useful per-GPU batch of full sequences.
constexpr int64_t kMaxMicroBatch = 4096;

// Each offload (optimizer, parameters) must buy more than 3% of throughput to be preferred: the
// model does not capture what offload costs beyond PCIe and CPU Adam time (host-memory pressure,
// CPU contention with data loading, pinned-memory limits), and 3% is below the time model's
// accuracy. A multiplicative factor keeps the ranking transitive.
constexpr double kOffloadPreference = 0.97;

double score(const Plan& p) {
  double s = p.tokens_per_s;
  if (p.zero.offload_optimizer != Offload::None) s *= kOffloadPreference;
  if (p.zero.offload_param != Offload::None) s *= kOffloadPreference;
  return s;
}

bool better(const Plan& a, const Plan& b) {
  // Is a better than b?
  if (a.fits != b.fits) return a.fits;
  if (a.fits) {
    const double sa = score(a), sb = score(b);
    if (sa != sb) return sa > sb;
    return a.memory.peak < b.memory.peak;
  }
  // Neither fits: the least over capacity (relative), then the faster.
  const double ra =
      static_cast<double>(a.memory.peak) / static_cast<double>(std::max<int64_t>(1, a.capacity_bytes));
  const double rb =
      static_cast<double>(b.memory.peak) / static_cast<double>(std::max<int64_t>(1, b.capacity_bytes));
  if (ra != rb) return ra < rb;
  return a.tokens_per_s > b.tokens_per_s;
}

struct BatchPlan {
  bool global_fixed = false;
  int64_t per_gpu = 0;  // global / world when global fixed
  std::vector<std::pair<int64_t, int64_t>>
      pairs;                  // (micro, accum) when the micro-batch is not searched freely
  bool search_micro = false;  // free micro-batch search with `accum`
  int64_t accum = 1;
};

BatchPlan plan_batches(const Workload& w) {
  const TrainingSpec& t = w.train;
  // Each sequence-parallel group trains the same sequences: the batch divides over data-parallel ranks.
  const int64_t world = data_parallel_size(w);
  BatchPlan bp;
  if (t.global_batch) {
    const int64_t g = *t.global_batch;
    if (g % world != 0)
      throw_user_error("--global-batch {} is not a multiple of the {} {}; use a multiple of {} (e.g. {})", g,
                       world, t.sequence_parallel > 1 ? "data-parallel ranks (GPUs / --sp)" : "GPUs", world,
                       std::max<int64_t>(world, g / world * world));
    bp.global_fixed = true;
    bp.per_gpu = g / world;
    if (t.micro_batch && t.grad_accum) {
      if (*t.micro_batch * *t.grad_accum != bp.per_gpu)
        throw_user_error(
            "--global-batch {} needs micro-batch x grad-accum x {} GPUs = {}, but --micro-batch {} x "
            "--grad-accum {} "
            "= {} per GPU; drop one of them and zeroplan picks it",
            g, world, g, *t.micro_batch, *t.grad_accum, *t.micro_batch * *t.grad_accum);
      bp.pairs.emplace_back(*t.micro_batch, *t.grad_accum);
    } else if (t.micro_batch) {
      if (bp.per_gpu % *t.micro_batch != 0)
        throw_user_error("--global-batch {} over {} GPUs is {} per GPU, not a multiple of --micro-batch {}",
                         g, world, bp.per_gpu, *t.micro_batch);
      bp.pairs.emplace_back(*t.micro_batch, bp.per_gpu / *t.micro_batch);
    } else if (t.grad_accum) {
      if (bp.per_gpu % *t.grad_accum != 0)
        throw_user_error("--global-batch {} over {} GPUs is {} per GPU, not a multiple of --grad-accum {}", g,
                         world, bp.per_gpu, *t.grad_accum);
      bp.pairs.emplace_back(bp.per_gpu / *t.grad_accum, *t.grad_accum);
    } else {
      for (int64_t d = 1; d <= bp.per_gpu && d <= kMaxMicroBatch; ++d)
        if (bp.per_gpu % d == 0) bp.pairs.emplace_back(d, bp.per_gpu / d);
    }
    return bp;
  }
  bp.accum = t.grad_accum.value_or(1);
  if (t.micro_batch) {
    bp.pairs.emplace_back(*t.micro_batch, bp.accum);
  } else {
    bp.search_micro = true;
  }
  return bp;
}

// Evaluates the micro-batch dimension for one configuration and keeps the best plan in `best`.
class Evaluator {
 public:
  Evaluator(const Workload& w, const ModelStats& s, double margin) : w_(w), s_(s), margin_(margin) {}

  int64_t evaluated = 0;

  void consider(ZeroConfig z, const BatchPlan& bp, Plan& best, bool& have) {
    if (!bp.search_micro) {
      // Ascending micro-batches: memory grows with the micro-batch, so once one does not fit the
      // larger ones do not either; keep evaluating only to find the least-over when nothing fits.
      bool any_fit = false;
      for (const auto& [micro, accum] : bp.pairs) {
        z.micro_batch = micro;
        z.grad_accum = accum;
        Plan p = evaluate(z);
        ++evaluated;
        keep(p, best, have);
        any_fit = any_fit || p.fits;
        if (!p.fits && any_fit) break;
      }
      return;
    }
    z.grad_accum = bp.accum;
    int64_t last_fit = 0, first_fail = 0;
    for (int64_t micro = 1; micro <= kMaxMicroBatch; micro *= 2) {
      z.micro_batch = micro;
      Plan p = evaluate(z);
      ++evaluated;
      keep(p, best, have);
      if (!p.fits) {
        first_fail = micro;
        break;
      }
      last_fit = micro;
    }
    if (last_fit == 0 || first_fail == 0) return;
    // The largest micro-batch that fits lies in (last_fit, first_fail): bisect on memory.
    int64_t lo = last_fit, hi = first_fail;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      z.micro_batch = mid;
      Plan p = evaluate(z);
      ++evaluated;
      if (p.fits) {
        lo = mid;
        keep(p, best, have);
      } else {
        hi = mid;
      }
    }
  }

 private:
  // A stage-3 candidate whose 16-bit save (stage3_gather_16bit_weights_on_model_save, which the search
  // turns on) would not fit the node's host RAM is tried without the gather: DeepSpeed's checkpoint alone,
  // converted offline with zero_to_fp32.py (planner/save_phase.h; the reasons say so).
  Plan evaluate(const ZeroConfig& z) const {
    Plan p = evaluate_plan(w_, s_, z, margin_);
    if (!p.save.host_ok && z.gather_16bit_weights_on_model_save) {
      ZeroConfig nz = z;
      nz.gather_16bit_weights_on_model_save = false;
      Plan q = evaluate_plan(w_, s_, nz, margin_);
      if (q.save.host_ok) return q;
    }
    return p;
  }
  static void keep(const Plan& p, Plan& best, bool& have) {
    if (!have || better(p, best)) {
      best = p;
      have = true;
    }
  }
  const Workload& w_;
  const ModelStats& s_;
  double margin_;
};

}  // namespace

Plan evaluate_plan(const Workload& w, const ModelStats& s, const ZeroConfig& z, double memory_margin) {
  // The memory breakdown is built in place (no default-built copy to overwrite: initialising and copying
  // its buffer arrays was a sixth of an evaluation).
  Plan p{.zero = z,
         .precision = w.train.precision,
         .seq_len = w.train.seq_len,
         .sequence_parallel = std::max(1, w.train.sequence_parallel),
         .tensor_parallel = std::max(1, w.train.tensor_parallel),
         .global_batch = z.micro_batch * z.grad_accum * data_parallel_size(w),  // sequences per step
         .memory = estimate_memory(w, s, z),
         .time = {},
         .save = {}};
  const int64_t world = w.cluster.world_size();
  p.capacity_bytes =
      static_cast<int64_t>(static_cast<double>(w.cluster.gpu.memory_bytes) * (1.0 - memory_margin));
  const bool host_ok = w.cluster.host_memory_bytes_per_node <= 0 ||
                       p.memory.host_per_node <= w.cluster.host_memory_bytes_per_node;
  const bool nvme_ok = p.memory.nvme_per_node <= 0 || w.cluster.nvme_bytes_per_node <= 0 ||
                       p.memory.nvme_per_node <= w.cluster.nvme_bytes_per_node;
  p.save = estimate_save(w, s, z, p.memory.host_per_node);
  p.fits = p.memory.peak <= p.capacity_bytes && host_ok && nvme_ok && p.save.host_ok;
  p.time = estimate_time(w, s, z);
  if (p.time.step_s > 0) {
    const double tokens = static_cast<double>(p.global_batch) * static_cast<double>(w.train.seq_len);
    p.tokens_per_s = tokens / p.time.step_s;
    p.tokens_per_s_per_gpu = p.tokens_per_s / static_cast<double>(world);
    const double peak = peak_flops(w.cluster.gpu, w.train.precision);
    if (peak > 0) p.mfu = p.time.flops_per_step / (p.time.step_s * peak);
  }
  // No plan leaves the planner without passing the physical checks (planner/invariants.h): a
  // violation is our bug and ends the command with exit 3, never a printed number.
  enforce_plan_invariants(w, p);
  return p;
}

SearchResult search(const Workload& w, const SearchOptions& opts) {
  const ModelStats s = compute_model_stats(w);
  return search(w, s, opts);
}

SearchResult search(const Workload& w, const ModelStats& s, const SearchOptions& opts) {
  if (opts.ep) {
    const std::string why = expert_parallel_refusal(w, *opts.ep);
    if (!why.empty()) throw_user_error("{}", why);
  }
  SearchResult r = search_plans(w, s, opts);
  explain(w, s, opts, r);
  return r;
}

namespace {

// Expert parallelism (DeepSpeed AutoEP, planner/expert_parallel.h): the sizes to search, and in
// `result.ep_refusal` why none above 1 applies to a MoE model.
std::vector<int> expert_parallel_choices(const Workload& w, const SearchOptions& opts, SearchResult& result) {
  std::vector<int> ep_choices = {1};
  if (w.train.sequence_parallel > 1) {
    // Ulysses SP with AutoEP: not modelled (and DeepSpeed 0.19.8 refuses it at stage 3:
    // engine.py _validate_zero3_moe_compatibility).
    if (w.model.is_moe())
      result.ep_refusal = "not modelled together with --sp (Ulysses sequence parallelism)";
    return ep_choices;
  }
  if (opts.ep) {
    // search() refused a size DeepSpeed cannot run for the user's workload; the variants the reasons
    // explore (LoRA, more GPUs) fall back to no expert parallelism where the fixed size does not apply.
    if (expert_parallel_refusal(w, *opts.ep).empty()) ep_choices = {*opts.ep};
  } else if (w.model.is_moe()) {
    for (int e : expert_parallel_candidates(w)) ep_choices.push_back(e);
    if (ep_choices.size() == 1) {
      result.ep_refusal = expert_parallel_refusal(w, 2);
      if (result.ep_refusal.empty())
        result.ep_refusal =
            fmt::format("no expert-parallel size > 1 divides both the {} experts and the {} GPUs per node",
                        w.model.num_experts, w.cluster.gpus_per_node);
    }
  }

  return ep_choices;
}

// The recommendation: the best fitting stage, or among stages within 0.1% of the best score the lowest.
void recommend(SearchResult& result) {
  const Plan* rec = nullptr;
  for (const Plan& p : result.best_per_stage)
    if (p.fits && (rec == nullptr || better(p, *rec))) rec = &p;
  // Among stages within 0.1% of the best score (e.g. all stages on one GPU, where ZeRO changes
  // nothing), recommend the lowest: fewer moving parts for the same predicted speed.
  if (rec != nullptr)
    for (const Plan& p : result.best_per_stage)
      if (p.fits && p.zero.stage < rec->zero.stage && score(p) >= score(*rec) * 0.999) {
        rec = &p;
        break;
      }
  if (rec != nullptr) result.recommendation = *rec;
}

// One candidate's knobs, as the search loops over them.
struct Knobs {
  int stage;
  Offload oo, po;
  Checkpointing ck;
  int64_t bucket;
  bool overlap;
  int ep, hpz;
  bool bf16_master;
  bool qwz = false, qgz = false;  // ZeRO++ quantized communication (SearchOptions::qwz / qgz)

  // Whether the search offers this combination.
  bool offered(const Workload& w, const SearchOptions& opts) const {
    // DeepSpeed keeps bf16 Adam states on the GPU only; offloaded, they need the engine's own CPU optimizer
    // (configs/check.cpp master_weights), which --emit writes only with --emit-optimizer: offered with the
    // optimizer on the GPU.
    // Muon is modelled at stages 1-2 with the optimizer on the GPU (planner/muon.h).
    if (w.train.muon && (stage < 1 || stage > 2 || oo != Offload::None || po != Offload::None || bf16_master))
      return false;
    if (bf16_master &&
        !(opts.allow_bf16_master && stage >= 1 && oo == Offload::None &&
          w.train.precision == Precision::BF16 && w.train.implementation != Implementation::ZeroplanEngine))
      return false;
    // engine.py asserts "AutoEP with ZeRO Stage 3 does not support zero_quantized_gradients yet."
    if (stage == 3 && qgz && ep > 1) return false;
    // DeepSpeed refuses hpZ beside AutoEP (layout::validate); --hpz auto keeps it to plans whose parameters
    // stay on the GPU (with offload_param the secondary copy sits on the host).
    return !(hpz > 1 && (ep > 1 || (opts.hpz_auto && po != Offload::None)));
  }

  ZeroConfig config(const Workload& w) const {
    ZeroConfig z = ZeroConfig::deepspeed_defaults(stage);
    // zeroplan's emitted stage-3 configs gather the 16-bit model on save (configs/emit.cpp).
    z.gather_16bit_weights_on_model_save = stage == 3;
    z.bf16_master_weights = bf16_master;
    z.bf16_optimizer_states = bf16_master;
    z.muon = w.train.muon;
    z.offload_optimizer = oo;
    z.offload_param = po;
    z.checkpointing = ck;
    z.reduce_bucket_size = bucket;
    z.allgather_bucket_size = bucket;
    z.overlap_comm = overlap;
    z.ep_size = ep;
    z.hpz_partition_size = hpz;
    z.quantized_weights = stage == 3 && qwz;
    z.quantized_gradients = stage == 3 && qgz;
    z.memory_efficient_linear = w.train.memory_efficient_linear;
    return z;
  }
};

}  // namespace

SearchResult search_plans(const Workload& w, const ModelStats& s, const SearchOptions& opts) {
  if (opts.memory_margin < 0 || opts.memory_margin >= 1)
    throw_user_error("--memory-margin {} must be in [0, 1): it is the fraction of GPU memory kept free",
                     opts.memory_margin);
  BatchPlan bp = plan_batches(w);
  if (s.compute.params_only && bp.search_micro) {
    // --params: no architecture, so activations (and with them the micro-batch's effect on memory)
    // are unknown; searching the micro-batch would run to its cap. Micro-batch 1 unless given.
    bp.search_micro = false;
    bp.pairs.emplace_back(1, bp.accum);
  }
  const bool nvme = w.cluster.nvme_GBps > 0;
  SearchResult result;
  Evaluator ev(w, s, opts.memory_margin);

  std::vector<Offload> offload_choices = {Offload::None, Offload::CPU};
  if (nvme) offload_choices.push_back(Offload::NVMe);
  std::vector<Checkpointing> ckpt_choices = {Checkpointing::None, Checkpointing::Selective,
                                             Checkpointing::Full};
  if (w.train.checkpointing) ckpt_choices = {*w.train.checkpointing};
  // Offloaded checkpoints are the inputs of fully checkpointed layers (planner/checkpoint_offload.h).
  // A fixed --checkpointing wins (`check` tries other modes with the config's cpu_checkpointing on).
  else if (w.train.checkpoint_offload != CheckpointOffload::None)
    ckpt_choices = {Checkpointing::Full};

  const std::vector<int> ep_choices = expert_parallel_choices(w, opts, result);

  for (int stage = 0; stage <= 3; ++stage) {
    if (opts.stage && *opts.stage != stage) continue;
    std::vector<Offload> opt_off = offload_choices;
    if (stage == 0) opt_off = {Offload::None};
    if (opts.offload_optimizer) {
      if (stage == 0 && *opts.offload_optimizer != Offload::None) continue;  // no offload without ZeRO
      opt_off = {*opts.offload_optimizer};
    }
    std::vector<Offload> par_off = {Offload::None};
    if (stage == 3) par_off = offload_choices;
    if (opts.offload_param) {
      if (stage != 3 && *opts.offload_param != Offload::None) continue;  // parameter offload is stage 3 only
      par_off = {*opts.offload_param};
    }
    // ZeRO++ hpZ is a stage-3 knob (stage3.py reads zero_hpz_partition_size; stages 0-2 ignore it).
    const std::vector<int> hpz_choices = stage != 3      ? std::vector<int>{1}
                                         : opts.hpz_auto ? hpz_candidates(w)
                                                         : opts.hpz_choices;
    Plan best;
    bool have = false;
    for (int ep : ep_choices) {
      Plan best_ep;
      bool have_ep = false;
      for (Offload oo : opt_off) {
        for (Offload po : par_off) {
          for (Checkpointing ck : ckpt_choices) {
            for (int64_t bucket : kSearchBucketSizes) {
              for (bool overlap : {false, true}) {
                for (int hpz : hpz_choices)
                  for (bool bf16_master : {false, true}) {
                    const Knobs k{stage, oo,  po,          ck,       bucket,  overlap,
                                  ep,    hpz, bf16_master, opts.qwz, opts.qgz};
                    if (k.offered(w, opts)) ev.consider(k.config(w), bp, best_ep, have_ep);
                  }
              }
            }
          }
        }
      }
      if (!have_ep) continue;
      if (!have || better(best_ep, best)) {
        best = best_ep;
        have = true;
      }
      if (w.model.is_moe() && ep_choices.size() > 1) {
        std::optional<Plan>& slot = ep == 1 ? result.best_without_ep : result.best_with_ep;
        if (!slot || better(best_ep, *slot)) slot = best_ep;
      }
    }
    if (have) result.best_per_stage.push_back(best);
  }
  result.candidates_evaluated = ev.evaluated;
  if (result.best_per_stage.empty())
    throw_user_error(
        "no ZeRO stage can be searched with the fixed options (offload of the optimizer needs --stage >= 1, "
        "of parameters --stage 3)");
  recommend(result);
  return result;
}

}  // namespace zeroplan::planner
