// DeepSpeed runtime-path policy; see ds_runtime.h. Every rule cites the function it reads.
#include "planner/ds_runtime.h"

#include "common/errors.h"

namespace zeroplan::planner {

std::string to_string(DeepSpeedVersion v) {
  switch (v) {
    case DeepSpeedVersion::V0_16_9:
      return "0.16.9";
    case DeepSpeedVersion::V0_18_9:
      return "0.18.9";
    case DeepSpeedVersion::V0_19_8:
      return "0.19.8";
  }
  return "unknown";
}

DeepSpeedVersion parse_deepspeed_version(std::string_view s) {
  // Major.minor decides; a patch (or "x") after it is accepted.
  auto minor_is = [&](std::string_view mm) {
    return s == mm || (s.size() > mm.size() && s.substr(0, mm.size()) == mm && s[mm.size()] == '.');
  };
  if (minor_is("0.16")) return DeepSpeedVersion::V0_16_9;
  if (minor_is("0.18")) return DeepSpeedVersion::V0_18_9;
  if (minor_is("0.19")) return DeepSpeedVersion::V0_19_8;
  throw_user_error("unknown --deepspeed-version '{}': modelled versions are 0.16.9, 0.18.9, 0.19.8", s);
}

std::string to_string(GradAccumDtype g) {
  switch (g) {
    case GradAccumDtype::Default:
      return "default";
    case GradAccumDtype::FP16:
      return "fp16";
    case GradAccumDtype::BF16:
      return "bf16";
    case GradAccumDtype::FP32:
      return "fp32";
  }
  return "unknown";
}

// runtime/config.py DtypeEnum accepts these spellings for data_types.grad_accum_dtype.
GradAccumDtype parse_grad_accum_dtype(std::string_view s) {
  if (s == "fp32" || s == "float32" || s == "float" || s == "torch.float32") return GradAccumDtype::FP32;
  if (s == "bf16" || s == "bfloat16" || s == "torch.bfloat16") return GradAccumDtype::BF16;
  if (s == "fp16" || s == "float16" || s == "half" || s == "torch.float16") return GradAccumDtype::FP16;
  throw_user_error("data_types.grad_accum_dtype '{}' is not one of fp32, bf16, fp16", s);
}

const char* wrapper_name(OptimizerWrapper w) {
  switch (w) {
    case OptimizerWrapper::Basic:
      return "FusedAdam";  // the basic optimizer itself (ds_config "AdamW" -> FusedAdam)
    case OptimizerWrapper::FP16Optimizer:
      return "FP16_Optimizer";
    case OptimizerWrapper::BF16Optimizer:
      return "BF16_Optimizer";
    case OptimizerWrapper::ZeroStage1And2:
      return "DeepSpeedZeroOptimizer";
    case OptimizerWrapper::ZeroStage3:
      return "DeepSpeedZeroOptimizer_Stage3";
    case OptimizerWrapper::Unsupported:
      return "unsupported";
  }
  return "unknown";
}

namespace {

Precision dtype_of(GradAccumDtype g, Precision model) {
  switch (g) {
    case GradAccumDtype::FP32:
      return Precision::FP32;
    case GradAccumDtype::BF16:
      return Precision::BF16;
    case GradAccumDtype::FP16:
      return Precision::FP16;
    case GradAccumDtype::Default:
      return model;
  }
  return model;
}

}  // namespace

RuntimePath runtime_path(DeepSpeedVersion v, int stage, Precision model, GradAccumDtype g, bool offload_optimizer) {
  RuntimePath r;
  // DeepSpeedEngine.get_data_types: an unset grad_accum_dtype is the model dtype, except in 0.16.9
  // where bf16 without ZeRO defaulted to fp32 (`if model_dtype == torch.bfloat16 and not
  // self.zero_optimization(): grad_accum_dtype = torch.float32`); 0.18.9 and 0.19.8 dropped that branch.
  if (g == GradAccumDtype::Default && v == DeepSpeedVersion::V0_16_9 && model == Precision::BF16 && stage == 0)
    r.grad_accum = Precision::FP32;
  else
    r.grad_accum = dtype_of(g, model);

  // DeepSpeedEngine._do_optimizer_sanity_check (same in 0.16.9, 0.18.9, 0.19.8 for ZeRO):
  if (stage >= 1) {
    // "if model_dtype == torch.bfloat16 and grad_accum_dtype == torch.float32 and
    //  zero_optimization_stage() == 1 and not zero_cpu_offload(): return BFLOAT16"
    if (stage == 1 && model == Precision::BF16 && r.grad_accum == Precision::FP32 && !offload_optimizer) {
      r.wrapper = OptimizerWrapper::BF16Optimizer;
      r.rule = "engine.py _do_optimizer_sanity_check: bf16 + fp32 grad_accum_dtype + stage 1 -> BF16_Optimizer";
    } else {
      r.wrapper = stage == 3 ? OptimizerWrapper::ZeroStage3 : OptimizerWrapper::ZeroStage1And2;
      r.rule = "engine.py _do_optimizer_sanity_check: ZeRO enabled -> _configure_zero_optimizer";
    }
    return r;
  }
  // Stage 0 ("data type checks" branch).
  if (model == r.grad_accum) {
    if (model == Precision::FP32) {
      r.wrapper = OptimizerWrapper::Basic;
      r.rule = "engine.py _do_optimizer_sanity_check: fp32 without ZeRO -> no wrapper";
    } else if (model == Precision::FP16) {
      r.wrapper = OptimizerWrapper::FP16Optimizer;
      r.rule = "engine.py _do_optimizer_sanity_check: fp16 -> FP16 -> FP16_Optimizer";
    } else if (v == DeepSpeedVersion::V0_16_9) {
      // 0.16.9: "Bfloat16 wrapper must use a gradient accumulation type of fp32, enable ZeRO to use
      // Bfloat16 gradient accumulation" (NotImplementedError).
      r.wrapper = OptimizerWrapper::Unsupported;
      r.rule = "DeepSpeed 0.16.9 engine.py _do_optimizer_sanity_check: bf16 gradient accumulation without ZeRO "
               "raises NotImplementedError";
    } else {
      // 0.18.9/0.19.8: `return FP16 if model_dtype == torch.float16 else DDP_BFLOAT16`, and
      // _configure_optimizer sends DDP_BFLOAT16 to _configure_fp16_optimizer(lp_dtype=bfloat16):
      // FP16_Optimizer over bf16 weights (full fp32 master + Adam states on every rank).
      r.wrapper = OptimizerWrapper::FP16Optimizer;
      r.rule = "engine.py _do_optimizer_sanity_check: bf16 grad_accum -> DDP_BFLOAT16 -> FP16_Optimizer(bf16)";
    }
    return r;
  }
  if (v == DeepSpeedVersion::V0_16_9 && model == Precision::BF16 && r.grad_accum == Precision::FP32) {
    // 0.16.9: "elif model_dtype == torch.bfloat16 and grad_accum_dtype == torch.float32: return BFLOAT16".
    r.wrapper = OptimizerWrapper::BF16Optimizer;
    r.rule = "DeepSpeed 0.16.9 engine.py _do_optimizer_sanity_check: bf16 + fp32 accumulation -> BF16_Optimizer";
    return r;
  }
  // 0.18.9/0.19.8: `raise NotImplementedError(f"unsupported mix of {model_dtype=} and {grad_accum_dtype=}")`.
  r.wrapper = OptimizerWrapper::Unsupported;
  r.rule = "engine.py _do_optimizer_sanity_check: unsupported mix of model dtype and grad_accum_dtype without "
           "ZeRO (NotImplementedError)";
  return r;
}

}  // namespace zeroplan::planner
