#pragma once
// Operator-level compute time (issue 13): the kernels one micro-step launches in the forward, the
// backward and the recomputation of HF Transformers (eager modules, SDPA attention) under DeepSpeed,
// and the optimizer step's kernels. Each operator has its FLOPs and HBM bytes; its time is the
// roofline max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth), the achievable rates coming
// from published measurements (planner/data/time_model.json, the GPU profile's GEMM curve and
// STREAM efficiency). A pass takes max(its GPU time, the host time to launch its kernels).
// PyTorch's estimator (torch/utils/_runtime_estimation.py, torch/distributed/_tools/
// runtime_estimator.py) is the reference point: per aten op, max(compute time at a fixed 75% of
// peak, transfer time of inputs + outputs at datasheet bandwidth). We replace its constant by
// shape-, kernel- and GPU-dependent efficiencies and add host launch time.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "planner/compute_stats.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

enum class OpPass : uint8_t { Forward, Backward, Recompute, Step };
inline constexpr int kNumOpPasses = 4;
const char* op_pass_name(OpPass p);

enum class OpBound : uint8_t { Compute, Memory };

// One operator family: `kernels` launches per micro-step (per optimizer step for OpPass::Step),
// together doing `flops` and moving `bytes`.
struct OpCost {
  const char* name = "";
  OpPass pass = OpPass::Forward;
  int64_t m = 0, n = 0, k = 0;  // GEMM shape [m,k] x [k,n] of one launch (0 when not a GEMM)
  double kernels = 0;
  double flops = 0;
  double bytes = 0;
  OpBound bound = OpBound::Compute;
  double efficiency = 0;  // achieved fraction of peak FLOP/s (compute) or of HBM bandwidth (memory)
  double time_s = 0;
};

inline constexpr int kMaxOps = 160;

// The per-pass sums of an operator table: what the step time reads (operator_totals).
struct OpTotals {
  std::array<double, kNumOpPasses> gpu_s{};    // sum of the pass's operator times
  std::array<double, kNumOpPasses> kernels{};  // launches
  std::array<double, kNumOpPasses> host_s{};   // host launch time of those kernels
  // Wall time of a pass: the GPU and the launching host thread overlap (asynchronous launches).
  double pass_s(OpPass p) const {
    const auto i = static_cast<size_t>(p);
    return gpu_s[i] > host_s[i] ? gpu_s[i] : host_s[i];
  }
};

// The operators themselves (what --explain-time prints) and their sums.
struct OpTable : OpTotals {
  std::array<OpCost, kMaxOps> ops{};
  int size = 0;
};

// planner/data/time_model.json, parsed once.
// The attention kernel a plan's attention core runs (issue 24 item 3), resolved from --kernels,
// --torch-version and the GPU by attention_backend().
enum class AttentionBackend {
  Eager,   // matmul + softmax + matmul, the s^2 scores materialised
  Flash2,  // FlashAttention-2: SDPA's flash backend, or attn_implementation="flash_attention_2"
  Flash3,  // attn_implementation="flash_attention_3" (Hopper)
  Cudnn,   // SDPA's cuDNN backend (torch >= 2.11 on Hopper picks it unforced)
};
std::string to_string(AttentionBackend b);

