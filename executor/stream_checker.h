#pragma once
// A stream-order checker for the engine's choreography of Stream::Compute and Stream::Comm.
//
// Why: the cpu backend runs every call synchronously and makes set_stream/wait/synchronize no-ops,
// so CI never exercises the ordering the engine expresses for the cuda backend. On a GPU a missing
// `wait` is a silent data race (wrong numbers, or a caching-pool block reused by one stream while
// another still reads it). These decorators sit between the engine and any Backend/Communicator,
// forward every call unchanged (the numbers stay real) and, on the side, replay the calls against a
// model of CUDA stream semantics:
//
//  * Three agents: the Compute stream, the Comm stream and the Host (the thread driving the rank).
//    Each agent has a vector clock (FastTrack-style happens-before, Flanagan & Freund, PLDI 2009).
//  * Every kernel, copy or collective is an operation on the current stream that reads and writes
//    byte ranges derived from the shapes and dtypes documented in executor/backend.h and
//    executor/communicator.h. A stream operation is issued by the host, so it is ordered after
//    everything the host did before issuing it (its clock absorbs the host's clock).
//  * `wait(a, b)` (cudaEventRecord on b + cudaStreamWaitEvent on a): a absorbs b's clock.
//  * Calls that block the host mirror executor/cuda/cuda_backend.cpp exactly: upload, download and
//    device sum_squares end with a host wait on the current stream; copy(HostToHost), zero(Host),
//    cast/scale/add/sum_squares on host memory and adam_step(Host) wait for the current stream and
//    then run ON THE HOST (host operations); synchronize() and Communicator::barrier() (the NCCL
//    barrier synchronizes) make the host absorb both streams; Timer::seconds() waits for the events
//    recorded by end() (cudaEventSynchronize).
//  * An access conflicts when an earlier write (for a read or a write), or an earlier read (for a
//    write), by ANOTHER agent is not ordered before it by the clocks. Same-agent accesses are in
//    program order and never conflict.
//  * Memory reuse: the access history of an address survives release() and the engine's own
//    caching pool (executor/memory.h) handing the block to a new tensor, so a new owner writing a
//    block on stream X that stream Y last read without ordering is reported: exactly the
//    cross-stream reuse hazard of a caching allocator (PyTorch's record_stream problem). This is
//    stricter than the current cuda backend, whose release() calls cudaFree (which synchronizes);
//    it is what a caching backend would need.
//
// Limits (what this does NOT see):
//  * Memory the engine touches directly on the host (host_add into a Host-tier buffer, store_elem
//    into a staging buffer, memcpy into the offloaded master) bypasses the Backend and is invisible;
//    so is everything a backend does internally (its workspaces and scratch).
//  * Only one rank's device is modelled: collectives are ordered on this rank's current stream,
//    and the peers' side of a collective (their streams, NCCL's own ordering) is not checked.
//  * Byte ranges come from the documented shapes; a kernel that touched memory outside its
//    documented shape would go unnoticed. embedding_forward/backward touch the rows named by the
//    token ids, which the checker reads from `tokens`: this needs host-addressable device memory
//    (the cpu backend); with `inspect_tokens = false` it conservatively treats the whole rest of the
//    allocation holding the table as touched.
//  * The wrapper hides backend-specific extensions reached by dynamic_cast (CudaBackend's memory
//    report): it is meant for the cpu runtime in CI.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/backend.h"
#include "executor/communicator.h"

