// The time model (issue 4): compute, every collective DeepSpeed v0.16 issues, overlap, offload.
//
// Compute (per micro-step of b sequences of s tokens): planner/op_model.cpp lists the kernels
// (weight GEMMs 2*m*n*k FLOPs each, Kaplan et al. 2020 §2.1, backward = input grad + weight grad,
// frozen LoRA weights input grad only; causal flash attention 4*b*s^2*q/2 forward, 2.5x backward as
// in FlashAttention-2's benchmarks; HF eager norms, rotary, activation, residual, loss; DeepSpeed's
// gradient copies; fused Adam + norm/clip on the GPU), each timed on its roofline with measured
// efficiencies (planner/data/time_model.json). Full checkpointing re-runs each decoder layer's
// forward; selective recomputes the attention core (Korthikanti et al. 2022).
// MFU: PaLM (Chowdhery et al. 2022, Appendix B): (6N + 12*L*H*Q*T) FLOPs per token, no recompute,
// over the GPU's dense peak, with the attention term halved for causal attention (see below) and
// LoRA's frozen weights at 4N; HFU adds the recomputed forward. flops_per_step is per GPU: that
// formula times the GPU's tokens per step.
// Compute: the operator table of planner/op_model.cpp (kernels of forward, backward, recompute and
// the optimizer step, each max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth), passes
// bounded below by host launch time), calibrated in planner/data/time_model.json.
//
// Communication (DeepSpeed v0.16, deepspeed/runtime/...):
//  - stage 0 (engine.py allreduce_gradients -> buffered_allreduce_fallback): grads all-reduced in
//    buckets of allreduce_bucket_size elements (we emit reduce_bucket_size for it) at the
//    accumulation boundary, after the backward: exposed. With bf16 the wrapper depends on the
//    version (planner/ds_runtime.h): 0.16.9 runs BF16_Optimizer (fp32 gradient accumulation,
//    engine.py get_data_types; the fp32 optimizer partitioned, the all-reduce cast to bf16, the
//    updated bf16 params all-gathered after the step by bf16_optimizer.py update_lp_params, as in
//    stage 1); 0.18+ keeps bf16 gradients and runs FP16_Optimizer over bf16 (the whole fp32
//    optimizer on every rank, one bf16 all-reduce, no all-gather).
//  - stage 1 (stage_1_and_2.py reduce_gradients / reduce_ready_partitions_and_remove_grads, which for
//    stage 1 runs only at the accumulation boundary): bucketed reduction of reduce_bucket_size
//    elements; average_tensor() with reduce_scatter=true and use_multi_rank_bucket_allreduce=true
//    (defaults) calls allreduce_and_scatter -> allreduce_bucket -> dist.all_reduce, and each rank
//    keeps its slice: all-reduce volume, 2(n-1)/n per byte. Then the step-end all-gather of the
//    updated 16-bit params: runtime/utils.py all_gather_dp_groups uses all_gather_into_tensor when
//    available (every NCCL build), one call per param group over the whole flat buffer (so
//    allgather_bucket_size does not split it; we model one param group).
//  - stage 2: the same bucketed all-reduce on EVERY micro-step (process_gradients: partition_gradients
//    reduces regardless of the boundary), then the step-end all-gather.
//  - stage 3 (partitioned_param_coordinator.py, partition_parameters.py, stage3.py): every
//    non-persistent parameter (numel > stage3_param_persistence_threshold) is all-gathered when its
//    module runs in the forward and again in the backward, except parameters whose reuse lies within
//    stage3_max_reuse_distance elements of traversal (__params_to_release keeps them: the last
//    layers before the forward/backward turn); each parameter padded to a multiple of n; gradients
//    reduce-scattered per micro-step in reduce_bucket_size buckets (__reduce_and_partition_ipg_grads);
//    no step-end all-gather (the next forward gathers).
//  - stage 3 host overhead: DeepSpeed's per-module hooks (time_model.json "stage3_hooks", measured
//    with DeepSpeed 0.19.8 by scripts/measure_zero3_hooks.py) on every module's forward and backward,
//    counted on top of the collectives (whose per-call latency is already in each gather's time,
//    comm_model.h); with the pass's kernel launches they form the host timeline, exposed where it
//    exceeds the pass's GPU timeline (compute and the communication it waits for).
//  - LoRA/QLoRA: only trainable (adapter) gradients are reduced and only trainable params are
//    all-gathered at the step end; stage 3 still gathers the frozen base weights.
// Overlap: stage 0 and step-end all-gathers are exposed; stage 1/2 bucket reduction with
// overlap_comm runs on a side stream during the backward (hidden except the last bucket, and never
// more than the backward it hides behind); without overlap_comm it runs on the compute stream
// (exposed); stage 3 prefetch (stage3_prefetch_bucket_size > 0) hides the next module's gather
// behind the current one except the first fetch of each pass, and overlap_comm hides the gradient
// reduce-scatter except the last bucket; with prefetch 0 every gather is exposed.
//
// Offload (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity, Rajbhandari et al. 2021):
//  - offload_optimizer=cpu: gradient partitions (16-bit) go D2H (stage 2/3: each micro-step, stage 1:
//    at the boundary), CPU Adam runs on the rank's partition, updated 16-bit params come back H2D;
//    all at the host link's pinned or pageable rate. The CPU Adam step is serial with the GPU
//    (DeepSpeed's default has no delayed parameter update).
//  - CPU Adam throughput: with --cpu-threads, DeepSpeed's measured host step (planner/cpu_optimizer.h);
//    without, kCpuAdamParamsPerSecPerNode below (assumption with its derivation).
//  - NVMe: optimizer states (12 bytes/param: fp32 param, m, v) read and written once per step per
//    partition, at the node's nvme_GBps shared by the node's ranks; NVMe params read per fetch.
//  - offload_param (stage 3): each gather first copies the rank's 16-bit partition H2D.
#include "planner/time_model.h"

#include <algorithm>
#include <cmath>

#include "common/checked.h"
#include "planner/checkpoint_offload.h"
#include "planner/collective_families.h"
#include "planner/comm_model.h"
#include "planner/cpu_optimizer.h"
#include "planner/ds_runtime.h"
#include "planner/engine_runtime.h"
#include "planner/expert_parallel.h"
#include "planner/muon.h"
#include "planner/op_model.h"
#include "planner/sequence_parallel.h"
#include "planner/tensor_parallel.h"
#include "planner/zero3_leaf.h"
#include "planner/zeropp_quant.h"

