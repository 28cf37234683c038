#include "executor/admission.h"

#include <cstdio>
#include <cstring>

#include "common/checked.h"

namespace zeroplan::exec {

RunNeeds minimum_run_needs(const RunConfig& cfg, int world_size) {
  const LayoutSizes lo = layout_sizes(cfg);
  const int64_t N = world_size;
  const int stage = cfg.zero.stage;
  const int64_t act = cfg.mixed_precision ? 2 : 4;  // bf16 or fp32 (RankEngine::act_)
  const bool offload = cfg.zero.offload_optimizer;
  const bool has_master = cfg.mixed_precision || stage > 0;   // RankEngine::has_master
  const bool partitioned = stage > 0 || cfg.mixed_precision;  // RankEngine::partitioned_

  int64_t params16 = 0, part = 0, frozen = 0, staging_elems = 0;
  if (stage <= 2) {
    // setup(): flat 16-bit group padded to 2 x world size, split into N equal partitions.
    const int64_t align = 2 * N;
    const int64_t padded = (lo.total + align - 1) / align * align;
    part = partitioned ? padded / N : padded;
    params16 = padded;
    frozen = lo.frozen_total;
    staging_elems = padded + lo.frozen_total;
  } else {
    // setup(): every parameter partitioned on its own, ceil(numel / N) per rank.
    int64_t off = 0, frozen_off = 0;
    for (size_t i = 0; i < lo.numel.size(); ++i)
      (lo.frozen[i] ? frozen_off : off) += (lo.numel[i] + N - 1) / N;
    part = params16 = off;
    frozen = frozen_off;
    staging_elems = off + frozen_off;
  }
  RunNeeds r;
  int64_t& dev = r.device_per_rank;
  int64_t& host = r.host_tier_per_rank;
  dev = checked_add(checked_mul(params16, act), checked_mul(frozen, act));
  // fp32 master + exp_avg + exp_avg_sq over the partition, on the optimizer's tier.
  const int64_t opt = checked_mul(checked_mul(part, 4), has_master ? 3 : 2);
  (offload ? host : dev) = checked_add(offload ? host : dev, opt);
  const int64_t bucket = checked_mul(cfg.zero.reduce_bucket_size, act);
  switch (stage) {
    case 0:
      dev = checked_add(dev, checked_mul(params16, 4));  // grads32 (bf16) or fp32 grads16
      break;
    case 1:  // first backward: bucket(s) + param.grad for every parameter
      dev = checked_add(dev, checked_mul(bucket, cfg.zero.overlap_comm ? 2 : 1));
      dev = checked_add(dev, checked_mul(params16, act));
      break;
    case 2:  // bucket(s) + the 16-bit gradient partition, or the fp32 one on the host with offload
      dev = checked_add(dev, checked_mul(bucket, cfg.zero.overlap_comm ? 2 : 1));
      if (offload)
        host = checked_add(host, checked_mul(part, 4));
      else
        dev = checked_add(dev, checked_mul(part, act));
      break;
    default:  // 3: one reduce bucket + the gradient partition (fp32 on the host with offload)
      dev = checked_add(dev, bucket);
      if (offload)
        host = checked_add(host, checked_mul(part, 4));
      else
        dev = checked_add(dev, checked_mul(part, act));
      break;
  }
  // setup(): fp32 `host` + `frozen` vectors and their 16-bit images; run(): master_out (the whole
  // model in fp32) and `mine` (the partition in fp32).
  r.host_staging_per_rank = checked_mul(staging_elems, 4 + act);
  if (cfg.export_params) {
    r.host_export_per_rank = checked_add(checked_mul(lo.total, 4), checked_mul(part, 4));
    r.host_per_process = checked_mul(lo.total, 4);  // run_training: res.final_params
  }
  return r;
}

int64_t host_memory_available() {
  // /proc/meminfo is a procfs file (size 0 in stat); one small fixed read.
  std::FILE* f = std::fopen("/proc/meminfo", "re");
  if (!f) return -1;
  char line[256];
  int64_t kib = -1;
  while (std::fgets(line, sizeof line, f)) {
    long long v = 0;
    if (std::sscanf(line, "MemAvailable: %lld kB", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib < 0 ? -1 : kib * 1024;
}

}  // namespace zeroplan::exec