struct AttentionCurve {
  std::string name;
  std::string architecture;  // "hopper" for "flash2_hopper" (the curve PyTorch SDPA runs)
  AttentionBackend backend =
      AttentionBackend::Flash2;  // Flash3 for "flash3_<arch>", Cudnn for "cudnn_<arch>"
  double peak_tflops = 0;
  std::vector<double> seq, fwd, fwd_causal, bwd, eager_fwd, eager_bwd;  // TFLOP/s at peak_tflops
  std::vector<double> bwd_causal;  // measured causal backward (cuDNN); empty: derived from the forward
};
struct TimeModelData {
  std::vector<AttentionCurve> curves;
  std::vector<std::pair<std::string, std::string>> architecture;  // GPU name -> "hopper", ...
  std::string default_architecture;
  // "sdpa_backend": from which torch release, and on which architectures, SDPA runs cuDNN unforced.
  int sdpa_cudnn_min_torch = 0;  // major * 100 + minor (211 = torch 2.11)
  std::vector<std::string> sdpa_cudnn_architectures;
  double host_us_per_kernel = 0;
  // time_model.json "stage3_hooks": host time DeepSpeed ZeRO-3 adds per module pass (forward or
  // backward call of one hooked module), measured by scripts/measure_zero3_hooks.py.
  double stage3_hook_us_per_module_pass = 0;
  double nccl_overlap_slowdown = 0;
  // time_model.json "deepspeed_step": DeepSpeed's optimizer step as measured, per runtime path: the
  // fraction of the derived passes' bandwidth its kernels reach, and its per-parameter-tensor launches
  // with their host time.
  struct DeepSpeedStepCost {
    double bandwidth_fraction = 1.0;
    double ops_per_param_tensor = 0;
    double host_us_per_op = 0;
  };
  DeepSpeedStepCost ds_step_stage0, ds_step_stage1_2, ds_step_stage3;
  // time_model.json "cpu_optimizer": DeepSpeed's host optimizer step (offload_optimizer cpu), ns per
  // parameter of the rank's partition at each measured OpenMP thread count (planner/cpu_optimizer.h).
  struct CpuOptimizer {
    std::vector<int> threads;
    std::vector<double> ns_per_param_stage1_2, ns_per_param_stage3;
  };
  CpuOptimizer cpu_optimizer;
  // Calibrated, per architecture: sustained tensor-core throughput / microbenchmark throughput.
  std::vector<std::pair<std::string, double>> sustained_tensor_core_factor;
  // Calibrated: eager element-wise kernels' bandwidth / STREAM copy bandwidth (all GPUs).
  double elementwise_bandwidth_factor = 1;
  double error_band = 0;  // calibrated: fraction, e.g. 0.12
  // Eager attention (time_model.json "eager_attention"): the element-wise kernels transformers'
  // eager_attention_forward runs over the [b, heads, s, s] score tensor, per score element:
  // launches per layer, 16-bit (activation dtype) and fp32 elements read + written.
  struct ScoreKernel {
    std::string name;
    double launches = 0, act_elems = 0, fp32_elems = 0, byte_elems = 0;  // byte_elems: 1-byte masks
  };
  std::vector<ScoreKernel> eager_scores_fwd, eager_scores_bwd;
  // Attention-score dropout (only when the model's attention dropout is on, e.g. GPT-2's attn_pdrop).
  std::vector<ScoreKernel> eager_dropout_fwd, eager_dropout_bwd;
  // GEMM tile/wave quantization (time_model.json "gemm_quantization"): the thread-block tiles
  // cuBLAS chooses from, [rows, cols] of the output, and its split-K freedom.
  std::vector<std::pair<int, int>> gemm_tiles;
  int split_k_max = 1;
  double split_k_min_slice = 0;  // inner-dimension elements each split-K slice keeps at least
  // Short inner dimension (time_model.json "gemm_inner_dimension"): a GEMM's efficiency relative to
  // a square of the same FLOPs, by its K; 1 from the last point on, the first value below it.
  std::vector<double> gemm_inner_k, gemm_inner_factor;  // ascending K and its factor
};
// The short-K factor of one GEMM launch with inner dimension k (linear in log2 K between the
// measured points of "gemm_inner_dimension"; 1 when the data file has none).
double gemm_inner_dimension_factor(int64_t k);
const TimeModelData& time_model_data();
// The GPU's architecture as the data file names it (default_architecture when not listed).
const std::string& gpu_architecture(const hw::GpuProfile& g);
double sustained_tensor_core_factor(const hw::GpuProfile& g);
// The GPU's dense peak in FLOP/s for the training precision (the MFU denominator and the roofline's).
double peak_flops(const hw::GpuProfile& g, Precision p);

// Achieved fraction of the GPU's dense peak for the attention kernel of one sequence length
// (the backend's curve for the GPU's architecture: FlashAttention-2/3, cuDNN; eager: the 'standard
// attention' bars), before the sustained clock factor. Interpolated linearly in log2(seq), flat beyond
// the measured range. Flash3 and Cudnn fall back to FlashAttention-2 where the architecture has no curve
// (attention_backend() only picks them where it has).
double attention_efficiency(const hw::GpuProfile& g, int64_t seq, bool causal, bool backward,
                            AttentionBackend backend);
// The kernel the plan's attention runs: eager, or --kernels fa2/fa3 as forced, or what SDPA picks by
// itself -- cuDNN where the torch release and the architecture say so (time_model.json "sdpa_backend")
// and a cuDNN curve exists, else FlashAttention-2. `sdpa_supported`: the model's HF class runs SDPA.
AttentionBackend attention_backend(const hw::GpuProfile& g, const TrainingSpec& t,
                                   bool sdpa_supported = true);
// Whether time_model.json has a FlashAttention-3 curve for the GPU's architecture (FA3 is Hopper-only).
bool flash_attention_3_available(const hw::GpuProfile& g);

