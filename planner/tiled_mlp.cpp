// TiledMLP (DeepSpeed ulysses_sp.py); see tiled_mlp.h.
#include "planner/tiled_mlp.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/checked.h"

namespace zeroplan::planner {

int64_t tiled_mlp_shards(const Workload& w) {
  if (w.train.tiled_mlp_shards > 0) return w.train.tiled_mlp_shards;
  const int64_t h = std::max<int64_t>(1, w.model.hidden_size);
  return std::max<int64_t>(1, ceil_div(w.train.rank_seq_len(), h));
}

int64_t tiled_mlp_intermediate_widths(const models::ModelSpec& m) {
  return (m.mlp == models::MlpKind::Gated ? 4 : 2) * m.intermediate_size;
}

std::string tiled_mlp_refusal(const Workload& w) {
  if (!w.train.tiled_mlp) return "";
  if (w.model.params_only)
    return "--kernels tiled-mlp needs the architecture (the MLP's widths); use --model instead of --params";
  if (w.model.is_moe())
    return fmt::format(
        "--kernels tiled-mlp: {} has mixture-of-experts MLPs, whose tiling (TiledMLP over the experts' "
        "token rows) is not modelled; tile dense MLPs only",
        w.model.name);
  if (w.train.implementation == Implementation::ZeroplanEngine)
    return "--kernels tiled-mlp: the executor runs the plain MLP; validate without it";
  return "";
}

void apply_tiled_mlp_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                            MemoryBreakdown& mb) {
  if (!w.train.tiled_mlp || w.model.params_only || w.model.is_moe()) return;
  const int64_t e = s.mem.act_elem_bytes;
  const int64_t h = w.model.hidden_size;
  const int64_t f = w.model.intermediate_size;
  // TiledMLP.backward flattens x to [b*s, h] and chunks the rows into `shards` pieces.
  const int64_t rows = checked_mul(std::max<int64_t>(1, z.micro_batch), w.train.rank_seq_len());
  const int64_t shard_rows = ceil_div(rows, tiled_mlp_shards(w));
  // Recorded inside TiledMLP.backward (tests/deepspeed/fixtures-tiled, docs/conformance-tiled.md: peak
  // above the live bytes at entry, tiny llama b 2 x s 64, h 256, f 512): 1,638,528 + rows per shard x
  // 4,608 B at stage 2 (4 and 2 shards), x 5,632 at stage 3. Per row: one shard's recomputed SwiGLU,
  // gate(x), up(x), act(gate(x)) and their product (4 x f; a plain MLP's fc1 output and activation,
  // 2 x f), and its output (h); stage 3's zero3_linear_wrap keeps one more f-wide tensor. The constant:
  // x_grad = torch.zeros_like(x) over all rows (65,536) and the MLP's weight gradients twice (2 x
  // 786,432), accumulated across shards while ds_grad_is_ready is False.
  const int64_t widths = tiled_mlp_intermediate_widths(w.model) + (z.zero3_linear_wrap() ? f : 0);
  const int64_t shard = checked_mul(checked_mul(shard_rows, widths + h), e);
  const int64_t x_grad = checked_mul(checked_mul(rows, h), e);
  const int64_t mlp_weights = w.train.method == Method::Full ? 3 * h * f : 0;  // gate, up, down (dense)
  const int64_t weight_grads = checked_mul(checked_mul(2, mlp_weights), s.mem.param_elem_bytes);
  mb.add_gpu(
      "TiledMLP backward: one shard's MLP, x_grad, weight gradients", Category::Activations,
      checked_add(checked_add(shard, x_grad), weight_grads), kBackward,
      "ulysses_sp.py TiledMLP.backward: a shard recomputed with grad, zeros_like(x), grads held to the last "
      "shard");
}

}  // namespace zeroplan::planner
