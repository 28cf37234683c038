#include "executor/stream_checker.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/errors.h"

namespace zeroplan::exec {

std::string_view agent_name(Agent a) {
  switch (a) {
    case Agent::Compute:
      return "compute";
    case Agent::Comm:
      return "comm";
    case Agent::Host:
      return "host";
  }
  return "?";
}

std::string_view hazard_name(HazardKind k) {
  switch (k) {
    case HazardKind::ReadAfterWrite:
      return "read-after-write";
    case HazardKind::WriteAfterRead:
      return "write-after-read";
    case HazardKind::WriteAfterWrite:
      return "write-after-write";
    case HazardKind::CollectiveOrder:
      return "collective-order";
  }
  return "?";
}

std::string StreamViolation::describe() const {
  return fmt::format(
      "{}: op #{} {} on {} touches [{:#x}, {:#x}) ({} bytes) not ordered after op #{} {} on {}",
      hazard_name(kind), op_index, op, agent_name(agent), begin, end, end - begin, earlier_op_index,
      earlier_op, agent_name(earlier_agent));
}

// ---------------------------------------------------------------------------------------------
// StreamOrderModel

namespace {
size_t idx(Agent a) {
  return static_cast<size_t>(a);
}
void join(StreamOrderModel::Clock& into, const StreamOrderModel::Clock& from) {
  for (size_t i = 0; i < into.size(); ++i) into[i] = std::max(into[i], from[i]);
}
}  // namespace

void StreamOrderModel::wait(Agent waiter, Agent signaller) {
  if (waiter == signaller) return;
  join(vc_[idx(waiter)], vc_[idx(signaller)]);
}

void StreamOrderModel::absorb(Agent waiter, const Clock& c) {
  join(vc_[idx(waiter)], c);
}

void StreamOrderModel::host_waits_all() {
  wait(Agent::Host, Agent::Compute);
  wait(Agent::Host, Agent::Comm);
}

StreamOrderModel::SegMap::iterator StreamOrderModel::split_at(uintptr_t a) {
  auto it = segs_.upper_bound(a);
  if (it == segs_.begin()) return it;
  auto prev = std::prev(it);
  if (prev->first < a && a < prev->second.end) {
    Segment tail = prev->second;
    prev->second.end = a;
    return segs_.emplace_hint(it, a, tail);
  }
  return segs_.lower_bound(a);  // the first segment starting at or after `a`
}

void StreamOrderModel::report(HazardKind k, const char* op, Agent agent, uintptr_t lo, uintptr_t hi,
                              const Access& earlier, Agent earlier_agent) {
  ++violation_count_;
  if (violations_.size() >= kMaxViolations) return;
  StreamViolation v;
  v.kind = k;
  v.op = op;
  v.agent = agent;
  v.op_index = next_op_ - 1;
  v.begin = lo;
  v.end = hi;
  v.earlier_op = earlier.op != nullptr ? earlier.op : "?";
  v.earlier_agent = earlier_agent;
  v.earlier_op_index = earlier.op_index;
  violations_.push_back(std::move(v));
}

void StreamOrderModel::access(Agent agent, uint64_t now, const char* op, uintptr_t lo, uintptr_t hi,
                              bool write) {
  if (lo >= hi) return;
  const Clock& mine = vc_[idx(agent)];
  // One report per (hazard kind, earlier agent) for this range: the union of the conflicting pieces
  // and the first earlier access found.
  struct Pending {
    bool any = false;
    uintptr_t lo = 0, hi = 0;
    Access earlier;
  };
  std::array<std::array<Pending, kNumAgents>, 3> pending{};
  auto note = [&](HazardKind k, Agent other, const Access& a, uintptr_t s, uintptr_t e) {
    Pending& p = pending[static_cast<size_t>(k)][idx(other)];
    if (!p.any) {
      p.any = true;
      p.lo = s;
      p.earlier = a;
    }
    p.hi = e;
  };
  split_at(lo);
  const auto last = split_at(hi);
  std::vector<std::pair<uintptr_t, uintptr_t>> gaps;
  uintptr_t cursor = lo;
  for (auto it = segs_.lower_bound(lo); it != last; ++it) {
    Segment& s = it->second;
    if (it->first > cursor) gaps.emplace_back(cursor, it->first);
    cursor = s.end;
    if (s.write.clock != 0 && s.write_agent != agent && mine[idx(s.write_agent)] < s.write.clock)
      note(write ? HazardKind::WriteAfterWrite : HazardKind::ReadAfterWrite, s.write_agent, s.write,
           it->first, s.end);
    if (write) {
      for (size_t y = 0; y < kNumAgents; ++y) {
        const Access& r = s.reads[y];
        if (y != idx(agent) && r.clock != 0 && mine[y] < r.clock)
          note(HazardKind::WriteAfterRead, static_cast<Agent>(y), r, it->first, s.end);
      }
    }
  }
  if (cursor < hi) gaps.emplace_back(cursor, hi);
  for (size_t k = 0; k < pending.size(); ++k)
    for (size_t y = 0; y < kNumAgents; ++y)
      if (pending[k][y].any)
        report(static_cast<HazardKind>(k), op, agent, pending[k][y].lo, pending[k][y].hi,
               pending[k][y].earlier, static_cast<Agent>(y));
  const Access me{now, next_op_ - 1, op};
  if (write) {
    // A write supersedes the range's history: any later access ordered after it is ordered after
    // everything it was checked against (or that pair was already reported).
    segs_.erase(segs_.lower_bound(lo), last);
    Segment s;
    s.end = hi;
    s.write_agent = agent;
    s.write = me;
    segs_.emplace(lo, s);
  } else {
    for (auto it = segs_.lower_bound(lo); it != segs_.end() && it->first < hi; ++it)
      it->second.reads[idx(agent)] = me;
    for (const auto& [a, b] : gaps) {
      Segment s;
      s.end = b;
      s.reads[idx(agent)] = me;
      segs_.emplace(a, s);
    }
  }
  merge_around(lo, hi);
}

void StreamOrderModel::merge_around(uintptr_t lo, uintptr_t hi) {
  auto same = [](const Segment& a, const Segment& b) {
    if (a.write.clock != b.write.clock || a.write.op_index != b.write.op_index ||
        a.write_agent != b.write_agent)
      return false;
    for (size_t y = 0; y < kNumAgents; ++y)
      if (a.reads[y].clock != b.reads[y].clock || a.reads[y].op_index != b.reads[y].op_index) return false;
    return true;
  };
  auto it = segs_.lower_bound(lo);
  if (it != segs_.begin()) --it;
  while (it != segs_.end() && it->first <= hi) {
    auto next = std::next(it);
    if (next == segs_.end()) break;
    if (it->second.end == next->first && same(it->second, next->second)) {
      it->second.end = next->second.end;
      segs_.erase(next);
    } else {
      it = next;
    }
  }
}

void StreamOrderModel::operation(Agent agent, const char* op, const std::vector<Range>& reads,
                                 const std::vector<Range>& writes, bool collective) {
  ++next_op_;
  ++ops_[idx(agent)];
  Clock& c = vc_[idx(agent)];
  // A stream operation is issued by the host: it runs after everything the host did before issuing it.
  if (agent != Agent::Host) join(c, vc_[idx(Agent::Host)]);
  const uint64_t now = ++c[idx(agent)];
  for (const Range& r : reads) {
    if (r.p == nullptr || r.bytes <= 0) continue;
    const auto lo = reinterpret_cast<uintptr_t>(r.p);
    access(agent, now, op, lo, lo + static_cast<uintptr_t>(r.bytes), false);
  }
  for (const Range& w : writes) {
    if (w.p == nullptr || w.bytes <= 0) continue;
    const auto lo = reinterpret_cast<uintptr_t>(w.p);
    access(agent, now, op, lo, lo + static_cast<uintptr_t>(w.bytes), true);
  }
  if (!collective) return;
  const Access& prev = last_collective_;
  if (prev.clock != 0 && last_collective_agent_ != agent && c[idx(last_collective_agent_)] < prev.clock) {
    const Range& r = !writes.empty() ? writes.front() : (!reads.empty() ? reads.front() : Range{});
    const auto lo = reinterpret_cast<uintptr_t>(r.p);
    report(HazardKind::CollectiveOrder, op, agent, lo,
           lo + static_cast<uintptr_t>(std::max<int64_t>(r.bytes, 0)), prev, last_collective_agent_);
  }
  last_collective_agent_ = agent;
  last_collective_ = Access{now, next_op_ - 1, op};
}

// ---------------------------------------------------------------------------------------------
// StreamCheckingBackend

namespace {
using Range = StreamOrderModel::Range;
Range rng(const void* p, int64_t elems, DType t) {
  return {p, elems * dtype_bytes(t)};
}
Range bytes_at(const void* p, int64_t bytes) {
  return {p, bytes};
}

// CudaTimer records an event on the current stream at begin()/end(); seconds() synchronizes on the
// end events (cudaEventSynchronize), so the host is ordered after the work issued before each end().
class CheckedTimer final : public Timer {
 public:
  CheckedTimer(StreamCheckingBackend& be, std::unique_ptr<Timer> inner) : be_(be), inner_(std::move(inner)) {}
  void begin() override { inner_->begin(); }
  void end() override {
    inner_->end();
    ends_.push_back(
        be_.model().clock(be_.current_stream() == Stream::Compute ? Agent::Compute : Agent::Comm));
  }
  double seconds() override {
    const double s = inner_->seconds();
    for (const auto& c : ends_) be_.model().absorb(Agent::Host, c);
    return s;
  }
  void reset() override {
    inner_->reset();
    ends_.clear();
  }