namespace zeroplan::planner {
namespace {

// ASSUMPTION (no CPU figure in the profiles): DeepSpeed CPU Adam (csrc/adam/cpu_adam_impl.cpp,
// AVX512/AVX2) is memory-bandwidth bound: per parameter it reads fp32 param, grad, m, v and writes
// param, m, v plus the 16-bit copy (~30 bytes); ~60 GB/s of usable DRAM bandwidth on a 2-socket
// training host gives 2e9 parameters/s per node, shared by the node's ranks. Cross-check: DeepSpeed
// PR #7474 (zero-offload tutorial, --bind_cores_to_rank) measures Qwen2.5-3B (3.09e9 parameters)
// with ZeRO offload on 2xA100-40GB and a 128-core host at 2383 ms per whole step, so its CPU Adam
// runs at >= 1.3e9 parameters/s; same order. `zeroplan calibrate` should measure it.
constexpr double kCpuAdamParamsPerSecPerNode = 2.0e9;

int64_t act_bytes(Precision p) {
  return p == Precision::FP32 ? 4 : 2;
}

// Collective time, from the workload's precomputed table when it applies (same numbers, no log2).
struct Timer {
  const CommTopology& topo;
  const CommCache* cache;  // null when the plan's cluster is not the one the cache was built for
  double operator()(CollectiveKind k, int64_t bytes) const {
    if (cache != nullptr)
      for (int i = 0; i < cache->size; ++i)
        if (cache->bytes[i] == bytes && cache->kind[i] == static_cast<uint8_t>(k)) return cache->time_s[i];
    return collective_time_s(topo, k, bytes);
  }
};

// Adds one collective family: `repeats` sequences (e.g. one per micro-step) of `per_repeat` calls,
// all of `message_bytes` but the last of each sequence (`last_message_bytes`). Returns its time.
double add_collective(StepTime& st, const Timer& timer, const char* name, CollectiveKind kind,
                      int64_t per_repeat, int64_t repeats, int64_t message_bytes,
                      int64_t last_message_bytes) {
  const CommTopology& topo = timer.topo;
  if (per_repeat <= 0 || repeats <= 0 || topo.ranks <= 1 || message_bytes <= 0) return 0;
  if (st.num_collectives >= kMaxCollectives) return 0;
  CollectiveCost& c = st.collectives[st.num_collectives++];
  c.name = name;
  c.kind = kind;
  c.count = per_repeat * repeats;
  c.message_bytes = message_bytes;
  const int64_t full = per_repeat - 1;
  c.bytes_per_rank = repeats * (full * bus_bytes_per_rank(kind, topo.ranks, message_bytes) +
                                bus_bytes_per_rank(kind, topo.ranks, last_message_bytes));
  c.time_s = static_cast<double>(repeats) *
             (static_cast<double>(full) * timer(kind, message_bytes) + timer(kind, last_message_bytes));
  return c.time_s;
}

// Bucketed reduction of `elems` 16-bit gradients in buckets of `bucket` elements.
struct Buckets {
  int64_t count = 0, bytes = 0, last_bytes = 0;
};
Buckets buckets_of(int64_t elems, int64_t bucket, int64_t elem_bytes) {
  Buckets b;
  if (elems <= 0) return b;
  bucket = std::max<int64_t>(1, bucket);
  b.count = (elems + bucket - 1) / bucket;
  b.bytes = std::min(elems, bucket) * elem_bytes;
  b.last_bytes = (elems - (b.count - 1) * bucket) * elem_bytes;
  return b;
}

// Adds `times` fetches of one module size, called in forward order. `reverse`: the pass runs
// backwards, so its first fetch is the last one added.
void add_fetch(FetchPass& p, const CommTopology& topo, int64_t message, int64_t times, bool reverse) {
  if (times <= 0) return;
  const double t = collective_time_s(topo, CollectiveKind::AllGather, message);
  if (p.calls == 0 || reverse) p.first_s = t;
  p.calls += times;
  p.bytes_per_rank += times * bus_bytes_per_rank(CollectiveKind::AllGather, topo.ranks, message);
  p.largest_message = std::max(p.largest_message, message);
  p.time_s += static_cast<double>(times) * t;
  p.partition_bytes += times * message / std::max(1, topo.ranks);
}

}  // namespace

namespace {

// DeepSpeed ZeRO-3's per-module hook host time of one micro-step (time_model.json "stage3_hooks").
struct Stage3HookHost {
  int64_t module_passes = 0;  // forward + backward + recomputed forward module calls
  double forward_s = 0, backward_s = 0;
};
Stage3HookHost stage3_hook_host(const Workload& w, const ModelStats& ms, const ZeroConfig& z) {
  const ComputeStats& s = ms.compute;
  const bool leaf =
      s.hooked_modules_per_layer_moe_leaf != s.hooked_modules_per_layer &&
      moe_block_is_leaf(ms.mem.moe_block_class, effective_moe_leaf(w, z), w.train.deepspeed_version);
  const int64_t per_layer = leaf ? s.hooked_modules_per_layer_moe_leaf : s.hooked_modules_per_layer;
  const int64_t in_layers = per_layer * s.num_layers + s.hooked_modules_layers_adjust;
  const int64_t per_pass = in_layers + s.hooked_modules_outside_layers;
  const int64_t recomputed = z.checkpointing == Checkpointing::Full ? in_layers : 0;
  const double hook_s = time_model_data().stage3_hook_us_per_module_pass * 1e-6 / w.train.host_speed;
  const double host_fwd = static_cast<double>(per_pass) * hook_s;
  const double host_bwd = static_cast<double>(per_pass + recomputed) * hook_s;
  return {2 * per_pass + recomputed, host_fwd, host_bwd};
}

// ZeRO-Offload's exposed time per step (optimizer on the host): gradient partitions D2H, CPU Adam on
// the node's partitions, the updated 16-bit partition H2D, NVMe traffic (header comment).
double optimizer_offload_s(const Workload& w, const ZeroConfig& z, int64_t partition, int64_t grad_bytes,
                           int64_t trainable, double host_bw, double bwd_micro) {
  double offload = 0;
  const double part_bytes = static_cast<double>(partition * grad_bytes);
  const int64_t accum = std::max<int64_t>(1, z.grad_accum);
  // Copies overlap the backward when overlap_comm is on (the reduce hooks' side stream).
  auto exposed = [&](double copy_s) { return z.overlap_comm ? std::max(0.0, copy_s - bwd_micro) : copy_s; };
  if (z.stage <= 2) {
    // ZeRO-1/2 (stage_1_and_2.py copy_grads_in_partition): at the boundary each gradient of the rank's
    // partition is cast on the GPU to the master dtype and copied into the host's fp32 buffer
    // (async_inplace_copy_grad_to_fp32_buffer_from_gpu): master bytes per parameter, 4 with fp32
    // masters (profiled on an H100: 402 D2H copies, 4.4 GB for 1.1B parameters,
    // docs/validation.md "H100, 2026-11-27"). With accumulation, async_accumulate_grad_in_cpu_via_gpu
    // also moves the 16-bit running sum: D2H after every micro-step that reduces (each at stage 2, the
    // boundary's at stage 1), H2D back before adding for each such micro-step after the first.
    // Per micro-step, the copies of that micro-step's reduction are exposed together.
    const double boundary = static_cast<double>(partition * master_bytes(z)) / host_bw;
    const double sum16 = part_bytes / host_bw;  // the 16-bit running sum, one way
    if (accum == 1) {
      offload += exposed(boundary);
    } else {
      offload += exposed(boundary + 2 * sum16);  // the boundary: H2D + add + D2H, then the fp32 copy
      if (z.stage == 2)
        offload +=
            exposed(sum16) + static_cast<double>(accum - 2) * exposed(2 * sum16);  // micro-steps 0..a-2
    }
  } else {
    // ZeRO-3 (stage3.py partition_grads, 0.19.8), every micro-step, for each gradient partition: the
    // host grad buffer (__param_id_to_grad_partition, pinned on the host under offload_optimizer) takes
    // a D2H copy and comes back with `grad_buffer.to(device)` ("to speed up the next few operations"),
    // or, after the first micro-step, goes H2D, is added to, and copied back: 2 x the gradient bytes per
    // micro-step. At the boundary _offload_grad_partition_at_boundary also copies the master-dtype
    // gradient to the optimizer's host buffer. They run on the reduce stream after each IPG bucket's
    // reduce-scatter, and the backward's epilogue waits for that stream: as for a bucketed reduction,
    // only what follows the first of k buckets can hide behind the rest of the backward (k =
    // ceil(trainable / reduce_bucket_size)), and the last bucket's share never hides. Measured on an
    // H100 (TinyLlama-1.1B, 4 x 2048, one bucket of 3; docs/validation.md "H100, 2026-11-27"): the
    // backward 138 ms longer than without offload at 16 threads (222 ms at 4).
    const int64_t buckets = std::max<int64_t>(
        1, ceil_div(std::max<int64_t>(1, trainable), std::max<int64_t>(1, z.reduce_bucket_size)));
    const double k = static_cast<double>(buckets);
    const double hide = buckets <= 1 ? 0.0 : bwd_micro * (1.0 - 1.0 / k);
    const auto exposed3 = [&](double copy_s) {
      return z.overlap_comm ? std::max(copy_s / k, copy_s - hide) : copy_s;
    };
    const double micro = 2.0 * part_bytes / host_bw;
    const double boundary = micro + static_cast<double>(partition * master_bytes(z)) / host_bw;
    offload += exposed3(micro) * static_cast<double>(accum - 1) + exposed3(boundary);
  }
  // CPU Adam on the node's partitions (the node's ranks share the host), then H2D of the updated
  // 16-bit params, unless they live on the host anyway (offload_param: the next gathers fetch them).
  // With --cpu-threads, DeepSpeed's host step as measured at that many threads per rank; without, the
  // earlier per-node assumption (kCpuAdamParamsPerSecPerNode).
  offload += w.train.cpu_threads > 0
                 ? cpu_optimizer_step_s(partition, z.stage, w.train.cpu_threads)
                 : static_cast<double>(partition) * w.cluster.gpus_per_node / kCpuAdamParamsPerSecPerNode;
  if (z.offload_param == Offload::None) offload += part_bytes / host_bw;
  if (z.offload_optimizer == Offload::NVMe && w.cluster.nvme_GBps > 0) {
    // Master param, m, v (fp32: 12 B/param; bf16 master 10, with bf16 states 6) read and written once
    // per step, the node's ranks share the disk.
    const double state_bytes =
        static_cast<double>(master_bytes(z) + moment_bytes(z, w.train.deepspeed_version));
    offload += 2.0 * state_bytes * static_cast<double>(partition) * w.cluster.gpus_per_node /
               (w.cluster.nvme_GBps * 1e9);
  }
  return offload;
}

// The checkpoint offload's PCIe time per step (planner/checkpoint_offload.h). The engine's forward D2H
// copies run on its side stream beside the next layers' compute, so only what a copy takes beyond one
// layer's share of the forward shows; its backward H2D copies are waited for by the compute stream
// (restore_input, no prefetch). The blocking path waits for both. The engine copies into pinned buffers,
// `.cpu()` into pageable memory: the GPU profile's two host-copy rates. Returns the exposed part.
double checkpoint_offload_s(const Workload& w, const ActivationStats& a, const ZeroConfig& z, double fwd,
                            StepTime& st) {
  const CheckpointOffloadPlan off = checkpoint_offload_plan(w.train, a.num_layers, z.checkpointing);
  const hw::GpuProfile& g = w.cluster.gpu;
  const double bw = (off.pinned ? g.host_pinned_GBps : g.host_pageable_GBps) * 1e9;
  // The CPU runtime's "device" is host memory: DeepSpeed skips the engine there (is_synchronized_device)
  // and `.cpu()` of a CPU tensor copies nothing.
  if (!off.active || !a.known || w.train.runtime == Runtime::Cpu || bw <= 0) return 0;
  const double accum = static_cast<double>(std::max<int64_t>(1, z.grad_accum));
  const int64_t bytes = a.layer_input_per_sample * std::max<int64_t>(1, z.micro_batch);
  const double copy = static_cast<double>(bytes) / bw;
  const double layer_fwd = fwd / static_cast<double>(a.num_layers);
  const double d2h = static_cast<double>(off.d2h_copies);
  const double h2d = static_cast<double>(off.h2d_copies);
  const double exposed_fwd = off.async ? std::max(0.0, copy - layer_fwd) * d2h : copy * d2h;
  st.checkpoint_copies = (off.d2h_copies + off.h2d_copies) * static_cast<int64_t>(accum);
  st.checkpoint_copy_bytes = bytes;
  st.checkpoint_copy_s = copy * (d2h + h2d) * accum;
  st.checkpoint_offload_s = (exposed_fwd + copy * h2d) * accum;
  return st.checkpoint_offload_s;
}

// Model FLOPs (PaLM Appendix B) and hardware FLOPs per GPU per step, and MFU/HFU over step_s.
void add_model_flops(const Workload& w, const ComputeStats& s, const ZeroConfig& z, StepTime& st) {
  const double tokens =
      static_cast<double>(z.micro_batch * std::max<int64_t>(1, z.grad_accum) * w.train.rank_seq_len());
  // Attention term: PaLM's 12*L*H*Q*T counts the full T x T score square; a causal decoder needs
  // only the lower triangle (FlashAttention-2 §4.1 halves the count for causal, and the kernels skip
  // the masked blocks), so, counting only the FLOPs the method needs (as for LoRA's frozen weights),
  // we count 6*L*H*Q*T. Under Ulysses SP a rank's tokens attend over the whole sequence T (for its
  // heads / sp heads: the same FLOPs per token), so T stays the sequence. Stated convention: MFUs that use
  // PaLM's full square read higher at long sequences (at 32k tokens the attention term exceeds 6N for a 7B
  // model).
  // Hybrids: only the attention layers have the term; the Gated DeltaNet layers' chunked rule and the
  // Mamba-2 layers' chunked scan count their forward and a backward of twice that, as a GEMM's 2N + 4N
  // (gated_delta_net.h, mamba2.h).
  const double attn = s.params_only
                          ? 0.0
                          : 6.0 * static_cast<double>(s.num_layers) * s.attention_layer_fraction *
                                static_cast<double>(s.attn_width) * static_cast<double>(w.train.seq_len);
  const double gdn_rule = 3.0 * (s.gdn_rule_flops_per_token_fwd + s.mamba2_scan_flops_per_token_fwd);
  st.flops_per_step = (s.model_flops_per_token_dense + attn + gdn_rule) * tokens;
  // Hardware FLOPs (Korthikanti et al. 2022 §6 / PaLM Appendix B "HFU"): what the GPU executes,
  // i.e. the model FLOPs plus the recomputed forward (full: the layers' weight GEMMs + the causal
  // attention forward 2*L*h*s per token = attn / 3; selective: the attention forward only).
  double recompute_flops = 0;
  if (!s.params_only && z.checkpointing == Checkpointing::Full) {
    recompute_flops = s.layer_gemm_flops_per_token_fwd -
                      recompute_skipped_flops_per_token(w, s, z.zero3_linear_wrap()) + attn / 3.0 +
                      gdn_rule / 3.0;
  }
  if (!s.params_only && z.checkpointing == Checkpointing::Selective) recompute_flops = attn / 3.0;
  st.hardware_flops_per_step = st.flops_per_step + recompute_flops * tokens;
  const double peak = peak_flops(w.cluster.gpu, w.train.precision);
  if (st.step_s > 0 && peak > 0) {
    st.mfu = st.flops_per_step / (st.step_s * peak);
    st.hfu = st.hardware_flops_per_step / (st.step_s * peak);
  }
}

}  // namespace

// Forward and backward fetch passes of stage 3 for one micro-step (rules in the header comment).
Stage3Fetches compute_stage3_fetches(const ComputeStats& s, const hw::ClusterSpec& cluster,
                                     int64_t persistence_threshold, int64_t max_reuse_distance,
                                     int64_t elem_bytes, int tp) {
  Stage3Fetches out;
  out.valid = true;
  out.persistence_threshold = persistence_threshold;
  out.max_reuse_distance = max_reuse_distance;
  out.elem_bytes = elem_bytes;
  const CommTopology topo = data_parallel_topology(cluster, tp);
  const int64_t n = topo.ranks;
  // Elements of the groups after group i in forward order, for the reuse-distance rule.
  int64_t after = 0;
  const int ng = static_cast<int>(s.groups.size());
  // Walk backwards to know, per group, how many trailing instances are kept between passes.
  std::array<int64_t, 64> kept_instances{};
  for (int gi = ng - 1; gi >= 0; --gi) {
    const ParamGroup& g = s.groups[gi];
    int64_t numel = 0;
    for (int64_t e : g.numels) numel += e;
    int64_t kept = 0;
    // Instance j from the end of this group has elements_after = after + j*numel; kept while the
    // traversal between its forward release and backward reuse (~2x that) is under the distance.
    while (kept < g.repeat && 2 * (after + kept * numel) < max_reuse_distance) ++kept;
    if (gi < 64) kept_instances[gi] = kept;
    after += g.repeat * numel;
  }
  for (int gi = 0; gi < ng; ++gi) {
    const ParamGroup& g = s.groups[gi];
    const int64_t kept = gi < 64 ? kept_instances[gi] : 0;
    for (int64_t e : g.numels) {
      if (e <= persistence_threshold) continue;    // ds_persist: stays whole on every rank
      const int64_t padded = (e + n - 1) / n * n;  // partition_parameters.py pads to ceil(e/n)
      add_fetch(out.forward, topo, padded * elem_bytes, g.repeat, false);
      add_fetch(out.backward, topo, padded * elem_bytes, g.repeat - kept, true);
    }
  }
  return out;
}

bool comm_cache_matches(const CommCacheKey& k, const hw::ClusterSpec& c, int tp) {
  return k.ranks == c.world_size() && k.tp == tp && k.nodes == c.nodes && k.nics == c.nics_per_node &&
         k.intra_latency_us == c.intra_node.latency_us && k.inter_latency_us == c.inter_node.latency_us &&
         k.intra_points == c.intra_node.busbw.points.size() &&
         k.inter_points == c.inter_node.busbw.points.size() && k.intra == c.intra_node.name &&
         k.inter == c.inter_node.name;
}

void fill_comm_cache(ComputeStats& s, const Workload& w) {
  CommCache& c = s.comm;
  c = CommCache{};
  const hw::ClusterSpec& cl = w.cluster;
  c.key = CommCacheKey{cl.world_size(),
                       cl.nodes,
                       cl.nics_per_node,
                       cl.intra_node.name,
                       cl.inter_node.name,
                       cl.intra_node.latency_us,
                       cl.inter_node.latency_us,
                       cl.intra_node.busbw.points.size(),
                       cl.inter_node.busbw.points.size()};
  const int tp = std::max(1, w.train.tensor_parallel);
  c.key.tp = tp;
  const CommTopology topo = data_parallel_topology(cl, tp);
  auto add = [&](CollectiveKind k, int64_t bytes) {
    if (c.size >= CommCache::kMaxEntries || bytes <= 0) return;
    for (int i = 0; i < c.size; ++i)
      if (c.bytes[i] == bytes && c.kind[i] == static_cast<uint8_t>(k)) return;
    c.kind[c.size] = static_cast<uint8_t>(k);
    c.bytes[c.size] = bytes;
    c.time_s[c.size] = collective_time_s(topo, k, bytes);
    ++c.size;
  };
  const int64_t elem = act_bytes(w.train.precision);
  const int64_t n = topo.ranks;
  for (int64_t bucket : kSearchBucketSizes) {
    const Buckets b = buckets_of(s.trainable_params, bucket, elem);
    for (CollectiveKind k : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter}) {
      add(k, b.bytes);
      add(k, b.last_bytes);
    }
    const Buckets b32 = buckets_of(s.trainable_params, bucket, 4);  // stage 0 bf16: fp32 grads
    add(CollectiveKind::AllReduce, b32.bytes);
    add(CollectiveKind::AllReduce, b32.last_bytes);
  }
  add(CollectiveKind::AllGather, (s.trainable_params + n - 1) / n * n * elem);
  const ZeroConfig d = ZeroConfig::deepspeed_defaults(3);
  c.stage3_default =
      compute_stage3_fetches(s, cl, d.param_persistence_threshold, d.max_reuse_distance, elem, tp);
  c.valid = true;
}

