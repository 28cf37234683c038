#pragma once
// Tagged memory accounting for one rank. Every tensor the engine allocates names its category
// (the same six names as the planner's MemoryBreakdown: parameters, gradients, optimizer_states,
// activations, buffers, overhead) and its tier (device, or the host tier that optimizer offload
// uses). The tracker keeps live bytes, the peak of each category, the peak of the total with the
// phase it happened in, and per phase the peak total and the categories live at that moment.
//
// Bytes are the bytes the engine asked for (numel x dtype size). The backend rounds allocations up
// to 256 bytes (executor/backend.h); that rounding is the "documented alignment" and is reported
// separately as `alignment_bytes`, never folded into a category.
#include <array>
#include <cstdint>
#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "executor/backend.h"

namespace zeroplan::exec {

enum class MemCategory : uint8_t { Parameters, Gradients, OptimizerStates, Activations, Buffers, Overhead };
inline constexpr int kNumMemCategories = 6;
// Same spelling as planner::category_name (planner/memory_breakdown.h), kept independent on purpose.
std::string_view mem_category_name(MemCategory c);

enum class StepPhase : uint8_t { Forward, Backward, Step };
inline constexpr int kNumStepPhases = 3;
std::string_view step_phase_name(StepPhase p);  // "forward", "backward", "step"

using CategoryBytes = std::array<int64_t, kNumMemCategories>;

struct TierUsage {
  CategoryBytes live{};
  CategoryBytes category_peak{};                              // each category's own maximum
  int64_t peak = 0;                                           // maximum of the total
  StepPhase peak_phase = StepPhase::Forward;                  // the phase the total peaked in
  CategoryBytes at_peak{};                                    // categories live when the total peaked
  std::array<int64_t, kNumStepPhases> phase_peak{};           // maximum total within each phase
  std::array<CategoryBytes, kNumStepPhases> phase_at_peak{};  // categories at each phase's maximum
  int64_t live_total() const {
    int64_t s = 0;
    for (auto b : live) s += b;
    return s;
  }
};

class MemoryTracker {
 public:
  // Entering a phase counts what is live at that moment towards the phase's peak.
  void set_phase(StepPhase p);
  StepPhase phase() const { return phase_; }
  void on_alloc(MemTier tier, MemCategory c, int64_t bytes, int64_t aligned_bytes);
  void on_free(MemTier tier, MemCategory c, int64_t bytes, int64_t aligned_bytes);
  const TierUsage& device() const { return tiers_[0]; }
  const TierUsage& host() const { return tiers_[1]; }
  int64_t alignment_bytes_peak() const { return align_peak_; }
  // Forget peaks (keep live bytes): measure a later step on its own.
  void reset_peaks();

 private:
  std::array<TierUsage, 2> tiers_{};
  StepPhase phase_ = StepPhase::Forward;
  int64_t align_live_ = 0, align_peak_ = 0;
};

// A caching pool in front of Backend::allocate/release, in the spirit of PyTorch's caching
// allocator: a released block is kept and handed out again for the next request of the same
// rounded size and tier. Every micro-step allocates the same tensors in the same order, so from the
// second one on the engine takes no memory from the device (no cudaMalloc/cudaFree, which
// synchronises the device, in the step). `reserved` is what the pool holds from the backend (live +
// cached): the engine's physical footprint, >= the tracker's logical bytes; the difference is the
// pool's fragmentation.
class CachingPool {
 public:
  explicit CachingPool(Backend& be) : be_(be) {}
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;
  ~CachingPool();
  void* take(int64_t bytes, MemTier tier);
  void give(void* p, int64_t bytes, MemTier tier);
  Backend& backend() const { return be_; }
  int64_t reserved(MemTier t) const { return reserved_[static_cast<int>(t)]; }
  int64_t reserved_peak(MemTier t) const { return reserved_peak_[static_cast<int>(t)]; }

 private:
  Backend& be_;
  // (tier, rounded size) -> cached blocks
  std::map<std::pair<int, int64_t>, std::vector<void*>> free_;
  std::array<int64_t, 2> reserved_{}, reserved_peak_{};
};

// One allocation of `numel` elements of `dtype`, tagged; freed by its destructor (RAII) or reset().
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& be, MemoryTracker& tr, MemTier tier, MemCategory c, int64_t numel, DType dtype);
  // Through a caching pool (the engine's way).
  DeviceBuffer(CachingPool& pool, MemoryTracker& tr, MemTier tier, MemCategory c, int64_t numel, DType dtype);
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  void reset();

  void* data() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  // Pointer to element `i` (in elements of this buffer's dtype).
  void* at(int64_t i) const { return static_cast<char*>(ptr_) + i * dtype_bytes(dtype_); }
  int64_t numel() const { return numel_; }
  int64_t bytes() const { return numel_ * dtype_bytes(dtype_); }
  DType dtype() const { return dtype_; }
  MemTier tier() const { return tier_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  Backend* be_ = nullptr;
  CachingPool* pool_ = nullptr;
  MemoryTracker* tr_ = nullptr;
  void* ptr_ = nullptr;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  MemTier tier_ = MemTier::Device;
  MemCategory cat_ = MemCategory::Overhead;
};

// The backend's allocation granularity (executor/backend.h: "aligned to 256 bytes").
inline constexpr int64_t kAllocAlignment = 256;
inline int64_t aligned_size(int64_t bytes) {
  return (bytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
}

}  // namespace zeroplan::exec