 private:
  StreamCheckingBackend& be_;
  std::unique_ptr<Timer> inner_;
  std::vector<StreamOrderModel::Clock> ends_;
};
}  // namespace

void StreamCheckingBackend::on_host(const char* op, const Ranges& reads, const Ranges& writes) {
  model_.wait(Agent::Host, stream_agent());
  model_.operation(Agent::Host, op, reads, writes);
}

bool StreamCheckingBackend::is_host_memory(const void* p) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = allocations_.upper_bound(a);
  if (it == allocations_.begin()) return true;
  --it;
  return !(a < it->second.first && it->second.second == MemTier::Device);
}

StreamCheckingBackend::Ranges StreamCheckingBackend::token_rows(const void* table, const int32_t* tokens,
                                                                int64_t N, int64_t row_bytes) const {
  const auto base = reinterpret_cast<uintptr_t>(table);
  if (!inspect_tokens_) {
    // Conservative: from the table to the end of the allocation that holds it.
    auto it = allocations_.upper_bound(base);
    if (it != allocations_.begin() && base < std::prev(it)->second.first)
      return {bytes_at(table, static_cast<int64_t>(std::prev(it)->second.first - base))};
    return {bytes_at(table, N * row_bytes)};
  }
  std::vector<int64_t> rows(tokens, tokens + N);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  Ranges out;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    out.push_back(bytes_at(static_cast<const char*>(table) + rows[i] * row_bytes,
                           static_cast<int64_t>(j - i) * row_bytes));
    i = j;
  }
  return out;
}