namespace {

// The optimizer wrapper DeepSpeed picks for this version, stage and dtypes (planner/ds_runtime.h,
// the rule the memory model and the per-call collective list follow): BF16_Optimizer (0.16.9's
// stage 0 in bf16; stage 0/1 with fp32 gradient accumulation on 0.18+) partitions the fp32
// optimizer over the ranks like stage 1 and all-gathers the bf16 partitions after the step;
// FP16_Optimizer over bf16 (0.18+/0.19 stage 0 with bf16 accumulation, DDP_BFLOAT16) and the plain
// fp32/fp16 stage 0 keep the whole optimizer on every rank and gather nothing.
struct OptimizerShare {
  bool bf16_optimizer = false;
  int64_t partition = 0;  // elements of the rank's optimizer partition
};
OptimizerShare optimizer_share(const Workload& w, const ComputeStats& s, const ZeroConfig& z, int64_t n) {
  const bool off_opt = z.stage >= 1 && z.offload_optimizer != Offload::None;
  const RuntimePath path =
      runtime_path(w.train.deepspeed_version, z.stage, w.train.precision, z.grad_accum_dtype, off_opt);
  OptimizerShare o;
  o.bf16_optimizer = z.stage == 0 && path.wrapper == OptimizerWrapper::BF16Optimizer;
  const int64_t trainable = s.trainable_params;
  o.partition = (z.stage == 0 && !o.bf16_optimizer) ? trainable : (trainable + n - 1) / n;
  return o;
}

// ZeRO++ qwZ / qgZ's element-wise kernels per micro-step (planner/zeropp_quant.h). Stage 3 gathers each
// non-persistent parameter once in the forward and once in the backward (the recompute reuses the
// backward's fetch), so the gathered elements are twice theirs; the launches are one dequantize per
// fetch (a module's parameters), a torch.cat and a cast per parameter, and the sender's cat, cast and
// quantize per fetch. qgZ treats every trained gradient, about five launches each.
void add_zeropp_quant_kernels(const Workload& w, const ComputeStats& s, const ZeroConfig& z, int64_t n,
                              RuntimeKernels& rt) {
  if (!z.qwz() && !z.qgz(w.cluster.nodes)) return;
  double gathered = 0, tensors = 0, fetches = 0, trained = 0, trained_tensors = 0;
  for (const ParamGroup& g : s.groups) {
    const double rep = static_cast<double>(g.repeat);
    fetches += rep * static_cast<double>(g.modules);
    for (size_t i = 0; i < g.numels.size(); ++i) {
      if (g.numels[i] > z.param_persistence_threshold) {
        gathered += rep * static_cast<double>(g.numels[i]);
        tensors += rep;
      }
      if (g.trainable[i]) {
        trained += rep * static_cast<double>(g.numels[i]);
        trained_tensors += rep;
      }
    }
  }
  if (z.qwz()) {
    rt.qwz_gathered_elems = 2.0 * gathered;
    rt.qwz_gathered_bytes_per_elem = qwz_gathered_bytes_per_elem(w.train.precision == Precision::BF16);
    rt.qwz_partition_elems = 2.0 * gathered / static_cast<double>(std::max<int64_t>(1, n));
    rt.qwz_partition_bytes_per_elem = kQwzPartitionBytesPerElem;
    rt.qwz_launches = 2.0 * (4.0 * fetches + 2.0 * tensors);
  }
  if (z.qgz(w.cluster.nodes)) {
    rt.qgz_grad_elems = trained;
    rt.qgz_bytes_per_elem = qgz_bytes_per_grad_elem(w.cluster.gpus_per_node, w.cluster.nodes);
    rt.qgz_launches = 5.0 * trained_tensors;
  }
}

// The DeepSpeed runtime's kernels for a rank's optimizer share (step_operator_table; estimate_time
// passes the share it has already computed).
RuntimeKernels step_runtime_kernels(const Workload& w, const ComputeStats& s, const ZeroConfig& z,
                                    const OptimizerShare& share, int64_t n) {
  const int64_t trainable = s.trainable_params;
  const bool bf16_optimizer = share.bf16_optimizer;
  RuntimeKernels rt;
  // runtime/base_optimizer.py _configure_master_weights (planner/zero_config.h).
  rt.master_bytes = static_cast<double>(master_bytes(z));
  rt.moment_bytes = static_cast<double>(moment_bytes(z, w.train.deepspeed_version));
  add_zeropp_quant_kernels(w, s, z, n, rt);
  if (z.muon && (z.stage == 1 || z.stage == 2)) {
    const MuonHoldings h = muon_holdings(w.model, n);
    const bool rank0 = w.train.models_rank0();
    rt.muon_ns_flops = rank0 ? h.ns_flops_rank0 : h.ns_flops_largest;
    rt.muon_ns_launches =
        static_cast<double>(kGramNsProducts * (rank0 ? h.matrices_rank0 : h.matrices_largest));
  }
  if (w.train.implementation != Implementation::ZeroplanEngine && trainable > 0) {
    // Gradient elements DeepSpeed touches before handing them to NCCL, per trained element (a =
    // gradient bytes: 16-bit, or fp32 under fp32 training and BF16_Optimizer's fp32 gradients):
    const double a = bf16_optimizer ? 4.0 : static_cast<double>(act_bytes(w.train.precision));
    const double buckets = std::ceil(static_cast<double>(trainable) /
                                     static_cast<double>(std::max<int64_t>(1, z.reduce_bucket_size)));
    if (z.stage == 3) {
      // stage3.py __avg_scatter_grads -> runtime/comm/coalesced_collectives.py reduce_scatter_coalesced
      // (0.19.8): torch.cat of every bucket's gradients into one rank-major padded flat buffer (r a,
      // w a; skipped only for a lone tensor divisible by the world size), then
      // tensor_partition_flat_buffer.div_(world_sz) (r a, w a), every micro-step.
      rt.zero3_linear_wrap = z.zero3_linear_wrap();
      // Under qgZ (several nodes) the matrices skip reduce_scatter_coalesced: their passes are
      // add_zeropp_quant_kernels' instead (the 1-D gradients' fallback is left out: under 0.1%).
      if (!z.qgz(w.cluster.nodes)) {
        rt.grad_reduce_name = "gradient bucket cat + pre-divide (reduce_scatter_coalesced)";
        rt.grad_reduce_bytes_per_elem = 4.0 * a;
        rt.grad_reduce_launches = 2.0 * buckets;
      }
    } else if (z.stage == 1 || z.stage == 2) {
      // stage_1_and_2.py average_tensor: tensor.div_(dp world size) over each bucket (r a, w a) before
      // the reduce/all-reduce; stage 2 reduces during the backward of every micro-step, stage 1 at
      // the accumulation boundary.
      rt.grad_reduce_name = "gradient bucket pre-divide (average_tensor div_)";
      rt.grad_reduce_bytes_per_elem = 2.0 * a;
      rt.grad_reduce_launches = buckets;
      rt.grad_reduce_every_micro_step = z.stage == 2;
    } else if (n > 1) {
      // Stage 0: engine.py allreduce_gradients -> buffered_allreduce_fallback -> allreduce_bucket at
      // the boundary: flatten the bucket (torch.cat, r a w a), div_ by the world size (r a w a), and
      // copy the unflattened result back into each .grad (r a w a).
      rt.grad_reduce_name = "gradient flatten + divide + copy back (engine allreduce_bucket)";
      rt.grad_reduce_bytes_per_elem = 6.0 * a;
      rt.grad_reduce_launches = 3.0 * buckets;
      rt.grad_reduce_every_micro_step = false;
    }
    // DeepSpeed's step as measured (time_model.json "deepspeed_step"): below-STREAM passes and
    // per-tensor launches. Stages 0 and 3 loop over every trained tensor; stages 1-2 over the tensors in
    // the rank's partition (stage_1_and_2.py params_in_partition).
    if (z.offload_optimizer == Offload::None) {
      const TimeModelData& d = time_model_data();
      const auto& c = z.stage == 3 ? d.ds_step_stage3 : z.stage >= 1 ? d.ds_step_stage1_2 : d.ds_step_stage0;
      const int64_t tensors = s.step_param_tensors;
      const double per_rank =
          z.stage == 1 || z.stage == 2
              ? std::ceil(static_cast<double>(tensors) / static_cast<double>(std::max<int64_t>(1, n)))
              : static_cast<double>(tensors);
      rt.step_bandwidth_fraction = c.bandwidth_fraction;
      rt.step_ops = c.ops_per_param_tensor * per_rank;
      rt.step_host_us_per_op = c.host_us_per_op;
    }
  }
  return rt;
}

// Elements of the optimizer partition the GPU steps (none when the optimizer is offloaded).
int64_t gpu_optimizer_params(const ZeroConfig& z, const OptimizerShare& share) {
  return z.offload_optimizer == Offload::None ? share.partition : 0;
}

}  // namespace

