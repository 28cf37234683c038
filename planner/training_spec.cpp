#include "planner/training_spec.h"

namespace zeroplan::planner {

// The spellings below are the CLI's flag values and the JSON contract's strings (issue 2).
std::string to_string(Precision p) {
  switch (p) {
    case Precision::BF16:
      return "bf16";
    case Precision::FP16:
      return "fp16";
    case Precision::FP32:
      return "fp32";
  }
  return "unknown";
}

std::string to_string(Method m) {
  switch (m) {
    case Method::Full:
      return "full";
    case Method::LoRA:
      return "lora";
    case Method::QLoRA:
      return "qlora";
  }
  return "unknown";
}

std::string to_string(Offload o) {
  switch (o) {
    case Offload::None:
      return "none";
    case Offload::CPU:
      return "cpu";
    case Offload::NVMe:
      return "nvme";
  }
  return "unknown";
}

std::string to_string(Checkpointing c) {
  switch (c) {
    case Checkpointing::None:
      return "none";
    case Checkpointing::Selective:
      return "selective";
    case Checkpointing::Full:
      return "full";
  }
  return "unknown";
}

std::string to_string(Attention a) {
  switch (a) {
    case Attention::Flash:
      return "flash";
    case Attention::Eager:
      return "eager";
  }
  return "unknown";
}

}  // namespace zeroplan::planner