void StreamCheckingBackend::collective(const char* op, const Ranges& reads, const Ranges& writes) {
  ++collectives_[static_cast<size_t>(current_)];
  model_.operation(stream_agent(), op, reads, writes, /*collective=*/true);
}

void* StreamCheckingBackend::allocate(int64_t bytes, MemTier tier) {
  void* p = inner_.allocate(bytes, tier);
  const auto a = reinterpret_cast<uintptr_t>(p);
  // No history is cleared: a reused address keeps what the previous owner's streams did to it.
  allocations_[a] = {a + static_cast<uintptr_t>(std::max<int64_t>(bytes, 1)), tier};
  return p;
}

void StreamCheckingBackend::release(void* p, MemTier tier) {
  inner_.release(p, tier);
  allocations_.erase(reinterpret_cast<uintptr_t>(p));
}

// A block back in the engine's caching pool may be handed to any stream's work next: every earlier
// access must be ordered before Compute (whose work the engine issues next; Comm work first waits
// for Compute) or, for host memory, before the host.
void StreamCheckingBackend::pool_released(void* p, int64_t bytes, MemTier tier) {
  inner_.pool_released(p, bytes, tier);
  if (bytes <= 0) return;
  if (tier == MemTier::Host)
    model_.operation(Agent::Host, "pool release (host block)", {}, {bytes_at(p, bytes)});
  else
    model_.operation(Agent::Compute, "pool release (device block)", {}, {bytes_at(p, bytes)});
}

