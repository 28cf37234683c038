// `zeroplan --model M --gpus G --max-seq` (issue 27 item 3): the longest sequence that fits, searched over
// everything the plan search tries (stage, offload, checkpointing, buckets; the kernels the user names
// with --kernels) and, where no plan fits with the checkpoints on the GPU and --checkpoint-offload does not
// fix it, with them offloaded to host memory (planner/checkpoint_offload.h); what limits it one step
// further, and a table of peak memory and throughput against the sequence length.
//
// Ulysses SP (planner/sequence_parallel.h): --sp N fixes it; without --sp the answer uses the largest SP
// DeepSpeed can run inside one node. The longest sequence cannot shrink as SP grows (the per-GPU
// activations divide by it, model states stay), so the largest valid size answers the question; its
// all-to-alls only move tokens/s.
//
// The search: micro-batch 1 unless --micro-batch / --global-batch fix it, sequences doubling from 1024
// while a plan fits, then bisection in steps of 1024 tokens between the last that fits and the first that
// does not. Every probe is a full plan search (planner::search_plans), so "fits" means what it means for
// `zeroplan --seq-len S`.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/plan_json.h"
#include "common/errors.h"
#include "models/model_spec.h"
#include "planner/checkpoint_offload.h"
#include "planner/parallel.h"
#include "planner/reasons.h"
#include "planner/search.h"
#include "planner/sequence_parallel.h"

namespace zeroplan::cli {

namespace {

constexpr int64_t kStep = 1024;  // granularity of the answer (tokens)

struct Probe {
  int64_t seq = 0;
  planner::SearchResult result;
  bool offloaded = false;  // fits only with the checkpoints in host memory
  bool fits() const { return result.recommendation.has_value(); }
};

// The SP size --max-seq plans with: the user's --sp, else the largest power of two up to the GPUs that
// the layout rules and DeepSpeed's Ulysses accept and that divides the search step (every probed length
// must split evenly). Across nodes the all-to-alls cross the network (slower, not shorter): ALST's
// 4-node Llama-8B runs use sp 32 (arXiv 2506.13996).
int max_seq_sp(const PlanFlags& flags, const planner::Workload& w) {
  if (!flags.sp.empty()) {
    const int sp = std::max(1, w.train.sequence_parallel);
    if (kStep % sp != 0)
      throw_user_error(
          "--max-seq probes lengths in steps of {} tokens, which --sp {} does not divide; use a "
          "power of two",
          kStep, sp);
    return sp;
  }
  int best = 1;
  // Under --tp no SP is tried: AutoTP with Ulysses is not modelled (planner/tensor_parallel.h).
  if (w.train.tensor_parallel > 1) return best;
  for (int sp = 2; sp <= w.cluster.world_size() && kStep % sp == 0; sp *= 2) {
    planner::Workload v = w;
    v.train.sequence_parallel = sp;
    v.train.seq_len = kStep;
    if (layout::validate(w.cluster.nodes, w.cluster.gpus_per_node, {1, sp, 1}, planner::layout_facts(v))
            .empty() &&
        planner::sequence_parallel_refusal(v).empty() &&
        (!w.model.is_moe() || flags.ep.empty() || flags.ep == "1"))
      best = sp;
  }
  return best;
}

std::string gb(int64_t b) {
  return fmt::format("{:.1f}", static_cast<double>(b) / 1e9);
}

std::string describe(const Probe& p) {
  return planner::describe_config(p.result.recommendation->zero) +
         (p.offloaded ? ", checkpoints offloaded to host memory" : "");
}

// The search's outcome: the doubling probes (the table), the longest length that fits (`lo`, 0 if
// none) and the first that does not (`hi`, 0 if none up to kMaxSeqLen), the best plan at `lo` and
// why `hi` does not fit.
struct MaxSeq {
  planner::Workload base;  // the user's workload, micro-batch 1 unless fixed
  bool try_offload = false;
  std::vector<Probe> sweep;
  int64_t lo = 0, hi = 0;
  std::optional<Probe> best;
  std::string limit;

