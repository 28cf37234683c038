#include "planner/deepspeed_estimator.h"

#include <fmt/format.h>

#include <algorithm>

#include "planner/memory_model.h"
#include "planner/model_stats.h"

namespace zeroplan::planner {

// Python semantics reproduced: `/` is true division (double), int() truncates toward zero, and
// `a * b * c` evaluates left to right (int * int stays exact, int * float becomes float).

// deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs (v0.16):
//   cpu_offload: gpu = 2*P; cpu = P * max(4*total_gpus, 16) * factor
// (the no-offload GPU term is the one since PR #5099, 2024-06; the docs page still prints the older
// 4*P + int(16*P/N)).
//   else:        gpu = 2*P + int(18*P/total_gpus); cpu = P * 4 * gpus_per_node * factor
DeepSpeedEstimate deepspeed_zero2_estimate(int64_t total_params, int64_t gpus_per_node, int64_t nodes,
                                           bool cpu_offload, double additional_buffer_factor) {
  const int64_t total_gpus = nodes * gpus_per_node;
  DeepSpeedEstimate e;
  double cpu_mem;
  if (cpu_offload) {
    e.gpu_bytes = 2 * total_params;
    cpu_mem =
        static_cast<double>(total_params * std::max<int64_t>(4 * total_gpus, 16)) * additional_buffer_factor;
  } else {
    e.gpu_bytes = 2 * total_params + static_cast<int64_t>(static_cast<double>(18 * total_params) /
                                                          static_cast<double>(total_gpus));
    cpu_mem = static_cast<double>(total_params * 4 * gpus_per_node) * additional_buffer_factor;
  }
  e.cpu_bytes = static_cast<int64_t>(cpu_mem);
  return e;
}

// deepspeed/runtime/zero/stage3.py estimate_zero3_model_states_mem_needs (v0.16):
//   largest_layer_memory = 4 * largest_layer_params; gpus_factor = 1 / num_nodes
//   offload optimizer + params: gpu = llm; cpu = P*18*gf*factor (zero_init) or
//                               P*max(4*gpn, 18*gf)*factor
//   offload optimizer only:     gpu = llm + int(2*P/total_gpus); cpu = P*16*gf*factor or
//                               P*max(4*gpn, 16*gf)*factor
//   no offload:                 gpu = llm + int(18*P/total_gpus); cpu = largest*4*gpn*factor
//                               (zero_init) or P*4*gpn*factor
DeepSpeedEstimate deepspeed_zero3_estimate(int64_t total_params, int64_t largest_layer_params,
                                           int64_t gpus_per_node, int64_t nodes, bool cpu_offload,
                                           bool cpu_offload_params, bool zero_init,
                                           double additional_buffer_factor) {
  const int64_t total_gpus = nodes * gpus_per_node;
  const double gpus_factor = 1.0 / static_cast<double>(nodes);
  const double P = static_cast<double>(total_params);
  DeepSpeedEstimate e;
  e.largest_layer_memory = 4 * largest_layer_params;
  // P * max(4*gpn, k*gf): Python's max returns the int when it wins (ties keep the first argument).
  auto max_term = [&](double k) {
    const double a = static_cast<double>(4 * gpus_per_node), b = k * gpus_factor;
    return b > a ? P * b : static_cast<double>(total_params * 4 * gpus_per_node);
  };
  double cpu_mem;
  if (cpu_offload) {
    if (cpu_offload_params) {
      e.gpu_bytes = e.largest_layer_memory;
      cpu_mem = zero_init ? static_cast<double>(total_params * 18) * gpus_factor * additional_buffer_factor
                          : max_term(18) * additional_buffer_factor;
    } else {
      e.gpu_bytes = e.largest_layer_memory + static_cast<int64_t>(static_cast<double>(2 * total_params) /
                                                                  static_cast<double>(total_gpus));
      cpu_mem = zero_init ? static_cast<double>(total_params * 16) * gpus_factor * additional_buffer_factor
                          : max_term(16) * additional_buffer_factor;
    }
  } else {
    e.gpu_bytes = e.largest_layer_memory + static_cast<int64_t>(static_cast<double>(18 * total_params) /
                                                                static_cast<double>(total_gpus));
    cpu_mem = zero_init
                  ? static_cast<double>(largest_layer_params * 4 * gpus_per_node) * additional_buffer_factor
                  : static_cast<double>(total_params * 4 * gpus_per_node) * additional_buffer_factor;
  }
  e.cpu_bytes = static_cast<int64_t>(cpu_mem);
  return e;
}

std::string format_deepspeed_gib(int64_t bytes) {
  return fmt::format("{:.2f}GB", static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30));
}