void StreamCheckingBackend::copy(void* dst, const void* src, int64_t bytes, CopyKind kind) {
  inner_.copy(dst, src, bytes, kind);
  if (bytes == 0) return;
  if (kind == CopyKind::HostToHost)
    on_host("copy(host-to-host)", {bytes_at(src, bytes)}, {bytes_at(dst, bytes)});
  else
    on_stream("copy", {bytes_at(src, bytes)}, {bytes_at(dst, bytes)});
}

void StreamCheckingBackend::zero(void* dst, int64_t bytes, MemTier tier) {
  inner_.zero(dst, bytes, tier);
  if (bytes == 0) return;
  if (tier == MemTier::Host)
    on_host("zero(host)", {}, {bytes_at(dst, bytes)});
  else
    on_stream("zero", {}, {bytes_at(dst, bytes)});
}

void StreamCheckingBackend::upload(void* dst_device, const void* src_host, int64_t bytes) {
  inner_.upload(dst_device, src_host, bytes);
  if (bytes == 0) return;
  on_stream("upload", {bytes_at(src_host, bytes)}, {bytes_at(dst_device, bytes)});
  model_.wait(Agent::Host, stream_agent());  // synchronous
}

void StreamCheckingBackend::download(void* dst_host, const void* src_device, int64_t bytes) {
  inner_.download(dst_host, src_device, bytes);
  if (bytes == 0) return;
  on_stream("download", {bytes_at(src_device, bytes)}, {bytes_at(dst_host, bytes)});
  model_.wait(Agent::Host, stream_agent());  // synchronous
}

void StreamCheckingBackend::set_stream(Stream s) {
  inner_.set_stream(s);
  current_ = s;
}

void StreamCheckingBackend::wait(Stream waiter, Stream signaller) {
  inner_.wait(waiter, signaller);
  if (dropped_[static_cast<size_t>(waiter)][static_cast<size_t>(signaller)]) return;
  auto ag = [](Stream s) { return s == Stream::Compute ? Agent::Compute : Agent::Comm; };
  model_.wait(ag(waiter), ag(signaller));
}

int64_t StreamCheckingBackend::record_event(Stream s) {
  const int64_t inner = inner_.record_event(s);
  events_.push_back({s, inner, model_.clock(s == Stream::Compute ? Agent::Compute : Agent::Comm)});
  return static_cast<int64_t>(events_.size()) - 1;
}

void StreamCheckingBackend::wait_event(Stream waiter, int64_t event) {
  ZP_CHECK(event >= 0 && event < static_cast<int64_t>(events_.size()), "wait_event: unknown event {}", event);
  const RecordedEvent& e = events_[static_cast<size_t>(event)];
  inner_.wait_event(waiter, e.inner);
  if (waiter == e.stream || dropped_[static_cast<size_t>(waiter)][static_cast<size_t>(e.stream)]) return;
  model_.absorb(waiter == Stream::Compute ? Agent::Compute : Agent::Comm, e.clock);
}

void StreamCheckingBackend::synchronize() {
  inner_.synchronize();
  model_.host_waits_all();
}

std::unique_ptr<Timer> StreamCheckingBackend::make_timer() {
  return std::make_unique<CheckedTimer>(*this, inner_.make_timer());
}