  planner::Workload at(int64_t seq, bool offloaded) const {
    planner::Workload v = base;
    v.train.seq_len = seq;
    if (offloaded) v.train.checkpoint_offload = planner::CheckpointOffload::Cpu;
    return v;
  }
};

MaxSeq search_max_seq(const PlanFlags& flags, const planner::SearchOptions& opts,
                      const planner::Workload& w) {
  MaxSeq m;
  m.base = w;
  m.base.train.sequence_parallel = max_seq_sp(flags, w);
  if (!m.base.train.micro_batch && !m.base.train.global_batch) m.base.train.micro_batch = 1;
  // Checkpoint offload is tried where the user left it open and DeepSpeed can run it for this stack.
  m.try_offload = flags.checkpoint_offload.empty() && !w.model.params_only &&
                  planner::checkpoint_offload_available(m.base.train);
  auto probe = [&](int64_t seq) {
    planner::Workload v = m.at(seq, false);
    const planner::ModelStats s = planner::compute_model_stats(v);
    Probe p{seq, planner::search_plans(v, s, opts)};
    if (!p.fits() && m.try_offload) {
      v.train.checkpoint_offload = planner::CheckpointOffload::Cpu;
      planner::SearchResult r = planner::search_plans(v, s, opts);
      if (r.recommendation) p = Probe{seq, std::move(r), true};
    }
    return p;
  };
  for (int64_t seq = kStep; seq <= kMaxSeqLen; seq *= 2) {
    m.sweep.push_back(probe(seq));
    if (!m.sweep.back().fits()) {
      m.hi = seq;
      break;
    }
    m.lo = seq;
  }
  for (const Probe& p : m.sweep)
    if (p.fits() && p.seq == m.lo) m.best = p;
  if (m.lo > 0 && m.hi > 0) {
    while (m.hi - m.lo > kStep) {
      const int64_t mid = m.lo + (m.hi - m.lo) / 2 / kStep * kStep;
      Probe p = probe(mid);
      if (p.fits()) {
        m.lo = mid;
        m.best = std::move(p);
      } else {
        m.hi = mid;
      }
    }
  }
  // Why one step further does not fit: the full search with its reasons at the first failing length.
  if (m.hi > 0) m.limit = planner::search(m.at(m.hi, m.try_offload), opts).no_fit_reason;
  return m;
}

nlohmann::json max_seq_json(const planner::Workload& w, const MaxSeq& m, int64_t max_pos,
                            bool beyond_positions) {
  nlohmann::json out = {{"zeroplan_version", ZEROPLAN_VERSION},
                        {"model", model_to_json(w)},
                        {"cluster", cluster_to_json(w)},
                        {"max_seq_len", m.lo},
                        {"sequence_parallel_size", m.base.train.sequence_parallel},
                        {"recommendation", nullptr},
                        {"next_seq_len", m.hi},
                        {"limit", m.limit},
                        {"sweep", nlohmann::json::array()}};
  if (m.best)
    out["recommendation"] =
        plan_to_json(m.at(m.best->seq, m.best->offloaded), *m.best->result.recommendation);
  for (const Probe& p : m.sweep) {
    nlohmann::json row = {{"seq_len", p.seq}, {"fits", p.fits()}};
    if (p.fits()) {
      row["peak"] = p.result.recommendation->memory.peak;
      row["tokens_per_s"] = p.result.recommendation->tokens_per_s;
      row["plan"] = describe(p);
      row["checkpoint_offload"] = p.offloaded;
    }
    out["sweep"].push_back(row);
  }
  if (beyond_positions) out["warnings"].push_back(fmt::format("beyond max_position_embeddings {}", max_pos));
  return out;
}

// How the SP size was chosen, for the header.
std::string sp_phrase(const PlanFlags& flags, const MaxSeq& m) {
  const int sp = m.base.train.sequence_parallel;
  if (sp <= 1)
    return flags.sp.empty() ? ", no sequence parallelism (no Ulysses size > 1 applies here)" : std::string();
  return flags.sp.empty()
             ? fmt::format(", Ulysses sp {} (the largest the GPUs and the heads allow; --sp to fix another)",
                           sp)
             : fmt::format(", Ulysses sp {}", sp);
}

std::string max_seq_text(const PlanFlags& flags, const planner::Workload& w, const MaxSeq& m, int64_t max_pos,
                         bool beyond_positions) {
  std::string s = fmt::format("{} on {} GPUs ({}x{}x{}), micro-batch {}{}: the longest sequence that fits\n",
                              w.model.name, w.cluster.world_size(), w.cluster.nodes, w.cluster.gpus_per_node,
                              w.cluster.gpu.name,
                              m.base.train.micro_batch ? fmt::format("{}", *m.base.train.micro_batch)
                                                       : std::string("from --global-batch"),
                              sp_phrase(flags, m));
  s += fmt::format("\n{:>9}  {:<4}  {:>8}  {:>10}  {}\n", "seq", "fits", "peak GB", "tokens/s", "plan");
  for (const Probe& p : m.sweep) {
    if (p.fits()) {
      const planner::Plan& r = *p.result.recommendation;
      s += fmt::format("{:>9}  {:<4}  {:>8}  {:>10.0f}  {}\n", p.seq, "yes", gb(r.memory.peak),
                       r.tokens_per_s, describe(p));
    } else {
      s += fmt::format("{:>9}  {:<4}  {:>8}  {:>10}  {}\n", p.seq, "no", "-", "-", "nothing fits");
    }
  }
  if (m.lo == 0) return s + fmt::format("\nNothing fits even at {} tokens. {}\n", kStep, m.limit);
  const planner::Plan& r = *m.best->result.recommendation;
  s += fmt::format(
      "\nLongest sequence that fits: {} tokens (searched in steps of {}), with {}: peak {} GB of {} "
      "GB usable, {:.0f} tokens/s.\n",
      m.lo, kStep, describe(*m.best), gb(r.memory.peak), gb(r.capacity_bytes), r.tokens_per_s);
  if (m.hi > 0) s += fmt::format("At {} tokens: {}\n", m.hi, m.limit);
  if (beyond_positions) {
    // What running past max_position_embeddings means depends on the position encoding
    // (models/model_spec.h PositionKind): a learned table (GPT-2's wpe, OPT's embed_positions) has no row
    // for those positions; rotary ones need a scaling rule to stay in the trained range; ALiBi and NoPE
    // layers (Granite-4.0-H's) take any length but were trained on max_position_embeddings.
    const auto pos = w.model.position;
    const char* what = pos == models::PositionKind::Rotary
                           ? "training there needs RoPE scaling in the model config"
                       : pos == models::PositionKind::Learned
                           ? "its learned position table has no rows past it: the model cannot run there "
                             "without a larger table"
                       : pos == models::PositionKind::NoPE
                           ? "it has no position encoding (NoPE), so any length runs, but it was not trained "
                             "on sequences this long"
                           : "ALiBi takes any length, but the model was not trained on sequences this long";
    s += fmt::format("Note: {} tokens is beyond the model's max_position_embeddings ({}); {}.\n", m.lo,
                     max_pos, what);
  }
  if (m.best->offloaded)
    s += w.train.deepspeed_checkpointing
             ? "Checkpoint offload: activation_checkpointing.cpu_checkpointing in the DeepSpeed config.\n"
             : "Checkpoint offload: run each step inside DeepSpeed's "
               "get_checkpoint_hidden_states_offloading_ctx_manager() (offload_activations.py, DeepSpeed "
               ">= 0.19.6).\n";
  // The kernels change the training script, not the config: named, not searched (each is one flag).
  std::vector<std::string> untried;
  if (!w.train.liger) untried.emplace_back("liger (Liger's fused linear cross-entropy: no b*s*V logits)");
  if (!w.train.tiled_mlp && !w.model.is_moe() && !w.model.params_only)
    untried.emplace_back("tiled-mlp (DeepSpeed's TiledMLP: the MLP in sequence shards)");
  if (!untried.empty()) {
    s += "Longer with --kernels ";
    for (size_t i = 0; i < untried.size(); ++i) s += (i ? ", " : "") + untried[i];
    s += " (the ALST recipe; they change the training script).\n";
  }
  if (!m.try_offload && flags.checkpoint_offload.empty())
    s += "Not searched: checkpoint offload (not with this stack).\n";
  return s;
}

}  // namespace

CommandResult run_max_seq(const PlanFlags& flags, const planner::SearchOptions& opts,
                          const planner::Workload& w) {
  if (!flags.emit.empty() || !flags.html.empty() || flags.explain || flags.explain_time ||
      !flags.compare.empty())
    throw UserError(
        "--max-seq answers one question (the longest sequence that fits); run the plan at that length with "
        "--seq-len N for --emit, --html, --explain or --compare");
  const MaxSeq m = search_max_seq(flags, opts, w);
  const int64_t max_pos = w.model.max_position_embeddings;
  const bool beyond_positions = m.lo > 0 && max_pos > 0 && m.lo > max_pos;
  if (flags.json) {
    write_answer(max_seq_json(w, m, max_pos, beyond_positions).dump(2) + "\n");
    return m.lo > 0 ? 0 : 1;
  }
  write_answer(max_seq_text(flags, w, m, max_pos, beyond_positions));
  return m.lo > 0 ? 0 : 1;
}

}  // namespace zeroplan::cli