namespace {
std::string gib(int64_t b) {
  return fmt::format("{:8.2f} GiB", static_cast<double>(b) / 1073741824.0);
}
}  // namespace

std::string render_deepspeed_comparison(const Workload& w, const Plan& p) {
  const ModelStats s{compute_memory_stats(w), {}};
  const MemoryStats& m = s.mem;
  const auto& z = p.zero;
  const int64_t gpn = w.cluster.gpus_per_node, nodes = w.cluster.nodes;
  // DeepSpeed's estimators count model.parameters() (trainable or not: they know nothing of LoRA).
  const int64_t P = m.total_params;
  DeepSpeedEstimate e;
  std::string which;
  if (z.stage == 3) {
    e = deepspeed_zero3_estimate(P, m.largest_module_numel, gpn, nodes, z.offload_optimizer != Offload::None,
                                 z.offload_param != Offload::None, z.zero_init);
    which = "stage3.py estimate_zero3_model_states_mem_needs";
  } else {
    e = deepspeed_zero2_estimate(P, gpn, nodes, z.offload_optimizer != Offload::None);
    which = "stage_1_and_2.py estimate_zero2_model_states_mem_needs";
  }
  const auto& mem = p.memory;
  std::string out;
  out += fmt::format("DeepSpeed's estimate vs zeroplan (stage {}, offload_optimizer={}, offload_param={})\n",
                     z.stage, to_string(z.offload_optimizer), to_string(z.offload_param));
  out += fmt::format("  DeepSpeed {} (additional_buffer_factor=1.5):\n", which);
  if (z.stage < 2) out += "  (DeepSpeed has no stage-0/1 estimator; its stage-2 formula is shown.)\n";
  if (z.stage == 3 && m.params_only)
    out += "  (--params gives no module sizes: largest_layer_params taken as 0.)\n";
  if (w.train.method != Method::Full)
    out += "  (DeepSpeed's estimator counts every parameter as trainable: it does not know LoRA.)\n";
  out += fmt::format("    per GPU {}   per CPU (node) {}\n", gib(e.gpu_bytes), gib(e.cpu_bytes));
  out += "  zeroplan, per GPU at the peak phase (" + std::string(phase_name(mem.peak_phase)) + "):\n";
  out += fmt::format("    model states       {}\n", gib(mem.model_states()));
  out += fmt::format("    activations        {}   <- not in DeepSpeed's estimate\n",
                     gib(mem.category(Category::Activations)));
  out += fmt::format(
      "    buffers            {}   <- not in DeepSpeed's estimate (buckets, gathered params, logits)\n",
      gib(mem.category(Category::Buffers)));
  out += fmt::format("    overhead           {}   <- not in DeepSpeed's estimate (CUDA context, NCCL)\n",
                     gib(mem.category(Category::Overhead)));
  out += fmt::format("    peak               {}   ({:+.2f} GiB vs DeepSpeed)\n", gib(mem.peak),
                     static_cast<double>(mem.peak - e.gpu_bytes) / 1073741824.0);
  out += fmt::format("  zeroplan host per node {} (pinned {}), at model load {}\n", gib(mem.host_per_node),
                     gib(mem.host_pinned_per_node), gib(mem.host_load_per_node));
  return out;
}

}  // namespace zeroplan::planner