void StreamCheckingBackend::gemm(int64_t m, int64_t n, int64_t k, const void* A, bool trans_a, const void* B,
                                 bool trans_b, DType ab, void* C, DType c, float alpha, float beta) {
  inner_.gemm(m, n, k, A, trans_a, B, trans_b, ab, C, c, alpha, beta);
  // op(A) is [m,k] and op(B) [k,n] whether stored transposed or not: same element counts.
  Ranges reads{rng(A, m * k, ab), rng(B, k * n, ab)};
  if (beta != 0.0f) reads.push_back(rng(C, m * n, c));
  on_stream("gemm", reads, {rng(C, m * n, c)});
}

void StreamCheckingBackend::cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) {
  inner_.cast(dst, dst_t, src, src_t, n);
  const Ranges r{rng(src, n, src_t)}, w{rng(dst, n, dst_t)};
  if (is_host_memory(dst) && is_host_memory(src))
    on_host("cast(host)", r, w);
  else
    on_stream("cast", r, w);
}

void StreamCheckingBackend::scale(void* x, DType t, int64_t n, float alpha) {
  inner_.scale(x, t, n, alpha);
  const Ranges rw{rng(x, n, t)};
  if (is_host_memory(x))
    on_host("scale(host)", rw, rw);
  else
    on_stream("scale", rw, rw);
}

void StreamCheckingBackend::add(void* y, DType yt, const void* x, DType xt, int64_t n, float alpha) {
  inner_.add(y, yt, x, xt, n, alpha);
  const Ranges r{rng(x, n, xt), rng(y, n, yt)}, w{rng(y, n, yt)};
  if (is_host_memory(y) && is_host_memory(x))
    on_host("add(host)", r, w);
  else
    on_stream("add", r, w);
}

double StreamCheckingBackend::sum_squares(const void* x, DType t, int64_t n) {
  const double s = inner_.sum_squares(x, t, n);
  if (is_host_memory(x)) {
    on_host("sum_squares(host)", {rng(x, n, t)}, {});
  } else {
    on_stream("sum_squares", {rng(x, n, t)}, {});
    model_.wait(Agent::Host, stream_agent());  // the result is read on the host
  }
  return s;
}

void StreamCheckingBackend::embedding_forward(void* out, const void* wte, const int32_t* tokens, int64_t N,
                                              int64_t C, DType t) {
  inner_.embedding_forward(out, wte, tokens, N, C, t);
  Ranges reads = token_rows(wte, tokens, N, C * dtype_bytes(t));
  reads.push_back(rng(tokens, N, DType::F32));  // int32 ids, 4 bytes each
  on_stream("embedding_forward", reads, {rng(out, N * C, t)});
}

void StreamCheckingBackend::embedding_backward(void* dwte, const void* dout, const int32_t* tokens, int64_t N,
                                               int64_t C, DType t) {
  Ranges rows = token_rows(dwte, tokens, N, C * dtype_bytes(t));  // before: tokens are unchanged anyway
  inner_.embedding_backward(dwte, dout, tokens, N, C, t);
  Ranges reads = rows;
  reads.push_back(rng(dout, N * C, t));
  reads.push_back(rng(tokens, N, DType::F32));
  on_stream("embedding_backward", reads, rows);  // "+=": read and written
}

void StreamCheckingBackend::rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight,
                                            int64_t N, int64_t C, float eps, DType t) {
  inner_.rmsnorm_forward(out, rstd, inp, weight, N, C, eps, t);
  on_stream("rmsnorm_forward", {rng(inp, N * C, t), rng(weight, C, t)},
            {rng(out, N * C, t), rng(rstd, N, DType::F32)});
}

void StreamCheckingBackend::rmsnorm_backward(void* dinp, void* dweight, const void* dout, const void* inp,
                                             const void* weight, const float* rstd, int64_t N, int64_t C,
                                             DType t) {
  inner_.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C, t);
  on_stream("rmsnorm_backward",
            {rng(dout, N * C, t), rng(inp, N * C, t), rng(weight, C, t), rng(rstd, N, DType::F32),
             rng(dinp, N * C, t), rng(dweight, C, t)},
            {rng(dinp, N * C, t), rng(dweight, C, t)});
}

