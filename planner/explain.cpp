#include "planner/explain.h"

#include <fmt/format.h>

namespace zeroplan::planner {

namespace {

std::string phases_string(uint8_t phases) {
  std::string s;
  for (int p = 0; p < kNumPhases; ++p) {
    if (!(phases & (1 << p))) continue;
    if (!s.empty()) s += "+";
    s += phase_name(p);
  }
  return s.empty() ? "-" : s;
}

double gib(int64_t b) {
  return static_cast<double>(b) / 1073741824.0;
}

}  // namespace

std::string render_explain(const Workload& w, const Plan& p) {
  const MemoryBreakdown& m = p.memory;
  std::string out;
  out += fmt::format("Memory of one GPU (stage {}, micro-batch {}, seq {}, checkpointing {}, {} GPUs)\n",
                     p.zero.stage, p.zero.micro_batch, p.seq_len, to_string(p.zero.checkpointing),
                     w.cluster.world_size());
  out += fmt::format("  {:<46} {:<16} {:>10} {:>16}  {:<24} {}\n", "buffer", "category", "GiB", "bytes",
                     "live in", "size from");
  for (int i = 0; i < m.num_gpu; ++i) {
    const Buffer& b = m.gpu[static_cast<size_t>(i)];
    out += fmt::format("  {:<46} {:<16} {:>10.3f} {:>16}  {:<24} {}\n", b.name, category_name(b.category),
                       gib(b.bytes), b.bytes, phases_string(b.phases), b.note);
  }
  out += "  per-phase totals:";
  for (int ph = 0; ph < kNumPhases; ++ph)
    out += fmt::format("  {} {:.3f} GiB{}", phase_name(ph), gib(m.phase_total[static_cast<size_t>(ph)]),
                       ph == m.peak_phase ? " (peak)" : "");
  out += "\n";
  out += fmt::format("  peak {:.3f} GiB ({} bytes) in the {} phase; capacity {:.3f} GiB, usable {:.3f} GiB\n",
                     gib(m.peak), m.peak, phase_name(m.peak_phase), gib(w.cluster.gpu.memory_bytes),
                     gib(p.capacity_bytes));
  out += "  at the peak:";
  for (int c = 0; c < kNumCategories; ++c)
    out += fmt::format(" {} {:.3f}", category_name(static_cast<Category>(c)),
                       gib(m.at_peak[static_cast<size_t>(c)]));
  out += " (GiB)\n";

  out += fmt::format("Host memory of one rank ({} ranks per node)\n", w.cluster.gpus_per_node);
  if (m.num_host == 0) out += "  (none beyond the process itself: nothing is offloaded)\n";
  for (int i = 0; i < m.num_host; ++i) {
    const Buffer& b = m.host[static_cast<size_t>(i)];
    out += fmt::format("  {:<46} {:<16} {:>10.3f} {:>16}  {:<24} {}\n", b.name, category_name(b.category),
                       gib(b.bytes), b.bytes, b.pinned ? "pinned" : "pageable", b.note);
  }
  out += fmt::format(
      "  per node: {:.3f} GiB (pinned {:.3f} GiB) while training; {:.3f} GiB while loading the model\n",
      gib(m.host_per_node), gib(m.host_pinned_per_node), gib(m.host_load_per_node));
  return out;
}

}  // namespace zeroplan::planner