OpTable step_operator_table(const Workload& w, const ComputeStats& s, const ZeroConfig& z) {
  const int64_t n = data_parallel_topology(w.cluster, w.train.tensor_parallel).ranks;
  const OptimizerShare share = optimizer_share(w, s, z, n);
  return operator_table(w, s, z.micro_batch, z.checkpointing, gpu_optimizer_params(z, share),
                        step_runtime_kernels(w, s, z, share, n));
}

namespace {

// What the communication sections of one step share: the plan, its compute per micro-step and the
// collective list (StepTime::collectives) they append to. Each section adds the exposed time of what
// it appended to the step's running total, passed by reference so that the floating-point sum keeps
// the order it had when this was one function (compare_plans: byte-identical).
struct StepComm {
  const Workload& w;
  const ModelStats& ms;
  const ZeroConfig& z;
  const Timer& timer;
  StepTime& st;
  int n;
  int64_t accum;
  int64_t grad_bytes;  // 16-bit grads/params; fp32 training 4
  int64_t trainable;
  bool cached;                    // the model stats' collective cache is this cluster's
  double fwd, bwd_micro;          // per micro-step: the forward, and the backward with its recomputation
  double launch_fwd, launch_bwd;  // host time of the passes' kernel launches
  bool ds_calls;  // DeepSpeed's per-call list (planner/collective_families.h) prices the collectives
  const CallFamilies& fam;
  const Buckets& b;  // the bucket arithmetic where the list does not apply
  bool bf16_optimizer;
  // Bucketed reduction with overlap_comm: bucket i of k is full after (i+1)/k of the backward, so
  // the reduction stream can only start after the first 1/k of it; one bucket cannot overlap at all
  // (stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads reduces a bucket when full).
  double hideable(int64_t buckets) const {
    return buckets <= 1 ? 0.0 : bwd_micro * (1.0 - 1.0 / static_cast<double>(buckets));
  }
  // The step's communication sections (below); each adds its collectives to `st` and its exposed time
  // to `exposed`.
  void data_parallel_comm(double& exposed);
  void stage3_micro_step_comm(double& exposed, FetchPass& forward, FetchPass& backward);
  void stage3_after_step_comm(double& exposed, const FetchPass& pf, const FetchPass& pb, int64_t partition,
                              double host_bw, double& offload);
  // Appends one family of DeepSpeed's call list; returns its time (0 when absent or on one rank).
  double add_family(const char* name, CallFamilyId id) {
    const CallFamily& f = fam[id];
    if (f.calls <= 0 || n <= 1 || st.num_collectives >= kMaxCollectives) return 0.0;
    st.collectives[st.num_collectives++] = {name,     f.kind, f.calls, f.largest_bytes, f.bus_bytes_per_rank,
                                            f.time_s, 0};
    return f.time_s;
  }
  void set_exposed(double e) {
    if (st.num_collectives > 0) st.collectives[st.num_collectives - 1].exposed_s = e;
  }
};

// Stages 0-2 (and stage 0's BF16_Optimizer): the gradient reduction, the step's scalar all-reduces and
// the step-end all-gather of the updated 16-bit parameters.
void StepComm::data_parallel_comm(double& exposed) {
  if (ds_calls) {
    const CallFamily& red = fam[kGradientReduction];
    if (z.stage <= 1) {
      const char* nm = red.to_owner   ? "gradient reduce to owning ranks (accumulation boundary)"
                       : z.stage == 0 ? "gradient all-reduce (accumulation boundary)"
                                      : "bucketed gradient all-reduce (accumulation boundary)";
      const double t = add_family(nm, kGradientReduction);
      // Stage 1 with overlap_comm reduces from the gradient hooks during the boundary's backward.
      const double e = z.stage == 1 && z.overlap_comm ? std::max(red.last_s, t - hideable(red.calls)) : t;
      if (t > 0) set_exposed(e);
      exposed += t > 0 ? e : 0.0;
    } else if (z.stage == 2) {
      const double t = add_family(red.to_owner ? "gradient reduce to owning ranks (every micro-step)"
                                               : "bucketed gradient all-reduce (every micro-step)",
                                  kGradientReduction);
      const double per_micro = t / static_cast<double>(accum);
      const int64_t calls_per_micro = red.calls / accum;
      const double e =
          z.overlap_comm ? std::max(red.last_s, per_micro - hideable(calls_per_micro)) : per_micro;
      if (t > 0) set_exposed(e * static_cast<double>(accum));
      exposed += t > 0 ? e * static_cast<double>(accum) : 0.0;
    }
    // After the backward: the overflow check's and the gradient norm's scalar all-reduces, then the
    // step; nothing hides them.
    const double ts = add_family("step scalar all-reduces (overflow, grad norm)", kStepScalars);
    if (ts > 0) set_exposed(ts);
    exposed += ts;
    const double tg = add_family("step-end parameter all-gather", kStepEndGather);
    if (tg > 0) set_exposed(tg);
    exposed += tg;
  } else if (z.stage == 0 || z.stage == 1) {
    const char* nm = z.stage == 0 ? "gradient all-reduce (accumulation boundary)"
                                  : "bucketed gradient all-reduce (accumulation boundary)";
    const double t =
        add_collective(st, timer, nm, CollectiveKind::AllReduce, b.count, 1, b.bytes, b.last_bytes);
    if (z.stage == 1 && z.overlap_comm) {
      const double last = timer(CollectiveKind::AllReduce, b.last_bytes);
      exposed += std::max(last, t - hideable(b.count));
    } else {
      exposed += t;
    }
    if (st.num_collectives > 0) st.collectives[st.num_collectives - 1].exposed_s = exposed;
  } else if (z.stage == 2) {
    const double t1 = add_collective(st, timer, "bucketed gradient all-reduce (every micro-step)",
                                     CollectiveKind::AllReduce, b.count, accum, b.bytes, b.last_bytes);
    const double per_micro = t1 / static_cast<double>(accum);
    double e = per_micro;
    if (z.overlap_comm) {
      const double last = timer(CollectiveKind::AllReduce, b.last_bytes);
      e = std::max(last, per_micro - hideable(b.count));
    }
    exposed += e * static_cast<double>(accum);
    if (st.num_collectives > 0)
      st.collectives[st.num_collectives - 1].exposed_s = e * static_cast<double>(accum);
  }
  if (!ds_calls && (z.stage == 1 || z.stage == 2 || bf16_optimizer)) {
    // Step-end all-gather of the updated 16-bit params: one call over the padded flat buffer
    // (stage_1_and_2.py step and bf16_optimizer.py update_lp_params both call all_gather_dp_groups).
    const int64_t msg = (trainable + n - 1) / n * n * grad_bytes;
    const double t =
        add_collective(st, timer, "step-end parameter all-gather", CollectiveKind::AllGather, 1, 1, msg, msg);
    exposed += t;
    if (st.num_collectives > 0 && t > 0) st.collectives[st.num_collectives - 1].exposed_s = t;
  }
}

// The fetch passes of one stage-3 micro-step: DeepSpeed's recorded-order fetches (one coalesced gather
// per fetch and per prefetch, partitioned_param_coordinator.py) averaged over the micro-steps, or the
// per-module estimate where the list does not apply (cached with the model stats for the defaults).
Stage3Fetches stage3_fetch_passes(const StepComm& c) {
  const ComputeStats& s = c.ms.compute;
  const ZeroConfig& z = c.z;
  const int64_t accum = c.accum, grad_bytes = c.grad_bytes;
  const Stage3Fetches& d = s.comm.stage3_default;
  const bool use_default = c.cached && d.valid && d.persistence_threshold == z.param_persistence_threshold &&
                           d.max_reuse_distance == z.max_reuse_distance && d.elem_bytes == grad_bytes;
  const auto per_micro = [&](const CallFamily& cf) {
    const double a = static_cast<double>(accum);
    return FetchPass{cf.calls / accum, cf.bus_bytes_per_rank / accum, cf.largest_bytes, cf.time_s / a,
                     cf.first_s,       cf.input_bytes / accum};
  };
  return c.ds_calls    ? Stage3Fetches{true,
                                    z.param_persistence_threshold,
                                    z.max_reuse_distance,
                                    grad_bytes,
                                    per_micro(c.fam[kStage3ForwardGathers]),
                                    per_micro(c.fam[kStage3BackwardGathers])}
         : use_default ? d
                       : compute_stage3_fetches(s, c.w.cluster, z.param_persistence_threshold,
                                                z.max_reuse_distance, grad_bytes, c.w.train.tensor_parallel);
}

// The backward's exposed communication per stage-3 micro-step: re-gathers are hidden by prefetch
// (except the first), the reduce-scatter by overlap_comm (except the last bucket); what is hidden
// shares the backward's duration. tb, trs: the re-gathers' and the reduce-scatter's time per micro-step.
double stage3_backward_exposed(const StepComm& c, const FetchPass& pb, double tb, double trs, double last_rs,
                               int64_t rs_calls) {
  const bool prefetch = c.z.prefetch_bucket_size > 0;
  if (prefetch && c.z.overlap_comm)
    return std::max(
        {pb.first_s + (trs > 0 ? last_rs : 0.0), tb + trs - c.bwd_micro, trs - c.hideable(rs_calls)});
  if (prefetch) return trs + pb.first_s + std::max(0.0, tb - pb.first_s - c.bwd_micro);
  if (c.z.overlap_comm) return tb + (trs > 0 ? std::max(last_rs, trs - c.hideable(rs_calls)) : 0.0);
  return tb + trs;
}

// Stage 3 per micro-step: the parameter fetches of the forward and of the backward (with its
// recomputation), the gradient reduce-scatter, and the module hooks' host time. `forward` and
// `backward` receive the fetch passes for what runs after the step.
void StepComm::stage3_micro_step_comm(double& exposed, FetchPass& forward, FetchPass& backward) {
  // Per-module hook host time (time_model.json "stage3_hooks"). Every hooked module pays it
  // in the forward and again in the backward; full checkpointing re-runs each decoder layer's
  // forward inside the backward, firing those modules' forward hooks again (selective
  // recomputation re-runs the attention core, a function, not a module: no hooks). What of it the
  // step shows is settled below, once the passes' exposed communication is known.
  // A MoE block that is a ZeRO-3 leaf is hooked as one module (planner/zero3_leaf.h).
  const Stage3HookHost hooks = stage3_hook_host(w, ms, z);
  const double host_fwd = hooks.forward_s, host_bwd = hooks.backward_s;
  st.hooked_module_calls = hooks.module_passes * accum;
  st.hook_host_s = (host_fwd + host_bwd) * static_cast<double>(accum);

  const Stage3Fetches f = stage3_fetch_passes(*this);
  const FetchPass& pf = f.forward;
  const FetchPass& pb = f.backward;
  const bool prefetch = z.prefetch_bucket_size > 0;
  const double af = static_cast<double>(accum);
  double ef = 0;  // forward gathers' exposed time per micro-step
  if (pf.calls > 0 && n > 1 && st.num_collectives + 3 <= kMaxCollectives) {
    CollectiveCost& cf = st.collectives[st.num_collectives++];
    cf = {kStage3ForwardGathersName,
          CollectiveKind::AllGather,
          pf.calls * accum,
          pf.largest_message,
          pf.bytes_per_rank * accum,
          pf.time_s * af,
          0};
    // Prefetch (stage3_prefetch_bucket_size > 0) gathers the next modules while the current one
    // computes; with prefetch off every gather waits on the compute stream.
    ef = prefetch ? pf.first_s + std::max(0.0, pf.time_s - pf.first_s - fwd) : pf.time_s;
    cf.exposed_s = ef * af;
    exposed += cf.exposed_s;
  }
  // Backward: re-gathers and the gradient reduce-scatter share the link; hidden behind the
  // backward except the first fetch and the last bucket.
  const Buckets rb = buckets_of(trainable, z.reduce_bucket_size, grad_bytes);
  double tb = 0;
  if (pb.calls > 0 && n > 1) {
    CollectiveCost& cb = st.collectives[st.num_collectives++];
    cb = {kStage3BackwardGathersName,
          CollectiveKind::AllGather,
          pb.calls * accum,
          pb.largest_message,
          pb.bytes_per_rank * accum,
          pb.time_s * af,
          0};
    tb += pb.time_s;
    // ZeRO++ hpZ: every backward gather reads the secondary partitions, inside the hpZ group.
    const int hpz = z.hpz(w.cluster.world_size());
    if (ds_calls && hpz > 1 &&
        fam[kStage3BackwardGathers].secondary_calls == fam[kStage3BackwardGathers].calls) {
      cb.group = "hpz";
      cb.group_size = hpz;
    }
  }
  const int rs_index = st.num_collectives;
  const double trs =
      (ds_calls ? add_family(z.qgz(w.cluster.nodes) ? kStage3QgzName : kStage3ReduceScatterName,
                             kStage3ReduceScatter)
                : add_collective(st, timer, kStage3ReduceScatterName, CollectiveKind::ReduceScatter, rb.count,
                                 accum, rb.bytes, rb.last_bytes)) /
      af;
  const double last_rs =
      ds_calls ? fam[kStage3ReduceScatter].last_s : timer(CollectiveKind::ReduceScatter, rb.last_bytes);
  const int64_t rs_calls = ds_calls ? fam[kStage3ReduceScatter].calls / accum : rb.count;
  const double eb = stage3_backward_exposed(*this, pb, tb, trs, last_rs, rs_calls);
  exposed += eb * af;
  // The hooks run on the host thread that launches the kernels, and v0.16 lets that thread run
  // ahead of the GPU (gathers are asynchronous on their own stream; the host only blocks on the
  // fetch event 3 fetches back, partitioned_param_coordinator.py __max_ongoing_fetch_events = 2).
  // The host waits only on the gather stream, so where communication is the bottleneck the hooks
  // run while gathers are in flight: host, compute and gathers form a pipeline, and a pass takes
  // max(GPU timeline, host timeline), the GPU timeline being its compute plus the communication
  // it waits for, the host timeline its hooks plus its kernel launches. The hooks show only beyond that
  // (small modules, short sequences, small micro-batches: DeepSpeed issues #1174, #5047). ASSUMPTION:
  // overlap per pass (forward; backward with its recomputation), not per module, which is optimistic where
  // long and short modules alternate. The host timeline of a pass is its hooks plus its kernel launches
  // (the op table's host time): the measured hook time is what stage 3 adds beyond stage 0's launches
  // (time_model.json).
  st.hook_overhead_s = (std::max(0.0, launch_fwd + host_fwd - (fwd + ef)) +
                        std::max(0.0, launch_bwd + host_bwd - (bwd_micro + eb))) *
                       af;
  // Attribute the backward exposure proportionally to the two families.
  if (tb + trs > 0) {
    if (pb.calls > 0 && n > 1) st.collectives[rs_index - 1].exposed_s = eb * af * tb / (tb + trs);
    if (rs_index < st.num_collectives) st.collectives[rs_index].exposed_s = eb * af * trs / (tb + trs);
  }
  forward = pf;
  backward = pb;
}

// Stage 3 after the step: the persistent parameters' all-gathers, and with parameter offload the
// partitions' host transfers (added to `offload`).
void StepComm::stage3_after_step_comm(double& exposed, const FetchPass& pf, const FetchPass& pb,
                                      int64_t partition, double host_bw, double& offload) {
  const double af = static_cast<double>(accum);
  // After the optimizer step, the persistent parameters (numel <= stage3_param_persistence_threshold,
  // kept whole on every rank but updated as partitions) are all-gathered again: stage3.py
  // DeepSpeedZeroOptimizer_Stage3._post_step -> persistent_parameters[0].all_gather(...). One
  // coalesced call per step over every rank's padded partitions (ceil(numel/N) per tensor); nothing
  // runs after the step, so it is exposed.
  if (ds_calls) {
    // partition_parameters.py _allgather_params_coalesced: one all-gather per persistent parameter.
    const double tp = add_family("stage-3 persistent-parameter all-gathers after step", kPersistentGathers);
    exposed += tp;
    if (tp > 0) set_exposed(tp);
  } else {
    const int64_t t = z.param_persistence_threshold;
    const int64_t per_rank = ms.mem.trainable_tensors.partition_numel_at_or_below(t, n) +
                             ms.mem.frozen_tensors.partition_numel_at_or_below(t, n);
    const int64_t msg = per_rank * n * grad_bytes;
    const double tp = add_collective(st, timer, "stage-3 persistent-parameter all-gather after step",
                                     CollectiveKind::AllGather, 1, 1, msg, msg);
    exposed += tp;
    if (tp > 0) st.collectives[st.num_collectives - 1].exposed_s = tp;
  }
  if (z.offload_param != Offload::None) {
    // Each gather first brings the rank's 16-bit partition from the host (ZeRO-Infinity);
    // prefetch overlaps it with compute like the gathers themselves.
    const double h2d = static_cast<double>(pf.partition_bytes + pb.partition_bytes) / host_bw;
    double t = h2d;
    if (z.offload_param == Offload::NVMe && w.cluster.nvme_GBps > 0)
      t = std::max(t,
                   static_cast<double>((pf.partition_bytes + pb.partition_bytes) * w.cluster.gpus_per_node) /
                       (w.cluster.nvme_GBps * 1e9));
    offload += std::max(0.0, t - (fwd + bwd_micro)) * af;
    // With the optimizer on the GPU, its updated 16-bit partition goes back to the host after the
    // step (D2H, exposed: nothing runs after the step).
    if (z.offload_optimizer == Offload::None)
      offload += static_cast<double>(partition * grad_bytes) / host_bw;
  }
}

}  // namespace

