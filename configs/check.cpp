#include "configs/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/checked.h"
#include "common/embedded_data.h"
#include "common/errors.h"
#include "configs/ds_keys.h"
#include "configs/emit.h"
#include "planner/checkpoint_offload.h"
#include "planner/ds_runtime.h"
#include "planner/expert_parallel.h"
#include "planner/hpz.h"
#include "planner/muon.h"
#include "planner/parallel.h"
#include "planner/sequence_parallel.h"
#include "planner/tensor_parallel.h"
#include "planner/zenflow.h"
#include "planner/zero3_leaf.h"

namespace zeroplan::configs {
namespace {

using nlohmann::json;
using planner::Offload;
using planner::Precision;

const json* find(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* k : path) {
    if (!cur->is_object()) return nullptr;
    const auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

constexpr int64_t kMaxMicroBatch = 65'536;
constexpr int64_t kMaxGradAccum = 1'000'000;
constexpr int64_t kMaxTrainBatch = 1'000'000'000;
// 1e15 elements: above every bucket/threshold anyone writes (DeepSpeed's docs use sub_group_size
// 1e12), and 16 bytes per element still fits in 64 bits.
constexpr int64_t kMaxElements = 1'000'000'000'000'000;

// configs/data/ds_optimizers.json: the optimizer names DeepSpeed builds from optimizer.type, per release.
const json& optimizer_table() {
  static const json t = json::parse(embedded_file("configs/data/ds_optimizers.json"));
  return t;
}

// DEEPSPEED_OPTIMIZERS of the newest listed release not newer than `version` (the oldest otherwise).
std::vector<std::string> deepspeed_optimizers(const std::string& version) {
  const json& lists = optimizer_table().at("deepspeed_optimizers");
  const auto want = version_parts(version);
  const json* best = nullptr;    // the newest release <= version
  const json* oldest = nullptr;  // the fallback for a version older than every list
  std::vector<int> best_parts, oldest_parts;
  for (const auto& [v, names] : lists.items()) {
    const auto parts = version_parts(v);
    if (parts <= want && (best == nullptr || parts > best_parts)) best = &names, best_parts = parts;
    if (oldest == nullptr || parts < oldest_parts) oldest = &names, oldest_parts = parts;
  }
  if (best == nullptr) best = oldest;
  return best ? best->get<std::vector<std::string>>() : std::vector<std::string>{};
}

bool is_auto(const json* v) {
  return v && v->is_string() && v->get<std::string>() == "auto";
}

// An integer value, or nullopt when absent, "auto", null or of a wrong type (the validator has
// already reported wrong types; the caller falls back to DeepSpeed's default).
std::optional<int64_t> as_int(const json* v) {
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

Offload parse_device(const json* section) {
  const json* d = section ? find(*section, {"device"}) : nullptr;
  if (!d || !d->is_string()) return Offload::None;
  const std::string s = d->get<std::string>();
  return s == "cpu" ? Offload::CPU : s == "nvme" ? Offload::NVMe : Offload::None;
}

std::string human_bytes(double b) {
  return fmt::format("{:.1f} GB", b / 1e9);
}

bool contains_auto(const json& j) {
  if (j.is_string()) return j.get<std::string>() == "auto";
  if (j.is_object() || j.is_array())
    for (const auto& v : j)
      if (contains_auto(v)) return true;
  return false;
}

class Reader {
 public:
  Reader(const json& config, const planner::Workload& w, const CheckOptions& o) : cfg_(config), w_(w) {
    r_.resolved = config.is_object() ? config : json::object();
    r_.deepspeed_version = resolve_deepspeed_version(o.deepspeed_version);
    v1_ = uses_pydantic_v1(r_.deepspeed_version);
    r_.runner_assumed = !o.runner.has_value();
    r_.runner = o.runner.value_or(contains_auto(config) ? Runner::HF : Runner::DeepSpeed);
    r_.issues = validate_keys(config, ValidateOptions{r_.deepspeed_version, r_.runner});
    if (o.lenient_json) {
      if (r_.runner == Runner::DeepSpeed)
        add(Severity::Warning, "",
            "not strict JSON (" + o.json_error +
                "); DeepSpeed reads a config path with hjson and accepts it, the HF Trainer and accelerate "
                "(json.load) refuse it",
            "remove the comments / trailing commas");
      else
        add(Severity::Error, "",
            "not strict JSON (" + o.json_error + "); the " + std::string(runner_name(r_.runner)) +
                " runner reads the file with json.load and refuses it (DeepSpeed alone would accept it)",
            "remove the comments / trailing commas");
    }
    if (r_.runner_assumed && r_.runner == Runner::HF)
      add(Severity::Info, "",
          "the file uses \"auto\", which only the HF Trainer and accelerate fill: judged as the HF Trainer "
          "would "
          "run it",
          "pass --runner deepspeed|hf|accelerate to choose");
  }

  ReadConfig run() {
    if (!cfg_.is_object()) {
      r_.usable = false;
      return std::move(r_);
    }
    runner_rules();
    sequence_parallel();
    tensor_parallel();
    batch();
    precision();
    zero();
    expert_parallel();
    hpz();
    quantized_zero();
    zenflow();
    r_.zero.checkpointing = w_.train.checkpointing.value_or(planner::Checkpointing::None);
    activation_checkpointing();
    traps();
    optimizer();
    master_weights();
    if (!muon_name_.empty() && !muon()) adam_priced(muon_name_);
    wrapper();
    return std::move(r_);
  }

 private:
  // "activation_checkpointing" configures deepspeed.checkpointing (runtime/activation_checkpointing/
  // checkpointing.py), which acts only where the model's layers call deepspeed.checkpointing.checkpoint
  // after the script calls deepspeed.checkpointing.configure (Megatron-DeepSpeed does). DeepSpeed's engine
  // does not configure it from ds_config (engine.py _configure_checkpointing sets up the checkpoint
  // *files*), and transformers' gradient_checkpointing_enable wraps the layers with torch.utils.checkpoint
  // (modeling_utils.py: gradient_checkpointing_func = checkpoint), so under the HF Trainer these keys
  // change nothing. Where they do act (--checkpoint-impl deepspeed): cpu_checkpointing keeps the
  // checkpoints in host memory (planner/checkpoint_offload.h), partition_activations splits each over the
  // model-parallel group (mp_size > 1 only; 1 here) and sends cpu_checkpointing down its blocking path.
  void activation_checkpointing() {
    const json* ac = find(cfg_, {"activation_checkpointing"});
    if (ac == nullptr || !ac->is_object()) return;
    const bool partition = zbool(find(*ac, {"partition_activations"})).value_or(false);
    const bool cpu = zbool(find(*ac, {"cpu_checkpointing"})).value_or(false);
    if (!partition && !cpu) return;
    const char* key =
        cpu ? "activation_checkpointing.cpu_checkpointing" : "activation_checkpointing.partition_activations";
    const char* what = partition && cpu ? "partition_activations and cpu_checkpointing"
                       : cpu            ? "cpu_checkpointing"
                                        : "partition_activations";
    if (!w_.train.deepspeed_checkpointing) {
      add(Severity::Info, key,
          fmt::format(
              "{} only act through deepspeed.checkpointing.checkpoint (Megatron-DeepSpeed, or a script "
              "that calls deepspeed.checkpointing.configure and checkpoints its layers with it); the HF "
              "Trainer's gradient_checkpointing uses torch.utils.checkpoint and ignores them, and so does "
              "this plan (checkpoints counted on the GPU, not partitioned{})",
              what, cpu ? " or moved to host memory" : ""),
          "with the HF Trainer drop them; if the script uses deepspeed.checkpointing, pass --checkpoint-impl "
          "deepspeed");
      return;
    }
    r_.cpu_checkpointing = cpu;
    r_.partition_activations = partition;
    // The layers are checkpointed (the script calls deepspeed.checkpointing.checkpoint), so an unset
    // --checkpointing means full recomputation here; an explicit one is kept.
    if (cpu && !w_.train.checkpointing) r_.zero.checkpointing = planner::Checkpointing::Full;
    planner::TrainingSpec t = w_.train;
    t.checkpoint_offload = cpu ? planner::CheckpointOffload::Cpu : planner::CheckpointOffload::None;
    t.partition_activations = partition;
    const planner::CheckpointOffloadPlan off =
        planner::checkpoint_offload_plan(t, std::max<int64_t>(1, w_.model.num_layers), r_.zero.checkpointing);
    const bool acts = off.active;
    add(Severity::Info, key,
        acts  ? fmt::format("modelled with deepspeed.checkpointing (layers fully checkpointed): the layer "
                             "inputs wait in host memory, {}{}",
                           !off.async ? "pageable, copied with blocking .cpu() / .to(device)"
                                       : "pinned, copied by DeepSpeed's offload engine on a side stream",
                           partition ? "; partition_activations splits nothing at model-parallel size 1" : "")
        : cpu ? fmt::format("{}: the plan's layers are not fully checkpointed (--checkpointing), so nothing "
                            "is offloaded",
                            what)
              : "partition_activations splits each checkpoint over the model-parallel group, which is 1 "
                "here: nothing changes",
        "");
  }

  // "expert_parallel" (DeepSpeed 0.19.8 AutoEP, module_inject/auto_ep_config.py parse_autoep_config: enabled
  // default False, autoep_size default 1): the plan's ep_size when zeroplan models it
  // (planner/expert_parallel.h).
  void expert_parallel() {
    const json* ep = find(cfg_, {"expert_parallel"});
    if (ep == nullptr || !ep->is_object()) return;
    const json* en = find(*ep, {"enabled"});
    const json* sz = find(*ep, {"autoep_size"});
    if (en == nullptr || !en->is_boolean() || !en->get<bool>() || sz == nullptr || !sz->is_number_integer())
      return;
    const int64_t size = sz->get<int64_t>();
    if (size <= 1 || size > 1'000'000) return;
    const std::string why = planner::expert_parallel_refusal(w_, static_cast<int>(size));
    if (!why.empty()) {
      add(Severity::Warning, "expert_parallel.autoep_size", why + "; predicted without expert parallelism");
      return;
    }
    r_.zero.ep_size = static_cast<int>(size);
  }

  // zero_optimization.zero_hpz_partition_size (ZeRO++ hpZ, planner/hpz.h; runtime/zero/config.py int >= 0,
  // default 1; only values above 1 build the secondary groups: stage3.py `if self.zero_hpz_partition_size >
  // 1`).
  void hpz() {
    const json* zo = find(cfg_, {"zero_optimization"});
    const json* v = zo && zo->is_object() ? find(*zo, {"zero_hpz_partition_size"}) : nullptr;
    const std::optional<int64_t> h = zint(v);
    if (!h || *h <= 1) return;
    const std::string path = "zero_optimization.zero_hpz_partition_size";
    const int stage = r_.zero.stage;
    if (stage != 3) {
      add(Severity::Warning, path,
          fmt::format("hpZ partitions stage-3 parameters; at stage {} DeepSpeed accepts it and ignores it",
                      stage),
          "remove it, or use stage 3", json{{"op", "remove"}});
      return;
    }
    const int64_t world = w_.cluster.world_size();
    // utils/groups.py _create_zero_param_parallel_group: min(group_size, world), then
    // _ensure_divisibility's assertion message.
    const int64_t eff = std::min<int64_t>(*h, world);
    if (world % eff != 0) {
      add(Severity::Error, path, fmt::format("DeepSpeed asserts \"{} is not divisible by {}\"", world, eff),
          "use a size that divides the GPUs, e.g. the GPUs per node");
      return;
    }
    if (r_.zero.ep_size > 1) {
      add(Severity::Error, path,
          fmt::format(
              "DeepSpeed 0.19.8 refuses it with AutoEP: \"AutoEP with ZeRO Stage 3 does not support hpZeRO "
              "secondary tensor groups yet (zero_optimization.zero_hpz_partition_size={}).\"",
              *h),
          "remove it, or turn AutoEP off");
      return;
    }
    const std::vector<std::string> why = layout::validate(
        w_.cluster.nodes, w_.cluster.gpus_per_node,
        {std::max(1, r_.tensor_parallel), std::max(1, r_.sequence_parallel), 1, static_cast<int>(eff)},
        layout::LayoutFacts{}, /*modelled_tp=*/true);
    if (!why.empty()) {
      add(Severity::Warning, path, why.front() + "; predicted without hpZ", "");
      return;
    }
    if (const std::string refused = planner::hpz_refusal(w_); !refused.empty()) {
      add(Severity::Warning, path, refused + "; predicted without hpZ", "");
      return;
    }
    if (eff > w_.cluster.gpus_per_node)
      add(Severity::Info, path,
          fmt::format(
              "the hpZ group of {} GPUs spans {} nodes, so the backward's gathers still cross the network; "
              "ZeRO++ sizes it to one node ({} GPUs)",
              eff, (eff + w_.cluster.gpus_per_node - 1) / w_.cluster.gpus_per_node, w_.cluster.gpus_per_node),
          "");
    r_.zero.hpz_partition_size = static_cast<int>(eff);
  }

  // ZeRO++ qwZ / qgZ (zero_quantized_weights, zero_quantized_nontrainable_weights, zero_quantized_gradients;
  // runtime/zero/config.py): stage-3 only (partition_parameters.py Init and stage3.py read them; stage 1/2 do
  // not). qwZ and qgZ are priced from the code (planner/zeropp_quant.h); their quantizer kernels exist for
  // CUDA only, so the CPU harness cannot record them (tests/deepspeed/fixtures-hpz/failures-0.19.8.json:
  // "This op had not been implemented on CPU backend"). zero_quantized_nontrainable_weights (frozen
  // parameters stored in int8) is not modelled.
  void quantized_zero() {
    const json* zo = find(cfg_, {"zero_optimization"});
    if (zo == nullptr || !zo->is_object()) return;
    const int stage = r_.zero.stage;
    for (const char* k :
         {"zero_quantized_weights", "zero_quantized_nontrainable_weights", "zero_quantized_gradients"}) {
      if (!zbool(find(*zo, {k})).value_or(false)) continue;
      const std::string path = std::string("zero_optimization.") + k;
      if (stage != 3) {
        add(Severity::Warning, path,
            fmt::format("a ZeRO++ stage-3 setting at stage {}: DeepSpeed accepts it and ignores it", stage),
            "remove it, or use stage 3", json{{"op", "remove"}});
        continue;
      }
      if (std::string(k) == "zero_quantized_gradients" && r_.zero.ep_size > 1) {
        add(Severity::Error, path,
            "DeepSpeed 0.19.8 refuses it with AutoEP: \"AutoEP with ZeRO Stage 3 does not support "
            "zero_quantized_gradients yet.\"",
            "remove it, or turn AutoEP off");
        continue;
      }
      const bool grads = std::string(k) == "zero_quantized_gradients";
      if (std::string(k) == "zero_quantized_nontrainable_weights") {
        add(Severity::Warning, path,
            "frozen parameters kept in int8 (qwZ for non-trainable weights) is not modelled; predicted with "
            "16-bit frozen parameters and gathers",
            "");
        continue;
      }
      if (grads)
        r_.zero.quantized_gradients = true;
      else
        r_.zero.quantized_weights = true;
      add(Severity::Info, path,
          grads ? (w_.cluster.nodes > 1
                       ? std::string(
                             "qgZ: priced as DeepSpeed 0.19.8 runs it (all_to_all_quant_reduce: int4 "
                             "all-to-alls of each gradient matrix inside the node, then across the nodes; "
                             "1-D gradients reduce-scattered alone), from the code: its CUDA kernels were "
                             "not recorded")
                       : std::string(
                             "on one node DeepSpeed 0.19.8 does not use qgZ: stage3.py __avg_scatter_grads "
                             "takes the quantized all-to-all only when world / GPUs per node > 1, so this "
                             "runs the plain reduce-scatter, as predicted"))
                : std::string(
                      "qwZ: priced as DeepSpeed 0.19.8 runs it (each parameter gather in int8 plus fp32 "
                      "scales, dequantized and cast on arrival), from the code: its CUDA kernels were "
                      "not recorded"),
          "");
    }
  }

  // zero_optimization.zenflow (planner/zenflow.h): DeepSpeed's refusals as errors; otherwise one warning
  // that the prediction is plain ZeRO-Offload's, with the selective AdamW's GPU bytes it leaves out.
  void zenflow() {
    const json* zf = find(cfg_, {"zero_optimization", "zenflow"});
    if (zf == nullptr || !zf->is_object()) return;
    planner::ZenFlowSettings z;
    if (const json* v = find(*zf, {"topk_ratio"}); v && v->is_number()) z.topk_ratio = v->get<double>();
    if (const json* v = find(*zf, {"select_strategy"}); v && v->is_string())
      z.select_strategy = v->get<std::string>();
    z.select_interval = as_int(find(*zf, {"select_interval"}));
    z.update_interval = as_int(find(*zf, {"update_interval"}));
    z.overlap_step = zbool(find(*zf, {"overlap_step"})).value_or(false);
    z.offload = zbool(find(*zf, {"offload"})).value_or(false);
    const std::string path = "zero_optimization.zenflow";
    const planner::ZenFlowHost host{r_.zero.stage, r_.zero.offload_optimizer == Offload::CPU,
                                    r_.zero.overlap_comm};
    if (const std::string refused = planner::zenflow_refusal(z, host); !refused.empty()) {
      add(Severity::Error, path, "DeepSpeed 0.19.8 refuses it at deepspeed.initialize: " + refused,
          host.offload_optimizer_cpu ? "fix the zenflow settings"
                                     : "add \"offload_optimizer\": {\"device\": \"cpu\"}");
      return;
    }
    // The runtime tree once for both reads below (each walk of it builds every layer's tensor list).
    const std::vector<models::LayerInventory> inventory = w_.model.runtime_inventory();
    if (const std::string refused = planner::zenflow_model_refusal(inventory); !refused.empty()) {
      add(Severity::Error, path, refused, "remove zenflow for this model");
      return;
    }
    // runtime/zenflow/engine.py configure_zenflow: engine._config.gradient_accumulation_steps =
    // update_interval (0 for "auto"), so the engine's accumulation boundary follows ZenFlow's update
    // interval.
    if (z.update_interval && *z.update_interval != r_.zero.grad_accum)
      add(Severity::Warning, "gradient_accumulation_steps",
          fmt::format(
              "ZenFlow replaces gradient_accumulation_steps ({}) with its update_interval ({}): the engine "
              "steps the CPU optimizer every {} micro-steps (runtime/zenflow/engine.py configure_zenflow)",
              r_.zero.grad_accum, *z.update_interval, *z.update_interval),
          "set them equal");
    // Recorded (fixtures-zenflow llama-gqa_s2_n2_bf16_zenflow_auto): with update_interval "auto" the engine's
    // gradient_accumulation_steps is 0 and engine.py backward divides the loss by it
    // (`loss / self.gradient_accumulation_steps()`); the measured step's loss is NaN.
    if (!z.update_interval)
      add(Severity::Warning, path + ".update_interval",
          "\"auto\" (ZenFlow's default) makes DeepSpeed 0.19.8 set the engine's gradient_accumulation_steps "
          "to 0 (runtime/zenflow/engine.py configure_zenflow), and engine.backward divides the loss by it: "
          "recorded on CPU ranks, the loss is NaN from the second step (users report NaN losses with "
          "ZenFlow too: DeepSpeed#7759, open)",
          "set update_interval to a number, e.g. 4");
    std::string gpu_bytes;
    if (w_.train.method == planner::Method::Full && !z.offload && !w_.model.params_only) {
      const int bytes = r_.precision == Precision::FP32 ? 4 : 2;
      gpu_bytes = fmt::format(
          "; it leaves out the selective AdamW's states ZenFlow keeps on every GPU, {} (exp_avg and "
          "exp_avg_sq of {:g} of each matrix's columns, recorded exactly)",
          human_bytes(
              static_cast<double>(planner::zenflow_selective_state_bytes(inventory, z.topk_ratio, bytes))),
          z.topk_ratio);
    }
    add(Severity::Warning, path,
        "ZenFlow's asynchronous top-k update is not modelled: memory and step time are predicted for plain "
        "ZeRO-Offload (every step waits for the CPU Adam)" +
            gpu_bytes,
        "");
  }

  // "sequence_parallel_size" (Ulysses SP, planner/sequence_parallel.h): DeepSpeed's batch arithmetic
  // divides the world by it (runtime/config.py _configure_train_batch_size, without an mpu), and
  // UlyssesSPAttentionHF refuses heads or KV heads it cannot split. The workload's --sp stands when the
  // file has no such key.
  void sequence_parallel() {
    r_.sequence_parallel = std::max(1, w_.train.sequence_parallel);
    const json* v = find(cfg_, {"sequence_parallel_size"});
    if (v == nullptr || is_auto(v)) return;
    if (!v->is_number_integer() || v->get<int64_t>() < 1 || v->get<int64_t>() > 1'000'000) {
      add(Severity::Error, "sequence_parallel_size", fmt::format("{} is not a positive integer", v->dump()),
          "write the Ulysses group size, e.g. 4");
      return;
    }
    const int sp = static_cast<int>(v->get<int64_t>());
    if (sp == 1) {
      r_.sequence_parallel = 1;
      return;
    }
    const std::vector<std::string> why =
        layout::validate(w_.cluster.nodes, w_.cluster.gpus_per_node, {1, sp, 1}, planner::layout_facts(w_));
    if (!why.empty()) {
      add(Severity::Error, "sequence_parallel_size", why.front(), "choose a size the rule allows");
      return;
    }
    planner::Workload probe = w_;
    probe.train.sequence_parallel = sp;
    if (const std::string refused = planner::sequence_parallel_refusal(probe); !refused.empty()) {
      add(Severity::Warning, "sequence_parallel_size", refused + "; predicted without sequence parallelism",
          "");
      return;
    }
    r_.sequence_parallel = sp;
  }

  // "tensor_parallel": {"autotp_size": N} (AutoTP training, planner/tensor_parallel.h): read by
  // deepspeed.initialize (runtime/tensor_parallel/config.py TPTrainingConfig; 0 = off). The batch
  // arithmetic is unchanged by it (the config counts TP ranks as replicas: planner/parallel.h
  // deepspeed_batch_world). The workload's --tp stands when the file has no such key.
  void tensor_parallel() {
    r_.tensor_parallel = std::max(1, w_.train.tensor_parallel);
    const json* v = find(cfg_, {"tensor_parallel", "autotp_size"});
    if (v == nullptr || is_auto(v)) return;
    if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 1'000'000) {
      add(Severity::Error, "tensor_parallel.autotp_size",
          fmt::format("{} is not a non-negative integer", v->dump()),
          "write the tensor-parallel size, e.g. 2 (0 or 1: off)");
      return;
    }
    const int tp = static_cast<int>(v->get<int64_t>());
    if (tp <= 1) {
      r_.tensor_parallel = 1;
      return;
    }
    const std::vector<std::string> why = layout::validate(w_.cluster.nodes, w_.cluster.gpus_per_node,
                                                          {tp, std::max(1, r_.sequence_parallel), 1},
                                                          planner::layout_facts(w_), /*modelled_tp=*/true);
    if (!why.empty()) {
      add(Severity::Error, "tensor_parallel.autotp_size", why.front(), "choose a size the rule allows");
      return;
    }
    planner::Workload probe = w_;
    probe.train.sequence_parallel = r_.sequence_parallel;
    if (const std::string refused = planner::tensor_parallel_refusal(probe, tp); !refused.empty()) {
      add(Severity::Warning, "tensor_parallel.autotp_size",
          refused + "; predicted without tensor parallelism", "");
      return;
    }
    r_.tensor_parallel = tp;
  }

  // zero_optimization / fp16 / bf16 values as DeepSpeed's pydantic models coerce them.
  std::optional<int64_t> zint(const json* v) const {
    return v && !is_auto(v) ? pydantic_int(*v, v1_) : std::nullopt;
  }
  std::optional<bool> zbool(const json* v) const {
    return v && !is_auto(v) ? pydantic_bool(*v) : std::nullopt;
  }
  bool fills_auto() const { return r_.runner != Runner::DeepSpeed; }

  void add(Severity s, std::string path, std::string msg, std::string hint = "", json fix = json()) {
    r_.issues.push_back(Issue{s, std::move(path), std::move(msg), std::move(hint), std::move(fix)});
  }
  void set_resolved(std::initializer_list<const char*> path, const json& v) {
    json* cur = &r_.resolved;
    for (const char* k : path) cur = &(*cur)[k];
    *cur = v;
  }

  // What the launcher itself refuses or changes before DeepSpeed sees the config.
  void runner_rules() {
    if (r_.runner != Runner::DeepSpeed) {
      // accelerate DeepSpeedPlugin.__post_init__ (the HF Trainer builds one too).
      if (!cfg_.contains("zero_optimization"))
        add(Severity::Error, "zero_optimization",
            fmt::format(
                "missing; the {} runner goes through accelerate's DeepSpeedPlugin, which raises 'Please "
                "specify the ZeRO optimization config in the DeepSpeed config.'",
                runner_name(r_.runner)),
            "add \"zero_optimization\": {\"stage\": 0} (or the stage you want)");
      // The legacy cpu_offload switch is not seen by transformers' is_offload() (it reads
      // offload_optimizer/offload_param.device), so the Trainer passes its torch AdamW and DeepSpeed's
      // engine refuses a client optimizer with ZeRO-Offload (engine.py _configure_optimizer), unless
      // zero_force_ds_cpu_optimizer is false. Recorded by tests/deepspeed_configs/judge.py
      // (adv_cpu_offload_legacy via hf).
      const json* zo = find(cfg_, {"zero_optimization"});
      const bool legacy = zo && zo->is_object() &&
                          pydantic_bool(zo->value("cpu_offload", json(false))).value_or(false) &&
                          !zo->contains("offload_optimizer");
      const bool has_opt =
          cfg_.contains("optimizer") && cfg_["optimizer"].is_object() && cfg_["optimizer"].contains("type");
      const bool force = cfg_.value("zero_force_ds_cpu_optimizer", json(true)) != json(false);
      if (legacy && !has_opt && force)
        add(Severity::Error, "zero_optimization.cpu_offload",
            "the HF Trainer does not recognise the legacy cpu_offload switch, passes its own torch AdamW, "
            "and "
            "DeepSpeed refuses 'ZeRO-Offload with a client provided optimizer'",
            "write \"offload_optimizer\": {\"device\": \"cpu\"} instead");
    }
    // runtime/config.py get_communication_data_type: anything but fp16/bf16/fp32 (any case) raises
    // "Invalid communication_data_type".
    for (const char* key : {"communication_data_type", "seq_parallel_communication_data_type"}) {
      const json* v = find(cfg_, {key});
      if (!v || v->is_null() || (is_auto(v) && fills_auto())) continue;
      std::string t = v->is_string() ? v->get<std::string>() : "";
      std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
      // Under Ulysses SP it is the gradient reductions' dtype at stages 0 and 3
      // (planner/sequence_parallel.h).
      if (std::string(key) == "seq_parallel_communication_data_type" && (t == "fp16" || t == "bf16"))
        sp_comm_fp32_ = false;
      if (t != "fp16" && t != "bf16" && t != "fp32")
        add(Severity::Error, key,
            fmt::format(
                "is {}; DeepSpeed raises 'Invalid communication_data_type. Supported data types: ['fp16', "
                "'bf16', 'fp32']'",
                v->dump()),
            "write \"fp16\", \"bf16\" or \"fp32\"");
    }
  }

  // Batch sizes: "auto" as the HF Trainer fills it (trainer_config_process: per_device_train_batch_size,
  // gradient_accumulation_steps, train_batch_size = world * micro * accum), then DeepSpeed's own
  // completion and assertion (runtime/config.py _set_batch_related_parameters, _batch_assertion).
  void batch() {
    // DeepSpeed's "world" here is the data-parallel size: GPUs / sequence_parallel_size.
    const int64_t world = w_.cluster.world_size() / std::max(1, r_.sequence_parallel);
    const auto& t = w_.train;
    // TrainingArguments values: flags, else HF defaults.
    int64_t hf_micro = t.micro_batch.value_or(kHfDefaultMicroBatch);
    int64_t hf_accum = kHfDefaultGradAccum;
    if (t.grad_accum)
      hf_accum = *t.grad_accum;
    else if (t.global_batch && t.micro_batch && *t.global_batch % (*t.micro_batch * world) == 0)
      hf_accum = *t.global_batch / (*t.micro_batch * world);

    const json* tb_v = find(cfg_, {"train_batch_size"});
    const json* mb_v = find(cfg_, {"train_micro_batch_size_per_gpu"});
    const json* ga_v = find(cfg_, {"gradient_accumulation_steps"});
    std::optional<int64_t> tb = as_int(tb_v), mb = as_int(mb_v), ga = as_int(ga_v);
    // accelerate's DeepSpeedPlugin sets an absent gradient_accumulation_steps to 1 before DeepSpeed
    // completes the batch (so train_batch_size 64 with micro-batch 32 on one GPU fails the assertion
    // through the HF Trainer, but means accumulation 2 for deepspeed.initialize).
    if (!ga_v && r_.runner != Runner::DeepSpeed) ga = 1;
    batch_key_types(tb_v, mb_v, ga_v);

    if (is_auto(mb_v) && fills_auto()) {
      mb = hf_micro;
      if (!t.micro_batch)
        add(Severity::Info, "train_micro_batch_size_per_gpu",
            fmt::format("\"auto\" resolved to {} (TrainingArguments' default per_device_train_batch_size)",
                        hf_micro),
            "pass --micro-batch to use your value");
    }
    if (is_auto(ga_v) && fills_auto()) {
      ga = hf_accum;
      if (!t.grad_accum && !t.global_batch)
        add(Severity::Info, "gradient_accumulation_steps",
            fmt::format("\"auto\" resolved to {} (TrainingArguments' default)", hf_accum),
            "pass --grad-accum to use your value");
    }
    if (is_auto(tb_v) && fills_auto())
      tb = checked_mul(checked_mul(world, mb.value_or(hf_micro)), ga.value_or(hf_accum));

    batch_flag_mismatches(tb_v, mb_v, ga_v);

    complete_batch(tb, mb, ga, hf_micro, hf_accum);
    r_.zero.micro_batch = *mb;
    r_.zero.grad_accum = *ga;
    r_.train_batch_size = *tb;
    set_resolved({"train_batch_size"}, *tb);
    set_resolved({"train_micro_batch_size_per_gpu"}, *mb);
    set_resolved({"gradient_accumulation_steps"}, *ga);
    if (is_auto(find(cfg_, {"gradient_clipping"})))
      set_resolved({"gradient_clipping"}, 1.0);  // max_grad_norm default
  }

  // runtime/config.py's batch keys are used without conversion: anything but a whole number (or an "auto"
  // the runner fills) fails DeepSpeed's batch assertion.
  void batch_key_types(const json* tb_v, const json* mb_v, const json* ga_v) {
    // runtime/config.py reads the batch keys with dict.get and no conversion; _batch_assertion then
    // compares them with 0, so a string (other than an "auto" the runner fills) or a fraction fails
    // there ("'>' not supported between instances of 'str' and 'int'", recorded by
    // tests/deepspeed_configs/judge.py for adv_micro_string).
    for (auto [key, v] :
         {std::pair{"train_batch_size", tb_v}, std::pair{"train_micro_batch_size_per_gpu", mb_v},
          std::pair{"gradient_accumulation_steps", ga_v}}) {
      if (!v || v->is_null() || (is_auto(v) && fills_auto())) continue;
      if (is_auto(v)) continue;  // reported by the validator
      if (!v->is_number() || !as_int(v))
        add(Severity::Error, key,
            fmt::format(
                "is {}; DeepSpeed uses it without conversion and its batch assertion fails on anything "
                "but a whole number",
                v->dump()),
            "write a whole number without quotes");
    }
  }

  // --micro-batch / --grad-accum / --global-batch against a number in the file.
  void batch_flag_mismatches(const json* tb_v, const json* mb_v, const json* ga_v) {
    const auto& t = w_.train;
    // A flag that disagrees with a number in the file: the HF Trainer refuses the mismatch
    // (trainer_config_finalize raises "Please correct the following DeepSpeed config values that
    // mismatch TrainingArguments values"); plain DeepSpeed uses the file. zeroplan uses the file.
    const auto mismatch = [&](const char* key, const json* v, std::optional<int64_t> flag,
                              const char* flag_name) {
      const auto cv = as_int(v);
      if (!cv || !flag || *cv == *flag) return;
      if (r_.runner == Runner::HF)
        add(Severity::Error, key,
            fmt::format("the file says {} but {} (TrainingArguments) says {}; the HF Trainer refuses this "
                        "mismatch ('Please correct the following DeepSpeed config values that mismatch "
                        "TrainingArguments values')",
                        *cv, flag_name, *flag),
            "make them agree or write \"auto\"");
      else
        add(Severity::Warning, key,
            fmt::format(
                "the file says {} but {} says {}; the {} runner uses the file's value (zeroplan does too)",
                *cv, flag_name, *flag, runner_name(r_.runner)),
            "make them agree");
    };
    mismatch("train_micro_batch_size_per_gpu", mb_v, t.micro_batch, "--micro-batch");
    mismatch("gradient_accumulation_steps", ga_v, t.grad_accum, "--grad-accum");
    mismatch("train_batch_size", tb_v, t.global_batch, "--global-batch");
  }

  // DeepSpeed's completion of the batch triple and its assertions; `hf_micro`/`hf_accum` stand in when
  // neither size is given (reported as an error).
  void complete_batch(std::optional<int64_t>& tb, std::optional<int64_t>& mb, std::optional<int64_t>& ga,
                      int64_t hf_micro, int64_t hf_accum) {
    const int64_t world = w_.cluster.world_size() / std::max(1, r_.sequence_parallel);
    // DeepSpeed's completion of missing values (integer division, as in runtime/config.py). A divisor
    // of 0 is a ZeroDivisionError in DeepSpeed; here it yields 0, which the positivity check below
    // reports. Products are checked (a hostile file must not overflow them).
    const auto div = [](int64_t x, int64_t y) -> int64_t { return y > 0 ? x / y : 0; };
    const auto prod = [](int64_t x, int64_t y, int64_t z) { return checked_mul(checked_mul(x, y), z); };
    if (tb && mb && ga) {
    } else if (tb && mb) {
      ga = div(div(*tb, *mb), world);
    } else if (tb && ga) {
      mb = div(div(*tb, world), *ga);
    } else if (mb && ga) {
      tb = prod(*mb, *ga, world);
    } else if (tb) {
      ga = 1;
      mb = div(*tb, world);
    } else if (mb) {
      tb = checked_mul(*mb, world);
      ga = 1;
    } else {
      add(Severity::Error, "train_batch_size",
          "neither train_batch_size nor train_micro_batch_size_per_gpu is given; DeepSpeed asserts 'Either "
          "train_batch_size or train_micro_batch_size_per_gpu needs to be provided'",
          "add \"train_micro_batch_size_per_gpu\"");
      tb = prod(world, hf_micro, hf_accum);
      mb = hf_micro;
      ga = hf_accum;
    }
    if (*mb <= 0 || *ga <= 0 || *tb <= 0) {
      add(Severity::Error, "train_batch_size",
          fmt::format("batch sizes work out to train_batch_size {}, micro-batch {}, accumulation {} on {} "
                      "GPUs; DeepSpeed "
                      "asserts each is greater than 0",
                      *tb, *mb, *ga, world),
          fmt::format("train_batch_size must be at least {} (one sequence per GPU)", world));
      mb = std::max<int64_t>(*mb, 1);
      ga = std::max<int64_t>(*ga, 1);
      tb = prod(*mb, *ga, world);
    } else if (*tb != prod(*mb, *ga, world)) {
      add(Severity::Error, "train_batch_size",
          fmt::format("train_batch_size {} != micro-batch {} x gradient_accumulation_steps {} x {} GPUs = "
                      "{}; DeepSpeed "
                      "refuses this ('Check batch related parameters')",
                      *tb, *mb, *ga, world, prod(*mb, *ga, world)),
          fmt::format("set train_batch_size to {} or write \"auto\"", prod(*mb, *ga, world)),
          json{{"op", "set"}, {"value", prod(*mb, *ga, world)}});
      tb = prod(*mb, *ga, world);
    }
    // zeroplan's input limits (the same as the CLI flags', cli/options.cpp): far above any real run,
    // low enough that every byte count stays inside checked 64-bit arithmetic.
    if (*mb > kMaxMicroBatch || *ga > kMaxGradAccum || *tb > kMaxTrainBatch)
      throw_user_error(
          "batch sizes in the config (micro-batch {}, accumulation {}, train_batch_size {}) are beyond "
          "zeroplan's "
          "limits ({}, {}, {})",
          *mb, *ga, *tb, kMaxMicroBatch, kMaxGradAccum, kMaxTrainBatch);
  }

  // fp16 / bf16: runtime/config.py get_fp16_enabled, get_bfloat16_enabled ("bfloat16" is the old
  // name); "auto" is filled from TrainingArguments fp16 / bf16 (here: --precision).
  void precision() {
    const auto enabled = [&](const char* section, Precision p) {
      const json* v = find(cfg_, {section, "enabled"});
      if (is_auto(v) && fills_auto()) {
        const bool on = w_.train.precision == p;
        set_resolved({section, "enabled"}, on);
        return on;
      }
      return zbool(v).value_or(false);
    };
    const bool fp16 = enabled("fp16", Precision::FP16);
    const bool bf16 =
        enabled("bf16", Precision::BF16) || (!cfg_.contains("bf16") && enabled("bfloat16", Precision::BF16));
    if (fp16 && bf16)
      add(Severity::Error, "fp16.enabled",
          "fp16 and bf16 are both enabled; DeepSpeed asserts 'bfloat16 and fp16 modes cannot be "
          "simultaneously enabled'",
          "keep one of them");
    r_.precision = bf16 ? Precision::BF16 : fp16 ? Precision::FP16 : Precision::FP32;
    // torch_autocast (runtime/torch_autocast.py, 0.19.8): the module keeps its fp32 parameters and the
    // optimizer its fp32 states; the engine's forward runs under torch.autocast, and the parameters of
    // the "lower precision safe" modules (default torch.nn.Linear/Conv) get a comm_dtype, so ZeRO keeps
    // one gradient bucket per dtype and reduces those gradients in the autocast dtype
    // (stage_1_and_2.py / stage3.py ipg_buckets keyed by get_all_comm_dtypes).
    const bool autocast = zbool(find(cfg_, {"torch_autocast", "enabled"})).value_or(false);
    if (autocast && r_.precision == Precision::FP32) {
      const auto* dt = find(cfg_, {"torch_autocast", "dtype"});
      const std::string dtype = dt != nullptr && dt->is_string() ? dt->get<std::string>() : "(dtype not set)";
      add(Severity::Warning, "torch_autocast.enabled",
          fmt::format("torch_autocast is on ({}): DeepSpeed keeps fp32 parameters, gradients and Adam states "
                      "(16 bytes/param, as below) and runs the forward under torch.autocast, so the Linear "
                      "GEMMs run in {} and their gradients are reduced in it; zeroplan prices this run as "
                      "fp32 training, so the step time below is too slow and the activations are counted "
                      "in fp32, not autocast's mix",
                      dtype, dtype),
          "for a prediction, compare with \"bf16\": {\"enabled\": true} (same 16 bytes/param of model "
          "states, bf16 GEMMs)");
    } else if (r_.precision == Precision::FP32) {
      add(Severity::Info, "",
          "neither fp16 nor bf16 is enabled: DeepSpeed trains in fp32 (16 bytes/param of model "
          "states stay, but no 16-bit copies and fp32 GEMMs)");
    }
    // runtime/config.py _do_error_check: 0.16.9 asserts stage 2 ('... only supported with ZeRO Stage 2 for
    // now.'), 0.18.9 and 0.19.8 stages 1-3 ('... only supported with ZeRO Stage 1, 2, or 3.').
    const bool stage2_only = r_.deepspeed_version == std::string("0.16.9");
    const int zs = zero_stage_raw();
    const bool fp16_master =
        fp16 && zbool(find(cfg_, {"fp16", "fp16_master_weights_and_grads"})).value_or(false);
    if (fp16_master && (stage2_only ? zs != 2 : zs == 0))
      add(Severity::Error, "fp16.fp16_master_weights_and_grads",
          stage2_only ? "DeepSpeed asserts 'Fp16_master_weights_and_grads is only supported with ZeRO Stage "
                        "2 for now.'"
                      : "DeepSpeed asserts 'Fp16_master_weights_and_grads is only supported with ZeRO Stage "
                        "1, 2, or 3.'");
    else if (fp16_master)
      add(Severity::Warning, "fp16.fp16_master_weights_and_grads",
          "zeroplan prices fp32 master weights here: fp16 masters (which DeepSpeed runs only with "
          "ZeRO-Offload and DeepSpeedCPUAdam) are not modelled, so the predicted optimizer states are too "
          "high",
          "bf16 masters (bf16.bf16_master_weights_and_grads) are modelled");
  }

  int zero_stage_raw() const {
    const json* zo = find(cfg_, {"zero_optimization"});
    if (zo && zo->is_boolean()) return zo->get<bool>() ? 1 : 0;
    const auto s = zo ? zint(find(*zo, {"stage"})) : std::nullopt;
    return (s && *s >= 0 && *s <= 3) ? static_cast<int>(*s) : 0;
  }

  // A zero_optimization size: number, "auto" (HF fill or dropped), alias, or DeepSpeed's default.
  int64_t zero_size(const json& zo, const char* key, const char* alias, int64_t dflt,
                    std::optional<double> hf_fill) {
    const json* v = find(zo, {key});
    if (!v && alias) v = find(zo, {alias});
    if (is_auto(v)) {
      if (hf_fill && fills_auto()) {
        if (w_.model.params_only || w_.model.hidden_size <= 0) {
          add(Severity::Error, std::string("zero_optimization.") + key,
              "\"auto\" is filled from the model's hidden_size, which --params does not give", "use --model");
          return dflt;
        }
        // transformers fills int(0.9*h*h) in current releases (older ones wrote the float itself).
        const auto filled = static_cast<int64_t>(std::floor(*hf_fill));
        if (static_cast<double>(filled) != *hf_fill)
          add(Severity::Warning, std::string("zero_optimization.") + key,
              fmt::format(
                  "the HF Trainer fills 0.9 x hidden_size^2 = {:.1f} here; transformers releases that do not "
                  "round it write a fraction, which DeepSpeed >= 0.15 (pydantic 2) rejects "
                  "('Input should be a valid integer', DeepSpeed #6525)",
                  *hf_fill),
              fmt::format("write {} instead of \"auto\"", filled));
        set_resolved({"zero_optimization", key}, filled);
        return filled;
      }
      return dflt;  // DeepSpeedConfigModel drops "auto": the default applies (validator warned)
    }
    const auto i = zint(v);
    if (i && *i > kMaxElements)
      throw_user_error("zero_optimization.{} = {} is beyond zeroplan's limit of {} elements", key, *i,
                       kMaxElements);
    // A value DeepSpeed refuses (0 where gt=0, negative) was reported by the validator; the prediction
    // is not printed for a refused config, so the default only keeps the arithmetic finite.
    // A zero-sized reduce/all-gather bucket: refused by DeepSpeed >= 0.15 (reduce_bucket_size gt=0), or
    // accepted by older versions with a behaviour zeroplan does not model. Other sizes of 0 are real
    // settings (no prefetch, every parameter partitioned).
    const bool bucket =
        std::string_view(key) == "reduce_bucket_size" || std::string_view(key) == "allgather_bucket_size";
    if (i && *i == 0 && !bucket) return 0;
    if (i && *i == 0) {
      const json* sch = key_schema(std::string("zero_optimization.") + key, r_.deepspeed_version);
      if (!(sch && sch->contains("gt")))  // refused versions were reported as errors by the validator
        add(Severity::Warning, std::string("zero_optimization.") + key,
            fmt::format(
                "0 elements: DeepSpeed {} accepts it, and zeroplan's memory and time models do not cover a "
                "zero-sized bucket, so the prediction below uses DeepSpeed's default {}",
                r_.deepspeed_version, dflt),
            "write a positive size");
    }
    return i && *i > 0 ? *i : dflt;
  }

  void zero() {
    const int stage = zero_stage_raw();
    planner::ZeroConfig z = planner::ZeroConfig::deepspeed_defaults(stage);
    z.micro_batch = r_.zero.micro_batch;
    z.grad_accum = r_.zero.grad_accum;
    const json empty = json::object();
    const json* zo_p = find(cfg_, {"zero_optimization"});
    const json& zo = (zo_p && zo_p->is_object()) ? *zo_p : empty;
    const double h = static_cast<double>(w_.model.hidden_size);
    const bool s3 = stage == 3;

    // HF fills reduce_bucket_size = h^2 at every stage; the stage-3 sizes only for stage 3
    // (transformers/integrations/deepspeed.py trainer_config_finalize).
    z.reduce_bucket_size = zero_size(zo, "reduce_bucket_size", nullptr, z.reduce_bucket_size, h * h);
    z.allgather_bucket_size =
        zero_size(zo, "allgather_bucket_size", nullptr, z.allgather_bucket_size, std::nullopt);
    z.prefetch_bucket_size =
        zero_size(zo, "stage3_prefetch_bucket_size", "prefetch_bucket_size", z.prefetch_bucket_size,
                  s3 ? std::optional<double>(0.9 * h * h) : std::nullopt);
    z.param_persistence_threshold =
        zero_size(zo, "stage3_param_persistence_threshold", "param_persistence_threshold",
                  z.param_persistence_threshold, s3 ? std::optional<double>(10 * h) : std::nullopt);
    z.max_live_parameters = zero_size(zo, "stage3_max_live_parameters", "max_live_parameters",
                                      z.max_live_parameters, std::nullopt);
    z.max_reuse_distance =
        zero_size(zo, "stage3_max_reuse_distance", "max_reuse_distance", z.max_reuse_distance, std::nullopt);
    z.sub_group_size = zero_size(zo, "sub_group_size", nullptr, z.sub_group_size, std::nullopt);
    // stage3_gather_16bit_weights_on_model_save (alias stage3_gather_fp16_weights_on_model_save;
    // runtime/zero/config.py, default False; "auto" is filled with False by accelerate, ds_keys.cpp):
    // what save_16bit_model writes at stage 3 (planner/save_phase.h).
    z.gather_16bit_weights_on_model_save =
        zbool(find(zo, {"stage3_gather_16bit_weights_on_model_save"}))
            .value_or(zbool(find(zo, {"stage3_gather_fp16_weights_on_model_save"})).value_or(false));
    // overlap_comm: None -> True for stage 3 only (runtime/zero/config.py overlap_comm_valid).
    z.overlap_comm = zbool(find(zo, {"overlap_comm"})).value_or(s3);
    z.contiguous_gradients = zbool(find(zo, {"contiguous_gradients"})).value_or(z.contiguous_gradients);
    z.reduce_scatter = zbool(find(zo, {"reduce_scatter"})).value_or(z.reduce_scatter);
    // memory_efficient_linear (runtime/zero/config.py, default true): stage 3's zero3_linear_wrap.
    z.memory_efficient_linear =
        zbool(find(zo, {"memory_efficient_linear"})).value_or(z.memory_efficient_linear);
    read_leaf_module(zo, z);

    const json* oo = find(zo, {"offload_optimizer"});
    const json* op = find(zo, {"offload_param"});
    z.offload_optimizer = parse_device(oo);
    z.offload_param = parse_device(op);
    // Deprecated booleans (runtime/zero/config.py cpu_offload, cpu_offload_param): true -> device cpu.
    if (zbool(find(zo, {"cpu_offload"})).value_or(false) && z.offload_optimizer == Offload::None)
      z.offload_optimizer = Offload::CPU;
    if (zbool(find(zo, {"cpu_offload_param"})).value_or(false) && z.offload_param == Offload::None)
      z.offload_param = Offload::CPU;
    if (z.offload_param != Offload::None && stage < 3) {
      add(Severity::Warning, "zero_optimization.offload_param",
          fmt::format(
              "parameter offload is only implemented for ZeRO stage 3; at stage {} DeepSpeed ignores it",
              stage),
          "remove it, or use stage 3");
      z.offload_param = Offload::None;
    }
    if (z.offload_optimizer != Offload::None && stage == 0) {
      add(Severity::Warning, "zero_optimization.offload_optimizer",
          "optimizer offload needs ZeRO stage 1, 2 or 3; with stage 0 DeepSpeed builds no ZeRO optimizer and "
          "ignores it",
          "set \"stage\" to 1 or more");
      z.offload_optimizer = Offload::None;
    }
    // Stage-3 knobs below stage 3: DeepSpeedZeroConfig accepts them and no stage-1/2 code reads them.
    if (stage < 3)
      for (const auto& [k, v] : zo.items())
        if (k.rfind("stage3_", 0) == 0)
          add(Severity::Warning, "zero_optimization." + k,
              fmt::format("a ZeRO stage-3 setting at stage {}: DeepSpeed accepts it and ignores it", stage),
              "remove it, or use stage 3", json{{"op", "remove"}});
    offload_ratio(oo, stage, z);
    read_pin_memory(zo, oo, op, z);
    r_.zero = z;
    r_.zero.seq_parallel_comm_fp32 = sp_comm_fp32_;
  }

  void read_leaf_module(const json& zo, planner::ZeroConfig& z) const {
    // zero_optimization.leaf_module (ZeRO-3 leaf modules; planner/zero3_leaf.h): whether the model's
    // MoE blocks are leaves under it (each field a string or a list of strings, leaf_module_config.py).
    if (const json* lm = find(zo, {"leaf_module"});
        lm && lm->is_object() && !w_.model.params_only && w_.model.is_moe()) {
      auto strings = [&](const char* key) -> std::optional<std::vector<std::string>> {
        const json* v = find(*lm, {key});
        if (!v) return std::nullopt;
        std::vector<std::string> out;
        if (v->is_string()) out.push_back(v->get<std::string>());
        if (v->is_array())
          for (const json& e : *v)
            if (e.is_string()) out.push_back(e.get<std::string>());
        return out;
      };
      std::string cls;
      std::vector<std::string> paths;
      for (const auto& layer : w_.model.runtime_inventory())
        if (!layer.moe_block.empty()) {
          cls = layer.moe_block_class;
          paths.push_back(layer.moe_block);
        }
      z.moe_leaf = planner::moe_leaf_from_config(
          strings("classes"), strings("names").value_or(std::vector<std::string>{}),
          strings("name_suffixes").value_or(std::vector<std::string>{}), cls, paths,
          w_.train.deepspeed_version);
    }
  }

  // offload_optimizer.ratio: refused below stage 3; at stage 3 whether DeepSpeed's sub groups make it
  // partial.
  void offload_ratio(const json* oo, int stage, const planner::ZeroConfig& z) {
    const auto ratio = oo ? find(*oo, {"ratio"}) : nullptr;
    if (ratio && ratio->is_number() && ratio->get<double>() < 1.0 && stage != 3)
      add(Severity::Error, "zero_optimization.offload_optimizer.ratio",
          "DeepSpeed asserts 'Partial offloading only supported for ZeRO Stage 3'",
          "remove \"ratio\" or use stage 3", json{{"op", "remove"}});
    // Stage 3 partial offload: stage3.py _create_fp32_partitions sends sub group i of a rank's G to the CPU
    // when i >= int((1 - ratio) * G); _create_fp16_sub_groups closes a sub group once it holds
    // sub_group_size partition elements, so G is about ceil(partition / sub_group_size). With one sub group
    // (the default 1e9 holds a whole partition of up to 1e9 x N parameters) any ratio in (0, 1) offloads it
    // all, which is what the plan prices; otherwise the split is not modelled.
    if (ratio && ratio->is_number() && stage == 3 && z.offload_optimizer != Offload::None) {
      const double r = ratio->get<double>();
      const int64_t world = std::max<int64_t>(1, w_.cluster.world_size());
      const int64_t part = (w_.model.num_parameters() + world - 1) / world;
      const int64_t groups =
          std::max<int64_t>(1, (part + z.sub_group_size - 1) / std::max<int64_t>(1, z.sub_group_size));
      const int64_t on_gpu = static_cast<int64_t>((1.0 - r) * static_cast<double>(groups));
      if (r > 0 && r < 1 && on_gpu == 0)
        add(Severity::Info, "zero_optimization.offload_optimizer.ratio",
            fmt::format(
                "ratio {} offloads every sub group here: each rank has about {} sub group(s) of "
                "sub_group_size {} and DeepSpeed keeps on the GPU only the first int((1 - ratio) x {}) = 0 "
                "(stage3.py _create_fp32_partitions), so the optimizer is wholly offloaded, as planned",
                r, groups, z.sub_group_size, groups),
            "lower sub_group_size for a partial offload");
      else if (r > 0 && r < 1)
        add(Severity::Warning, "zero_optimization.offload_optimizer.ratio",
            fmt::format(
                "partial offload: about {} of each rank's {} sub groups stay on the GPU (stage3.py "
                "_create_fp32_partitions); zeroplan prices the optimizer as wholly offloaded, so its GPU "
                "memory is low by their share and the CPU Adam time high",
                on_gpu, groups),
            "");
    }
  }

  void read_pin_memory(const json& zo, const json* oo, const json* op, planner::ZeroConfig& z) const {
    // pin_memory: the version's default (runtime/zero/offload_config.py: False up to 0.17, True in 0.18+;
    // read from the key table). The deprecated cpu_offload_use_pin_memory sets nothing in 0.15+
    // (set_new_param=False), so only its value is reported.
    const char* pin_section = z.offload_optimizer != Offload::None ? "offload_optimizer" : "offload_param";
    const json* pin_src = z.offload_optimizer != Offload::None ? oo : op;
    const bool pin_default =
        key_default(std::string("zero_optimization.") + pin_section + ".pin_memory", r_.deepspeed_version)
            .value_or(json(false))
            .get<bool>();
    bool pin = pin_src && pin_src->is_object() ? zbool(find(*pin_src, {"pin_memory"})).value_or(pin_default)
                                               : pin_default;
    // cpu_offload: true builds the offload section with pin_memory from cpu_offload_use_pin_memory
    // (runtime/zero/config.py new_param_fn of cpu_offload / cpu_offload_param).
    if ((!oo && zbool(find(zo, {"cpu_offload"})).value_or(false)) ||
        (!op && zbool(find(zo, {"cpu_offload_param"})).value_or(false)))
      pin = zbool(find(zo, {"cpu_offload_use_pin_memory"})).value_or(pin);
    if (z.offload_optimizer != Offload::None || z.offload_param != Offload::None) z.pin_memory = pin;
  }

  // optimizer.type and optimizer.params as DeepSpeed's engine builds the optimizer from the file (no
  // client optimizer: the HF Trainer and accelerate pass none when the file has an "optimizer" section).
  void optimizer() {
    const json* type = find(cfg_, {"optimizer", "type"});
    if (type == nullptr || !type->is_string()) return;
    // engine.py _do_sanity_check: runtime/config.py lower-cases the name when its lower case is in
    // DEEPSPEED_OPTIMIZERS; _is_supported_optimizer accepts a listed name or any torch.optim attribute.
    std::string name = type->get<std::string>();
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    const auto listed = deepspeed_optimizers(r_.deepspeed_version);
    const bool in_list = std::find(listed.begin(), listed.end(), lower) != listed.end();
    const auto torch_names = optimizer_table().at("torch_optim_names").get<std::vector<std::string>>();
    const bool in_torch = std::find(torch_names.begin(), torch_names.end(), name) != torch_names.end();
    if (!in_list && !in_torch) {
      std::string known;
      for (const auto& n : listed) known += (known.empty() ? "" : ", ") + n;
      add(Severity::Error, "optimizer.type",
          fmt::format("DeepSpeed {} asserts '{} is not a supported DeepSpeed Optimizer' (its own optimizers: "
                      "{}; or a torch.optim class name){}",
                      r_.deepspeed_version, name, known,
                      lower == "onebitadam" || lower == "zerooneadam" || lower == "onebitlamb"
                          ? "; the 1-bit optimizers were removed after 0.19.6 (DeepSpeed issue #8489)"
                          : ""),
          "write \"AdamW\", or pin a release that still has it with --deepspeed-version");
      return;
    }
    // The planner prices Adam's states (fp32 exp_avg + exp_avg_sq: 8 bytes per trainable parameter, on
    // top of the master copy). DeepSpeed's adam/adamw, their muP variants and FusedLamb keep those two
    // moments (ops/adam/fused_adam.py, ops/lamb/fused_lamb.py); the others keep different state.
    static const char* const kAdamLike[] = {"adam", "adamw", "muadam", "muadamw", "lamb"};
    if (lower == "muon")
      muon_name_ = name;  // judged by muon() once the precision and bf16 master keys are read
    else if (std::none_of(std::begin(kAdamLike), std::end(kAdamLike),
                          [&](const char* n) { return lower == n; }))
      adam_priced(name);
    // engine.py _configure_basic_optimizer raises before building any optimizer (every release the key
    // tables cover; recorded: adv_max_grad_norm_param).
    if (find(cfg_, {"optimizer", "params", "max_grad_norm"}) != nullptr)
      add(Severity::Error, "optimizer.params.max_grad_norm",
          "DeepSpeed raises \"ValueError: 'max_grad_norm' is not supported as an optimizer parameter, please "
          "switch to using the deepspeed parameter 'gradient_clipping'\"",
          "move it to the top level as \"gradient_clipping\"",
          json{{"op", "rename"}, {"to", "gradient_clipping"}});
  }

  void adam_priced(const std::string& name) {
    add(Severity::Warning, "optimizer.type",
        fmt::format("{}: zeroplan prices Adam's optimizer states (two fp32 moments, 8 bytes per trainable "
                    "parameter, besides the fp32 master copy); {} keeps different state, so the predicted "
                    "optimizer states and step time are Adam's, not its",
                    name, name),
        "compare with an AdamW run, or read the optimizer's state size from its source");
  }

  // optimizer.type "muon" (runtime/zero/muon/muon_optimizer.py MuonWithAuxAdam; planner/muon.h): DeepSpeed's
  // refusals, and whether zeroplan prices it (stages 1-2, the optimizer on the GPU, what muon_refusal
  // accepts); false leaves the Adam warning to say what is priced instead.
  bool muon() {
    const planner::ZeroConfig& z = r_.zero;
    // stage3.py DeepSpeedZeroOptimizer_Stage3.__init__ (0.19.8), recorded: llama-gqa_s3_n2_bf16_muon.
    if (z.stage == 3 && z.reduce_scatter) {
      add(Severity::Error, "optimizer.type",
          "DeepSpeed raises \"ValueError: Muon and reduce scatter cannot be used together\" at ZeRO stage 3 "
          "(zero_optimization.reduce_scatter defaults to true)",
          "set zero_optimization.reduce_scatter false, or use ZeRO stage 1 or 2");
      return true;
    }
    if (z.stage < 1 || z.stage > 2 || z.offload_optimizer != planner::Offload::None || z.bf16_master_weights)
      return false;
    planner::Workload w = w_;
    w.train.precision = r_.precision;
    w.train.muon = true;
    if (!planner::muon_refusal(w).empty()) return false;
    r_.zero.muon = true;
    add(Severity::Info, "optimizer.type",
        "muon: priced as DeepSpeed 0.19.8 runs it at this stage (one momentum and its staged copy over the "
        "hidden matrices each rank's partition touches, Adam on the embeddings, head and norms, "
        "Newton-Schulz "
        "in the step; planner/muon.h)",
        "");
    return true;
  }

  // bf16.bf16_master_weights_and_grads / bf16.bf16_optimizer_states (DeepSpeed >= 0.18.3; older
  // releases' key tables do not have them and validate_keys reports them): the plan's master and
  // moment dtypes (planner/zero_config.h), and what DeepSpeed refuses, in its words:
  //  - runtime/config.py _do_error_check asserts stage 1-3 for either key, and the master for the states;
  //  - runtime/base_optimizer.py _configure_master_weights: a bf16 master with fp32 optimizer states
  //    (0.19.8: or with any optimizer offload) needs optimizer offload with DeepSpeedCPUAdam, which the
  //    engine builds only from an Adam/AdamW "optimizer" section (engine.py get_optimizer_configuration;
  //    "torch_adam": true gives torch's AdamW instead). Recorded with 0.19.8: tests/deepspeed_configs.
  void master_weights() {
    if (r_.precision != Precision::BF16) return;
    if (key_schema("bf16.bf16_master_weights_and_grads", r_.deepspeed_version) == nullptr) return;
    const bool master = zbool(find(cfg_, {"bf16", "bf16_master_weights_and_grads"})).value_or(false);
    const bool states = zbool(find(cfg_, {"bf16", "bf16_optimizer_states"})).value_or(false);
    if (!master && !states) return;
    const int stage = r_.zero.stage;
    bool ok = true;  // DeepSpeed raises at the first failed assertion: report that one
    if (master && (stage < 1 || stage > 3)) {
      add(Severity::Error, "bf16.bf16_master_weights_and_grads",
          "DeepSpeed asserts 'Bf16_master_weights_and_grads is only supported with ZeRO Stage 1, 2, or 3.'",
          "use ZeRO stage 1, 2 or 3, or drop the key");
      ok = false;
    }
    if (ok && states && (stage < 1 || stage > 3)) {
      add(Severity::Error, "bf16.bf16_optimizer_states",
          "DeepSpeed asserts 'bf16_optimizer_states is only supported with ZeRO Stage 1, 2, or 3.'",
          "use ZeRO stage 1, 2 or 3, or drop the key");
      ok = false;
    }
    if (ok && states && !master) {
      add(Severity::Error, "bf16.bf16_optimizer_states",
          "DeepSpeed asserts 'bf16_optimizer_states requires bf16_master_weights_and_grads to be enabled.'",
          "set bf16.bf16_master_weights_and_grads true as well");
      ok = false;
    }
    if (!ok) return;
    const bool offload = r_.zero.offload_optimizer != planner::Offload::None;
    const bool newest = r_.deepspeed_version == std::string("0.19.8");
    if (!states || (offload && newest)) {
      const json* type = find(cfg_, {"optimizer", "type"});
      std::string lower = type && type->is_string() ? type->get<std::string>() : "";
      std::transform(lower.begin(), lower.end(), lower.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      const bool torch_adam = zbool(find(cfg_, {"optimizer", "params", "torch_adam"})).value_or(false);
      // Without a section the training script's optimizer is used, and with offload DeepSpeed takes only
      // DeepSpeedCPUAdam from a script (zero_force_ds_cpu_optimizer, default true, refuses the others);
      // judged: adv_bf16master_offload_nosection runs under both runners.
      const bool cpu_adam =
          offload && (type == nullptr || ((lower == "adam" || lower == "adamw") && !torch_adam));
      if (!cpu_adam) {
        const std::string zs = stage == 3 ? "ZeRO-3" : stage == 2 ? "ZeRO-2" : "ZeRO-1";
        add(Severity::Error, "bf16.bf16_master_weights_and_grads",
            fmt::format(
                "DeepSpeed asserts 'Master weights feature requires {} Offload with DeepSpeedCPUAdam.' "
                "({}){}",
                zs,
                !offload ? "the optimizer is not offloaded"
                         : "the optimizer section does not build DeepSpeedCPUAdam",
                states ? "" : "; with bf16_optimizer_states the states may stay on the GPU"),
            !offload ? "set bf16.bf16_optimizer_states true, or offload the optimizer with an AdamW section"
                     : "name Adam or AdamW in the optimizer section (without torch_adam), so that DeepSpeed "
                       "builds DeepSpeedCPUAdam");
        return;
      }
      // 0.19.8 with bf16 states offloaded: the CPU optimizer must keep bf16 moments, which only the
      // engine's own construction from an optimizer section arranges (engine.py
      // get_optimizer_configuration sets fp32_optimizer_states=False); a script's DeepSpeedCPUAdam
      // keeps its default fp32 states. Judged: adv_bf16master_bf16opt_offload_nosection refused by
      // both runners, adv_bf16master_bf16opt_offload accepted.
      if (states && offload && newest && type == nullptr) {
        add(Severity::Error, "bf16.bf16_optimizer_states",
            "DeepSpeed asserts 'bf16_optimizer_states with ZeRO-Offload requires DeepSpeedCPUAdam "
            "constructed "
            "with fp32_optimizer_states=False so optimizer moments are stored in bf16.' (without an "
            "\"optimizer\" section the script's optimizer is used)",
            "add an \"optimizer\": {\"type\": \"AdamW\"} section so that DeepSpeed builds the CPU optimizer");
        return;
      }
    }
    r_.zero.bf16_master_weights = master;
    r_.zero.bf16_optimizer_states = states;
  }

  // data_types.grad_accum_dtype and the optimizer wrapper DeepSpeed's engine picks from it, from the
  // planner's runtime-path model. The dtype goes into the plan (r_.zero): it chooses the runtime
  // path the memory, collectives and time models follow (BF16_Optimizer at stage 1 with fp32).
  void wrapper() {
    planner::GradAccumDtype g = planner::GradAccumDtype::Default;
    if (const json* d = find(cfg_, {"data_types", "grad_accum_dtype"}); d && d->is_string()) {
      try {
        g = planner::parse_grad_accum_dtype(d->get<std::string>());
      } catch (const UserError& e) {
        add(Severity::Error, "data_types.grad_accum_dtype", e.what());
      }
    }
    r_.zero.grad_accum_dtype = g;
    planner::DeepSpeedVersion v{};
    try {
      v = planner::parse_deepspeed_version(r_.deepspeed_version);
    } catch (const UserError&) {
      r_.optimizer_wrapper.clear();  // a version the runtime-path model does not cover
      return;
    }
    const auto path = planner::runtime_path(v, r_.zero.stage, r_.precision, g,
                                            r_.zero.offload_optimizer != planner::Offload::None);
    if (path.wrapper == planner::OptimizerWrapper::Unsupported) {
      // engine.py _do_optimizer_sanity_check (0.19.8): without ZeRO, a model dtype and grad_accum_dtype
      // that differ raise `NotImplementedError(f"unsupported mix of {model_dtype=} and
      // {grad_accum_dtype=}")` (0.16.9: bf16 accumulation without ZeRO raises its own
      // NotImplementedError). Recorded: tests/deepspeed_configs adv_bf16_stage0_gaccfp32.
      const auto torch_dtype = [](planner::Precision p) {
        return p == planner::Precision::BF16   ? "torch.bfloat16"
               : p == planner::Precision::FP16 ? "torch.float16"
                                               : "torch.float32";
      };
      add(Severity::Error, "data_types.grad_accum_dtype",
          fmt::format("DeepSpeed {} raises NotImplementedError: unsupported mix of model_dtype={} and "
                      "grad_accum_dtype={} ({})",
                      r_.deepspeed_version, torch_dtype(r_.precision), torch_dtype(path.grad_accum),
                      path.rule),
          "enable zero_optimization (stage 1 with fp32 accumulation runs BF16_Optimizer), or remove "
          "grad_accum_dtype",
          json{{"op", "remove"}});
      r_.optimizer_wrapper.clear();
      return;
    }
    if (path.wrapper == planner::OptimizerWrapper::BF16Optimizer && r_.zero.stage == 1 &&
        !zbool(find(cfg_, {"zero_optimization", "compute_grad_norm"})).value_or(true))
      // engine.py _do_optimizer_sanity_check (0.19.8), the stage-1 BF16_Optimizer branch.
      add(Severity::Error, "zero_optimization.compute_grad_norm",
          "DeepSpeed raises ValueError: zero_optimization.compute_grad_norm=false does not support ZeRO "
          "Stage 1 "
          "with BF16 parameters and FP32 gradient accumulation",
          "remove compute_grad_norm", json{{"op", "remove"}});
    r_.optimizer_wrapper = planner::wrapper_name(path.wrapper);
  }

  void traps() {
    const auto& z = r_.zero;
    const json* zo = find(cfg_, {"zero_optimization"});
    const int64_t gpu_mem = w_.cluster.gpu.memory_bytes;

    // NVMe without a path: DeepSpeed's swapper needs nvme_path (runtime/swap_tensor/*_swapper.py).
    const auto nvme_path = [&](const char* section, Offload o) {
      if (o != Offload::NVMe || !zo) return;
      const json* p = find(*zo, {section, "nvme_path"});
      const std::string key = std::string("zero_optimization.") + section + ".nvme_path";
      if (!p || p->is_null() || (p->is_string() && p->get<std::string>().empty()))
        add(Severity::Error, key, "NVMe offload without \"nvme_path\": DeepSpeed has no directory to swap to",
            "set it to a directory on a local NVMe drive");
      else if (p->is_string() && p->get<std::string>() == kNvmePathPlaceholder)
        // DeepSpeed creates the directory and swaps there (the judge recorded emit_s3_offload_nvme as
        // accepted, running as root): it runs, but not on an NVMe drive.
        add(Severity::Warning, key,
            "still the placeholder zeroplan writes: DeepSpeed creates that directory and swaps to it, which "
            "is "
            "not your NVMe drive (and fails where / is not writable)",
            "set it to a directory on a local NVMe drive");
    };
    nvme_path("offload_optimizer", z.offload_optimizer);
    nvme_path("offload_param", z.offload_param);

    // NVMe parameter swap buffers must hold the largest parameter partition
    // (runtime/swap_tensor/partitioned_param_swapper.py get_buffer asserts numel < buffer size).
    if (z.stage == 3 && z.offload_param == Offload::NVMe && !w_.model.params_only) {
      int64_t largest = 0;
      // The runtime tree: transformers 5's fused experts are the largest tensors DeepSpeed partitions.
      for (const auto& layer : w_.model.runtime_inventory())
        for (const auto& t : layer.tensors) largest = std::max(largest, t.numel());
      const int64_t part = ceil_div(largest, w_.cluster.world_size());
      const auto bs = as_int(find(*zo, {"offload_param", "buffer_size"}));
      const int64_t buffer =
          bs.value_or(key_default("zero_optimization.offload_param.buffer_size")->get<int64_t>());
      if (buffer <= part)
        add(Severity::Error, "zero_optimization.offload_param.buffer_size",
            fmt::format(
                "{} elements, but the largest parameter partition has {} (largest tensor {} over {} GPUs); "
                "DeepSpeed asserts 'More elements ... than buffer size'",
                buffer, part, largest, w_.cluster.world_size()),
            fmt::format("set it above {}", part));
    }

    if (z.offload_optimizer != Offload::None || z.offload_param != Offload::None) {
      if (!z.pin_memory)
        add(Severity::Warning,
            z.offload_optimizer != Offload::None ? "zero_optimization.offload_optimizer.pin_memory"
                                                 : "zero_optimization.offload_param.pin_memory",
            fmt::format(
                "offload without pinned host memory: host<->GPU copies run at pageable speed ({:.0f} GB/s on "
                "{} instead of {:.0f} GB/s pinned)",
                w_.cluster.gpu.host_pageable_GBps, w_.cluster.gpu.name, w_.cluster.gpu.host_pinned_GBps),
            "set \"pin_memory\": true if the host has the RAM");
    }

    // overlap_comm with big buckets (stage 1/2): HF's DeepSpeed guide (transformers docs, "ZeRO-2"):
    // "overlap_comm uses 4.5x the allgather_bucket_size and reduce_bucket_size values ... 5e8 ...
    // requires 9GB" (= 4.5 x 2 bytes x (reduce + allgather)).
    if ((z.stage == 1 || z.stage == 2) && z.overlap_comm && gpu_mem > 0) {
      const double footprint =
          4.5 * 2.0 * static_cast<double>(z.reduce_bucket_size + z.allgather_bucket_size);
      // Warn above 15% of the GPU: the 9 GB of the defaults is 37% of a 24 GB GPU.
      if (footprint > 0.15 * static_cast<double>(gpu_mem))
        add(Severity::Warning, "zero_optimization.overlap_comm",
            fmt::format("overlap_comm with reduce_bucket_size {} and allgather_bucket_size {} takes about {} "
                        "(HF's DeepSpeed guide: 4.5 x the buckets in 16-bit), {:.0f}% of the {}'s {}",
                        z.reduce_bucket_size, z.allgather_bucket_size, human_bytes(footprint),
                        100.0 * footprint / static_cast<double>(gpu_mem), w_.cluster.gpu.name,
                        human_bytes(static_cast<double>(gpu_mem))),
            "lower both buckets (e.g. 2e8) or let zeroplan pick them");
    }

    // Stage 3 persistence threshold below the model's small tensors: every norm weight / bias is
    // partitioned and all-gathered on its own in forward and backward, a flood of latency-bound
    // collectives (DeepSpeed #1174, #5047). The HF Trainer's "auto" is 10 x hidden_size.
    if (z.stage == 3 && !w_.model.params_only && w_.model.hidden_size > 0) {
      const int64_t small_limit = 10 * w_.model.hidden_size;
      int64_t gathered = 0;
      for (const auto& layer : w_.model.runtime_inventory())  // what DeepSpeed partitions (fused experts)
        for (const auto& t : layer.tensors)
          if (t.numel() <= small_limit && t.numel() > z.param_persistence_threshold) ++gathered;
      if (gathered >= w_.model.num_layers && gathered > 0)
        add(Severity::Warning, "zero_optimization.stage3_param_persistence_threshold",
            fmt::format(
                "{} leaves {} small tensors (norm weights, biases of at most {} elements) partitioned: each "
                "is "
                "all-gathered separately in every forward and backward, ~{} latency-bound collectives per "
                "micro-step (DeepSpeed #1174, #5047)",
                z.param_persistence_threshold, gathered, small_limit, 2 * gathered),
            fmt::format("use 10 x hidden_size = {}, the HF Trainer's \"auto\"", small_limit));
    }
  }

  const json& cfg_;
  const planner::Workload& w_;
  std::string muon_name_;     // optimizer.type as written when it is Muon
  bool sp_comm_fp32_ = true;  // seq_parallel_communication_data_type (planner::ZeroConfig)
  ReadConfig r_;
  bool v1_ = false;
};

void flatten(const json& j, const std::string& prefix, std::map<std::string, json>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else {
    out[prefix] = j;
  }
}

bool same_value(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

}  // namespace

ReadConfig read_deepspeed_config(const nlohmann::json& config, const planner::Workload& w,
                                 const CheckOptions& o) {
  return Reader(config, w, o).run();
}

planner::Workload workload_for_config(const planner::Workload& w, const ReadConfig& r) {
  planner::Workload wc = w;
  wc.train.precision = r.precision;
  wc.train.micro_batch = r.zero.micro_batch;
  wc.train.grad_accum = r.zero.grad_accum;
  wc.train.global_batch = r.train_batch_size;
  wc.train.checkpointing = r.zero.checkpointing;
  wc.train.sequence_parallel = r.sequence_parallel;
  // Muon as priced (Reader::muon): the recommendation searched beside it keeps the optimizer.
  wc.train.muon = r.zero.muon;
  if (wc.train.tensor_parallel != r.tensor_parallel) {  // AutoTP: one TP rank's shard of the model as given
    const models::ModelSpec full = wc.full_model();
    wc.model = full;
    wc.unsharded.reset();
    planner::apply_tensor_parallel(wc, r.tensor_parallel);
  }
  // train_batch_size counts every TP rank as a replica (planner/parallel.h deepspeed_batch_world); the
  // planner's global batch is distinct sequences.
  if (wc.train.global_batch && r.tensor_parallel > 1)
    wc.train.global_batch = *wc.train.global_batch / r.tensor_parallel;
  if (w.train.deepspeed_checkpointing) {  // the config's activation_checkpointing acts (Reader above)
    wc.train.checkpoint_offload =
        r.cpu_checkpointing ? planner::CheckpointOffload::Cpu : planner::CheckpointOffload::None;
    wc.train.partition_activations = r.partition_activations;
  }
  return wc;
}

nlohmann::json change_to_json(const ConfigChange& c) {
  return json{{"key", c.key}, {"from", c.from}, {"to", c.to}, {"from_default", c.from_default}};
}

std::string format_change(const ConfigChange& c) {
  const auto show = [](const json& v) { return v.is_null() ? std::string("(not set)") : v.dump(); };
  return fmt::format("{}: {}{} -> {}", c.key, show(c.from), c.from_default ? " (DeepSpeed default)" : "",
                     show(c.to));
}

std::vector<ConfigChange> diff_plans(const planner::Workload& w, const nlohmann::json& user_config,
                                     const planner::Plan& user_plan, const planner::Plan& recommended,
                                     const planner::Workload* w_recommended) {
  std::map<std::string, json> from, to, given;
  flatten(deepspeed_config(w, user_plan, false), "", from);
  flatten(deepspeed_config(w_recommended != nullptr ? *w_recommended : w, recommended, false), "", to);
  flatten(user_config, "", given);
  // Keys whose meaning the user did not choose (zeroplan always writes them) are not changes.
  for (const char* k : {"gradient_clipping", "zero_optimization.stage3_gather_16bit_weights_on_model_save"}) {
    from.erase(k);
    to.erase(k);
  }
  // The optimizer section (written for Muon, configs/emit.cpp add_muon_optimizer): the recommendation keeps
  // the user's optimizer and its hyper-parameters, so its keys are not changes.
  for (auto* m : {&from, &to})
    std::erase_if(*m, [](const auto& kv) { return kv.first.rfind("optimizer.", 0) == 0; });
  std::map<std::string, bool> keys;
  for (const auto& [k, _] : from) keys[k] = true;
  for (const auto& [k, _] : to) keys[k] = true;
  std::vector<ConfigChange> out;
  for (const auto& [k, _] : keys) {
    // The user's side: what the file says ("auto" as resolved), else the default DeepSpeed applies:
    // the table's code default, or the value the reader derived (overlap_comm's stage rule).
    json a;
    bool from_default = false;
    const auto g = given.find(k);
    if (g != given.end()) {
      a = (g->second.is_string() && g->second.get<std::string>() == "auto" && from.count(k)) ? from[k]
                                                                                             : g->second;
    } else if (const auto d = key_default(k); d && !d->is_null()) {
      a = *d;
      from_default = true;
    } else if (from.count(k)) {
      a = from[k];
      from_default = true;
    }
    const json b = to.count(k) ? to[k] : json();
    if (b.is_null() && (a.is_null() || from_default)) continue;  // an unset default that stays irrelevant
    if (!a.is_null() && !b.is_null() && same_value(a, b)) continue;
    out.push_back(ConfigChange{k, a, b, from_default});
  }
  // A section the recommendation drops entirely (e.g. offload_param) is one line, not one per key.
  std::vector<ConfigChange> collapsed;
  std::map<std::string, bool> dropped_sections;
  for (const auto& c : out) {
    if (!c.to.is_null()) continue;
    const auto dot = c.key.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string section = c.key.substr(0, dot);
    bool kept = false;
    for (const auto& [k, _] : to) kept |= k.rfind(section + ".", 0) == 0;
    if (!kept && section.find('.') != std::string::npos) dropped_sections[section] = true;
  }
  for (const auto& c : out) {
    const auto dot = c.key.rfind('.');
    const std::string section = dot == std::string::npos ? "" : c.key.substr(0, dot);
    if (!dropped_sections.count(section)) {
      collapsed.push_back(c);
      continue;
    }
    if (dropped_sections[section]) {
      json user_section;
      for (const auto& [k, v] : given)
        if (k.rfind(section + ".", 0) == 0) user_section[k.substr(section.size() + 1)] = v;
      collapsed.push_back(ConfigChange{section, user_section, json(), false});
      dropped_sections[section] = false;  // emitted once
    }
  }
  out = std::move(collapsed);
  if (user_plan.zero.checkpointing != recommended.zero.checkpointing)
    out.push_back(ConfigChange{"TrainingArguments.gradient_checkpointing (" +
                                   planner::to_string(user_plan.zero.checkpointing) + " -> " +
                                   planner::to_string(recommended.zero.checkpointing) + ")",
                               user_plan.zero.checkpointing != planner::Checkpointing::None,
                               recommended.zero.checkpointing == planner::Checkpointing::Full, false});
  return out;
}

// What DeepSpeed will run, as the fixtures of tests/deepspeed_configs record it from real DeepSpeed.
nlohmann::json resolved_values(const ReadConfig& rc) {
  const auto& z = rc.zero;
  nlohmann::json r = {{"train_batch_size", rc.train_batch_size},
                      {"train_micro_batch_size_per_gpu", z.micro_batch},
                      {"gradient_accumulation_steps", z.grad_accum},
                      {"zero_stage", z.stage},
                      {"precision", planner::to_string(rc.precision)},
                      {"offload_optimizer", planner::to_string(z.offload_optimizer)},
                      {"offload_param", planner::to_string(z.offload_param)}};
  if (z.stage >= 1) {
    r["reduce_bucket_size"] = z.reduce_bucket_size;
    r["allgather_bucket_size"] = z.allgather_bucket_size;
    r["overlap_comm"] = z.overlap_comm;
    r["contiguous_gradients"] = z.contiguous_gradients;
  }
  if (z.stage == 3) {
    r["stage3_prefetch_bucket_size"] = z.prefetch_bucket_size;
    r["stage3_param_persistence_threshold"] = z.param_persistence_threshold;
    r["stage3_max_live_parameters"] = z.max_live_parameters;
    r["sub_group_size"] = z.sub_group_size;
  }
  if (z.offload_optimizer != planner::Offload::None || z.offload_param != planner::Offload::None)
    r["pin_memory"] = z.pin_memory;
  if (!rc.optimizer_wrapper.empty()) r["optimizer_wrapper"] = rc.optimizer_wrapper;
  return r;
}

}  // namespace zeroplan::configs
