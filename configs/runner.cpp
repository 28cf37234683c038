#include "configs/runner.h"

#include "common/errors.h"

namespace zeroplan::configs {

std::string_view runner_name(Runner r) {
  switch (r) {
    case Runner::DeepSpeed:
      return "deepspeed";
    case Runner::HF:
      return "hf";
    case Runner::Accelerate:
      return "accelerate";
  }
  return "deepspeed";
}

Runner parse_runner(std::string_view s) {
  if (s == "deepspeed") return Runner::DeepSpeed;
  if (s == "hf" || s == "transformers") return Runner::HF;
  if (s == "accelerate") return Runner::Accelerate;
  throw_user_error("--runner '{}' is not one of deepspeed, hf, accelerate", s);
}

}  // namespace zeroplan::configs