void StreamCheckingBackend::rotary(void* x, int64_t B, int64_t T, int64_t H, int64_t D, float theta,
                                   bool backward, DType t) {
  inner_.rotary(x, B, T, H, D, theta, backward, t);
  const Ranges rw{rng(x, B * T * H * D, t)};
  on_stream("rotary", rw, rw);
}

void StreamCheckingBackend::swiglu_forward(void* out, const void* gate, const void* up, int64_t N, int64_t I,
                                           DType t) {
  inner_.swiglu_forward(out, gate, up, N, I, t);
  on_stream("swiglu_forward", {rng(gate, N * I, t), rng(up, N * I, t)}, {rng(out, N * I, t)});
}

void StreamCheckingBackend::swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate,
                                            const void* up, int64_t N, int64_t I, DType t) {
  inner_.swiglu_backward(dgate, dup, dout, gate, up, N, I, t);
  on_stream("swiglu_backward", {rng(dout, N * I, t), rng(gate, N * I, t), rng(up, N * I, t)},
            {rng(dgate, N * I, t), rng(dup, N * I, t)});
}

void StreamCheckingBackend::attention_forward(void* out, float* lse, const void* q, const void* k,
                                              const void* v, int64_t B, int64_t T, int64_t Hq, int64_t Hkv,
                                              int64_t D, DType t) {
  inner_.attention_forward(out, lse, q, k, v, B, T, Hq, Hkv, D, t);
  const int64_t nq = B * T * Hq * D, nkv = B * T * Hkv * D;
  on_stream("attention_forward", {rng(q, nq, t), rng(k, nkv, t), rng(v, nkv, t)},
            {rng(out, nq, t), rng(lse, B * Hq * T, DType::F32)});
}

void StreamCheckingBackend::attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q,
                                               const void* k, const void* v, const void* out,
                                               const float* lse, int64_t B, int64_t T, int64_t Hq,
                                               int64_t Hkv, int64_t D, DType t) {
  inner_.attention_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, Hq, Hkv, D, t);
  const int64_t nq = B * T * Hq * D, nkv = B * T * Hkv * D;
  on_stream("attention_backward",
            {rng(dout, nq, t), rng(q, nq, t), rng(k, nkv, t), rng(v, nkv, t), rng(out, nq, t),
             rng(lse, B * Hq * T, DType::F32)},
            {rng(dq, nq, t), rng(dk, nkv, t), rng(dv, nkv, t)});
}

void StreamCheckingBackend::moe_route_forward(float* probs, int32_t* idx, float* weights, const void* logits,
                                              int64_t N, int64_t E, int64_t k, bool renorm, DType t) {
  inner_.moe_route_forward(probs, idx, weights, logits, N, E, k, renorm, t);
  on_stream("moe_route_forward", {rng(logits, N * E, t)},
            {rng(probs, N * E, DType::F32), rng(idx, N * k, DType::F32), rng(weights, N * k, DType::F32)});
}

void StreamCheckingBackend::moe_route_backward(void* dlogits, const float* dweights, const float* probs,
                                               const int32_t* idx, int64_t N, int64_t E, int64_t k,
                                               bool renorm, DType t) {
  inner_.moe_route_backward(dlogits, dweights, probs, idx, N, E, k, renorm, t);
  on_stream("moe_route_backward",
            {rng(dweights, N * k, DType::F32), rng(probs, N * E, DType::F32), rng(idx, N * k, DType::F32)},
            {rng(dlogits, N * E, t)});
}

void StreamCheckingBackend::gather_rows(void* out, const void* in, const int32_t* pairs, int64_t R, int64_t C,
                                        int64_t k, DType t) {
  inner_.gather_rows(out, in, pairs, R, C, k, t);
  on_stream("gather_rows", {rng(in, R / k * C, t), rng(pairs, R, DType::F32)}, {rng(out, R * C, t)});
}

