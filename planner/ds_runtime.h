#pragma once
// Which DeepSpeed runtime path a configuration runs, by DeepSpeed version (issue 12 item 4).
//
// DeepSpeed picks the optimizer wrapper from (ZeRO stage, model dtype, gradient-accumulation dtype,
// optimizer offload) in DeepSpeedEngine._do_optimizer_sanity_check (deepspeed/runtime/engine.py),
// after resolving the accumulation dtype in DeepSpeedEngine.get_data_types. That rule changed after
// 0.16: in 0.16.9 bf16 without ZeRO defaulted grad_accum_dtype to fp32 (-> BF16_Optimizer); from 0.18
// the default is the model dtype (-> DDP_BFLOAT16 -> FP16_Optimizer holding bf16 weights). Each path
// is one small policy (RuntimePath) that the memory model (named buffers) and the collective list
// (ds_runtime_collectives.h) consume, instead of one long stage branch.
#include <cstdint>
#include <string>
#include <string_view>

#include "planner/training_spec.h"

namespace zeroplan::planner {

// DeepSpeedVersion (the modelled releases) is declared in training_spec.h (TrainingSpec selects it).
std::string to_string(DeepSpeedVersion v);  // "0.19.8"
// Accepts "0.19.8", "0.19", "0.19.x" (any patch of a modelled minor release maps to the modelled
// one; the rules above did not change within them). Anything else: UserError listing the versions.
DeepSpeedVersion parse_deepspeed_version(std::string_view s);

// data_types.grad_accum_dtype of a ds_config (runtime/config.py get_data_types_params); Default = unset.
enum class GradAccumDtype : uint8_t { Default, FP16, BF16, FP32 };
std::string to_string(GradAccumDtype g);  // "default", "fp16", "bf16", "fp32"
GradAccumDtype parse_grad_accum_dtype(std::string_view s);  // "fp32"/"float32"/"bf16"/"bfloat16"/"fp16"/"float16"

// The optimizer wrapper the engine ends up with: type(engine.optimizer).__name__ in DeepSpeed.
enum class OptimizerWrapper : uint8_t {
  Basic,           // no wrapper: the torch/DeepSpeed optimizer on the fp32 params (fp32 without ZeRO)
  FP16Optimizer,   // runtime/fp16/fused_optimizer.py FP16_Optimizer (fp16, and bf16 via DDP_BFLOAT16 >= 0.18)
  BF16Optimizer,   // runtime/bf16_optimizer.py BF16_Optimizer (fp32 accumulation, partitioned fp32 states)
  ZeroStage1And2,  // runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer
  ZeroStage3,      // runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3
  Unsupported,     // DeepSpeed raises NotImplementedError for this dtype mix (reason in RuntimePath::rule)
};
const char* wrapper_name(OptimizerWrapper w);  // DeepSpeed's class name ("FP16_Optimizer", ...)

struct RuntimePath {
  OptimizerWrapper wrapper = OptimizerWrapper::ZeroStage1And2;
  Precision grad_accum = Precision::BF16;  // resolved gradient-accumulation dtype
  const char* rule = "";                   // the DeepSpeed code that decides it
};

// Pure: the path DeepSpeed `v` takes. `offload_optimizer` matters only for the stage-1 BF16 rule.
RuntimePath runtime_path(DeepSpeedVersion v, int stage, Precision model_dtype, GradAccumDtype g,
                         bool offload_optimizer);

}  // namespace zeroplan::planner
