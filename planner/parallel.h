#pragma once
// The plan's parallel layout (layout/parallel_layout.h) from the workload and the candidate's knobs:
// every rank is data-parallel except AutoEP's expert groups (z.ep_size) and Ulysses SP groups
// (w.train.sequence_parallel); TP stays 1 until the AutoTP issue. The planner reads group sizes from here,
// never from the world size (issue 25): ZeRO partitions over layout.zero(), expert states over
// layout.expert_dp().
#include "layout/parallel_layout.h"
#include "planner/training_spec.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

// The facts a layout is validated against, from the model and the run.
layout::LayoutFacts layout_facts(const Workload& w);

// The layout a candidate runs on (throws UserError if z.ep_size breaks a rule; the search only
// proposes valid ones).
layout::ParallelLayout layout_of(const Workload& w, const ZeroConfig& z);

// The data-parallel size: ranks that see distinct sequences, the GPUs over the sequence- and
// tensor-parallel sizes. Distinct sequences per step = micro x accum x this (the plan's global batch).
int64_t data_parallel_size(const Workload& w);

// The world DeepSpeed's batch arithmetic divides by (runtime/config.py DeepSpeedConfig: world_size =
// world / sequence_parallel_size without an mpu), so its train_batch_size = micro x accum x this.
// AutoTP ranks are counted as replicas: the config is built before deepspeed.initialize makes the TP
// groups (recorded: train_batch_size 8 for micro 2 at TP 2 x DP 2 on 4 ranks, fixtures-tp). Equal to
// data_parallel_size without TP.
int64_t deepspeed_batch_world(const Workload& w);

}  // namespace zeroplan::planner
