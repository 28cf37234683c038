#pragma once
// DeepSpeed 0.19.8's Muon (ds_config optimizer.type "muon", runtime/zero/muon/muon_optimizer.py
// MuonWithAuxAdam) at ZeRO stages 1 and 2, as recorded on CPU ranks (tests/deepspeed/fixtures-muon,
// docs/conformance-muon.md):
// - deepspeed/__init__.py set_optimizer_flags tags a parameter use_muon when its layer shape has >= 2
//   dimensions and its name contains neither "embed" nor "lm_head"; the rest (embeddings, the head,
//   norms, biases) go to an auxiliary Adam. engine.py _muon_param_groups makes two param groups, Muon's
//   first, and original_muon.py MuonWithAuxAdam sorts Muon's by shape, largest first
//   (`sorted(params, key=lambda x: x.size(), reverse=True)`, stable).
// - stage_1_and_2.py partitions each group on its own (padded to 2N elements, 1/N per rank). The Adam
//   group keeps exp_avg + exp_avg_sq (fp32) of its partition. The Muon group keeps, instead, one
//   momentum buffer over the WHOLE matrices that overlap the rank's partition (_muon_momentum_buffer:
//   `sum(t.numel() for t in tensor_list)`, in the gradient's dtype), and a staged copy of it
//   (_muon_staging_momentum, kept between steps).
// - The step orthogonalizes each held matrix with 5 Newton-Schulz iterations (muon_update,
//   ns_method "gram" by default: zeropower_via_gram_newtonschulz).
#include <cstdint>
#include <string>

#include "models/model_spec.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

// Why --optimizer muon cannot be planned for this workload ("" when it can). What is modelled is what was
// recorded: full training of a dense model, bf16 or fp32, pure data parallel, DeepSpeed 0.19.8; the
// stage (1-2) and the optimizer on the GPU are the search's to keep (planner/search.cpp Knobs::offered).
std::string muon_refusal(const Workload& w);

// DeepSpeed's tagging (deepspeed/__init__.py set_optimizer_flags).
bool muon_tensor(const models::TensorSpec& t);

struct MuonHoldings {
  bool valid = false;
  int64_t muon_params = 0, adam_params = 0;        // trainable elements of each group
  int64_t muon_partition = 0, adam_partition = 0;  // each group's per-rank partition (padded / N)
  int64_t momentum_rank0 = 0;    // elements of the whole Muon matrices overlapping rank 0's partition
  int64_t momentum_largest = 0;  // the most any rank holds
  double ns_flops_rank0 = 0, ns_flops_largest = 0;   // Newton-Schulz FLOPs of those matrices per step
  int64_t matrices_rank0 = 0, matrices_largest = 0;  // how many matrices each orthogonalizes
};

// Matrix products zeropower_via_gram_newtonschulz launches per matrix (5 steps, restart at 2): the Gram
// matrix, 5 R@R, 4 Z@Q, 3 x (Z@R, Z@RZ), the restart's Q@X and X@X^T, and the final Q@X.
inline constexpr int kGramNsProducts = 1 + 5 + 4 + 6 + 2 + 1;

// The groups over `n` ranks (full training; the model's runtime inventory). Invalid for --params models.
MuonHoldings muon_holdings(const models::ModelSpec& m, int64_t n);

// FLOPs of zeropower_via_gram_newtonschulz (5 steps, restart at step 2) on a rows x cols matrix,
// counted from its matrix products (original_muon.py): with n = min and m = max of the two,
// 8 n^2 m + 30 n^3 when n < m, and 5 x (4 n^2 m + 2 n^3) = 30 n^3 for a square one (the standard
// iteration it falls back to).
double gram_newton_schulz_flops(int64_t rows, int64_t cols);

}  // namespace zeroplan::planner
