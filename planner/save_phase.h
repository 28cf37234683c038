#pragma once
// The checkpoint save (issue 28 item 4): what saving costs a plan in disk and host RAM, and whether
// the node can hold it. Runs that train for hours die at their first save when the save needs more
// host RAM than the node has left (gathering a 30B model for a 16-bit save needs >= 60 GB, FastChat
// PR #1457; LlamaFactory#7532).
//
// Two saves, as the HF Trainer makes them (Trainer._save_checkpoint: save_model, then the DeepSpeed
// checkpoint), one after the other:
//  - DeepSpeed's checkpoint, engine.save_checkpoint (DeepSpeed 0.19.8 runtime/engine.py
//    _save_checkpoint / _save_zero_checkpoint): rank 0 writes mp_rank_00_model_states.pt (the module's
//    16-bit state dict, and at stage 0 the optimizer's fp32 master and moments too); at stages 1-3 every
//    rank writes zero_pp_rank_<r>_mp_rank_00_optim_states.pt (its partition of the master and of Adam's
//    moments); at stage 3 the module state files hold no weights.
//  - the 16-bit model, engine.save_16bit_model (what Trainer.save_model calls): rank 0 writes the whole
//    model in its 16-bit dtype; at stage 3 only with stage3_gather_16bit_weights_on_model_save, when
//    _zero3_consolidated_16bit_state_dict gathers every module and keeps each parameter on rank 0's host
//    (param.detach().cpu()), so rank 0 holds the whole 16-bit model in host RAM.
// torch.save (torch/serialization.py _save) copies one storage at a time from the GPU to the host
// (storage.cpu()) and writes it: a rank saving GPU tensors holds its largest storage on the host at a
// time, and every rank of a node saves at once.
// Recorded with DeepSpeed 0.19.8 on CPU ranks (tests/deepspeed/fixtures/0.19.8/*_save*.json): every
// file's size and rank 0's host peak of the 16-bit consolidation (tests/test_conformance.cpp). The
// device-to-host copies of torch.save cannot show on CPU ranks (.cpu() of a CPU tensor is itself):
// they rest on the torch code above.
#include <cstdint>

#include "planner/memory_breakdown.h"
#include "planner/model_stats.h"
#include "planner/training_spec.h"
#include "planner/zero_config.h"

namespace zeroplan::planner {

struct SaveEstimate {
  // DeepSpeed's checkpoint: tensor bytes of the files (pickle framing, a few KB per file, not counted).
  int64_t checkpoint_model_file_bytes = 0;  // mp_rank_00_model_states.pt (stages 0-2; 0 at stage 3)
  int64_t checkpoint_optim_file_bytes = 0;  // one rank's zero_pp_rank_*_optim_states.pt (stages 1-3)
  int64_t checkpoint_total_bytes = 0;       // every rank's files together (the disk one save takes)
  // The 16-bit model file (0 when save_16bit_model writes nothing: stage 3 without the gather).
  int64_t model16_file_bytes = 0;
  // Host RAM the save adds on the busiest node (node 0), beyond what training holds there: the larger
  // of the two saves (they run one after the other).
  int64_t checkpoint_host_bytes_node0 = 0;  // torch.save's storage-at-a-time copies of every rank
  int64_t model16_host_bytes_node0 = 0;     // rank 0's consolidated 16-bit model or its storage copy
  int64_t host_bytes_node0 = 0;             // max of the two
  bool host_ok = true;                      // training's host memory + the save's fit the node
};

// `training_host_per_node`: the host memory the plan already holds per node (MemoryBreakdown).
SaveEstimate estimate_save(const Workload& w, const ModelStats& s, const ZeroConfig& z,
                           int64_t training_host_per_node);

}  // namespace zeroplan::planner