void StreamCheckingBackend::scatter_add_rows(void* out, const void* in, const int32_t* pairs,
                                             const float* weights, int64_t R, int64_t C, int64_t k, DType t) {
  inner_.scatter_add_rows(out, in, pairs, weights, R, C, k, t);
  Ranges reads{rng(in, R * C, t), rng(pairs, R, DType::F32), rng(out, R / k * C, t)};
  if (weights != nullptr) reads.push_back(rng(weights, R, DType::F32));
  on_stream("scatter_add_rows", reads, {rng(out, R / k * C, t)});  // "+="
}

void StreamCheckingBackend::scatter_add_rows_backward(void* din, float* dweights, const void* dout,
                                                      const void* in, const int32_t* pairs,
                                                      const float* weights, int64_t R, int64_t C, int64_t k,
                                                      DType t) {
  inner_.scatter_add_rows_backward(din, dweights, dout, in, pairs, weights, R, C, k, t);
  on_stream(
      "scatter_add_rows_backward",
      {rng(dout, R / k * C, t), rng(in, R * C, t), rng(pairs, R, DType::F32), rng(weights, R, DType::F32)},
      {rng(din, R * C, t), rng(dweights, R, DType::F32)});
}

void StreamCheckingBackend::cross_entropy_forward(float* losses, const void* logits, const int32_t* targets,
                                                  int64_t N, int64_t V, DType t) {
  inner_.cross_entropy_forward(losses, logits, targets, N, V, t);
  on_stream("cross_entropy_forward", {rng(logits, N * V, t), rng(targets, N, DType::F32)},
            {rng(losses, N, DType::F32)});
}

void StreamCheckingBackend::cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets,
                                                   float dloss, int64_t N, int64_t V, DType t) {
  inner_.cross_entropy_backward(dlogits, logits, targets, dloss, N, V, t);
  on_stream("cross_entropy_backward", {rng(logits, N * V, t), rng(targets, N, DType::F32)},
            {rng(dlogits, N * V, t)});
}

void StreamCheckingBackend::adam_step(std::span<const AdamChunk> chunks, const AdamParams& p, MemTier tier) {
  inner_.adam_step(chunks, p, tier);
  Ranges reads, writes, device_param16;
  for (const AdamChunk& c : chunks) {
    for (const void* x : {static_cast<const void*>(c.param), static_cast<const void*>(c.exp_avg),
                          static_cast<const void*>(c.exp_avg_sq)}) {
      reads.push_back(rng(x, c.n, DType::F32));
      writes.push_back(rng(x, c.n, DType::F32));
    }
    reads.push_back(rng(c.grad, c.n, DType::F32));
    if (c.param16 == nullptr) continue;
    // Host tier: a 16-bit copy in device memory goes back by copies on the current stream.
    if (tier == MemTier::Host && !is_host_memory(c.param16))
      device_param16.push_back(rng(c.param16, c.n, c.param16_dtype));
    else
      writes.push_back(rng(c.param16, c.n, c.param16_dtype));
  }
  if (tier == MemTier::Device) {
    on_stream("adam_step", reads, writes);
    return;
  }
  // cuda: wait_stream(current), CPU Adam, per piece a copy to the device on the current stream,
  // then cudaEventSynchronize on the last copies.
  on_host("adam_step(host)", reads, writes);
  if (!device_param16.empty()) {
    on_stream("adam_step(param16 copy)", {}, device_param16);
    model_.wait(Agent::Host, stream_agent());
  }
}

// ---------------------------------------------------------------------------------------------
// StreamCheckingCommunicator

void StreamCheckingCommunicator::add_counter_delta(const CommCounters& before) {
  const CommCounters& now = inner_.counters();
  for (size_t k = 0; k < now.calls.size(); ++k) {
    counters_.calls[k] += now.calls[k] - before.calls[k];
    counters_.bytes_sent[k] += now.bytes_sent[k] - before.bytes_sent[k];
  }
}

void StreamCheckingCommunicator::all_reduce(void* buf, int64_t count, DType dtype) {
  const CommCounters before = inner_.counters();
  inner_.all_reduce(buf, count, dtype);
  add_counter_delta(before);
  be_.collective("all_reduce", {rng(buf, count, dtype)}, {rng(buf, count, dtype)});
}

