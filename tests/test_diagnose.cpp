// zeroplan diagnose: the log parser on real DeepSpeed 0.19.8 logs (tests/diagnose/*.log, produced by
// scripts/make_ds_logs.py) and public excerpts (tests/diagnose/public, cited in tests/diagnose/README.md);
// the diagnosis names each injected cause first and nothing on healthy runs; broken inputs degrade.
// Expected numbers are copied by hand from the log files (what DeepSpeed printed), not from the parser.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/errors.h"
#include "diagnose/config_recovery.h"
#include "diagnose/diagnosis.h"
#include "diagnose/log_parser.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/tensor_parallel.h"

namespace zeroplan::diagnose {
namespace {

const std::string kDir = std::string(ZEROPLAN_SOURCE_DIR) + "/tests/diagnose/";

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

RunLog parse(const std::string& name) {
  RunLog log;
  parse_log_file(kDir + name, log);
  return log;
}

// The workload the fixtures ran: tiny-llama-micro, seq 64 (scripts/make_ds_logs.py), 2 CPU ranks.
planner::Workload cpu_workload() {
  planner::Workload w;
  w.model = models::load_model("tiny-llama-micro");
  w.cluster = hw::parse_cluster("2xCPU");
  w.train.seq_len = 64;
  return w;
}

std::vector<std::string> ids(const Diagnosis& d) {
  std::vector<std::string> v;
  for (const auto& c : d.causes) v.push_back(c.id);
  return v;
}

Diagnosis run(const std::string& name, bool with_model) {
  DiagnoseInputs in;
  if (with_model) in.workload = cpu_workload();
  return diagnose(parse(name), in);
}

TEST(DiagnoseSizes, CommsLoggerAndPyTorchUnits) {
  // comms_logging.convert_size: 1024-based, "%s %s" % (round(size / p, 2), unit).
  EXPECT_EQ(parse_convert_size("0B"), 0);
  EXPECT_EQ(parse_convert_size("8.0 KB"), 8192);
  EXPECT_EQ(parse_convert_size("483.25 KB"), 494848);  // 483.25 * 1024
  EXPECT_EQ(parse_convert_size("1.5 MB"), 1572864);
  EXPECT_EQ(parse_convert_size("KB"), -1);
  EXPECT_EQ(parse_convert_size("8.0 XB"), -1);
  EXPECT_EQ(parse_mem_size("978.00 MiB"), 978LL * 1024 * 1024);
  EXPECT_EQ(parse_mem_size("0 bytes"), 0);
  EXPECT_EQ(parse_mem_size("2.00 GiB"), 2LL << 30);
}

TEST(DiagnoseParse, EveryFixtureParses) {
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(kDir)) {
    if (e.path().extension() != ".log") continue;
    RunLog log;
    ASSERT_NO_THROW(parse_log_file(e.path().string(), log)) << e.path();
    EXPECT_GT(log.recognized_lines, 0) << e.path();
    EXPECT_NO_THROW(require_recognized(log));
    EXPECT_NO_THROW((void)diagnose(log, {})) << e.path();
    ++n;
  }
  EXPECT_GE(n, 13);
}

TEST(DiagnoseParse, RealZero3LogByHand) {
  const RunLog log = parse("z3_healthy.log");
  EXPECT_EQ(log.deepspeed_version, "0.19.8");
  EXPECT_EQ(log.backend, "gloo");
  EXPECT_EQ(log.world_size, 2);
  ASSERT_TRUE(log.user_config.has_value());
  EXPECT_EQ((*log.user_config)["zero_optimization"]["stage"], 3);
  EXPECT_EQ((*log.user_config)["train_micro_batch_size_per_gpu"], 2);
  // zero_config dump: "prefetch_bucket_size=50000000", "reduce_bucket_size=500000000".
  EXPECT_EQ(log.zero_config.at("prefetch_bucket_size"), "50000000");
  EXPECT_EQ(log.zero_config.at("reduce_bucket_size"), "500000000");
  EXPECT_EQ(log.engine_config.at("zero_optimization_stage"), "3");
  // 6 steps: 6 micro lines and 6 global lines, all rank 0.
  int micro = 0, global = 0;
  for (const auto& t : log.timers) (t.micro ? micro : global)++;
  EXPECT_EQ(micro, 6);
  EXPECT_EQ(global, 6);
  bool rs = false;
  for (const auto& r : log.comms)
    if (r.op == "reduce_scatter_tensor") {
      rs = true;
      EXPECT_EQ(r.message_bytes, 494848);  // "483.25 KB"
      EXPECT_EQ(r.count, 6);
    }
  EXPECT_TRUE(rs);
  // see_memory_usage three times (before/after initialize, after training) on each rank.
  ASSERT_GE(log.memory.size(), 3u);
  EXPECT_EQ(log.memory.front().label, "before deepspeed.initialize");
  EXPECT_TRUE(log.ooms.empty());
}

// The engine's zero_config dump names ZeRO++'s fields (0.19.8 prints "zero_hpz_partition_size=1
// zero_quantized_weights=False ..."): the config recovered from a log alone carries them, so check's reader
// and the plan see hpZ (planner/hpz.h). The real z3 log says 1; the same log with 2 must say 2.
TEST(DiagnoseParse, ZeroPlusPlusFieldsAreRecoveredFromTheDump) {
  RunLog log = parse("z3_healthy.log");
  ASSERT_EQ(log.zero_config.at("zero_hpz_partition_size"), "1");
  nlohmann::json c = config_from_engine_dump(log);
  // Off (DeepSpeed's defaults): not written, so the recovered config holds the run's own keys.
  EXPECT_FALSE(c["zero_optimization"].contains("zero_hpz_partition_size"));
  EXPECT_FALSE(c["zero_optimization"].contains("zero_quantized_weights"));
  log.zero_config["zero_hpz_partition_size"] = "2";
  log.zero_config["zero_quantized_gradients"] = "True";
  c = config_from_engine_dump(log);
  EXPECT_EQ(c["zero_optimization"]["zero_hpz_partition_size"], 2);
  EXPECT_EQ(c["zero_optimization"]["zero_quantized_gradients"], true);
  EXPECT_EQ(zero_from_config(c).hpz_partition_size, 2);
}

TEST(DiagnoseCauses, InjectedCauseIsNamedFirst) {
  for (bool with_model : {false, true}) {
    SCOPED_TRACE(with_model ? "with --model/--gpus" : "log only");
    const std::pair<const char*, const char*> cases[] = {{"z3_prefetch0.log", "prefetch_off"},
                                                         {"z2_tiny_buckets.log", "tiny_buckets"},
                                                         {"z2_overlap_off.log", "overlap_off"},
                                                         {"z3_oom.log", "oom"}};
    for (auto [log, cause] : cases) {
      const Diagnosis d = run(log, with_model);
      ASSERT_FALSE(d.causes.empty()) << log;
      EXPECT_EQ(d.causes.front().id, cause) << log;
      EXPECT_FALSE(d.causes.front().evidence.empty()) << log;
    }
  }
}

TEST(DiagnoseCauses, HealthyRunsHaveNoCause) {
  for (bool with_model : {false, true})
    for (const char* log : {"z3_healthy.log", "z2_healthy.log", "z2_offload.log"}) {
      const Diagnosis d = run(log, with_model);
      EXPECT_TRUE(d.causes.empty()) << log << (with_model ? " with model" : "") << ": "
                                    << d.causes.front().title;
      EXPECT_TRUE(d.fixed_config.is_null()) << log;
    }
}

TEST(DiagnoseCauses, FixesAreTheDeepSpeedDefaults) {
  const Diagnosis d = run("z3_prefetch0.log", true);
  ASSERT_FALSE(d.fixed_config.is_null());
  // runtime/zero/config.py: stage3_prefetch_bucket_size default 5e7.
  EXPECT_EQ(d.fixed_config["zero_optimization"]["stage3_prefetch_bucket_size"], 50000000);
  EXPECT_EQ(d.fixed_config["zero_optimization"]["stage"], 3);
  ASSERT_TRUE(d.predicted && d.fixed);
  // The time model hides gathers with prefetch on, so the fixed step is no slower.
  EXPECT_LE(d.fixed->time.step_s, d.predicted->time.step_s);
  const Diagnosis t = run("z2_tiny_buckets.log", false);
  EXPECT_EQ(t.fixed_config["zero_optimization"]["reduce_bucket_size"], 500000000);
}

// Logs without a configuration (DeepSpeed 0.19's default WARNING level: timer lines and the comms summary
// only), recorded by scripts/make_ds_logs.py on tiny-llama-small (its MLP and embedding matrices are above
// stage 3's default persistence threshold). The knob each run injected (its NAME.ds_config.json) is the
// expected answer; the diagnosis reads it from the comms logger's calls alone.
Diagnosis run_quiet(const std::string& name, bool with_model) {
  DiagnoseInputs in;
  if (with_model) {
    in.workload = cpu_workload();
    in.workload->model = models::load_model("tiny-llama-small");
  }
  return diagnose(parse(name), in);
}

TEST(DiagnoseFromComms, TheLogsCarryNoConfig) {
  for (const char* log :
       {"q3_healthy.log", "q3_prefetch0.log", "q3_persist0.log", "q2_healthy.log", "q2_tiny_buckets.log"}) {
    const RunLog l = parse(log);
    EXPECT_FALSE(l.user_config.has_value()) << log;
    EXPECT_TRUE(l.zero_config.empty()) << log;
    EXPECT_FALSE(l.comms.empty()) << log;
    EXPECT_TRUE(run_quiet(log, true).config.is_null()) << log;
  }
}

TEST(DiagnoseFromComms, InjectedKnobIsNamedWithoutAConfig) {
  const std::pair<const char*, const char*> cases[] = {{"q3_prefetch0.log", "prefetch_off"},
                                                       {"q3_persist0.log", "persistence_zero"},
                                                       {"q2_tiny_buckets.log", "tiny_buckets"}};
  for (auto [log, cause] : cases) {
    const Diagnosis d = run_quiet(log, true);
    ASSERT_EQ(d.causes.size(), 1u) << log;
    EXPECT_EQ(d.causes.front().id, cause) << log;
    EXPECT_GE(d.causes.front().evidence.size(), 2u) << log;
    // No config to correct: the fix is said, and no corrected file is offered.
    EXPECT_FALSE(d.causes.front().fix.is_null()) << log;
    EXPECT_TRUE(d.fixed_config.is_null()) << log;
  }
  // Tiny buckets need no model: the step's reductions against what DeepSpeed's default bucket allows.
  const Diagnosis t = run_quiet("q2_tiny_buckets.log", false);
  ASSERT_EQ(ids(t), std::vector<std::string>{"tiny_buckets"});
  EXPECT_EQ(t.causes.front().fix["zero_optimization"]["reduce_bucket_size"], 500000000);
  // 39 reductions per step: one per parameter tensor (4 layers x 9, plus the embedding, the final norm and
  // lm_head), the log's 234 all_reduce calls over 6 steps, by hand from q2_tiny_buckets.log.
  ASSERT_TRUE(t.inferred.has_value());
  EXPECT_DOUBLE_EQ(t.inferred->reductions_per_step, 39.0);
}

TEST(DiagnoseFromComms, HealthyRunsAndTheStage) {
  for (bool with_model : {false, true}) {
    for (const char* log : {"q3_healthy.log", "q2_healthy.log"}) {
      const Diagnosis d = run_quiet(log, with_model);
      EXPECT_TRUE(d.causes.empty()) << log << ": " << (d.causes.empty() ? "" : d.causes.front().title);
    }
    // The stage from the calls: ZeRO-3 gathers every step and reduce-scatters; ZeRO-2 all-reduces.
    EXPECT_EQ(run_quiet("q3_persist0.log", with_model).inferred->stage, 3);
    EXPECT_EQ(run_quiet("q2_healthy.log", with_model).inferred->stage, 2);
  }
  // With the model, the healthy run's gathers agree with DeepSpeed's defaults only (fp32: the recording
  // ran with bf16 off), so both knobs are known and on.
  const Diagnosis h = run_quiet("q3_healthy.log", true);
  ASSERT_EQ(h.inferred->agreeing.size(), 1u);
  EXPECT_EQ(h.inferred->agreeing.front().setting, "DeepSpeed's defaults");
  EXPECT_EQ(h.inferred->agreeing.front().dtype, "fp32");
  EXPECT_TRUE(h.inferred->prefetch_known && !h.inferred->prefetch_off);
  EXPECT_TRUE(h.inferred->persistence_known && !h.inferred->persistence_zero);
  // With prefetch off, persistence 0 issues the same calls as the default: it stays unknown, said so.
  const Diagnosis p = run_quiet("q3_prefetch0.log", true);
  EXPECT_TRUE(p.inferred->prefetch_off);
  EXPECT_FALSE(p.inferred->persistence_known);
  // Without the model, stage 3's knobs are not guessed.
  const Diagnosis n = run_quiet("q3_prefetch0.log", false);
  EXPECT_TRUE(n.causes.empty());
  EXPECT_TRUE(n.inferred->agreeing.empty());
}

TEST(DiagnoseFromComms, TheWrongModelAgreesWithNothing) {
  // tiny-llama-micro's parameters are not the ones the run gathered: no setting agrees, nothing inferred.
  DiagnoseInputs in;
  in.workload = cpu_workload();
  const Diagnosis d = diagnose(parse("q3_prefetch0.log"), in);
  EXPECT_TRUE(d.inferred->agreeing.empty());
  EXPECT_TRUE(d.causes.empty());
}

TEST(DiagnoseCauses, PersistenceZeroFromTheConfig) {
  DiagnoseInputs in;
  in.config = nlohmann::json::parse(slurp(kDir + "q3_persist0.ds_config.json"));
  in.config_path = "q3_persist0.ds_config.json";
  const Diagnosis d = diagnose(parse("q3_persist0.log"), in);
  ASSERT_EQ(ids(d), std::vector<std::string>{"persistence_zero"});
  EXPECT_FALSE(d.inferred.has_value());  // a config is given: nothing is inferred
  EXPECT_EQ(d.fixed_config["zero_optimization"]["stage3_param_persistence_threshold"], 100000);
}

TEST(DiagnoseCauses, LessonLogSlowLinkThenPrefetch) {
  // docs/worked-examples.md section 4: the constructed 4xA40 log (scripts/make_lesson_log.py):
  // all-gathers at 2.2 GB/s busbw through SHM with P2P disabled, and stage3_prefetch_bucket_size 0.
  DiagnoseInputs in;
  planner::Workload w;
  w.model = models::load_model("llama-2-7b");
  w.cluster = hw::parse_cluster("4xA40");
  w.train.checkpointing = planner::Checkpointing::Full;
  in.workload = w;
  const Diagnosis d = diagnose(parse("lesson/lesson_zero3_4xA40.log"), in);
  ASSERT_EQ(ids(d), (std::vector<std::string>{"low_busbw", "prefetch_off"}));
  EXPECT_GT(d.causes[0].gain_ms, d.causes[1].gain_ms);
  // The low_busbw evidence quotes NCCL's own lines.
  bool shm = false;
  for (const auto& e : d.causes[0].evidence) shm |= e.find("via SHM/direct/direct") != std::string::npos;
  EXPECT_TRUE(shm);
  ASSERT_TRUE(d.predicted && d.fixed);
  EXPECT_LT(d.fixed->time.step_s, d.predicted->time.step_s);
}

TEST(DiagnoseCauses, OomOfAPublicZero3Run) {
  const RunLog log = parse("public/lf7532_zero3_oom.log");
  ASSERT_EQ(log.ooms.size(), 1u);
  const auto& o = log.ooms.front();
  EXPECT_EQ(o.gpu, 1);
  EXPECT_NEAR(static_cast<double>(o.tried_bytes), 3.39 * (1 << 30), 1e4);
  EXPECT_NEAR(static_cast<double>(o.total_bytes), 79.32 * (1 << 30), 1e4);
  EXPECT_NEAR(static_cast<double>(o.free_bytes), 2.40 * (1 << 30), 1e4);
  EXPECT_NEAR(static_cast<double>(o.allocated_bytes), 73.28 * (1 << 30), 1e4);
  EXPECT_NEAR(static_cast<double>(o.reserved_unallocated_bytes), 1.59 * (1 << 30), 1e4);
  EXPECT_NE(o.context.find("_optimizer_step"), std::string::npos);
  const Diagnosis d = diagnose(log, {});
  ASSERT_FALSE(d.causes.empty());
  EXPECT_EQ(d.causes.front().id, "oom");
  EXPECT_NE(d.causes.front().evidence[1].find("optimizer step"), std::string::npos);
}

TEST(DiagnoseParse, PinnedMemoryLines) {
  // The real 0.19.8 lines (z3_healthy.log: both ranks print the two ZeRO-3 summaries; nothing is pinned on
  // CPU ranks).
  const RunLog h = parse("z3_healthy.log");
  ASSERT_EQ(h.pinned.size(), 4u);
  EXPECT_EQ(h.pinned[0].tag, "ZeRO-3 parameter offload init");
  EXPECT_EQ(h.pinned[2].tag, "ZeRO-3 optimizer init");
  EXPECT_EQ(h.pinned[2].bytes, 0);
  EXPECT_EQ(h.pinned[2].allocations, 0);
  EXPECT_EQ(h.pinned[2].line, 35);
  // Non-zero totals in the two formats of utils/pin_memory_tracker.py's f-strings (_fmt_bytes: 1024-based,
  // three decimals in GB), as a GPU run prints them; the bytes by hand: 40.5 x 2^30 and 41.25 x 2^30.
  RunLog log;
  parse_log_text(
      "[2026-11-27 10:00:00,000] [INFO] [pin_memory_tracker.py:51:track] [pinned-memory checkpoint] crossed "
      "32.000 GB: 40.500 GB pinned across 1234 allocations\n"
      "[2026-11-27 10:00:01,000] [INFO] [pin_memory_tracker.py:56:log_summary] [pinned-memory ZeRO-3 "
      "optimizer "
      "init] 41.250 GB pinned across 1300 allocations\n"
      "[2026-11-27 10:00:02,000] [INFO] [logging.py:107:log_dist] [Rank 0] time (ms) | fwd_microstep: 10.00 "
      "| "
      "bwd_microstep: 20.00 | bwd_inner_microstep: 18.00 | bwd_allreduce_microstep: 2.00 | step_microstep: "
      "5.00\n",
      "gpu.log", log);
  ASSERT_EQ(log.pinned.size(), 2u);
  EXPECT_EQ(log.pinned[0].tag, "checkpoint");
  EXPECT_EQ(log.pinned[0].bytes, 43'486'543'872);
  EXPECT_EQ(log.pinned[0].allocations, 1234);
  EXPECT_EQ(log.pinned[1].bytes, 44'291'850'240);
  // The diagnosis notes the largest total and names the memlock limit.
  const Diagnosis d = diagnose(log, {});
  const auto it = std::find_if(d.observations.begin(), d.observations.end(),
                               [](const std::string& o) { return o.rfind("pinned memory:", 0) == 0; });
  ASSERT_NE(it, d.observations.end());
  EXPECT_NE(it->find("41.25 GiB pinned in 1300 allocations"), std::string::npos) << *it;
  EXPECT_NE(it->find("ulimit -l"), std::string::npos) << *it;
}

TEST(DiagnoseParse, PublicOldFormats) {
  const RunLog old = parse("public/ds3869_old_oom.log");
  ASSERT_EQ(old.ooms.size(), 1u);
  EXPECT_EQ(old.ooms[0].tried_bytes, 978LL << 20);
  EXPECT_EQ(old.ooms[0].total_bytes, 4LL << 30);
  EXPECT_EQ(old.ooms[0].free_bytes, 0);
  EXPECT_EQ(old.ooms[0].gpu, 0);

  const RunLog neox = parse("public/neox965_old_timers.log");
  ASSERT_EQ(neox.timers.size(), 2u);  // one micro, one global line; the optimizer_* line has no phase
  EXPECT_TRUE(neox.timers[0].micro);
  EXPECT_DOUBLE_EQ(neox.timers[0].fwd_ms, 5073.60);
  EXPECT_DOUBLE_EQ(neox.timers[0].bwd_allreduce_ms, 1321.02);
  EXPECT_FALSE(neox.timers[1].micro);
  EXPECT_DOUBLE_EQ(neox.timers[1].step_ms, 1819.18);

  const RunLog plain = parse("public/ds255_old_timers_noprefix.log");
  const PhaseTimes p = measured_phases(plain);
  EXPECT_EQ(p.samples, 3);             // 4 lines, the first left out
  EXPECT_DOUBLE_EQ(p.fwd_ms, 201.97);  // median of 199.06, 206.16, 201.97

  const RunLog mem = parse("public/ds2302_memory_and_old_oom.log");
  ASSERT_EQ(mem.memory.size(), 1u);
  EXPECT_DOUBLE_EQ(mem.memory[0].ca_gib, 0.08);
  EXPECT_DOUBLE_EQ(mem.cpu_vm_used_gb, 4.07);
  EXPECT_TRUE(mem.run_failed);

  const RunLog nccl = parse("public/nccl1817_shm.log");
  EXPECT_EQ(nccl.nccl.transports.at("SHM"), 4);
}

TEST(DiagnoseParse, TrainerProfilerAndReportLines) {
  // Formats from source: transformers Trainer.log prints the logs dict; DeepSpeed's flops profiler
  // prints line_fmt '{:<70}  {:<8}' rows (profiling/flops_profiler/profiler.py print_model_profile);
  // ds_report prints "name ..... value" rows under "DeepSpeed general environment info:".
  RunLog log;
  parse_log_text(
      "{'loss': 2.3456, 'grad_norm': 1.25, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
      "{'train_runtime': 123.45, 'train_samples_per_second': 6.48, 'train_steps_per_second': 0.405, "
      "'train_loss': 2.1, 'epoch': 1.0}\n"
      "-------------------------- DeepSpeed Flops Profiler --------------------------\n"
      "Profile Summary at step 10:\n"
      "world size:                                                             4       \n"
      "fwd latency:                                                            74.73 ms\n"
      "bwd latency:                                                            1.2 s   \n"
      "DeepSpeed general environment info:\n"
      "torch version .................... 2.1.0\n"
      "deepspeed info ................... 0.14.0, unknown, unknown\n",
      "mixed.log", log);
  ASSERT_EQ(log.losses.size(), 1u);
  EXPECT_DOUBLE_EQ(log.losses[0], 2.3456);
  EXPECT_DOUBLE_EQ(log.hf_metrics.at("train_samples_per_second"), 6.48);
  EXPECT_DOUBLE_EQ(log.hf_metrics.at("train_runtime"), 123.45);
  EXPECT_EQ(log.flops.world_size, 4);
  EXPECT_DOUBLE_EQ(log.flops.fwd_latency_ms, 74.73);
  EXPECT_DOUBLE_EQ(log.flops.bwd_latency_ms, 1200.0);
  EXPECT_EQ(log.torch_version, "2.1.0");
  EXPECT_EQ(log.deepspeed_version, "0.14.0");
}

TEST(DiagnoseRobust, TruncatedLogGivesPartialDiagnosis) {
  const std::string text = slurp(kDir + "z3_prefetch0.log");
  // Cut inside the engine's JSON block: no config, timers gone, the cut said.
  const size_t json_at = text.find("json = {");
  ASSERT_NE(json_at, std::string::npos);
  RunLog cut;
  parse_log_text(std::string_view(text).substr(0, json_at + 60), "cut.log", cut);
  EXPECT_FALSE(cut.user_config.has_value());
  bool said = false;
  for (const auto& n : cut.notes) said |= n.find("cut off") != std::string::npos;
  EXPECT_TRUE(said);
  // The zero_config dump line came before the JSON: the prefetch 0 is still found.
  const Diagnosis d = diagnose(cut, {});
  ASSERT_FALSE(d.causes.empty());
  EXPECT_EQ(d.causes.front().id, "prefetch_off");
  EXPECT_FALSE(d.missing.empty());
  // Cut before anything DeepSpeed printed about its config: no cause, and it says what is missing.
  RunLog head;
  parse_log_text(std::string_view(text).substr(0, 200), "head.log", head);
  const Diagnosis h = diagnose(head, {});
  EXPECT_TRUE(h.causes.empty());
  EXPECT_FALSE(h.missing.empty());
}

TEST(DiagnoseRobust, InterleavedRanksAndTwoFiles) {
  // Lines of two logs interleaved one by one (another rank's lines inside every block).
  const std::string a = slurp(kDir + "z2_tiny_buckets.log"), b = slurp(kDir + "public/nccl1817_shm.log");
  std::istringstream sa(a), sb(b);
  std::string mixed, la, lb;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(sa, la)), gb = static_cast<bool>(std::getline(sb, lb));
    if (!ga && !gb) break;
    if (ga) mixed += la + "\n";
    if (gb) mixed += "[rank1]:" + lb + "\n";
  }
  RunLog log;
  parse_log_text(mixed, "mixed.log", log);
  ASSERT_TRUE(log.user_config.has_value());
  const Diagnosis d = diagnose(log, {});
  ASSERT_FALSE(d.causes.empty());
  EXPECT_EQ(d.causes.front().id, "tiny_buckets");
  // Two files: a real run's log and the OOM excerpt -> OOM first, the slow cause after.
  RunLog two;
  parse_log_file(kDir + "z2_overlap_off.log", two);
  parse_log_file(kDir + "public/lf7532_zero3_oom.log", two);
  const auto v = ids(diagnose(two, {}));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0], "oom");
  EXPECT_EQ(v[1], "overlap_off");
}