namespace zeroplan::exec {

// The agents of the model: the two streams of executor/backend.h and the host.
enum class Agent : uint8_t { Compute, Comm, Host };
inline constexpr int kNumAgents = 3;
std::string_view agent_name(Agent a);  // "compute", "comm", "host"

enum class HazardKind : uint8_t {
  ReadAfterWrite,   // a read not ordered after another agent's write
  WriteAfterRead,   // a write not ordered after another agent's read (incl. reuse of a freed block)
  WriteAfterWrite,  // a write not ordered after another agent's write
  // A collective not ordered after the previous collective of the same communicator issued on the
  // other stream: NCCL gives no guarantee that two operations of one communicator progress
  // concurrently, and every rank must run them in the same order, so a collective on one stream
  // must wait for the last one on the other (NVIDIA/nccl issues #195 and #217, kwen2501: "the
  // inter-stream order is also important"; engine.cpp compute_waits_for_comm keeps this order).
  CollectiveOrder,
};
std::string_view hazard_name(HazardKind k);  // "read-after-write", ...

struct StreamViolation {
  HazardKind kind = HazardKind::ReadAfterWrite;
  std::string op;  // the later operation, e.g. "gemm", "all_reduce"
  Agent agent = Agent::Compute;
  int64_t op_index = 0;          // its position in this checker's operation sequence (1-based)
  uintptr_t begin = 0, end = 0;  // conflicting byte range [begin, end) (union of the pieces)
  std::string earlier_op;        // the unordered earlier access
  Agent earlier_agent = Agent::Compute;
  int64_t earlier_op_index = 0;
  std::string describe() const;  // one line for test failures and reports
};

class StreamCheckingBackend;

// Happens-before state of one rank's device. Public so that tests can read it; the decorators
// below are the only writers.
class StreamOrderModel {
 public:
  using Clock = std::array<uint64_t, kNumAgents>;
  // At most this many violations are kept (the count goes on): one missing wait in a loop would
  // otherwise report itself once per iteration.
  static constexpr size_t kMaxViolations = 64;

  struct Range {
    const void* p = nullptr;
    int64_t bytes = 0;
  };
  // One operation on `agent`: checks, then records, every read then every write. A collective is
  // also checked against the previous collective (HazardKind::CollectiveOrder).
  void operation(Agent agent, const char* op, const std::vector<Range>& reads,
                 const std::vector<Range>& writes, bool collective = false);
  void wait(Agent waiter, Agent signaller);   // waiter absorbs signaller's clock
  void absorb(Agent waiter, const Clock& c);  // waiter absorbs a recorded event (a clock snapshot)
  void host_waits_all();                      // synchronize()
  Clock clock(Agent a) const { return vc_[static_cast<size_t>(a)]; }

  const std::vector<StreamViolation>& violations() const { return violations_; }
  int64_t violation_count() const { return violation_count_; }
  int64_t ops_on(Agent a) const { return ops_[static_cast<size_t>(a)]; }
  int64_t op_count() const { return next_op_ - 1; }
  size_t tracked_segments() const { return segs_.size(); }

 private:
  struct Access {
    uint64_t clock = 0;  // 0: none
    int64_t op_index = 0;
    const char* op = nullptr;
  };
  struct Segment {
    uintptr_t end = 0;
    Agent write_agent = Agent::Compute;
    Access write;                            // last write
    std::array<Access, kNumAgents> reads{};  // latest read per agent since the last write
  };
  using SegMap = std::map<uintptr_t, Segment>;
  SegMap::iterator split_at(uintptr_t a);  // ensures a segment boundary at `a` (if inside one)
  void access(Agent agent, uint64_t now, const char* op, uintptr_t lo, uintptr_t hi, bool write);
  void merge_around(uintptr_t lo, uintptr_t hi);
  void report(HazardKind k, const char* op, Agent agent, uintptr_t lo, uintptr_t hi, const Access& earlier,
              Agent earlier_agent);

  std::array<Clock, kNumAgents> vc_{};
  std::array<int64_t, kNumAgents> ops_{};
  int64_t next_op_ = 1;
  SegMap segs_;  // disjoint [start, end) -> history
  Agent last_collective_agent_ = Agent::Compute;
  Access last_collective_;
  std::vector<StreamViolation> violations_;
  int64_t violation_count_ = 0;
};

// Forwards every call to `inner` and replays it into a StreamOrderModel. Tracks set_stream itself
// (the cpu backend ignores it) and forwards it too.
class StreamCheckingBackend final : public Backend {
 public:
  explicit StreamCheckingBackend(Backend& inner, bool inspect_tokens = true)
      : inner_(inner), inspect_tokens_(inspect_tokens) {}
  Backend& inner() const { return inner_; }
  Stream current_stream() const { return current_; }
  StreamOrderModel& model() { return model_; }
  const StreamOrderModel& model() const { return model_; }
  const std::vector<StreamViolation>& violations() const { return model_.violations(); }
  // Collectives issued through the paired StreamCheckingCommunicator, per stream.
  int64_t collectives_on(Stream s) const { return collectives_[static_cast<size_t>(s)]; }
  // Called by StreamCheckingCommunicator: one collective on the current stream.
  void collective(const char* op, const std::vector<StreamOrderModel::Range>& reads,
                  const std::vector<StreamOrderModel::Range>& writes);
  void host_waits_all() { model_.host_waits_all(); }
  // Fault injection for tests: from now on the model ignores wait(waiter, signaller) (the call is
  // still forwarded), i.e. it checks the engine as if that wait were missing. Proves that a test
  // over real engine traffic would notice the wait's absence.
  void drop_waits_for_testing(Stream waiter, Stream signaller) {
    dropped_[static_cast<size_t>(waiter)][static_cast<size_t>(signaller)] = true;
  }