void StreamCheckingCommunicator::reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) {
  const CommCounters before = inner_.counters();
  inner_.reduce_scatter(send, recv, count, dtype);
  add_counter_delta(before);
  be_.collective("reduce_scatter", {rng(send, count * world_size(), dtype)}, {rng(recv, count, dtype)});
}

void StreamCheckingCommunicator::all_gather(const void* send, void* recv, int64_t count, DType dtype) {
  const CommCounters before = inner_.counters();
  inner_.all_gather(send, recv, count, dtype);
  add_counter_delta(before);
  be_.collective("all_gather", {rng(send, count, dtype)}, {rng(recv, count * world_size(), dtype)});
}

void StreamCheckingCommunicator::broadcast(void* buf, int64_t count, DType dtype, int root) {
  const CommCounters before = inner_.counters();
  inner_.broadcast(buf, count, dtype, root);
  add_counter_delta(before);
  be_.collective("broadcast", {rng(buf, count, dtype)}, {rng(buf, count, dtype)});
}

void StreamCheckingCommunicator::barrier() {
  inner_.barrier();
  be_.host_waits_all();  // the NCCL barrier ends with Backend::synchronize()
}

std::unique_ptr<Communicator> StreamCheckingCommunicator::split(int color, int key) {
  std::unique_ptr<Communicator> inner = inner_.split(color, key);
  if (!inner) return nullptr;
  auto out = std::make_unique<StreamCheckingCommunicator>(*inner, be_);
  out->owned_ = std::move(inner);
  return out;
}

// ---------------------------------------------------------------------------------------------
// StreamCheckingRuntime

StreamCheckingRuntime::StreamCheckingRuntime(std::unique_ptr<Runtime> inner) : inner_(std::move(inner)) {
  ZP_CHECK(inner_ != nullptr, "stream checker needs a runtime to wrap");
  const auto n = static_cast<size_t>(inner_->world_size());
  backends_.resize(n);
  comms_.resize(n);
  for (int r : inner_->local_ranks()) {
    Backend& be = inner_->backend(r);
    // Token ids can be read from the host only where device memory is host memory (cpu backend).
    const bool host_addressable = be.name() == "cpu";
    const auto i = static_cast<size_t>(r);
    backends_[i] = std::make_unique<StreamCheckingBackend>(be, host_addressable);
    comms_[i] = std::make_unique<StreamCheckingCommunicator>(inner_->communicator(r), *backends_[i]);
  }
}

StreamCheckingBackend& StreamCheckingRuntime::checker(int rank) {
  ZP_CHECK(rank >= 0 && static_cast<size_t>(rank) < backends_.size() && backends_[static_cast<size_t>(rank)],
           "rank {} is not local to this runtime", rank);
  return *backends_[static_cast<size_t>(rank)];
}

Communicator& StreamCheckingRuntime::communicator(int rank) {
  checker(rank);  // validates the rank
  return *comms_[static_cast<size_t>(rank)];
}

std::vector<StreamViolation> StreamCheckingRuntime::all_violations() const {
  std::vector<StreamViolation> out;
  for (const auto& b : backends_)
    if (b) out.insert(out.end(), b->violations().begin(), b->violations().end());
  return out;
}

int64_t StreamCheckingRuntime::violation_count() const {
  int64_t s = 0;
  for (const auto& b : backends_)
    if (b) s += b->model().violation_count();
  return s;
}

int64_t StreamCheckingRuntime::ops_on(Agent a) const {
  int64_t s = 0;
  for (const auto& b : backends_)
    if (b) s += b->model().ops_on(a);
  return s;
}

int64_t StreamCheckingRuntime::collectives_on(Stream st) const {
  int64_t s = 0;
  for (const auto& b : backends_)
    if (b) s += b->collectives_on(st);
  return s;
}

std::unique_ptr<StreamCheckingRuntime> make_stream_checking_runtime(std::unique_ptr<Runtime> inner) {
  return std::make_unique<StreamCheckingRuntime>(std::move(inner));
}

}  // namespace zeroplan::exec