TEST(DiagnoseRobust, GarbageAndOtherLocales) {
  RunLog g;
  std::string junk;
  for (int i = 0; i < 5000; ++i) junk += static_cast<char>((i * 7919) % 256);
  parse_log_text(junk, "junk.bin", g);
  EXPECT_THROW(require_recognized(g), UserError);
  // A German-locale shell's messages around real lines, UTF-8 and a decimal comma: still read.
  RunLog de;
  parse_log_text(
      "Speicherzugriffsfehler (Speicherabzug geschrieben) bei 1,5 GB\n"
      "[Rank 0] time (ms) | fwd_microstep: 12.50 | bwd_microstep: 30.00 | bwd_inner_microstep: 25.00 | "
      "bwd_allreduce_microstep: 5.00 | step_microstep: 7.00\n"
      "训练开始 time (ms) | fwd_microstep: 1,5 | step_microstep: abc\n",
      "de.log", de);
  ASSERT_EQ(de.timers.size(), 1u);  // "1,5" is not a number DeepSpeed prints: that line adds no phase
  EXPECT_DOUBLE_EQ(de.timers[0].fwd_ms, 12.5);
  RunLog empty;
  parse_log_text("", "empty.log", empty);
  EXPECT_THROW(require_recognized(empty), UserError);
}

