// `zeroplan --model M --gpus G --max-seq` (issue 27 item 3, without sequence parallelism yet): the longest
// sequence that fits, searched over everything the plan search tries (stage, offload, checkpointing,
// buckets; the kernels the user names with --kernels), what limits it one step further, and a table of
// peak memory and throughput against the sequence length.
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
#include "planner/reasons.h"
#include "planner/search.h"

namespace zeroplan::cli {

namespace {

constexpr int64_t kStep = 1024;  // granularity of the answer (tokens)

struct Probe {
  int64_t seq = 0;
  planner::SearchResult result;
  bool fits() const { return result.recommendation.has_value(); }
};

std::string gb(int64_t b) {
  return fmt::format("{:.1f}", static_cast<double>(b) / 1e9);
}

}  // namespace

CommandResult run_max_seq(const PlanFlags& flags, const planner::SearchOptions& opts,
                          const planner::Workload& w) {
  if (!flags.emit.empty() || !flags.html.empty() || flags.explain || flags.explain_time ||
      !flags.compare.empty())
    throw UserError(
        "--max-seq answers one question (the longest sequence that fits); run the plan at that length with "
        "--seq-len N for --emit, --html, --explain or --compare");
  planner::Workload base = w;
  if (!base.train.micro_batch && !base.train.global_batch) base.train.micro_batch = 1;
  auto probe = [&](int64_t seq) {
    planner::Workload v = base;
    v.train.seq_len = seq;
    const planner::ModelStats s = planner::compute_model_stats(v);
    return Probe{seq, planner::search_plans(v, s, opts)};
  };

  std::vector<Probe> sweep;  // the doubling probes, for the table
  int64_t lo = 0, hi = 0;
  for (int64_t seq = kStep; seq <= kMaxSeqLen; seq *= 2) {
    sweep.push_back(probe(seq));
    if (!sweep.back().fits()) {
      hi = seq;
      break;
    }
    lo = seq;
  }
  std::optional<Probe> best;
  for (const Probe& p : sweep)
    if (p.fits() && p.seq == lo) best = p;
  if (lo > 0 && hi > 0) {
    while (hi - lo > kStep) {
      const int64_t mid = lo + (hi - lo) / 2 / kStep * kStep;
      Probe p = probe(mid);
      if (p.fits()) {
        lo = mid;
        best = std::move(p);
      } else {
        hi = mid;
      }
    }
  }
  // Why one step further does not fit: the full search with its reasons at the first failing length.
  std::string limit;
  if (hi > 0) {
    planner::Workload v = base;
    v.train.seq_len = hi;
    const planner::SearchResult r = planner::search(v, opts);
    limit = r.no_fit_reason;
  }
  const int64_t max_pos = w.model.max_position_embeddings;
  const bool beyond_positions = lo > 0 && max_pos > 0 && lo > max_pos;

  if (flags.json) {
    nlohmann::json out = {{"zeroplan_version", ZEROPLAN_VERSION},
                          {"model", model_to_json(w)},
                          {"cluster", cluster_to_json(w)},
                          {"max_seq_len", lo},
                          {"recommendation", nullptr},
                          {"next_seq_len", hi},
                          {"limit", limit},
                          {"sweep", nlohmann::json::array()}};
    if (best) {
      planner::Workload v = base;
      v.train.seq_len = best->seq;
      out["recommendation"] = plan_to_json(v, *best->result.recommendation);
    }
    for (const Probe& p : sweep) {
      nlohmann::json row = {{"seq_len", p.seq}, {"fits", p.fits()}};
      if (p.fits()) {
        row["peak"] = p.result.recommendation->memory.peak;
        row["tokens_per_s"] = p.result.recommendation->tokens_per_s;
        row["plan"] = planner::describe_config(p.result.recommendation->zero);
      }
      out["sweep"].push_back(row);
    }
    if (beyond_positions)
      out["warnings"].push_back(fmt::format("beyond max_position_embeddings {}", max_pos));
    write_answer(out.dump(2) + "\n");
    return lo > 0 ? 0 : 1;
  }

  std::string s =
      fmt::format("{} on {} GPUs ({}x{}x{}), micro-batch {}: the longest sequence that fits\n", w.model.name,
                  w.cluster.world_size(), w.cluster.nodes, w.cluster.gpus_per_node, w.cluster.gpu.name,
                  base.train.micro_batch ? fmt::format("{}", *base.train.micro_batch)
                                         : std::string("from --global-batch"));
  s += fmt::format("\n{:>9}  {:<4}  {:>8}  {:>10}  {}\n", "seq", "fits", "peak GB", "tokens/s", "plan");
  for (const Probe& p : sweep) {
    if (p.fits()) {
      const planner::Plan& r = *p.result.recommendation;
      s += fmt::format("{:>9}  {:<4}  {:>8}  {:>10.0f}  {}\n", p.seq, "yes", gb(r.memory.peak),
                       r.tokens_per_s, planner::describe_config(r.zero));
    } else {
      s += fmt::format("{:>9}  {:<4}  {:>8}  {:>10}  {}\n", p.seq, "no", "-", "-", "nothing fits");
    }
  }
  if (lo == 0) {
    s += fmt::format("\nNothing fits even at {} tokens. {}\n", kStep, limit);
    write_answer(s);
    return 1;
  }
  const planner::Plan& r = *best->result.recommendation;
  s += fmt::format(
      "\nLongest sequence that fits: {} tokens (searched in steps of {}), with {}: peak {} GB of {} "
      "GB usable, {:.0f} tokens/s.\n",
      lo, kStep, planner::describe_config(r.zero), gb(r.memory.peak), gb(r.capacity_bytes), r.tokens_per_s);
  if (hi > 0) s += fmt::format("At {} tokens: {}\n", hi, limit);
  if (beyond_positions)
    s += fmt::format(
        "Note: {} tokens is beyond the model's max_position_embeddings ({}); training there needs "
        "RoPE scaling in the model config.\n",
        lo, max_pos);
  s += "Not searched yet: sequence parallelism (Ulysses/ALST), TiledMLP, checkpoint offload.\n";
  write_answer(s);
  return 0;
}

}  // namespace zeroplan::cli
