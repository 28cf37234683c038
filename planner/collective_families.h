#pragma once
// DeepSpeed's per-call collective list (ds_runtime_collectives.h) summarized by the code path that
// issues each call: the one account of a step's collectives that the time model, `check --json`, the
// plan's `--json` and the report's table all read (issue 23: they used to count buckets as
// ceil(Psi / bucket), stage-3 gathers per module and the post-step persistent gather as one call,
// while DeepSpeed reduces a parameter larger than the bucket alone, gathers once per fetch and
// gathers each persistent parameter on its own). Times are the calls' own nccl-tests costs
// (collective_time_s on the call's size), issued one after another.
#include <array>
#include <cstdint>

#include "planner/comm_model.h"
#include "planner/model_stats.h"
#include "planner/step_time.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

enum CallFamilyId : int {
  kGradientReduction,      // stages 0-2 and BF16_Optimizer: backward all-reduces / reduces to owners
  kStage3ForwardGathers,   // stage 3: forward fetch + prefetch all-gathers
  kStage3BackwardGathers,  // stage 3: backward re-gathers
  kStage3ReduceScatter,    // stage 3: gradient bucket reduce-scatters
  kStepScalars,            // step: overflow check and gradient-norm all-reduces (a few bytes each)
  kStepEndGather,          // stages 1/2 and BF16_Optimizer: the updated 16-bit partitions
  kPersistentGathers,      // stage 3 _post_step: one all-gather per persistent parameter
  kNumCallFamilies
};

struct CallFamily {
  CollectiveKind kind = CollectiveKind::AllReduce;
  bool to_owner = false;           // dist.reduce to the owning rank (use_multi_rank_bucket_allreduce false)
  int64_t calls = 0;               // per step
  int64_t secondary_calls = 0;     // of them, ZeRO++ hpZ's gathers in the secondary group (its own link)
  int64_t largest_bytes = 0;       // nccl-tests size S of the largest call (all-gather: output)
  int64_t bus_bytes_per_rank = 0;  // per step
  int64_t input_bytes = 0;         // this rank's input payloads per step (all-gather: its partitions)
  double time_s = 0;               // per step
  double first_s = 0;              // the step's first call of the family
  double last_s = 0;               // the step's last call of the family
};

struct CallFamilies {
  std::array<CallFamily, kNumCallFamilies> f{};
  const CallFamily& operator[](CallFamilyId id) const { return f[static_cast<size_t>(id)]; }
};

// The families of one step of z.grad_accum micro-steps on topology `t`. Micro-steps after the first
// repeat the second's calls (the stage-3 fetch state at the end of each micro-step's backward is the
// same), so the list is built for at most two micro-steps and extended linearly; results are cached
// per (workload, knobs) on the calling thread, since the search prices many candidates that differ
// only in micro-batch and checkpointing.
CallFamilies deepspeed_call_families(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                                     const CommTopology& t);

}  // namespace zeroplan::planner
