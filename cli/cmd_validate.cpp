// `zeroplan validate --backend cpu --model tiny-llama-micro --gpus 4xCPU --stage 2 [--steps K] [--json]`:
// runs one plan on the executor and prints the planner's prediction beside the executor's own
// measurement, component by component, with the error of each. This is the only place where the
// planner and the executor meet: the executor sizes everything from its own tensors.
//
// Exit codes: 0 ran and reported; 2 a user error (unsupported model/precision/backend, bad flags).
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/plan_json.h"
#include "cli/progress.h"
#include "cli_exec/engine_run_config.h"
#include "common/checked.h"
#include "common/errors.h"
#include "executor/admission.h"
#include "executor/engine.h"
#include "executor/mpi_comm.h"
#include "planner/checkpoint_offload.h"
#include "planner/model_stats.h"
#include "planner/parallel.h"
#include "planner/search.h"
#include "planner/zero3_leaf.h"
#ifdef ZEROPLAN_HAVE_CUDA
#include "executor/cuda/cuda_runtime.h"
#include "executor/cuda/device.h"
#endif

namespace zeroplan::cli {
namespace {

using nlohmann::json;
using planner::Category;

struct ValidateFlags {
  std::string backend = "cpu";
  std::string steps = "3";
  std::string reduce_bucket_size, prefetch_bucket_size, persistence_threshold, max_live_parameters,
      max_reuse_distance, sub_group_size;
  std::string overlap_comm;  // on | off (DeepSpeed default: on for stage 3 only)
  std::string emulate_rank;  // cuda: run rank R of the N-rank plan on one GPU
};

constexpr int kMaxThreadRanks = 64;

int64_t count_flag(const std::string& v, std::string_view flag, int64_t def, int64_t max) {
  return v.empty() ? def : parse_positive_count(v, flag, max);
}

// Relative error of the measurement against the prediction; null when the prediction is 0 and the
// measurement is not.
json rel_error(int64_t predicted_bytes, int64_t measured_bytes) {
  const auto predicted = static_cast<double>(predicted_bytes), measured = static_cast<double>(measured_bytes);
  if (predicted == 0) return measured == 0 ? json(0.0) : json(nullptr);
  return (measured - predicted) / predicted;
}
json rel_error(double predicted, double measured) {
  if (predicted == 0) return measured == 0 ? json(0.0) : json(nullptr);
  return (measured - predicted) / predicted;
}

std::string pct(const json& e) {
  if (e.is_null()) return "n/a";
  return fmt::format("{:+.1f}%", 100.0 * e.get<double>());
}

std::string mb(int64_t b) {
  return fmt::format("{:.3f}", static_cast<double>(b) / 1e6);
}

// The ZeroConfig of the plan to run: DeepSpeed's defaults for the stage, the user's batch and
// memory choices, and the optional DeepSpeed knobs.
planner::ZeroConfig zero_config(const PlanFlags& f, const ValidateFlags& v, const planner::Workload& w) {
  const planner::SearchOptions opts = build_search_options(f);
  if (!opts.stage)
    throw UserError(
        "validate runs one plan; pass --stage 0, 1, 2 or 3 (see `zeroplan --model ... --gpus ...` for the "
        "recommended one)");
  if (opts.ep && *opts.ep > 1)
    throw UserError(
        "validate does not run expert parallelism (the native executor has no all-to-all); drop --ep (the "
        "AutoEP prediction is checked against real DeepSpeed in tests/test_conformance_moe_ep)");
  if (opts.hpz_auto || opts.hpz_choices != std::vector<int>{1})
    throw UserError(
        "validate does not run ZeRO++ hpZ (the native executor keeps no secondary partition); drop --hpz "
        "(the "
        "hpZ prediction is checked against real DeepSpeed in tests/deepspeed/fixtures-hpz)");
  planner::ZeroConfig z = planner::ZeroConfig::deepspeed_defaults(*opts.stage);
  z.micro_batch = w.train.micro_batch.value_or(1);
  z.grad_accum = w.train.grad_accum.value_or(1);
  // Distinct sequences per step over the data-parallel ranks (GPUs / tp under AutoTP, planner/parallel.h).
  if (w.train.global_batch)
    z.grad_accum = *w.train.global_batch / (z.micro_batch * planner::data_parallel_size(w));
  z.checkpointing = w.train.checkpointing.value_or(planner::Checkpointing::None);
  z.offload_optimizer = opts.offload_optimizer.value_or(planner::Offload::None);
  z.offload_param = opts.offload_param.value_or(planner::Offload::None);
  z.reduce_bucket_size =
      count_flag(v.reduce_bucket_size, "--reduce-bucket-size", z.reduce_bucket_size, 10'000'000'000);
  z.prefetch_bucket_size =
      count_flag(v.prefetch_bucket_size, "--prefetch-bucket-size", z.prefetch_bucket_size, 10'000'000'000);
  z.param_persistence_threshold = count_flag(v.persistence_threshold, "--persistence-threshold",
                                             z.param_persistence_threshold, 10'000'000'000);
  z.max_live_parameters =
      count_flag(v.max_live_parameters, "--max-live-parameters", z.max_live_parameters, 1'000'000'000'000);
  z.max_reuse_distance =
      count_flag(v.max_reuse_distance, "--max-reuse-distance", z.max_reuse_distance, 1'000'000'000'000);
  z.sub_group_size = count_flag(v.sub_group_size, "--sub-group-size", z.sub_group_size, 1'000'000'000'000);
  if (!v.overlap_comm.empty()) {
    if (v.overlap_comm != "on" && v.overlap_comm != "off")
      throw_user_error("--overlap-comm '{}' must be on or off", v.overlap_comm);
    z.overlap_comm = v.overlap_comm == "on";
  }
  return z;
}

exec::RunConfig run_config(const planner::Workload& w, const planner::ZeroConfig& z, int steps) {
  if (w.train.method == planner::Method::QLoRA)
    throw UserError(
        "the executor has no 4-bit NF4 kernels; QLoRA plans cannot be validated (use --method lora or full)");
  if (w.train.precision == planner::Precision::FP16)
    throw UserError(
        "the executor runs bf16 or fp32 (fp16 needs loss scaling, not implemented); use --precision bf16");
  if (w.train.attention == planner::Attention::Eager)
    throw UserError(
        "the executor's attention is flash-style (saves only the log-sum-exp, memory linear in the "
        "sequence); validate with --attention flash");
  if (z.offload_optimizer == planner::Offload::NVMe || z.offload_param != planner::Offload::None)
    throw UserError(
        "the executor offloads the optimizer to host memory only; use --offload-optimizer none|cpu and "
        "--offload-param none");
  exec::RunConfig c = exec::engine_run_config(w, z, steps);
  c.export_params = false;  // validate reports memory, time and traffic, not the trained values
  exec::check_run_config(c, w.cluster.world_size());
  return c;
}

// ---- multi-process runs (mpirun/srun, built with MPI): every process runs its own rank of the plan
// (executor/mpi_comm.h). Rank 0 prints the report; the processes agree on the outcome so that all
// exit alike, and a failure is told once, by the lowest rank that failed on its own (not one that
// was only released by a peer's failure).

// A process that ends without printing (not the reporting rank), with this exit code.
struct QuietExit {
  int code;
};

bool released_by_peer(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const InternalError& ie) {
    return std::string_view(ie.what()).find("another rank failed") != std::string_view::npos;
  } catch (...) {
    return false;
  }
}

exec::RunResult run_ranks(const exec::RunConfig& rc, exec::Runtime& rt, exec::MpiSession& mpi) {
  if (!mpi.multi_process()) return exec::run_training(rc, rt);
  exec::RunResult res;
  std::exception_ptr err;
  try {
    res = exec::run_training(rc, rt);
  } catch (...) {
    err = std::current_exception();
  }
  const bool any_failed = mpi.lowest_rank_with(err != nullptr) >= 0;
  const int reporter = mpi.lowest_rank_with(err && !released_by_peer(err));
  if (any_failed) {
    if (mpi.rank() == reporter) std::rethrow_exception(err);  // OOM report or main's one line
    if (reporter < 0 && mpi.rank() == 0)
      throw InternalError("a rank failed in a collective without reporting why");
    throw QuietExit{1};
  }
  // The global loss: the mean over all ranks, which run_training can only take over its own.
  res.loss_per_step = mpi.mean_over_processes(res.loss_per_step);
  return res;
}

// The plan's bytes per rank per step in AutoTP's TP group (planner/tensor_parallel.h), which the engine
// counts apart (RankMeasurement::tp_comm); 0 without TP.
int64_t predicted_tp_bytes(const planner::Plan& plan) {
  int64_t b = 0;
  for (int i = 0; i < plan.time.num_collectives; ++i) {
    const auto& c = plan.time.collectives[static_cast<size_t>(i)];
    if (c.group != nullptr && std::string(c.group) == "tensor_parallel") b += c.bytes_per_rank;
  }
  return b;
}

// ---- admission before allocation (issue 16): the run's certain needs, sized by the executor's own
// layout (executor/admission.h, not the planner), against what this machine has; refused with both
// numbers before the engine allocates a byte.

std::string gb(int64_t b) {
  return fmt::format("{:.1f} GB", static_cast<double>(b) / 1e9);
}

// Ranks that share this machine's memory: every thread rank, or under mpirun the processes on this
// node (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE, MPICH/Hydra's MPI_LOCALNRANKS; 1 when neither is set).
int64_t ranks_on_this_node(bool multi, int world) {
  if (!multi) return world;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(var)) {
      const long n = std::strtol(v, nullptr, 10);
      if (n > 0) return n;
    }
  return 1;
}

// Host RAM: each local rank's device tier on the cpu backend (it is host memory there; capped at the
// profile's memory, where the engine stops with an out-of-memory report), the host tier, the host
// staging vectors, and the process's result.
void admit_host(const exec::RunNeeds& n, bool cpu_backend, int64_t device_cap, int64_t local_ranks,
                std::string_view who) {
  const int64_t avail = exec::host_memory_available();
  if (avail < 0) return;  // no /proc/meminfo (not Linux): nothing to compare with
  const bool fits_cap = !cpu_backend || device_cap <= 0 || n.device_per_rank <= device_cap;
  const int64_t device_on_host = cpu_backend ? (fits_cap ? n.device_per_rank : device_cap) : 0;
  int64_t per_rank = checked_add(checked_add(device_on_host, n.host_tier_per_rank), n.host_staging_per_rank);
  if (fits_cap) per_rank = checked_add(per_rank, n.host_export_per_rank);
  const int64_t need = checked_add(checked_mul(per_rank, local_ranks), fits_cap ? n.host_per_process : 0);
  if (need <= avail) return;
  throw_user_error(
      "this run needs at least {} of host memory ({} {} x {} each: {}{} host tier, {} staging{}), but this "
      "machine has {} available (MemAvailable in /proc/meminfo); refused before allocating. Use a smaller "
      "model, fewer ranks or a higher --stage",
      gb(need), local_ranks, who, gb(per_rank),
      cpu_backend ? gb(device_on_host) + (fits_cap ? " device tier, " : " device tier (its cap), ") : "",
      gb(n.host_tier_per_rank), gb(n.host_staging_per_rank),
      fits_cap ? ", " + gb(n.host_export_per_rank) + " result export" : "", gb(avail));
}

// --emulate-rank: the rank a one-GPU run emulates (-1: none).
int parse_emulate_rank(const ValidateFlags& v, int world) {
  int emulate = -1;
  if (!v.emulate_rank.empty()) {
    if (v.backend != "cuda") throw UserError("--emulate-rank needs --backend cuda");
    if (v.emulate_rank == "0") {
      emulate = 0;
    } else {
      if (world < 2) throw_user_error("--emulate-rank '{}' must be 0 for a 1-rank plan", v.emulate_rank);
      emulate = static_cast<int>(parse_positive_count(v.emulate_rank, "--emulate-rank", world - 1));
    }
  }

  return emulate;
}

// The runtime the ranks run on: thread ranks or MPI processes on the CPU, GPUs (or one GPU emulating
// `emulate`) with CUDA; refused when the GPU cannot hold one rank's certain needs.
std::unique_ptr<exec::Runtime> make_runtime(const ValidateFlags& v, const planner::Workload& w, bool multi,
                                            int world, [[maybe_unused]] int emulate,
                                            [[maybe_unused]] const exec::RunNeeds& needs, bool& emulated) {
  std::unique_ptr<exec::Runtime> rt;
  emulated = false;
  if (v.backend == "cpu") {
    if (world > kMaxThreadRanks)
      throw_user_error(
          "the cpu backend runs one thread per rank; {} ranks is more than {} (use e.g. --gpus 4xCPU)", world,
          kMaxThreadRanks);
    // Each thread rank's device tier is capped at the profile's memory (8 GiB for CPU, or --gpu-mem),
    // so a plan that does not fit runs out of memory here as it would on the GPU.
    rt = multi ? exec::make_mpi_cpu_runtime(w.cluster.gpu.memory_bytes)
               : exec::make_cpu_runtime(world, w.cluster.gpu.memory_bytes);
  } else {
#ifdef ZEROPLAN_HAVE_CUDA
    rt = exec::make_cuda_runtime(world, emulate);
    emulated = exec::cuda::runtime_is_emulated(*rt);
    // Device memory: what cudaMemGetInfo says is free once the context, streams and cuBLASLt
    // workspace exist, against one rank's certain needs (ranks are symmetric).
    if (const exec::cuda::MemInfo mi = exec::cuda::mem_info(); needs.device_per_rank > mi.free_bytes)
      throw_user_error(
          "this run needs at least {} of GPU memory per rank (parameters, gradients, optimizer states and "
          "reduce buckets, before activations), but the GPU has {} free of {} (cudaMemGetInfo); refused "
          "before allocating. Use a higher --stage, --offload-optimizer cpu or more GPUs",
          gb(needs.device_per_rank), gb(mi.free_bytes), gb(mi.total_bytes));
#else
    (void)emulate;
    throw UserError(
        "this zeroplan was built without the CUDA backend (no nvcc at build time); use --backend cpu");
#endif
  }
  return rt;
}

// An OOM is an answer, not a crash: where it happened against what the planner predicted.
void print_out_of_memory(const exec::OutOfMemory& oom, bool as_json, const planner::Workload& w,
                         const planner::Plan& plan) {
  // An OOM is an answer, not a crash: where it happened against what the planner predicted.
  const std::string phase = oom.phase.empty() ? "setup" : oom.phase;
  if (as_json) {
    fmt::print("{}\n", json{{"predicted", plan_to_json(w, plan)},
                            {"measured",
                             {{"out_of_memory",
                               {{"phase", phase},
                                {"tier", oom.tier},
                                {"held_bytes", oom.live_bytes},
                                {"requested_bytes", oom.requested_bytes},
                                {"message", oom.what()}}}}}}
                           .dump(2));
  } else {
    fmt::print(
        "ran out of {} memory in phase {} at {} bytes held (asking for {} more); the plan predicted a peak "
        "of {} "
        "bytes ({}).\n  {}\n",
        oom.tier, phase, oom.live_bytes, oom.requested_bytes, plan.memory.peak,
        plan.fits ? "predicted to fit" : "predicted not to fit", oom.what());
  }
}

// The names of the measured collective kinds, in exec::CollKind order.
constexpr const char* kKindNames[] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast"};

// Measured against predicted (run_validate_on): the memory categories in the phase where the planner
// puts its peak, communication and time, and the relative errors.
struct ValidationComparison {
  int cmp_phase = 0;
  int64_t meas_model_states = 0;
  double meas_time = 0, pred_engine_step = 0;
  json measured, error, err_gpu;
  std::optional<int64_t> device_peak;  // cuda: cudaMemGetInfo's peak
  double achieved_tflops = 0;
};

// The measured GPU categories in the phase where the planner puts its peak, with the measured peak, its
// phase and the engine's alignment and reserved bytes: the "measured.memory.gpu" object.
json measured_gpu_json(const exec::RankMeasurement& m, const exec::CategoryBytes& cmp, int cmp_phase,
                       int64_t meas_model_states) {
  const auto cat = [&](Category c) { return cmp[static_cast<int>(c)]; };
  return {{"parameters", cat(Category::Parameters)},
          {"gradients", cat(Category::Gradients)},
          {"optimizer_states", cat(Category::OptimizerStates)},
          {"model_states", meas_model_states},
          {"activations", cat(Category::Activations)},
          {"buffers", cat(Category::Buffers)},
          {"overhead", cat(Category::Overhead)},
          {"peak", m.device.peak},
          {"peak_phase", std::string(exec::step_phase_name(m.device.peak_phase))},
          {"categories_phase", std::string(planner::phase_name(cmp_phase))},
          {"alignment_bytes", m.alignment_bytes},
          {"reserved", m.reserved_device_bytes}};
}

// The relative errors of the predicted GPU categories and peak against the measured ones in the same
// phase: the "error.memory.gpu" object (compare_run adds device_peak under cuda).
json gpu_errors_json(const planner::MemoryBreakdown& pm, const exec::RankMeasurement& m,
                     const exec::CategoryBytes& cmp, int64_t meas_model_states) {
  const auto cat = [&](Category c) { return cmp[static_cast<int>(c)]; };
  const int64_t pred_overhead = pm.category(Category::Overhead);
  return {
      {"parameters", rel_error(pm.category(Category::Parameters), cat(Category::Parameters))},
      {"gradients", rel_error(pm.category(Category::Gradients), cat(Category::Gradients))},
      {"optimizer_states", rel_error(pm.category(Category::OptimizerStates), cat(Category::OptimizerStates))},
      {"model_states", rel_error(pm.model_states(), meas_model_states)},
      {"activations", rel_error(pm.category(Category::Activations), cat(Category::Activations))},
      {"buffers", rel_error(pm.category(Category::Buffers), cat(Category::Buffers))},
      {"peak", rel_error(pm.peak, m.device.peak)},
      // The cpu backend has no CUDA context or NCCL buffers: compare the peak without them too.
      {"peak_without_overhead",
       rel_error(pm.peak - pred_overhead,
                 m.device.peak - m.device.at_peak[static_cast<int>(Category::Overhead)])}};
}

// What the run measured on one rank: GPU and host memory, communication by collective kind, the
// step's time and the loss per step (the "measured" object; compare_run adds "device" under cuda).
json measured_json(const exec::RunResult& res, const exec::RankMeasurement& m, json meas_gpu, bool emulated,
                   double meas_time) {
  json comm_kinds = json::object();
  for (int k = 0; k < 4; ++k)
    comm_kinds[kKindNames[k]] = {{"calls", m.comm.calls[static_cast<size_t>(k)]},
                                 {"bytes", m.comm.bytes_sent[static_cast<size_t>(k)]}};
  return {{"memory",
           {{"gpu", meas_gpu},
            {"host",
             {{"peak", m.host.peak},
              {"optimizer_states", m.host.category_peak[2]},
              {"gradients", m.host.category_peak[1]}}}}},
          {"communication",
           {{"bytes_per_rank_per_step", m.comm_bytes},
            {"tensor_parallel_bytes_per_rank_per_step", m.tp_comm.total_bytes_sent()},
            {"gradient_norm_bytes", m.scalar_comm_bytes},
            {"by_kind", comm_kinds},
            {"modelled_not_measured", emulated}}},
          {"time",
           {{"forward_s", m.seconds.forward},
            {"backward_s", m.seconds.backward},
            {"optimizer_s", m.seconds.step},
            {"step_s", meas_time}}},
          {"loss_per_step", res.loss_per_step}};
}

ValidationComparison compare_run(const planner::Plan& plan, const exec::RunResult& res,
                                 const exec::RankMeasurement& m, [[maybe_unused]] exec::Runtime& runtime,
                                 bool emulated, [[maybe_unused]] int steps) {
  ValidationComparison r;
  // ---- measured vs predicted
  // Categories are compared in the same phase: the measured bytes live at the measured maximum of
  // the phase in which the planner predicts its peak (the planner's categories are those of its
  // peak phase). The measured overall peak and its phase are reported beside.
  r.cmp_phase = plan.memory.peak_phase;
  const int cmp_phase = r.cmp_phase;
  const auto& cmp = m.device.phase_at_peak[static_cast<size_t>(cmp_phase)];
  const auto cat = [&](Category c) { return cmp[static_cast<int>(c)]; };
  r.meas_model_states = cat(Category::Parameters) + cat(Category::Gradients) + cat(Category::OptimizerStates);
  const int64_t meas_model_states = r.meas_model_states;
  const auto& pm = plan.memory;
  json& err_gpu = r.err_gpu;
  err_gpu = gpu_errors_json(pm, m, cmp, meas_model_states);
  r.meas_time = m.seconds.forward + m.seconds.backward + m.seconds.step;
  const double meas_time = r.meas_time;
  // The native engine runs no Python module hooks: the planner's exposed ZeRO-3 hook time
  // (plan.time.hook_overhead_s, DeepSpeed's fetch/release_sub_module host cost) is not part of
  // what it measures, so the step is compared without it.
  r.pred_engine_step = plan.time.step_s - plan.time.hook_overhead_s;
  const double pred_engine_step = r.pred_engine_step;
  json& measured = r.measured;
  measured =
      measured_json(res, m, measured_gpu_json(m, cmp, cmp_phase, meas_model_states), emulated, meas_time);
  // cuda: what the GPU itself reports (cudaMemGetInfo peak: engine tensors + CUDA context, cuBLASLt
  // workspace, kernel scratch, NCCL buffers, rounding), compared with the predicted peak, which
  // includes the planner's overhead category; and the achieved TFLOP/s of the measured step.
  std::optional<int64_t>& device_peak = r.device_peak;
#ifdef ZEROPLAN_HAVE_CUDA
  double& achieved_tflops = r.achieved_tflops;
  if (const auto dl = exec::cuda::device_level_report(runtime, m.rank)) {
    device_peak = dl->device_used_peak_bytes;
    const double flops_per_step = dl->executed_flops / static_cast<double>(steps);
    achieved_tflops = meas_time > 0 ? flops_per_step / meas_time / 1e12 : 0.0;
    measured["device"] = {{"total_bytes", dl->total_bytes},
                          {"used_peak_bytes", dl->device_used_peak_bytes},
                          {"baseline_used_bytes", dl->baseline_used_bytes},
                          {"workspace_bytes", dl->workspace_bytes},
                          {"executed_flops_per_step", flops_per_step},
                          {"achieved_tflops", achieved_tflops}};
  }
#endif
  if (device_peak) err_gpu["device_peak"] = rel_error(pm.peak, *device_peak);
  r.error = {{"memory", {{"gpu", err_gpu}}},
             {"communication",
              {{"bytes_per_rank_per_step",
                rel_error(static_cast<double>(plan.time.comm_bytes_per_rank - predicted_tp_bytes(plan)),
                          static_cast<double>(m.comm_bytes))},
               {"tensor_parallel_bytes_per_rank_per_step",
                rel_error(static_cast<double>(predicted_tp_bytes(plan)),
                          static_cast<double>(m.tp_comm.total_bytes_sent()))}}},
             {"time",
              {{"step_s", rel_error(pred_engine_step, meas_time)},
               {"predicted_step_s_without_deepspeed_hooks", pred_engine_step},
               {"compute_s", rel_error(plan.time.compute_s, meas_time)}}}};
  return r;
}

// The text answer: memory, communication and time side by side, then the loss.
void print_validation(const PlanFlags& f, const ValidateFlags& v, const planner::Workload& w,
                      const planner::ZeroConfig& z, const planner::Plan& plan, const exec::RunResult& res,
                      const exec::RankMeasurement& m, const ValidationComparison& r, int world, int steps,
                      bool multi, bool emulated) {
  const int cmp_phase = r.cmp_phase;
  const auto& cmp = m.device.phase_at_peak[static_cast<size_t>(cmp_phase)];
  const auto cat = [&](Category c) { return cmp[static_cast<int>(c)]; };
  const auto& pm = plan.memory;
  const int64_t pred_overhead = pm.category(Category::Overhead);
  // Copies: the rows look up keys that may be absent ("overhead"), which a const json cannot insert.
  json err_gpu = r.err_gpu;
  json error = r.error;
  const int64_t meas_model_states = r.meas_model_states;
  const double meas_time = r.meas_time, pred_engine_step = r.pred_engine_step;
  const std::optional<int64_t>& device_peak = r.device_peak;
  const double achieved_tflops = r.achieved_tflops;
  fmt::print(
      "zeroplan validate: {}{} on {} ({} backend, {} rank{}{}), ZeRO-{}, {}, micro-batch {} x grad-accum {}, "
      "seq {},\n"
      "  checkpointing {}, offload optimizer {}, {} step{} (the last one measured; peaks reset at its "
      "start)\n\n",
      w.model.name,
      w.train.method == planner::Method::LoRA ? fmt::format(" (LoRA r={})", w.train.lora_rank)
                                              : std::string(),
      f.gpus, v.backend, world, world == 1 ? "" : "s",
      emulated ? ", emulated on one GPU"
      : multi  ? fmt::format(", one process each; measured: rank 0 of {} processes", world)
               : std::string(),
      z.stage, planner::to_string(w.train.precision), z.micro_batch, z.grad_accum, w.train.seq_len,
      planner::to_string(z.checkpointing), planner::to_string(z.offload_optimizer), steps,
      steps == 1 ? "" : "s");
  fmt::print("memory per rank, MB (1e6 B)   predicted   measured     error\n");
  const std::pair<const char*, Category> rows[] = {{"parameters", Category::Parameters},
                                                   {"gradients", Category::Gradients},
                                                   {"optimizer_states", Category::OptimizerStates},
                                                   {"activations", Category::Activations},
                                                   {"buffers", Category::Buffers},
                                                   {"overhead", Category::Overhead}};
  for (const auto& [name, c] : rows)
    fmt::print("  {:<26} {:>11} {:>10} {:>9}\n", name, mb(pm.category(c)), mb(cat(c)), pct(err_gpu[name]));
  fmt::print("  {:<26} {:>11} {:>10} {:>9}\n", "model states", mb(pm.model_states()), mb(meas_model_states),
             pct(err_gpu["model_states"]));
  fmt::print("  {:<26} {:>11} {:>10} {:>9}   (predicted in {}, measured in {})\n", "peak", mb(pm.peak),
             mb(m.device.peak), pct(err_gpu["peak"]), planner::phase_name(pm.peak_phase),
             exec::step_phase_name(m.device.peak_phase));
  fmt::print("  {:<26} {:>11} {:>10} {:>9}\n", "peak without overhead", mb(pm.peak - pred_overhead),
             mb(m.device.peak - m.device.at_peak[static_cast<int>(Category::Overhead)]),
             pct(err_gpu["peak_without_overhead"]));
  fmt::print(
      "  (categories: bytes live at each side's maximum in the {} phase, where the planner puts its peak;\n"
      "   the cpu backend has no CUDA context/NCCL overhead)\n",
      planner::phase_name(cmp_phase));
  fmt::print("  engine's caching pool reserved {} MB (live + cached blocks, 256-byte rounded)\n",
             mb(m.reserved_device_bytes));
  if (m.host.peak > 0 || pm.host_per_node > 0)
    fmt::print("  host tier (offload): measured peak {} MB per rank; predicted {} MB per node\n",
               mb(m.host.peak), mb(pm.host_per_node));
  fmt::print("\ncommunication per rank per step, bytes   predicted     measured     error{}\n",
             emulated ? "   (emulated: counted, times modelled)" : "");
  const int64_t tp_pred = predicted_tp_bytes(plan);
  fmt::print("  {:<38} {:>10} {:>12} {:>9}\n",
             tp_pred > 0 ? "ZeRO's (nccl-tests bus bytes)" : "total (nccl-tests bus bytes)",
             plan.time.comm_bytes_per_rank - tp_pred, m.comm_bytes,
             pct(error["communication"]["bytes_per_rank_per_step"]));
  if (tp_pred > 0 || m.tp_comm.total_bytes_sent() > 0)
    fmt::print("  {:<38} {:>10} {:>12} {:>9}\n", "AutoTP's, in the TP group", tp_pred,
               m.tp_comm.total_bytes_sent(),
               pct(error["communication"]["tensor_parallel_bytes_per_rank_per_step"]));
  for (int k = 0; k < 4; ++k)
    if (m.comm.calls[static_cast<size_t>(k)] > 0)
      fmt::print("  measured {:<29} {:>10} {:>12}   ({} calls)\n", kKindNames[k], "",
                 m.comm.bytes_sent[static_cast<size_t>(k)], m.comm.calls[static_cast<size_t>(k)]);
  for (int i = 0; i < plan.time.num_collectives; ++i)
    fmt::print("  predicted {:<52} {:>12} ({} calls)\n", plan.time.collectives[i].name,
               plan.time.collectives[i].bytes_per_rank, plan.time.collectives[i].count);
  if (m.scalar_comm_bytes > 0)
    fmt::print("  gradient-norm scalar all-reduce (clipping), not in the total: {} bytes\n",
               m.scalar_comm_bytes);
  fmt::print("\ntime per step, s                 predicted   measured     error\n");
  fmt::print("  {:<28} {:>11.4f} {:>10.4f}\n", "forward", plan.time.forward_s, m.seconds.forward);
  fmt::print("  {:<28} {:>11.4f} {:>10.4f}\n", "backward (+recompute)",
             plan.time.backward_s + plan.time.recompute_s, m.seconds.backward);
  fmt::print("  {:<28} {:>11.4f} {:>10.4f}\n", "optimizer", plan.time.optimizer_s, m.seconds.step);
  if (plan.time.hook_overhead_s > 0)
    fmt::print("  {:<28} {:>11.4f} {:>10}   (DeepSpeed's Python hooks; the engine has none)\n",
               "ZeRO-3 module hooks", plan.time.hook_overhead_s, "-");
  fmt::print("  {:<28} {:>11.4f} {:>10.4f} {:>9}\n", "step (without hooks)", pred_engine_step, meas_time,
             pct(error["time"]["step_s"]));
  if (v.backend == "cpu")
    fmt::print(
        "  (cpu backend: {} {} share this machine's cores, so measured times are wall times of a\n"
        "   time-shared rank and the naive kernels are not tuned; compare times on the cuda backend)\n",
        world, multi ? "processes" : "thread ranks");
  if (device_peak)
    fmt::print(
        "\ndevice-level peak (cudaMemGetInfo, context and libraries included): {} MB against the predicted "
        "peak {} MB ({}); achieved {:.1f} TFLOP/s in the measured step\n",
        mb(*device_peak), mb(pm.peak), pct(err_gpu["device_peak"]), achieved_tflops);
  fmt::print("\nloss per step:");
  for (double l : res.loss_per_step) fmt::print(" {:.4f}", l);
  fmt::print("\n");
}

CommandResult run_validate_on(const PlanFlags& f, const ValidateFlags& v, exec::MpiSession& mpi) {
  // Everything is validated before anything runs or prints.
  if (v.backend != "cpu" && v.backend != "cuda")
    throw_user_error("--backend '{}' must be cpu or cuda", v.backend);
  const int steps = static_cast<int>(parse_positive_count(v.steps, "--steps", 1000));
  const planner::SearchOptions opts = build_search_options(f);
  // The prediction beside the measurement models the native engine, not the user's DeepSpeed: the
  // engine implements the DeepSpeed 0.16.9 runtime paths (stage-0 bf16 through BF16_Optimizer's fp32
  // gradient buffer, docs/executor.md), so that is the version the planner models here.
  planner::Workload w = build_workload(f);
  w.train.deepspeed_version = planner::DeepSpeedVersion::V0_16_9;
  // ...and its own kernels' activations and gradient buffers (planner/engine_runtime.h).
  w.train.implementation = planner::Implementation::ZeroplanEngine;
  if (const std::string why = planner::checkpoint_offload_refusal(w.train); !why.empty())
    throw UserError(why);
  const planner::ZeroConfig z = zero_config(f, v, w);
  const exec::RunConfig rc = run_config(w, z, steps);
  const int world = w.cluster.world_size();
  const bool multi = mpi.multi_process();
  if (multi && mpi.size() != world)
    throw_user_error(
        "mpirun started {} processes but the plan has {} ranks; start {} processes (mpirun -np {})",
        mpi.size(), world, world, world);
  if (multi && !v.emulate_rank.empty())
    throw UserError("--emulate-rank runs one process on one GPU; start it without mpirun");
  const int emulate = parse_emulate_rank(v, world);

  // ZeRO partitions over the data-parallel group: world / tp ranks under AutoTP (the layout's sizes are then
  // one TP rank's shard, executor/engine.h layout_sizes).
  const exec::RunNeeds needs = exec::minimum_run_needs(rc, world / std::max(1, rc.parallel.tp));
  if (v.backend == "cpu") {
    admit_host(needs, true, w.cluster.gpu.memory_bytes, ranks_on_this_node(multi, world),
               multi ? "processes" : "thread ranks");
  } else {
    admit_host(needs, false, 0, emulate >= 0 ? 1 : ranks_on_this_node(multi, world),
               multi ? "processes" : "ranks");
  }

  bool emulated = false;
  std::unique_ptr<exec::Runtime> rt = make_runtime(v, w, multi, world, emulate, needs, emulated);

  const planner::ModelStats stats = planner::compute_model_stats(w);
  const planner::Plan plan = planner::evaluate_plan(w, stats, z, opts.memory_margin);
  exec::RunResult res;
  try {
    // A terminal sees the steps go by (cli/progress.h); piped output is unchanged. Under mpirun only
    // global rank 0 reports, and the line is cleared before the answer is printed.
    Progress progress("validate", "step", steps,
                      fmt::format("{} {}", world,
                                  multi                ? "processes"
                                  : v.backend == "cpu" ? "thread ranks"
                                                       : "ranks"));
    exec::RunConfig shown = rc;
    const bool reporter = !multi || mpi.rank() == 0;
    if (reporter && progress.shown()) {
      shown.on_step = [&progress](int done) { progress.update(done); };
      progress.update(0);
    }
    res = run_ranks(shown, *rt, mpi);
  } catch (const exec::OutOfMemory& oom) {
    print_out_of_memory(oom, f.json, w, plan);
    return 1;
  }
  if (multi && mpi.rank() != 0) return 0;              // rank 0 reports
  const exec::RankMeasurement& m = res.ranks.front();  // ZeRO is symmetric: rank 0 speaks for all

  const ValidationComparison r = compare_run(plan, res, m, *rt, emulated, steps);
  if (f.json) {
    json out = {{"zeroplan_version", ZEROPLAN_VERSION},
                {"backend", v.backend},
                {"ranks", world},
                {"steps", steps},
                {"measured_step", steps},
                {"predicted", plan_to_json(w, plan)},
                {"measured", r.measured},
                {"error", r.error}};
    if (multi) out["processes"] = mpi.size();  // mpirun: one rank per process, measured = rank 0's
    fmt::print("{}\n", out.dump(2));
    return 0;
  }

  print_validation(f, v, w, z, plan, res, m, r, world, steps, multi, emulated);
  return 0;
}

CommandResult run_validate(const PlanFlags& f, const ValidateFlags& v) {
  // MPI only under a launcher (mpirun/srun). A static: it ends with the process, after main has
  // printed any error, and waits there for every process (see ~MpiSession).
  static exec::MpiSession mpi;
  try {
    return run_validate_on(f, v, mpi);
  } catch (const QuietExit& q) {
    return q.code;
  } catch (const UserError&) {
    if (mpi.multi_process() && mpi.rank() != 0) return 2;  // every rank has the same; rank 0 says it
    throw;
  }
}

}  // namespace

void register_validate(CLI::App& app, PlanFlags& flags, CommandResult& result) {
  auto v = std::make_shared<ValidateFlags>();
  auto* sub = app.add_subcommand(
      "validate",
      "Run one plan on the executor (cpu: thread ranks, e.g. --gpus 4xCPU; cuda: GPUs) and compare the\n"
      "measured memory, communication and time with the planner's prediction, component by component.");
  sub->add_option("--backend", v->backend, "cpu (default) | cuda");
  sub->add_option("--steps", v->steps, "Optimizer steps to run; the last one is measured (default 3)");
  sub->add_option("--reduce-bucket-size", v->reduce_bucket_size,
                  "reduce_bucket_size in elements (DeepSpeed default 5e8)");
  sub->add_option("--overlap-comm", v->overlap_comm, "on | off (DeepSpeed default: on for stage 3 only)");
  sub->add_option("--prefetch-bucket-size", v->prefetch_bucket_size,
                  "stage3_prefetch_bucket_size in elements");
  sub->add_option("--persistence-threshold", v->persistence_threshold, "stage3_param_persistence_threshold");
  sub->add_option("--max-live-parameters", v->max_live_parameters, "stage3_max_live_parameters");
  sub->add_option("--max-reuse-distance", v->max_reuse_distance, "stage3_max_reuse_distance");
  sub->add_option("--sub-group-size", v->sub_group_size, "sub_group_size");
  sub->add_option("--emulate-rank", v->emulate_rank, "cuda: run rank R of the N-rank plan on one GPU");
  sub->fallthrough();
  sub->callback([&flags, &result, v] { result = run_validate(flags, *v); });
}

}  // namespace zeroplan::cli
