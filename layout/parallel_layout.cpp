// ParallelLayout; see parallel_layout.h.
#include "layout/parallel_layout.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/errors.h"

namespace zeroplan::layout {

namespace {

// "1, 2, 4, 8": the divisors of n, for the messages.
std::string divisors(int64_t n) {
  std::string out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  return out;
}

}  // namespace

const char* group_name(GroupKind k) {
  switch (k) {
    case GroupKind::TensorParallel:
      return "tensor-parallel";
    case GroupKind::SequenceParallel:
      return "sequence-parallel";
    case GroupKind::DataParallel:
      return "data-parallel";
    case GroupKind::Zero:
      return "ZeRO (sequence x data parallel)";
    case GroupKind::ExpertParallel:
      return "expert-parallel";
    case GroupKind::ExpertDataParallel:
      return "expert-data-parallel";
    case GroupKind::ZeroSecondary:
      return "ZeRO++ hpZ secondary partition";
  }
  return "?";
}

std::vector<std::string> validate(int nodes, int gpus_per_node, const LayoutSizes& s, const LayoutFacts& f,
                                  bool modelled_tp) {
  std::vector<std::string> why;
  const int64_t world = static_cast<int64_t>(nodes) * gpus_per_node;
  if (s.tp < 1 || s.sp < 1 || s.ep < 1 || s.hpz < 1) {
    why.push_back("--tp, --sp, --ep and --hpz must be at least 1");
    return why;
  }
  // The sizes multiply into the world: DP is what is left.
  if (world % (static_cast<int64_t>(s.tp) * s.sp) != 0)
    why.push_back(
        fmt::format("--tp {} x --sp {} = {} does not divide the {} GPUs; tp x sp must be one of: {}", s.tp,
                    s.sp, s.tp * s.sp, world, divisors(world)));
  // TP splits attention heads and KV heads (DeepSpeed AutoTP shards q/k/v by heads:
  // module_inject/auto_tp.py, tp_shard.py get_shard_size).
  if (s.tp > 1 && f.attention_heads > 0 && f.attention_heads % s.tp != 0)
    why.push_back(fmt::format("--tp {} does not divide the model's {} attention heads; valid --tp: {}", s.tp,
                              f.attention_heads, divisors(f.attention_heads)));
  if (s.tp > 1 && f.kv_heads > 0 && f.kv_heads % s.tp != 0 && s.tp % f.kv_heads != 0)
    why.push_back(fmt::format("--tp {} neither divides nor is a multiple of the model's {} KV heads", s.tp,
                              f.kv_heads));
  // TP's all-reduces run every layer: DeepSpeed keeps the TP group inside a node only when tp <= GPUs
  // per node (contiguous ranks); a wider TP crosses the network on every layer.
  if (s.tp > gpus_per_node)
    why.push_back(
        fmt::format("--tp {} is wider than a node's {} GPUs: every layer's all-reduce would cross the "
                    "network; use --tp {} or less",
                    s.tp, gpus_per_node, gpus_per_node));
  // Ulysses all-to-alls scatter heads and gather the sequence (sequence_parallel/ulysses_sp.py): SP
  // must divide the heads and the sequence.
  if (s.sp > 1 && f.attention_heads > 0 && f.attention_heads % s.sp != 0)
    why.push_back(fmt::format("--sp {} does not divide the model's {} attention heads; valid --sp: {}", s.sp,
                              f.attention_heads, divisors(f.attention_heads)));
  // KV heads: UlyssesSPAttentionHF.__init__ requires kv % sp == 0 or sp % kv == 0 (it replicates KV
  // heads sp / kv times when the group is wider than them).
  if (s.sp > 1 && f.kv_heads > 0 && f.kv_heads % s.sp != 0 && s.sp % f.kv_heads != 0)
    why.push_back(
        fmt::format("--sp {} neither divides nor is a multiple of the model's {} KV heads "
                    "(UlyssesSPAttentionHF requires one or the other)",
                    s.sp, f.kv_heads));
  if (s.sp > 1 && f.seq_len > 0 && f.seq_len % s.sp != 0)
    why.push_back(
        fmt::format("--sp {} does not divide the sequence length {}; Ulysses gives each rank seq/sp tokens",
                    s.sp, f.seq_len));
  // AutoEP: experts split evenly over the EP group (auto_ep_config.py validation), which is carved out
  // of the ZeRO group.
  if (s.ep > 1 && f.routed_experts > 0 && f.routed_experts % s.ep != 0)
    why.push_back(
        fmt::format("--ep {} does not divide the model's {} routed experts per layer; valid --ep: {}", s.ep,
                    f.routed_experts, divisors(f.routed_experts)));
  if (s.ep > 1 && f.routed_experts == 0)
    why.push_back(fmt::format("--ep {}: the model has no routed experts", s.ep));
  if (s.ep > 1 && world % (static_cast<int64_t>(s.tp) * s.sp) == 0) {
    const int64_t zero = world / s.tp;
    if (zero % s.ep != 0)
      why.push_back(fmt::format("--ep {} does not divide the {} ranks ZeRO partitions over; valid --ep: {}",
                                s.ep, zero, divisors(zero)));
  }
  // ZeRO++ hpZ: utils/groups.py _create_zero_param_parallel_group asserts _ensure_divisibility(world, hpz)
  // ("{world} is not divisible by {hpz}").
  if (s.hpz > 1 && world % s.hpz != 0)
    why.push_back(
        fmt::format("--hpz {} does not divide the {} GPUs (DeepSpeed asserts it: utils/groups.py "
                    "_create_zero_param_parallel_group); valid --hpz: {}",
                    s.hpz, world, divisors(world)));
  // DeepSpeed 0.19.8 refuses hpZ with AutoEP at stage 3 (engine.py: "AutoEP with ZeRO Stage 3 does not
  // support hpZeRO secondary tensor groups yet"). Its groups are blocks of consecutive global ranks
  // (utils/groups.py _create_zero_param_parallel_group), not blocks of the ZeRO group. Beside Ulysses SP the
  // ZeRO group is every rank (SP x DP), so the blocks are ZeRO subgroups as without SP (recorded:
  // tests/deepspeed/fixtures-hpz llama-gqa_s3_n4_bf16_hpz2_sp2, losses equal to fixtures-sp's sp2 run).
  // Beside AutoTP a block is TP peers, which hold different shards: recorded, llama-gqa_s3_n4_bf16_hpz2_tp2's
  // first forward already computes a different loss than hpz1_tp2 (7.7022 against 7.7525).
  if (s.hpz > 1 && s.ep > 1)
    why.push_back(
        fmt::format("--hpz {} with --ep {}: DeepSpeed 0.19.8 refuses it (\"AutoEP with ZeRO Stage 3 "
                    "does not support hpZeRO secondary tensor groups yet\")",
                    s.hpz, s.ep));
  if (s.hpz > 1 && s.tp > 1)
    why.push_back(fmt::format(
        "--hpz {} with --tp {}: DeepSpeed 0.19.8 builds hpZ's groups from consecutive global ranks "
        "(utils/groups.py), which beside AutoTP are TP peers holding different shards; recorded on "
        "CPU ranks, the first forward's loss already differs from the same run without hpZ (wrong "
        "weights); use --hpz 1",
        s.hpz, s.tp));
  if (!modelled_tp && s.tp > 1)
    why.push_back(
        fmt::format("--tp {}: tensor parallelism (DeepSpeed AutoTP) is not modelled yet; use --tp 1", s.tp));
  return why;
}

ParallelLayout::ParallelLayout(int nodes, int gpus_per_node, LayoutSizes sizes, const LayoutFacts& facts)
    : nodes_(nodes), gpus_per_node_(gpus_per_node), sizes_(sizes) {
  if (nodes < 1 || gpus_per_node < 1) throw_user_error("a layout needs at least one node of one GPU");
  const std::vector<std::string> why = validate(nodes, gpus_per_node, sizes, facts, /*modelled_tp=*/true);
  if (!why.empty()) throw UserError(why.front());
}

Group ParallelLayout::group(GroupKind kind, int rank) const {
  Group g;
  g.kind = kind;
  const int tp = sizes_.tp, sp = sizes_.sp, dp = this->dp();
  // rank = tp_index + tp * (sp_index + sp * dp_index)
  const int t = rank % tp, q = (rank / tp) % sp, d = rank / (tp * sp);
  const auto at = [&](int ti, int qi, int di) { return ti + tp * (qi + sp * di); };
  switch (kind) {
    case GroupKind::TensorParallel:
      for (int i = 0; i < tp; ++i) g.ranks.push_back(at(i, q, d));
      break;
    case GroupKind::SequenceParallel:
      for (int i = 0; i < sp; ++i) g.ranks.push_back(at(t, i, d));
      break;
    case GroupKind::DataParallel:
      for (int i = 0; i < dp; ++i) g.ranks.push_back(at(t, q, i));
      break;
    case GroupKind::Zero:
    case GroupKind::ExpertParallel:
    case GroupKind::ExpertDataParallel: {
      // The ZeRO group: every SP x DP index of this TP slice, in rank order.
      std::vector<int> zero;
      for (int di = 0; di < dp; ++di)
        for (int qi = 0; qi < sp; ++qi) zero.push_back(at(t, qi, di));
      const auto pos = static_cast<int>(std::find(zero.begin(), zero.end(), rank) - zero.begin());
      const int ep = sizes_.ep;
      if (kind == GroupKind::Zero) {
        g.ranks = zero;
      } else if (kind == GroupKind::ExpertParallel) {
        // Contiguous blocks of ep members (groups.py E+D: the EP group is a block of the DP group).
        const int block = pos / ep;
        for (int i = 0; i < ep; ++i) g.ranks.push_back(zero[static_cast<size_t>(block * ep + i)]);
      } else {
        // The same slot of every block.
        for (int b = 0; b < static_cast<int>(zero.size()) / ep; ++b)
          g.ranks.push_back(zero[static_cast<size_t>(b * ep + pos % ep)]);
      }
      break;
    }
    case GroupKind::ZeroSecondary: {
      const int h = std::max(1, sizes_.hpz);
      for (int i = 0; i < h; ++i) g.ranks.push_back(rank / h * h + i);
      break;
    }
  }
  std::sort(g.ranks.begin(), g.ranks.end());
  g.intra_node = node_of(g.ranks.front()) == node_of(g.ranks.back());
  return g;
}

}  // namespace zeroplan::layout