// Tile and wave quantization of one GEMM launch with an [m x n] output (NVIDIA Deep Learning
// Performance docs, "Matrix Multiplication Background User's Guide", Dimension Quantization Effects):
// the output is cut into tile_m x tile_n thread-block tiles (tile quantization: the last row/column of
// tiles is partly idle), split_k slices of the inner dimension multiply the thread blocks, and the
// GPU runs them in waves of one block per SM (wave quantization: the last wave is partly idle).
// Utilization = useful tile-equivalents / (waves * SMs), with useful = m*n/(tile_m*tile_n) * split_k
// and waves = ceil(tiles * split_k / SMs).
double gemm_tiling_utilization(int64_t m, int64_t n, int tile_m, int tile_n, int split_k, int sms);
struct GemmQuantization {
  int tile_m = 0, tile_n = 0, split_k = 1;
  double utilization = 1;
};
// The best utilization over time_model.json's tiles and split-K counts (cuBLAS's heuristics pick the
// kernel; we assume they find the best-utilising one, which makes this the smallest loss the model
// allows). 1 when sms <= 0 (the profile has no sm_count) or the output is narrower than the smallest
// listed tile (cuBLASLt has tiles down to 8 wide; not modelled).
GemmQuantization gemm_quantization(int64_t m, int64_t n, int64_t k, int sms);

// Element-wise work the DeepSpeed runtime path adds around the model's own kernels (filled by
// time_model.cpp step_operator_table from the ZeRO stage and optimizer wrapper; the default adds none).
struct RuntimeKernels {
  // ZeRO stage 3: zero.Init replaces torch.nn.functional.linear by zero3_linear_wrap (DeepSpeed
  // zero_optimization.memory_efficient_linear, default true), which adds biases in a kernel of its own.
  bool zero3_linear_wrap = false;
  // Passes over every trained gradient element to prepare its reduction (bytes read + written per
  // element, launches in all), and whether they run every micro-step (Backward) or once per step.
  const char* grad_reduce_name = nullptr;
  double grad_reduce_bytes_per_elem = 0;
  double grad_reduce_launches = 0;
  bool grad_reduce_every_micro_step = true;
  // The optimizer step's element sizes (planner/zero_config.h bf16_master_weights /
  // bf16_optimizer_states): master partition and its gradient, and Adam's two moments together.
  double master_bytes = 4;
  double moment_bytes = 8;
  // ZeRO++ qwZ (planner/zeropp_quant.h), per micro-step: the elements stage 3 gathers (forward and
  // backward together), the bytes the dequantize and cast add per gathered element, and the rank's
  // quantize pass before each gather (elements of its partitions, bytes per element); launches in all.
  double qwz_gathered_elems = 0, qwz_gathered_bytes_per_elem = 0;
  double qwz_partition_elems = 0, qwz_partition_bytes_per_elem = 0;
  double qwz_launches = 0;
  // ZeRO++ qgZ, per micro-step: the gradient elements all_to_all_quant_reduce quantizes, reduces and
  // dequantizes, the bytes per element, and its launches.
  double qgz_grad_elems = 0, qgz_bytes_per_elem = 0, qgz_launches = 0;
  // Muon (planner/muon.h): the step's Newton-Schulz products on the rank's held matrices.
  double muon_ns_flops = 0;
  double muon_ns_launches = 0;
  // DeepSpeed's optimizer step as measured (time_model.json "deepspeed_step"): its passes run at this
  // fraction of the derived bandwidth, and it launches `step_ops` small operations (per-tensor norms,
  // copies, overflow checks) at `step_host_us_per_op` of host time each. 1 / 0: the derived step.
  double step_bandwidth_fraction = 1.0;
  double step_ops = 0;
  double step_host_us_per_op = 0;
  bool operator==(const RuntimeKernels&) const = default;  // operator_totals' cache key
};

// Whether full checkpointing's recompute skips the MLP output GEMM (ComputeStats::recompute_early_stop):
// HF modules under a non-reentrant checkpoint, without ZeRO-3's zero3_linear_wrap.
bool recompute_stops_early(const Workload& w, const ComputeStats& s, bool zero3_linear_wrap);
// The FLOPs per token the recompute then leaves out (HFU counts what runs).
double recompute_skipped_flops_per_token(const Workload& w, const ComputeStats& s, bool zero3_linear_wrap);

// Forward, backward and recompute operators of one micro-step of `micro` sequences.
// `optimizer_params`: elements of the rank's optimizer partition stepped on the GPU (0 when the
// optimizer is offloaded), for the OpPass::Step operators.
OpTable operator_table(const Workload& w, const ComputeStats& s, int64_t micro, Checkpointing ckpt,
                       int64_t optimizer_params, const RuntimeKernels& rt = {});

// operator_table's sums, memoized: the search prices the same few (micro-batch, checkpointing,
// runtime kernels) tables for many candidates (bucket sizes, prefetch and persistence settings, the
// accumulation steps), and building one was half of an evaluation (perf on bench_search
// BM_EvaluatePlan, 70B on 4x8 H100). A per-thread cache keyed by every input operator_table reads
// (op_model.cpp OpTableInputs); the sums are the ones operator_table returns, bit for bit. Stats not
// made by compute_compute_stats (ComputeStats::id 0) are never cached.
OpTotals operator_totals(const Workload& w, const ComputeStats& s, int64_t micro, Checkpointing ckpt,
                         int64_t optimizer_params, const RuntimeKernels& rt = {});

}  // namespace zeroplan::planner
