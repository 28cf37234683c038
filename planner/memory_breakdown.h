#pragma once
// MemoryBreakdown: the memory model's result, a list of named buffers with lifetimes. The peak is
// the largest sum over phases of the buffers live in that phase (never a sum of per-buffer maxima).
// Category names are shared with the executor's Measurement so reports compare line by line.
#include <array>
#include <cstdint>
#include <string_view>

namespace zeroplan::planner {

enum class Category : uint8_t { Parameters, Gradients, OptimizerStates, Activations, Buffers, Overhead };
inline constexpr int kNumCategories = 6;
std::string_view category_name(Category c);  // "parameters", "gradients", "optimizer_states", ...

enum Phase : uint8_t { kForward = 1, kBackward = 2, kStep = 4, kAllPhases = 7 };
inline constexpr int kNumPhases = 3;
std::string_view phase_name(int phase_index);  // 0 forward, 1 backward, 2 step

// A named buffer. `name` and `note` point at string literals (no allocation: the search evaluates
// millions of plans per second).
struct Buffer {
  const char* name = "";
  Category category = Category::Overhead;
  int64_t bytes = 0;
  uint8_t phases = kAllPhases;  // bitmask of Phase
  const char* note = "";        // where the size comes from (formula/source), for --explain
  bool pinned = false;          // host buffers: page-locked (cudaHostAlloc) memory
  // The DeepSpeed attribute holding it ("optimizer.fp32_groups_flat"), for the conformance test's
  // byte-exact comparison with recorded runs (tests/deepspeed/fixtures); null when it is no single
  // DeepSpeed attribute (activations, autograd transients).
  const char* ds_name = nullptr;
  // Still allocated after the optimizer step (DeepSpeed frees 16-bit gradients and their fp32 copies
  // at the end of step(); partitioned stage-3 gradient buffers and model weights stay).
  bool after_step = true;
  // Within the backward, three moments: the loss's backward (its start: every saved activation, the
  // loss's own tensors and gradients), the decoder layers' backward (the saved activations and a
  // checkpointed layer's recomputed working set), and its end (full gradients and the reductions over
  // them). A buffer is alive at the start only (LossStart: the fp32 log-probabilities and loss
  // gradients, freed before any layer's backward), at the start and through the layers (Start: saved
  // activations, freed layer by layer), through the layers only (Layers: the recomputed working set), at
  // the end only (End), or throughout (Whole). The layers' moment leaves out the End buffers (gradient
  // buckets, which arrive from the head's gradient on) as the two-moment model before it did; it is never
  // larger than the start without a Layers buffer, so only checkpointed plans can peak there.
  // finalize() keeps the backward phase at its largest moment and drops the buffers not alive in it.
  // (memory_breakdown.cpp finalize indexes a table by these values: keep the order.)
  enum class Moment : uint8_t { Whole, Start, End, LossStart, Layers };
  Moment backward_moment = Moment::Whole;
  // Within the step: alive while the gradient norm is computed only (stage 1/2's fp64 copy of one
  // gradient, get_grad_norm_direct), while the optimizer updates only (the flat gradient partition
  // and its fp32 copy, created after the norm), or throughout. finalize() keeps the step phase at the
  // larger of the two, as it does for the backward. Outside: released when the step begins and
  // restored when it ends (stage 3's persistent parameters), so alive after the step but at neither
  // moment.
  enum class StepMoment : uint8_t { Whole, Norm, Update, Outside };
  StepMoment step_moment = StepMoment::Whole;
  // Within the forward: alive before the head only (stage 3's coalesced all-gather flat buffer, freed
  // when the head's parameters are waited), at the loss only (logits, their fp32 upcast, the
  // log-probabilities), or throughout. finalize() keeps the forward at the larger moment.
  enum class ForwardMoment : uint8_t { Whole, Body, Head };
  ForwardMoment forward_moment = ForwardMoment::Whole;
};

// Fixed capacity so evaluation never allocates.
inline constexpr int kMaxBuffers = 48;

struct MemoryBreakdown {
  // Default-built (every Buffer member has its initializer), not value-initialized: zeroing them
  // first cost an evaluation as much as building them.
  std::array<Buffer, kMaxBuffers> gpu;
  int num_gpu = 0;
  std::array<Buffer, kMaxBuffers> host;
  int num_host = 0;

  // Filled by finalize(): per-phase totals, the peak phase and the per-category bytes in it.
  std::array<int64_t, kNumPhases> phase_total{};
  int peak_phase = 0;
  int64_t peak = 0;
  std::array<int64_t, kNumCategories> at_peak{};  // category bytes live in the peak phase
  int64_t host_per_node = 0;                      // all host buffers of the node's ranks
  int64_t host_pinned_per_node = 0;
  // What one rank pins (the memlock limit, `ulimit -l`, is per process): the node's pinned bytes over its
  // ranks, which pin alike.
  int64_t host_pinned_per_process(int gpus_per_node) const {
    return host_pinned_per_node / (gpus_per_node > 0 ? gpus_per_node : 1);
  }
  // Offloaded model states swapped to NVMe (offload_optimizer/offload_param "nvme"), all the node's
  // ranks together: what the node's NVMe must hold.
  int64_t nvme_per_node = 0;
  // Host memory per node while the model loads (before training starts): every rank materialises
  // the model unless zero.Init partitions it. Reported separately from the steady-state host use.
  int64_t host_load_per_node = 0;

  Buffer& add_gpu(const char* name, Category c, int64_t bytes, uint8_t phases, const char* note = "");
  Buffer& add_host(const char* name, Category c, int64_t bytes, bool pinned, const char* note = "");
  void finalize(int ranks_per_node);
  int64_t category(Category c) const { return at_peak[static_cast<int>(c)]; }
  // Bytes of category `c` on the GPU that stay allocated after the optimizer step (the state the
  // conformance harness records as model_states).
  // `with_host`: add the host buffers of that category (the CPU runtime, where host and "device"
  // memory are the same process memory).
  int64_t after_step_bytes(Category c, bool with_host = false) const;
  // Activations saved by the forward's end (what the harness's saved_tensors_hooks count): those live
  // in the forward, and the loss-moment ones (log-probs) when the forward is kept at its earlier moment.
  int64_t saved_activation_bytes() const;
  // Parameters + gradients + optimizer states at their largest moment (filled by finalize()): the
  // peak moment can be one that holds no gradients yet (the backward's start), so model_states()
  // below, the states in the peak phase, can be smaller.
  int64_t model_states_max = 0;
  int64_t model_states() const {
    return category(Category::Parameters) + category(Category::Gradients) +
           category(Category::OptimizerStates);
  }
};

}  // namespace zeroplan::planner
