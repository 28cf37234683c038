#pragma once
// TiledMLP (issue 27 item 1): DeepSpeed's sequence-tiled MLP (deepspeed/runtime/sequence_parallel/
// ulysses_sp.py class TiledMLP, an autograd.Function; the ALST recipe monkey-patches the model's MLP
// forward with it, as the class docstring shows for LlamaMLP). What it changes per decoder layer:
//  - forward: the MLP runs on `shards` chunks of the sequence under torch.no_grad(), and
//    ctx.save_for_backward(x) keeps only the MLP's input (memory_stats.cpp mlp_saved);
//  - backward: for each shard the MLP forward runs again with grad and torch.autograd.backward takes
//    its gradient, which accumulates into x_grad = torch.zeros_like(x): one shard's intermediates
//    and the whole x_grad are alive at once (apply_tiled_mlp_memory);
//  - time: the MLP's GEMMs and activation run once more per micro-step (op_model.cpp), a third time
//    under full checkpointing (the docstring: "the forward occurs twice ... and trice").
// Dense MLPs only: MoE expert blocks are refused.
#include <cstdint>
#include <string>

#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// The shard count: TrainingSpec::tiled_mlp_shards, else the recipe's ceil(seqlen / hidden_size)
// (TiledMLP docstring tiled_mlp_forward) over the rank's seq/sp tokens; at least 1.
int64_t tiled_mlp_shards(const Workload& w);

// The per-token widths of a dense MLP's intermediates: SwiGLU's gate(x), up(x), act(gate(x)) and their
// product (4 x intermediate), a plain MLP's fc1 output and activation (2 x intermediate). What TiledMLP
// stops saving, and what one shard's recompute holds per row.
int64_t tiled_mlp_intermediate_widths(const models::ModelSpec& m);

// Why the plan cannot model TiledMLP for this workload (one sentence naming the flag), or "".
std::string tiled_mlp_refusal(const Workload& w);

// Applied by estimate_memory before finalize() (w.train.tiled_mlp only): the backward's working set,
// one shard's recomputed intermediates and the whole x_grad.
void apply_tiled_mlp_memory(const Workload& w, const ModelStats& s, const ZeroConfig& z, MemoryBreakdown& m);

}  // namespace zeroplan::planner
