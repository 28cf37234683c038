// Exact live-byte counter for PyTorch's CPU allocator, used by the DeepSpeed conformance harness.
//
// Why a replacement allocator: every CPU tensor storage PyTorch creates (at::empty_cpu, the
// kernels' temporaries, gloo's flatten/unflatten copies made with ATen, DeepSpeed's flat buffers)
// obtains its memory from c10::GetCPUAllocator() (c10/core/CPUAllocator.cpp, at::empty_cpu in
// aten/src/ATen/EmptyTensor.cpp). Installing this allocator with c10::SetCPUAllocator before the
// first tensor is made means every storage allocated afterwards is allocated and freed here, on
// whatever thread does it, so `live` is the exact sum of the sizes of the storages alive now.
// Each block carries a 64-byte header holding its requested size, so the free path subtracts
// exactly what the allocation added (no lookup table, thread-safe via atomics). The header is not
// counted: `live` is the bytes PyTorch asked for, as the CUDA caching allocator's
// "requested_bytes" would be, not the bytes malloc used.
//
// Loaded through ctypes (extern "C" API below), built by tests/deepspeed/memcount.py with g++
// against the venv's libc10.so.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <atomic>
#include <cstdint>

namespace zp_memcount {

constexpr std::size_t kHeader = 64;  // keeps the user pointer at c10's 64-byte alignment (gAlignment)

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_allocs{0};

void raise_peak(int64_t now) {
  int64_t p = g_peak.load(std::memory_order_relaxed);
  while (now > p && !g_peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

void counted_free(void* user) {
  if (user == nullptr) return;
  char* base = static_cast<char*>(user) - kHeader;
  const int64_t n = *reinterpret_cast<int64_t*>(base);
  g_live.fetch_sub(n, std::memory_order_relaxed);
  c10::free_cpu(base);
}

struct CountingAllocator final : public c10::Allocator {
  c10::DataPtr allocate(std::size_t n) override {
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeader));
    *reinterpret_cast<int64_t*>(base) = static_cast<int64_t>(n);
    const int64_t now = g_live.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) + static_cast<int64_t>(n);
    g_allocs.fetch_add(1, std::memory_order_relaxed);
    raise_peak(now);
    void* user = base + kHeader;
    return {user, user, &counted_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_free; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace zp_memcount

extern "C" {
// Installs the counting allocator as PyTorch's CPU allocator (priority above the default's 0).
int zp_install() {
  static zp_memcount::CountingAllocator alloc;
  c10::SetCPUAllocator(&alloc, /*priority=*/200);
  return c10::GetCPUAllocator() == &alloc ? 1 : 0;
}
long long zp_live() { return zp_memcount::g_live.load(); }
long long zp_peak() { return zp_memcount::g_peak.load(); }
long long zp_allocs() { return zp_memcount::g_allocs.load(); }
// Restarts peak tracking from the current live bytes (phase boundaries).
void zp_reset_peak() { zp_memcount::g_peak.store(zp_memcount::g_live.load()); }
// Sets the tracked peak (the harness takes a collective's backend staging out of it: harness.py
// make_wrapper).
void zp_set_peak(long long v) { zp_memcount::g_peak.store(v); }
}