TEST(DiagnoseRobust, FileChecks) {
  RunLog log;
  EXPECT_THROW(parse_log_file(kDir + "does-not-exist.log", log), UserError);
  EXPECT_THROW(parse_log_file(kDir, log), UserError);  // a directory
}

// Under AutoTP (--tp) the comms logger's all-reduces of one micro-batch's hidden states are AutoTP's, in
// the TP group; the rest are ZeRO's, in the data-parallel group. A comms-logger table written out by hand
// in DeepSpeed's format (utils/comms_logging.py log_all) for llama-3.1-8b at micro-batch 1 x 2048 tokens
// on 4 GPUs with tp 2: 1 x 2048 x 4096 x 2 B = 16.0 MB per TP all-reduce, 226 of them over 1 logged step
// (32 layers x 7 + the lm_head's), and a ZeRO bucket all-reduce of 238.42 MB.
TEST(DiagnoseCauses, AutoTpAllReducesAreNamedWithTheirGroup) {
  const std::string text =
      "Comm. Op            Message Size        Count               Total Latency(ms)   Avg Latency(ms)     "
      "tput_avg (Gbps)     busbw_avg (Gbps)    \n"
      "all_reduce\n"
      "                    16.0 MB             226                 1130.00             5.00                "
      "26.84               26.84               \n"
      "                    238.42 MB           9                   900.00              100.00              "
      "20.00               20.00               \n";
  RunLog log;
  parse_log_text(text, "constructed", log);
  ASSERT_EQ(log.comms.size(), 2u);
  DiagnoseInputs in;
  planner::Workload w;
  w.model = models::load_model("llama-3.1-8b");
  w.cluster = hw::parse_cluster("4xA100-80GB");
  w.train.seq_len = 2048;
  w.train.micro_batch = 1;
  w.train.grad_accum = 1;
  planner::apply_tensor_parallel(w, 2);
  in.workload = w;
  in.config = nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}, "tensor_parallel": {"autotp_size": 2}})");
  const Diagnosis d = diagnose(log, in);
  ASSERT_TRUE(d.predicted.has_value());
  ASSERT_EQ(d.collectives.size(), 2u);
  EXPECT_EQ(d.collectives[0].group, "tensor_parallel");
  EXPECT_EQ(d.collectives[0].group_size, 2);
  EXPECT_EQ(d.collectives[1].group, "zero");
  EXPECT_EQ(d.collectives[1].group_size, 2);
  bool named = false;
  for (const auto& o : d.observations) named |= o.find("AutoTP: the comms logger shows 226 all-reduces") == 0;
  std::string all;
  for (const auto& o : d.observations) all += o + "\n";
  EXPECT_TRUE(named) << all;
}

}  // namespace
}  // namespace zeroplan::diagnose