  std::string name() const override { return inner_.name(); }
  void* allocate(int64_t bytes, MemTier tier) override;
  void release(void* p, MemTier tier) override;
  void pool_released(void* p, int64_t bytes, MemTier tier) override;
  void copy(void* dst, const void* src, int64_t bytes, CopyKind kind) override;
  void zero(void* dst, int64_t bytes, MemTier tier) override;
  void upload(void* dst_device, const void* src_host, int64_t bytes) override;
  void download(void* dst_host, const void* src_device, int64_t bytes) override;
  DeviceMemoryInfo memory_info() const override { return inner_.memory_info(); }
  void set_stream(Stream s) override;
  void wait(Stream waiter, Stream signaller) override;
  int64_t record_event(Stream s) override;  // a snapshot of s's clock (and the inner backend's handle)
  void wait_event(Stream waiter, int64_t event) override;
  void synchronize() override;
  std::unique_ptr<Timer> make_timer() override;
  void gemm(int64_t m, int64_t n, int64_t k, const void* A, bool trans_a, const void* B, bool trans_b,
            DType ab, void* C, DType c, float alpha, float beta) override;
  void cast(void* dst, DType dst_t, const void* src, DType src_t, int64_t n) override;
  void scale(void* x, DType t, int64_t n, float alpha) override;
  void add(void* y, DType yt, const void* x, DType xt, int64_t n, float alpha) override;
  double sum_squares(const void* x, DType t, int64_t n) override;
  void embedding_forward(void* out, const void* wte, const int32_t* tokens, int64_t N, int64_t C,
                         DType t) override;
  void embedding_backward(void* dwte, const void* dout, const int32_t* tokens, int64_t N, int64_t C,
                          DType t) override;
  void rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight, int64_t N, int64_t C,
                       float eps, DType t) override;
  void rmsnorm_backward(void* dinp, void* dweight, const void* dout, const void* inp, const void* weight,
                        const float* rstd, int64_t N, int64_t C, DType t) override;
  void rotary(void* x, int64_t B, int64_t T, int64_t H, int64_t D, float theta, bool backward,
              DType t) override;
  void swiglu_forward(void* out, const void* gate, const void* up, int64_t N, int64_t I, DType t) override;
  void swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up, int64_t N,
                       int64_t I, DType t) override;
  void attention_forward(void* out, float* lse, const void* q, const void* k, const void* v, int64_t B,
                         int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) override;
  void attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q, const void* k,
                          const void* v, const void* out, const float* lse, int64_t B, int64_t T, int64_t Hq,
                          int64_t Hkv, int64_t D, DType t) override;
  void cross_entropy_forward(float* losses, const void* logits, const int32_t* targets, int64_t N, int64_t V,
                             DType t) override;
  void cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets, float dloss,
                              int64_t N, int64_t V, DType t) override;
  void adam_step(std::span<const AdamChunk> chunks, const AdamParams& p, MemTier tier) override;
  // MoE kernels: forwarded when the inner backend has them. The routed rows' gathers and scatters
  // are modelled as reading/writing the whole [N, C] tensor (the rows the pairs name are a subset).
  bool has_moe_kernels() const override { return inner_.has_moe_kernels(); }
  void moe_route_forward(float* probs, int32_t* idx, float* weights, const void* logits, int64_t N, int64_t E,
                         int64_t k, bool renorm, DType t) override;
  void moe_route_backward(void* dlogits, const float* dweights, const float* probs, const int32_t* idx,
                          int64_t N, int64_t E, int64_t k, bool renorm, DType t) override;
  void gather_rows(void* out, const void* in, const int32_t* pairs, int64_t R, int64_t C, int64_t k,
                   DType t) override;
  void scatter_add_rows(void* out, const void* in, const int32_t* pairs, const float* weights, int64_t R,
                        int64_t C, int64_t k, DType t) override;
  void scatter_add_rows_backward(void* din, float* dweights, const void* dout, const void* in,
                                 const int32_t* pairs, const float* weights, int64_t R, int64_t C, int64_t k,
                                 DType t) override;

 private:
  using Ranges = std::vector<StreamOrderModel::Range>;
  Agent stream_agent() const { return current_ == Stream::Compute ? Agent::Compute : Agent::Comm; }
  void on_stream(const char* op, const Ranges& reads, const Ranges& writes) {
    model_.operation(stream_agent(), op, reads, writes);
  }
  // The cuda backend's "wait_stream(current_stream()); then run on the CPU".
  void on_host(const char* op, const Ranges& reads, const Ranges& writes);
  bool is_host_memory(const void* p) const;  // not inside a Device-tier allocation (cuda on_host)
  // Rows of a [?, C] table named by tokens[0..N): one range per distinct row.
  Ranges token_rows(const void* table, const int32_t* tokens, int64_t N, int64_t row_bytes) const;

  Backend& inner_;
  bool inspect_tokens_ = true;
  Stream current_ = Stream::Compute;
  StreamOrderModel model_;
  std::map<uintptr_t, std::pair<uintptr_t, MemTier>> allocations_;  // start -> (end, tier), live
  std::array<int64_t, 2> collectives_{};
  std::array<std::array<bool, 2>, 2> dropped_{};  // [waiter][signaller]
  struct RecordedEvent {
    Stream stream;
    int64_t inner;
    StreamOrderModel::Clock clock;
  };
  std::vector<RecordedEvent> events_;  // record_event handles index this
};

