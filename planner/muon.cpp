#include "planner/muon.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace zeroplan::planner {

bool muon_tensor(const models::TensorSpec& t) {
  if (t.shape.size() < 2 || t.frozen) return false;
  std::string name = t.name;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return name.find("embed") == std::string::npos && name.find("lm_head") == std::string::npos;
}

std::string muon_refusal(const Workload& w) {
  const TrainingSpec& t = w.train;
  if (w.model.params_only)
    return "Muon's state depends on each matrix's shape; use --model instead of --params";
  if (t.deepspeed_version != DeepSpeedVersion::V0_19_8)
    return "Muon is modelled as DeepSpeed 0.19.8 runs it (recorded in tests/deepspeed/fixtures-muon); use "
           "--deepspeed-version 0.19.8";
  if (t.implementation == Implementation::ZeroplanEngine) return "zeroplan's native engine has no Muon";
  if (t.method != Method::Full) return "Muon with LoRA/QLoRA adapters is not modelled; use --method full";
  if (w.model.is_moe())
    return "Muon on MoE experts (DeepSpeed's expert groups, batched Newton-Schulz) is not modelled";
  if (t.precision == Precision::FP16)
    return "Muon is recorded with bf16 and fp32 (not fp16's loss scaling); use --precision bf16";
  if (t.tensor_parallel > 1 || t.sequence_parallel > 1)
    return "Muon beside AutoTP or Ulysses SP is not modelled; drop --tp/--sp";
  return "";
}

double gram_newton_schulz_flops(int64_t rows, int64_t cols) {
  const double n = static_cast<double>(std::min(rows, cols)), m = static_cast<double>(std::max(rows, cols));
  if (n <= 0) return 0;
  if (n == m) return 5 * (4 * n * n * m + 2 * n * n * n);
  return 8 * n * n * m + 30 * n * n * n;
}

namespace {

int64_t partition_of(int64_t numel, int64_t n) {
  // stage_1_and_2.py: the flat group padded to nccl_start_alignment_factor (2) x N, 1/N each.
  const int64_t align = 2 * n;
  return (numel + align - 1) / align * align / n;
}

}  // namespace

namespace {

MuonHoldings compute_holdings(const models::ModelSpec& m, int64_t n);

}  // namespace

// The search evaluates hundreds of candidates of one model and ZeRO group: a small per-thread cache keyed
// on the model's name, family and the shapes its tensors follow from, and N, saves rebuilding the
// inventory for each.
MuonHoldings muon_holdings(const models::ModelSpec& m, int64_t n) {
  struct Entry {
    std::string name, type;
    std::vector<int64_t> shape;
    int64_t n = 0;
    MuonHoldings h;
  };
  constexpr size_t kEntries = 8;
  thread_local std::vector<Entry> cache;
  const std::vector<int64_t> shape = {m.hidden_size,
                                      m.num_layers,
                                      m.intermediate_size,
                                      m.vocab_size,
                                      m.num_heads,
                                      m.kv_heads(),
                                      m.head_dim,
                                      m.num_experts,
                                      int64_t{m.tie_word_embeddings},
                                      static_cast<int64_t>(m.checkpoint_tensors.size())};
  for (const Entry& e : cache)
    if (e.n == n && e.shape == shape && e.name == m.name && e.type == m.model_type) return e.h;
  Entry e{m.name, m.model_type, shape, n, compute_holdings(m, n)};
  if (cache.size() >= kEntries) cache.erase(cache.begin());
  cache.push_back(e);
  return e.h;
}

namespace {

MuonHoldings compute_holdings(const models::ModelSpec& m, int64_t n) {
  MuonHoldings h;
  if (m.params_only || n < 1) return h;
  const std::vector<models::LayerInventory> inventory = m.runtime_inventory();  // the pointers below point in
  std::vector<const models::TensorSpec*> muon;
  for (const auto& layer : inventory)
    for (const auto& t : layer.tensors) {
      if (t.frozen) continue;
      if (muon_tensor(t)) {
        muon.push_back(&t);
        h.muon_params += t.numel();
      } else {
        h.adam_params += t.numel();
      }
    }
  // Python's sorted(..., key=size(), reverse=True): torch.Size compares as a tuple, and the sort is
  // stable, so equal shapes keep module order.
  std::stable_sort(muon.begin(), muon.end(), [](const models::TensorSpec* a, const models::TensorSpec* b) {
    return std::lexicographical_compare(b->shape.begin(), b->shape.end(), a->shape.begin(), a->shape.end());
  });
  h.muon_partition = partition_of(h.muon_params, n);
  h.adam_partition = partition_of(h.adam_params, n);
  std::vector<int64_t> held(static_cast<size_t>(n), 0);
  std::vector<double> flops(static_cast<size_t>(n), 0);
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  const int64_t part = std::max<int64_t>(1, h.muon_partition);
  int64_t lo = 0;
  for (const auto* t : muon) {
    const int64_t hi = lo + t->numel();
    const int64_t rows = t->shape[0];
    const int64_t cols = t->numel() / std::max<int64_t>(1, rows);
    for (int64_t r = lo / part; r <= (hi - 1) / part && r < n; ++r) {
      held[static_cast<size_t>(r)] += t->numel();
      flops[static_cast<size_t>(r)] += gram_newton_schulz_flops(rows, cols);
      ++count[static_cast<size_t>(r)];
    }
    lo = hi;
  }
  h.valid = true;
  h.momentum_rank0 = held[0];
  h.momentum_largest = *std::max_element(held.begin(), held.end());
  h.ns_flops_rank0 = flops[0];
  h.ns_flops_largest = *std::max_element(flops.begin(), flops.end());
  h.matrices_rank0 = count[0];
  h.matrices_largest = *std::max_element(count.begin(), count.end());
  return h;
}

}  // namespace

}  // namespace zeroplan::planner
