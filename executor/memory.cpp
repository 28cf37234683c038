#include "executor/memory.h"

#include <algorithm>
#include <utility>

#include "common/errors.h"

namespace zeroplan::exec {

std::string_view mem_category_name(MemCategory c) {
  switch (c) {
    case MemCategory::Parameters:
      return "parameters";
    case MemCategory::Gradients:
      return "gradients";
    case MemCategory::OptimizerStates:
      return "optimizer_states";
    case MemCategory::Activations:
      return "activations";
    case MemCategory::Buffers:
      return "buffers";
    case MemCategory::Overhead:
      return "overhead";
  }
  return "?";
}

std::string_view step_phase_name(StepPhase p) {
  switch (p) {
    case StepPhase::Forward:
      return "forward";
    case StepPhase::Backward:
      return "backward";
    case StepPhase::Step:
      return "step";
  }
  return "?";
}

void MemoryTracker::set_phase(StepPhase p) {
  phase_ = p;
  const int pi = static_cast<int>(p);
  for (auto& u : tiers_) {
    const int64_t total = u.live_total();
    if (total > u.phase_peak[pi]) {
      u.phase_peak[pi] = total;
      u.phase_at_peak[pi] = u.live;
    }
  }
}

void MemoryTracker::on_alloc(MemTier tier, MemCategory c, int64_t bytes, int64_t aligned_bytes) {
  TierUsage& u = tiers_[static_cast<int>(tier)];
  const int ci = static_cast<int>(c);
  u.live[ci] += bytes;
  if (u.live[ci] > u.category_peak[ci]) u.category_peak[ci] = u.live[ci];
  const int64_t total = u.live_total();
  const int pi = static_cast<int>(phase_);
  if (total > u.phase_peak[pi]) {
    u.phase_peak[pi] = total;
    u.phase_at_peak[pi] = u.live;
  }
  if (total > u.peak) {
    u.peak = total;
    u.peak_phase = phase_;
    u.at_peak = u.live;
  }
  if (tier == MemTier::Device) {
    align_live_ += aligned_bytes - bytes;
    if (align_live_ > align_peak_) align_peak_ = align_live_;
  }
}

void MemoryTracker::on_free(MemTier tier, MemCategory c, int64_t bytes, int64_t aligned_bytes) {
  TierUsage& u = tiers_[static_cast<int>(tier)];
  u.live[static_cast<int>(c)] -= bytes;
  ZP_CHECK(u.live[static_cast<int>(c)] >= 0, "memory tracker: category {} freed more than allocated",
           static_cast<int>(c));
  if (tier == MemTier::Device) align_live_ -= aligned_bytes - bytes;
}

void MemoryTracker::reset_peaks() {
  for (auto& u : tiers_) {
    u.category_peak = u.live;
    u.peak = u.live_total();
    u.at_peak = u.live;
    u.peak_phase = phase_;
    for (int p = 0; p < kNumStepPhases; ++p) {
      u.phase_peak[p] = 0;
      u.phase_at_peak[p] = {};
    }
  }
  align_peak_ = align_live_;
}

DeviceBuffer::DeviceBuffer(Backend& be, MemoryTracker& tr, MemTier tier, MemCategory c, int64_t numel,
                           DType dtype)
    : be_(&be), tr_(&tr), numel_(numel), dtype_(dtype), tier_(tier), cat_(c) {
  const int64_t b = bytes();
  ptr_ = be.allocate(b > 0 ? b : 1, tier);
  tr.on_alloc(tier, c, b, aligned_size(b));
}

DeviceBuffer::DeviceBuffer(CachingPool& pool, MemoryTracker& tr, MemTier tier, MemCategory c, int64_t numel,
                           DType dtype)
    : be_(&pool.backend()), pool_(&pool), tr_(&tr), numel_(numel), dtype_(dtype), tier_(tier), cat_(c) {
  const int64_t b = bytes();
  ptr_ = pool.take(b > 0 ? b : 1, tier);
  tr.on_alloc(tier, c, b, aligned_size(b));
}

CachingPool::~CachingPool() {
  for (auto& [key, blocks] : free_)
    for (void* p : blocks) be_.release(p, static_cast<MemTier>(key.first));
}

void* CachingPool::take(int64_t bytes, MemTier tier) {
  const int64_t size = aligned_size(bytes);
  auto it = free_.find({static_cast<int>(tier), size});
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    return p;
  }
  void* p = be_.allocate(size, tier);
  const int t = static_cast<int>(tier);
  reserved_[t] += size;
  reserved_peak_[t] = std::max(reserved_peak_[t], reserved_[t]);
  return p;
}

void CachingPool::give(void* p, int64_t bytes, MemTier tier) {
  be_.pool_released(p, aligned_size(bytes), tier);
  free_[{static_cast<int>(tier), aligned_size(bytes)}].push_back(p);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    be_ = std::exchange(o.be_, nullptr);
    pool_ = std::exchange(o.pool_, nullptr);
    tr_ = std::exchange(o.tr_, nullptr);
    ptr_ = std::exchange(o.ptr_, nullptr);
    numel_ = std::exchange(o.numel_, 0);
    dtype_ = o.dtype_;
    tier_ = o.tier_;
    cat_ = o.cat_;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (ptr_ != nullptr) {
    tr_->on_free(tier_, cat_, bytes(), aligned_size(bytes()));
    if (pool_ != nullptr) {
      const int64_t b = bytes();
      pool_->give(ptr_, b > 0 ? b : 1, tier_);
    } else {
      be_->release(ptr_, tier_);
    }
    ptr_ = nullptr;
    numel_ = 0;
  }
}

}  // namespace zeroplan::exec