// Forwards every collective to `inner` and records it as an operation on `backend`'s current
// stream (the NCCL communicator enqueues on the backend's current stream). Counters mirror the
// inner communicator's (the engine reads them per phase).
class StreamCheckingCommunicator final : public Communicator {
 public:
  StreamCheckingCommunicator(Communicator& inner, StreamCheckingBackend& backend)
      : inner_(inner), be_(backend) {}
  int rank() const override { return inner_.rank(); }
  int world_size() const override { return inner_.world_size(); }
  void all_reduce(void* buf, int64_t count, DType dtype) override;
  void reduce_scatter(const void* send, void* recv, int64_t count, DType dtype) override;
  void all_gather(const void* send, void* recv, int64_t count, DType dtype) override;
  void broadcast(void* buf, int64_t count, DType dtype, int root) override;
  void barrier() override;
  // The inner communicator's group, wrapped the same way (its collectives recorded on this backend).
  std::unique_ptr<Communicator> split(int color, int key) override;
  void abort() override { inner_.abort(); }

 private:
  void add_counter_delta(const CommCounters& before);
  Communicator& inner_;
  StreamCheckingBackend& be_;
  std::unique_ptr<Communicator> owned_;  // a split's inner communicator (inner_ refers to it)
};

// A Runtime whose every local rank runs through the two decorators above:
//   auto rt = make_stream_checking_runtime(make_cpu_runtime(4));
//   run_training(cfg, *rt);
//   EXPECT_TRUE(rt->all_violations().empty());
class StreamCheckingRuntime final : public Runtime {
 public:
  explicit StreamCheckingRuntime(std::unique_ptr<Runtime> inner);
  int world_size() const override { return inner_->world_size(); }
  std::vector<int> local_ranks() const override { return inner_->local_ranks(); }
  Backend& backend(int rank) override { return checker(rank); }
  Communicator& communicator(int rank) override;
  StreamCheckingBackend& checker(int rank);
  // Every local rank's kept violations, rank by rank (each rank keeps at most kMaxViolations).
  std::vector<StreamViolation> all_violations() const;
  int64_t violation_count() const;  // total, including those past the cap
  int64_t ops_on(Agent a) const;    // summed over local ranks
  int64_t collectives_on(Stream s) const;

 private:
  std::unique_ptr<Runtime> inner_;
  std::vector<std::unique_ptr<StreamCheckingBackend>> backends_;  // indexed by rank; null if not local
  std::vector<std::unique_ptr<StreamCheckingCommunicator>> comms_;
};

std::unique_ptr<StreamCheckingRuntime> make_stream_checking_runtime(std::unique_ptr<Runtime> inner);

}  // namespace zeroplan::exec