StepTime estimate_time(const Workload& w, const ModelStats& ms, const ZeroConfig& z) {
  const ComputeStats& s = ms.compute;
  const hw::GpuProfile& g = w.cluster.gpu;
  const CommTopology topo = data_parallel_topology(w.cluster, w.train.tensor_parallel);  // ZeRO's group
  const int n = topo.ranks;
  const int64_t accum = std::max<int64_t>(1, z.grad_accum);
  const int64_t grad_bytes = act_bytes(w.train.precision);  // 16-bit grads/params; fp32 training 4
  const bool cached = s.comm.valid && comm_cache_matches(s.comm.key, w.cluster, w.train.tensor_parallel);
  const Timer timer{topo, cached ? &s.comm : nullptr};
  StepTime st;

  // ---- compute, per micro-step: the operator table (op_model.cpp)
  const int64_t trainable = s.trainable_params;
  const OptimizerShare share = optimizer_share(w, s, z, n);
  const auto [bf16_optimizer, partition] = share;
  // The sums of the table --explain-time prints (step_operator_table).
  const OpTotals ops = operator_totals(w, s, z.micro_batch, z.checkpointing, gpu_optimizer_params(z, share),
                                       step_runtime_kernels(w, s, z, share, n));
  const double fwd = ops.pass_s(OpPass::Forward);
  const double bwd = ops.pass_s(OpPass::Backward);
  const double recompute = ops.pass_s(OpPass::Recompute);
  const double optimizer = ops.pass_s(OpPass::Step);
  st.forward_s = fwd * static_cast<double>(accum);
  st.backward_s = bwd * static_cast<double>(accum);
  st.recompute_s = recompute * static_cast<double>(accum);
  st.optimizer_s = optimizer;
  st.compute_s = st.forward_s + st.backward_s + st.recompute_s + st.optimizer_s;
  st.kernels_per_step =
      (ops.kernels[0] + ops.kernels[1] + ops.kernels[2]) * static_cast<double>(accum) + ops.kernels[3];
  const double bwd_micro = bwd + recompute;  // what backward-time communication can hide behind
  const double launch_fwd = ops.host_s[static_cast<size_t>(OpPass::Forward)];
  const double launch_bwd =
      ops.host_s[static_cast<size_t>(OpPass::Backward)] + ops.host_s[static_cast<size_t>(OpPass::Recompute)];
  st.launch_host_forward_s = launch_fwd * static_cast<double>(accum);
  st.launch_host_backward_s = launch_bwd * static_cast<double>(accum);

  // ---- communication
  double exposed = 0;
  // BF16_Optimizer hands DeepSpeed's engine its fp32 gradient buffers (bf16_optimizer.py
  // get_grads_for_reduction), which allreduce_bucket casts to communication_data_type (the model's
  // bf16) before the all-reduce: 2 bytes (recorded: llama-gqa_s1_n2_bf16_gaccfp32 and the 0.16.9
  // stage-0 fixtures, one bf16 all-reduce). zeroplan's native engine all-reduces the fp32 buffer as it
  // is: 4 bytes (planner/engine_runtime.h).
  const bool engine = w.train.implementation == Implementation::ZeroplanEngine;
  const int64_t reduce_bytes =
      bf16_optimizer && engine && engine_gradient_rules().bf16_optimizer_allreduces_fp32 ? 4 : grad_bytes;
  const Buckets b = buckets_of(trainable, z.reduce_bucket_size, reduce_bytes);
  // DeepSpeed's own runs: every collective from its per-call list (planner/collective_families.h),
  // the one account `check --json`, `--json` and the report print. zeroplan's native engine, models
  // known by size only and QLoRA (whose frozen NF4 gathers the list does not carry) keep the bucket
  // arithmetic below.
  const bool ds_calls = !engine && !w.model.params_only && w.train.method != Method::QLoRA;
  CallFamilies fam;
  if (ds_calls) fam = deepspeed_call_families(w, ms, z, topo);
  StepComm c{w,      ms,  z,         timer,      st,         n,        accum, grad_bytes, trainable,
             cached, fwd, bwd_micro, launch_fwd, launch_bwd, ds_calls, fam,   b,          bf16_optimizer};
  c.data_parallel_comm(exposed);
  double offload = 0;
  const double host_bw = (z.pin_memory ? g.host_pinned_GBps : g.host_pageable_GBps) * 1e9;
  if (z.stage == 3) {
    FetchPass pf, pb;
    c.stage3_micro_step_comm(exposed, pf, pb);
    c.stage3_after_step_comm(exposed, pf, pb, partition, host_bw, offload);
  }

  // ---- optimizer offload
  if (z.offload_optimizer != Offload::None)
    offload += optimizer_offload_s(w, z, partition, grad_bytes, trainable, host_bw, bwd_micro);
  // ---- checkpoint offload (--checkpoint-offload cpu only)
  offload += checkpoint_offload_s(w, ms.mem.act, z, fwd, st);

  for (int i = 0; i < st.num_collectives; ++i) {
    st.communication_s += st.collectives[i].time_s;
    st.comm_bytes_per_rank += st.collectives[i].bytes_per_rank;
  }
  st.exposed_communication_s = exposed;
  st.offload_s = offload;
  apply_expert_parallel_time(w, ms, z, st);    // z.ep_size > 1 only (planner/expert_parallel.h)
  apply_sequence_parallel_time(w, ms, z, st);  // --sp > 1 only (planner/sequence_parallel.h)
  apply_tensor_parallel_time(w, ms, z, st);    // --tp > 1 only (planner/tensor_parallel.h)
  // Compute that runs beside NCCL kernels is slowed by them (SMs and HBM shared): the hidden part of
  // the communication, bounded by the compute it hides behind, costs nccl_overlap_slowdown of itself
  // (planner/data/time_model.json "nccl_overlap").
  const double hidden = std::clamp(st.communication_s - st.exposed_communication_s, 0.0, st.compute_s);
  st.overlap_slowdown_s = hidden * time_model_data().nccl_overlap_slowdown;
  st.step_s =
      st.compute_s + st.exposed_communication_s + st.offload_s + st.hook_overhead_s + st.overlap_slowdown_s;
  st.error_band = time_model_data().error_band;

  add_model_flops(w, s, z, st);  // MFU and HFU need step_s
  return st;
}

}  // namespace zeroplan::planner
