#pragma once
// Element load/store for the cpu side: widen 16-bit values to fp32 on load, round once on store
// (Eigen::bfloat16 / Eigen::half round to nearest even).
#include <Eigen/Core>

#include "executor/communicator.h"

namespace zeroplan::exec {

inline float load_elem(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::BF16:
      return static_cast<float>(static_cast<const Eigen::bfloat16*>(p)[i]);
    case DType::F16:
      return static_cast<float>(static_cast<const Eigen::half*>(p)[i]);
  }
  return 0;
}

inline void store_elem(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::F32:
      static_cast<float*>(p)[i] = v;
      break;
    case DType::BF16:
      static_cast<Eigen::bfloat16*>(p)[i] = Eigen::bfloat16(v);
      break;
    case DType::F16:
      static_cast<Eigen::half*>(p)[i] = Eigen::half(v);
      break;
  }
}

}  // namespace zeroplan::exec
