#include "planner/memory_breakdown.h"

#include <algorithm>

#include "common/checked.h"
#include "common/errors.h"

namespace zeroplan::planner {

std::string_view category_name(Category c) {
  switch (c) {
    case Category::Parameters:
      return "parameters";
    case Category::Gradients:
      return "gradients";
    case Category::OptimizerStates:
      return "optimizer_states";
    case Category::Activations:
      return "activations";
    case Category::Buffers:
      return "buffers";
    case Category::Overhead:
      return "overhead";
  }
  return "unknown";
}

std::string_view phase_name(int phase_index) {
  switch (phase_index) {
    case 0:
      return "forward";
    case 1:
      return "backward";
    case 2:
      return "step";
    default:
      return "unknown";
  }
}

Buffer& MemoryBreakdown::add_gpu(const char* name, Category c, int64_t bytes, uint8_t phases,
                                 const char* note) {
  ZP_CHECK(num_gpu < kMaxBuffers, "too many GPU buffers ({})", num_gpu);
  ZP_CHECK(bytes >= 0, "negative buffer size for {}", name);
  Buffer& b = gpu[static_cast<size_t>(num_gpu++)];
  b.name = name;
  b.category = c;
  b.bytes = bytes;
  b.phases = phases;
  b.note = note;
  b.pinned = false;
  b.ds_name = nullptr;
  b.after_step = true;
  b.backward_moment = Buffer::Moment::Whole;
  return b;
}

Buffer& MemoryBreakdown::add_host(const char* name, Category c, int64_t bytes, bool pinned,
                                  const char* note) {
  ZP_CHECK(num_host < kMaxBuffers, "too many host buffers ({})", num_host);
  ZP_CHECK(bytes >= 0, "negative buffer size for {}", name);
  Buffer& b = host[static_cast<size_t>(num_host++)];
  b.name = name;
  b.category = c;
  b.bytes = bytes;
  b.phases = kAllPhases;
  b.note = note;
  b.pinned = pinned;
  b.ds_name = nullptr;
  b.after_step = true;
  return b;
}

int64_t MemoryBreakdown::saved_activation_bytes() const {
  int64_t sum = 0;
  for (int i = 0; i < num_gpu; ++i) {
    const Buffer& b = gpu[static_cast<size_t>(i)];
    const bool saved =
        (b.phases & kForward) || (b.forward_moment == Buffer::ForwardMoment::Head && (b.phases & kBackward));
    if (b.category == Category::Activations && saved) sum = checked_add(sum, b.bytes);
  }
  return sum;
}

int64_t MemoryBreakdown::after_step_bytes(Category c, bool with_host) const {
  int64_t sum = 0;
  for (int i = 0; i < num_gpu; ++i) {
    const Buffer& b = gpu[static_cast<size_t>(i)];
    const bool held_after = (b.phases & kStep) || b.step_moment == Buffer::StepMoment::Outside;
    if (b.category == c && b.after_step && held_after) sum = checked_add(sum, b.bytes);
  }
  if (with_host)
    for (int i = 0; i < num_host; ++i) {
      const Buffer& b = host[static_cast<size_t>(i)];
      if (b.category == c && b.after_step) sum = checked_add(sum, b.bytes);
    }
  return sum;
}

namespace {

// Of two moments within `phase` (Buffer::step_moment / forward_moment values `a` and `b`), the one whose
// buffers hold fewer bytes: finalize() drops it from the phase (ties drop `a`).
template <typename M>
M smaller_moment(const MemoryBreakdown& m, Phase phase, M Buffer::*moment, M a, M b) {
  int64_t at_a = 0, at_b = 0;
  for (int i = 0; i < m.num_gpu; ++i) {
    const Buffer& buf = m.gpu[static_cast<size_t>(i)];
    if (!(buf.phases & phase)) continue;
    if (buf.*moment == a) at_a = checked_add(at_a, buf.bytes);
    if (buf.*moment == b) at_b = checked_add(at_b, buf.bytes);
  }
  return at_a > at_b ? b : a;
}

}  // namespace

// The peak is the largest per-phase sum of the buffers live in that phase: a buffer that lives only
// in the backward (the gradient bucket) and one that lives only in the step (the fp32 gradient
// copy) never add up.
void MemoryBreakdown::finalize(int ranks_per_node) {
  // The backward phase is its largest moment (Buffer::Moment): the loss's backward (saved activations
  // and loss gradients alive), the layers' backward (the activations left, a recomputed layer, the
  // gradients arriving) or its end (every full gradient and the reduction over them).
  // Which of the three moments (bit 0 start, 1 layers, 2 end) a buffer of each Buffer::Moment is alive in,
  // indexed by the enum's value (Whole, Start, End, LossStart, Layers).
  constexpr std::array<uint8_t, 5> kAliveIn = {0b111, 0b011, 0b100, 0b001, 0b010};
  constexpr size_t kNumMoments = 3;
  const auto alive_at = [&](Buffer::Moment b, size_t moment) {
    return (kAliveIn[static_cast<size_t>(b)] >> moment) & 1U;
  };
  std::array<int64_t, 3> at_moment{};  // start, layers, end
  for (int i = 0; i < num_gpu; ++i) {
    const Buffer& b = gpu[static_cast<size_t>(i)];
    if (!(b.phases & kBackward)) continue;
    for (size_t k = 0; k < kNumMoments; ++k)
      if (alive_at(b.backward_moment, k)) at_moment[k] = checked_add(at_moment[k], b.bytes);
  }
  // Model states at their largest, over forward, every backward moment and the step (before the
  // smaller backward moments are dropped below): what the GPU must hold for parameters, gradients and
  // optimizer states whichever moment peaks.
  {
    const auto is_state = [](const Buffer& b) {
      return b.category == Category::Parameters || b.category == Category::Gradients ||
             b.category == Category::OptimizerStates;
    };
    std::array<int64_t, 5> at{};  // forward, backward start, layers, end, step
    for (int i = 0; i < num_gpu; ++i) {
      const Buffer& b = gpu[static_cast<size_t>(i)];
      if (!is_state(b)) continue;
      if (b.phases & kForward) at[0] = checked_add(at[0], b.bytes);
      for (size_t k = 0; k < kNumMoments; ++k)
        if ((b.phases & kBackward) && alive_at(b.backward_moment, k))
          at[k + 1] = checked_add(at[k + 1], b.bytes);
      if (b.phases & kStep) at[4] = checked_add(at[4], b.bytes);
    }
    model_states_max = *std::max_element(at.begin(), at.end());
  }
  // The moment kept: the largest; ties keep the earlier (start before layers before end).
  size_t kept = 0;
  for (size_t k = 1; k < kNumMoments; ++k)
    if (at_moment[k] > at_moment[kept]) kept = k;
  // The step likewise: the norm's moment or the update's; and the forward: before the head or at the
  // loss.
  const Buffer::StepMoment step_dropped = smaller_moment(
      *this, kStep, &Buffer::step_moment, Buffer::StepMoment::Norm, Buffer::StepMoment::Update);
  const Buffer::ForwardMoment forward_dropped = smaller_moment(
      *this, kForward, &Buffer::forward_moment, Buffer::ForwardMoment::Body, Buffer::ForwardMoment::Head);
  for (int i = 0; i < num_gpu; ++i) {
    Buffer& b = gpu[static_cast<size_t>(i)];
    if (!alive_at(b.backward_moment, kept)) b.phases = static_cast<uint8_t>(b.phases & ~kBackward);
    if (b.step_moment == step_dropped || b.step_moment == Buffer::StepMoment::Outside)
      b.phases = static_cast<uint8_t>(b.phases & ~kStep);
    if (b.forward_moment == forward_dropped) b.phases = static_cast<uint8_t>(b.phases & ~kForward);
  }
  phase_total.fill(0);
  for (int i = 0; i < num_gpu; ++i) {
    const Buffer& b = gpu[static_cast<size_t>(i)];
    for (int p = 0; p < kNumPhases; ++p)
      if (b.phases & (1 << p))
        phase_total[static_cast<size_t>(p)] = checked_add(phase_total[static_cast<size_t>(p)], b.bytes);
  }
  peak_phase = 0;
  for (int p = 1; p < kNumPhases; ++p)
    if (phase_total[static_cast<size_t>(p)] > phase_total[static_cast<size_t>(peak_phase)]) peak_phase = p;
  peak = phase_total[static_cast<size_t>(peak_phase)];
  at_peak.fill(0);
  for (int i = 0; i < num_gpu; ++i) {
    const Buffer& b = gpu[static_cast<size_t>(i)];
    if (b.phases & (1 << peak_phase)) at_peak[static_cast<size_t>(b.category)] += b.bytes;
  }
  int64_t host_rank = 0, pinned_rank = 0;
  for (int i = 0; i < num_host; ++i) {
    const Buffer& b = host[static_cast<size_t>(i)];
    host_rank = checked_add(host_rank, b.bytes);
    if (b.pinned) pinned_rank = checked_add(pinned_rank, b.bytes);
  }
  const int64_t r = std::max(1, ranks_per_node);
  host_per_node = checked_mul(host_rank, r);
  host_pinned_per_node = checked_mul(pinned_rank, r);
}

}  // namespace zeroplan::planner
