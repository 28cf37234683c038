#include "configs/emit.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/checked.h"
#include "common/errors.h"
#include "planner/checkpoint_offload.h"
#include "planner/parallel.h"
#include "planner/tiled_mlp.h"
#include "planner/vision.h"

namespace zeroplan::configs {
namespace {

using nlohmann::json;
using planner::Offload;
using planner::Precision;

// fp16 dynamic loss scaling, DeepSpeed's own defaults written out so users see them
// (deepspeed/runtime/constants.py v0.16.9: FP16_LOSS_SCALE_DEFAULT 0 = dynamic,
// FP16_INITIAL_SCALE_POWER_DEFAULT 16, FP16_LOSS_SCALE_WINDOW_DEFAULT 1000, FP16_HYSTERESIS_DEFAULT 2,
// FP16_MIN_LOSS_SCALE_DEFAULT 1; same values in the DeepSpeed config docs' fp16 section).
constexpr int kLossScale = 0;
constexpr int kInitialScalePower = 16;
constexpr int kLossScaleWindow = 1000;
constexpr int kHysteresis = 2;
constexpr int kMinLossScale = 1;

// gradient_clipping 1.0: the HF TrainingArguments default max_grad_norm (DeepSpeed's own default
// is 0 = off, runtime/constants.py GRADIENT_CLIPPING_DEFAULT); clipping at 1.0 is the LLM norm
// (Llama 2 paper, Touvron et al. 2023, §2.2).
constexpr double kGradientClipping = 1.0;

// NVMe swap buffers: DeepSpeed's defaults (runtime/zero/offload_config.py v0.16.9):
// offload_optimizer.buffer_count 4 ("at least the number of states ... Adam has 4"),
// offload_param.buffer_count 5, buffer_size 1e8 elements, max_in_cpu 1e9.
constexpr int64_t kOptimizerNvmeBufferCount = 4;
constexpr int64_t kParamNvmeBufferCount = 5;
constexpr int64_t kParamNvmeBufferSize = 100'000'000;
constexpr int64_t kParamMaxInCpu = 1'000'000'000;

// Optimizer section (only with with_optimizer): torch.optim.AdamW's defaults (lr 1e-3, betas
// (0.9, 0.999), eps 1e-8, weight_decay 1e-2; PyTorch docs) and DeepSpeed WarmupLR's defaults
// (runtime/lr_schedules.py WarmupLR.__init__: warmup_min_lr 0, warmup_max_lr 1e-3,
// warmup_num_steps 1000). Users set their own learning rate; these are placeholders that run.
constexpr double kAdamLr = 1e-3, kAdamBeta1 = 0.9, kAdamBeta2 = 0.999, kAdamEps = 1e-8,
                 kAdamWeightDecay = 1e-2;
constexpr double kWarmupMinLr = 0.0, kWarmupMaxLr = 1e-3;
constexpr int64_t kWarmupNumSteps = 1000;

// HF Trainer's fill values (transformers/integrations/deepspeed.py trainer_config_finalize):
// reduce_bucket_size h^2; stage 3: stage3_prefetch_bucket_size 0.9 h^2, persistence 10 h.
bool trainer_fills(int64_t value, double trainer_value) {
  return static_cast<double>(value) == trainer_value;
}

int64_t largest_param_numel(const planner::Workload& w) {
  if (w.model.params_only) return 0;
  int64_t largest = 0;
  // The runtime tree: transformers 5's fused experts are the largest tensors DeepSpeed partitions.
  for (const auto& layer : w.model.runtime_inventory())
    for (const auto& t : layer.tensors) largest = std::max(largest, t.numel());
  return largest;
}

// DeepSpeed's NVMe parameter swapper asserts `numel < elements_per_buffer` for every partitioned
// parameter (runtime/swap_tensor/partitioned_param_swapper.py get_buffer), so buffer_size must
// exceed the largest parameter's partition ceil(numel / N). Keep the default when it does; otherwise
// round up to the next multiple of 1e7 elements above it.
int64_t nvme_param_buffer_size(const planner::Workload& w) {
  // Partitioned over the ZeRO group: world / tp under AutoTP (planner/tensor_parallel.h).
  const int64_t part =
      ceil_div(largest_param_numel(w), w.cluster.world_size() / std::max(1, w.train.tensor_parallel));
  if (part < kParamNvmeBufferSize) return kParamNvmeBufferSize;
  constexpr int64_t step = 10'000'000;
  return (part / step + 1) * step;
}

json offload_section(Offload o, bool pin_memory, bool is_param, const planner::Workload& w) {
  json s = {{"device", o == Offload::CPU ? "cpu" : "nvme"}, {"pin_memory", pin_memory}};
  if (o == Offload::NVMe) {
    s["nvme_path"] = kNvmePathPlaceholder;
    if (is_param) {
      s["buffer_count"] = kParamNvmeBufferCount;
      s["buffer_size"] = nvme_param_buffer_size(w);
      s["max_in_cpu"] = kParamMaxInCpu;
    } else {
      s["buffer_count"] = kOptimizerNvmeBufferCount;
    }
  }
  return s;
}

std::string stem_of(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.extension() == ".json") return (p.parent_path() / p.stem()).string();
  return path;
}

std::string plan_summary(const planner::Workload& w, const planner::Plan& p) {
  const auto& z = p.zero;
  std::string off;
  if (z.offload_optimizer != Offload::None)
    off += ", optimizer offload " + planner::to_string(z.offload_optimizer);
  if (z.offload_param != Offload::None) off += ", parameter offload " + planner::to_string(z.offload_param);
  if (z.bf16_master_weights)
    off += z.bf16_optimizer_states ? ", bf16 master weights + optimizer states" : ", bf16 master weights";
  return fmt::format(
      "{} on {}x{}x{}: ZeRO-{}{}, {}, micro-batch {} x grad-accum {} x {} {} = global batch {}, "
      "seq {}{}, checkpointing {}",
      w.model.name, w.cluster.nodes, w.cluster.gpus_per_node, w.cluster.gpu.name, z.stage, off,
      planner::to_string(p.precision), z.micro_batch, z.grad_accum, planner::data_parallel_size(w),
      p.sequence_parallel > 1 || p.tensor_parallel > 1 ? "data-parallel ranks" : "GPUs",
      z.micro_batch * z.grad_accum * planner::data_parallel_size(w), p.seq_len,
      p.sequence_parallel > 1 ? fmt::format(" over Ulysses sp {}", p.sequence_parallel)
      : p.tensor_parallel > 1 ? fmt::format(" over AutoTP tp {}", p.tensor_parallel)
                              : std::string(),
      planner::to_string(z.checkpointing));
}

std::string shell_quote(const std::string& s) {
  if (s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+") ==
      std::string::npos)
    return s;
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

std::string py_string(const std::string& s) {
  return json(s).dump();
}  // a valid Python string literal

}  // namespace

namespace {

// Checkpoint offload through deepspeed.checkpointing (--checkpoint-impl deepspeed): DeepSpeed reads
// activation_checkpointing (runtime/activation_checkpointing/config.py; cpu_checkpointing and
// partition_activations default false) when the script calls deepspeed.checkpointing.configure. The
// HF path has no config key: the script wraps its step in the offload context (the snippet says so).
// Null when the plan offloads nothing.
json activation_checkpointing_section(const planner::Workload& w, const planner::ZeroConfig& z) {
  if (!w.train.deepspeed_checkpointing ||
      !planner::checkpoint_offload_plan(w.train, w.model.num_layers, z.checkpointing).active)
    return nullptr;
  return {{"partition_activations", w.train.partition_activations}, {"cpu_checkpointing", true}};
}

// A value the HF Trainer fills from its own arguments: written "auto" in hf_auto mode, so the Trainer
// checks or fills it, and as the plan's value otherwise.
json auto_or(bool hf_auto, json v) {
  return hf_auto ? json("auto") : v;
}

// Writes the precision sections ("bf16" / "fp16") of the config `c`: the one the plan trains in, with
// DeepSpeed's loss scaling written out for fp16, and both off explicitly for fp32.
void add_precision_sections(json& c, const planner::Plan& p, bool hf_auto) {
  const auto& z = p.zero;
  switch (p.precision) {
    case Precision::BF16:
      c["bf16"] = {{"enabled", auto_or(hf_auto, true)}};
      // runtime/precision_config.py (>= 0.18.3); configs/check.cpp master_weights for the rules.
      if (z.bf16_master_weights) c["bf16"]["bf16_master_weights_and_grads"] = true;
      if (z.bf16_optimizer_states) c["bf16"]["bf16_optimizer_states"] = true;
      break;
    case Precision::FP16:
      c["fp16"] = {{"enabled", auto_or(hf_auto, true)},
                   {"loss_scale", kLossScale},
                   {"initial_scale_power", kInitialScalePower},
                   {"loss_scale_window", kLossScaleWindow},
                   {"hysteresis", kHysteresis},
                   {"min_loss_scale", kMinLossScale}};
      break;
    case Precision::FP32:
      // Both explicit: without "fp16": {"enabled": false} the HF Trainer loads the model in fp16
      // (transformers/integrations/deepspeed.py trainer_config_process: dtype is fp32 only when
      // fp16.enabled is false).
      c["fp16"] = {{"enabled", false}};
      c["bf16"] = {{"enabled", false}};
      break;
  }
}

// The "zero_optimization" block: the stage, its buckets and switches (stages 1-2 and 3 take different
// keys) and the offload sections, so DeepSpeed partitions and offloads as the plan priced it.
json zero_optimization_block(const planner::Workload& w, const planner::ZeroConfig& z, bool hf_auto) {
  const double h = static_cast<double>(w.model.hidden_size);
  json zo = {{"stage", z.stage}};
  // Sizes the HF Trainer would fill identically are written "auto" in hf_auto mode; a tuned value
  // that differs is kept as a number, because "auto" would replace it by the Trainer's h^2-based value.
  const auto size_or_auto = [&](int64_t v, double trainer_value) {
    return (hf_auto && h > 0 && trainer_fills(v, trainer_value)) ? json("auto") : json(v);
  };
  if (z.stage == 1 || z.stage == 2) {
    zo["reduce_bucket_size"] = size_or_auto(z.reduce_bucket_size, h * h);
    zo["allgather_bucket_size"] = z.allgather_bucket_size;
    zo["overlap_comm"] = z.overlap_comm;
    zo["contiguous_gradients"] = z.contiguous_gradients;
    zo["reduce_scatter"] = z.reduce_scatter;
    if (z.offload_optimizer != Offload::None)
      zo["offload_optimizer"] = offload_section(z.offload_optimizer, z.pin_memory, false, w);
  } else if (z.stage == 3) {
    zo["overlap_comm"] = z.overlap_comm;
    zo["contiguous_gradients"] = z.contiguous_gradients;
    zo["reduce_bucket_size"] = size_or_auto(z.reduce_bucket_size, h * h);
    zo["stage3_prefetch_bucket_size"] = size_or_auto(z.prefetch_bucket_size, 0.9 * h * h);
    zo["stage3_param_persistence_threshold"] = size_or_auto(z.param_persistence_threshold, 10 * h);
    zo["stage3_max_live_parameters"] = z.max_live_parameters;
    zo["stage3_max_reuse_distance"] = z.max_reuse_distance;
    zo["sub_group_size"] = z.sub_group_size;
    // Partitioned weights are not in state_dict; without this, save_16bit_model / Trainer.save_model
    // write no usable weights (runtime/zero/config.py gather_16bit_weights_on_model_save). The plan turns
    // it off only where gathering the model would not fit rank 0's host RAM (planner/save_phase.h).
    zo["stage3_gather_16bit_weights_on_model_save"] = z.gather_16bit_weights_on_model_save;
    // Written only when the plan was made with --memory-efficient-linear off (DeepSpeed's default is true).
    if (!z.memory_efficient_linear) zo["memory_efficient_linear"] = false;
    if (z.hpz_partition_size > 1) zo["zero_hpz_partition_size"] = z.hpz_partition_size;  // ZeRO++ hpZ (hpz.h)
    // ZeRO++ qwZ / qgZ (planner/zeropp_quant.h).
    if (z.quantized_weights) zo["zero_quantized_weights"] = true;
    if (z.quantized_gradients) zo["zero_quantized_gradients"] = true;
    if (z.offload_optimizer != Offload::None)
      zo["offload_optimizer"] = offload_section(z.offload_optimizer, z.pin_memory, false, w);
    if (z.offload_param != Offload::None)
      zo["offload_param"] = offload_section(z.offload_param, z.pin_memory, true, w);
  }
  return zo;
}

// Writes the "optimizer" (AdamW) and "scheduler" (WarmupLR) sections (with_optimizer only), so a
// script that passes no optimizer of its own gets one DeepSpeed builds.
void add_optimizer_sections(json& c, bool hf_auto) {
  c["optimizer"] = {{"type", "AdamW"},
                    {"params",
                     {{"lr", auto_or(hf_auto, kAdamLr)},
                      {"betas", auto_or(hf_auto, json::array({kAdamBeta1, kAdamBeta2}))},
                      {"eps", auto_or(hf_auto, kAdamEps)},
                      {"weight_decay", auto_or(hf_auto, kAdamWeightDecay)}}}};
  c["scheduler"] = {{"type", "WarmupLR"},
                    {"params",
                     {{"warmup_min_lr", auto_or(hf_auto, kWarmupMinLr)},
                      {"warmup_max_lr", auto_or(hf_auto, kWarmupMaxLr)},
                      {"warmup_num_steps", auto_or(hf_auto, kWarmupNumSteps)}}}};
}

// DeepSpeed's Muon (planner/muon.h): the optimizer section is what selects it, so it is written whether or
// not --emit-optimizer asked for one (the HF Trainer then builds no optimizer of its own). muon_lr and
// momentum are Muon's reference defaults (github.com/KellerJordan/Muon muon.py: lr 0.02, momentum 0.95);
// adam_lr is the AdamW half's (engine.py _muon_half_defaults reads muon_lr / adam_lr over lr).
void add_muon_optimizer(json& c, bool hf_auto) {
  c["optimizer"] = {{"type", "muon"},
                    {"params",
                     {{"lr", auto_or(hf_auto, kAdamLr)},
                      {"muon_lr", 0.02},
                      {"adam_lr", kAdamLr},
                      {"momentum", 0.95},
                      {"betas", auto_or(hf_auto, json::array({kAdamBeta1, kAdamBeta2}))},
                      {"eps", auto_or(hf_auto, kAdamEps)},
                      {"weight_decay", auto_or(hf_auto, kAdamWeightDecay)}}}};
}

}  // namespace

json deepspeed_config(const planner::Workload& w, const planner::Plan& p, bool hf_auto) {
  return deepspeed_config(w, p, ConfigOptions{hf_auto, false});
}

json deepspeed_config(const planner::Workload& w, const planner::Plan& p, const ConfigOptions& o) {
  const auto& z = p.zero;
  const int64_t world = w.cluster.world_size();
  ZP_CHECK(z.micro_batch > 0 && z.grad_accum > 0 && world > 0, "plan has micro {} accum {} world {}",
           z.micro_batch, z.grad_accum, world);
  ZP_CHECK(z.stage >= 0 && z.stage <= 3, "plan has ZeRO stage {}", z.stage);
  // DeepSpeed offloads the optimizer only with ZeRO (stage >= 1) and parameters only with stage 3.
  ZP_CHECK(z.stage >= 1 || z.offload_optimizer == Offload::None, "stage-0 plan with optimizer offload");
  ZP_CHECK(z.stage == 3 || z.offload_param == Offload::None, "stage-{} plan with parameter offload", z.stage);

  json c = json::object();
  // DeepSpeed asserts train_batch_size == micro * accum * world (runtime/config.py _batch_assertion),
  // where world is GPUs / sequence_parallel_size; AutoTP ranks count as replicas there
  // (planner/parallel.h deepspeed_batch_world).
  c["train_batch_size"] = auto_or(
      o.hf_auto, checked_mul(checked_mul(z.micro_batch, z.grad_accum), planner::deepspeed_batch_world(w)));
  c["train_micro_batch_size_per_gpu"] = auto_or(o.hf_auto, z.micro_batch);
  c["gradient_accumulation_steps"] = auto_or(o.hf_auto, z.grad_accum);
  c["gradient_clipping"] = auto_or(o.hf_auto, kGradientClipping);
  add_precision_sections(c, p, o.hf_auto);
  c["zero_optimization"] = zero_optimization_block(w, z, o.hf_auto);
  // Expert parallelism (planner/expert_parallel.h): DeepSpeed 0.19.8's AutoEP reads "expert_parallel"
  // (runtime/config.py get_expert_parallel_config -> module_inject/auto_ep_config.py parse_autoep_config) and
  // replaces the HF MoE blocks inside deepspeed.initialize (engine.py _configure_expert_parallel); the
  // preset is found from the model's class (auto_ep_presets/registry.py), so only the size is written.
  if (z.ep_size > 1) c["expert_parallel"] = {{"enabled", true}, {"autoep_size", z.ep_size}};
  // Ulysses SP (planner/sequence_parallel.h): runtime/config.py reads "sequence_parallel_size" for its
  // batch arithmetic when no mpu is passed (DeepSpeed's own Ulysses tests write it beside
  // UlyssesSPAttentionHF.register_with_transformers); the groups come from that mpu or from
  // accelerate's ParallelismConfig (the snippets).
  if (p.sequence_parallel > 1) c["sequence_parallel_size"] = p.sequence_parallel;
  // AutoTP (planner/tensor_parallel.h): deepspeed.initialize reads tensor_parallel.autotp_size, makes the
  // TP groups and shards the HF model by its tp_plan (engine.py _configure_tensor_parallel).
  if (p.tensor_parallel > 1) c["tensor_parallel"] = {{"autotp_size", p.tensor_parallel}};
  if (json ac = activation_checkpointing_section(w, z); !ac.is_null())
    c["activation_checkpointing"] = std::move(ac);

  if (o.with_optimizer) add_optimizer_sections(c, o.hf_auto);
  if (z.muon) add_muon_optimizer(c, o.hf_auto);
  return c;
}

std::string launch_command(const planner::Workload& w, const std::string& config_path) {
  const std::string cfg = shell_quote(config_path);
  if (w.cluster.nodes == 1)
    return fmt::format("deepspeed --num_gpus {} train.py --deepspeed {}", w.cluster.gpus_per_node, cfg);
  return fmt::format("deepspeed --hostfile {} --num_nodes {} --num_gpus {} train.py --deepspeed {}",
                     shell_quote(stem_of(config_path) + ".hostfile"), w.cluster.nodes,
                     w.cluster.gpus_per_node, cfg);
}

std::string hostfile(const planner::Workload& w) {
  std::string s =
      "# DeepSpeed hostfile generated by zeroplan: one line per node, \"HOST slots=GPUS\".\n"
      "# Replace nodeN with the hostnames reachable by passwordless ssh from the first node.\n";
  for (int n = 1; n <= w.cluster.nodes; ++n)
    s += fmt::format("node{} slots={}\n", n, w.cluster.gpus_per_node);
  return s;
}

std::string launch_script(const planner::Workload& w, const std::string& config_path,
                          const std::string& hostfile_path) {
  std::string s =
      "#!/usr/bin/env bash\n# Generated by zeroplan. Replace train.py with your training script.\n"
      "# With the HF Trainer, --deepspeed is the TrainingArguments flag. A script that calls\n"
      "# deepspeed.initialize() with deepspeed.add_config_arguments(parser) takes\n"
      "# `--deepspeed --deepspeed_config CONFIG` instead.\n";
  if (w.cluster.nodes > 1)
    s += fmt::format("# Multi-node: edit {} (one line per node), run this on the first node.\n",
                     hostfile_path);
  s += "set -euo pipefail\n";
  s += launch_command(w, config_path) + " \"$@\"\n";
  return s;
}

namespace {

// The snippet's AutoTP header lines: what the config enables and the versions and batch rule it needs,
// "" without --tp.
std::string autotp_note(const planner::Workload& w, const planner::Plan& p) {
  const auto& z = p.zero;
  // AutoTP (planner/tensor_parallel.h): enabled by the config alone; DeepSpeed's AutoTP training blog
  // (blogs/huggingface-tp/README.md, "Usage") names transformers >= 4.50.1 and accelerate >= 1.6.0, and the
  // engine asserts on its first forward that the ranks of a TP group got the same batch.
  if (p.tensor_parallel > 1)
    return fmt::format(
        "# AutoTP: tensor_parallel.autotp_size {} is in the DeepSpeed config (transformers >= 4.50.1, "
        "accelerate\n"
        "# >= 1.6.0). The {} GPUs of each TP group must get the same batch: DeepSpeed checks it on the "
        "first\n"
        "# forward. per_device_train_batch_size counts per GPU, so DeepSpeed's train_batch_size is {} x the\n"
        "# {} distinct sequences per step.\n",
        p.tensor_parallel, p.tensor_parallel, p.tensor_parallel,
        z.micro_batch * z.grad_accum * planner::data_parallel_size(w));
  return "";
}

// The gradient_checkpointing arguments for the plan's recomputation (the DeepSpeed config has no switch
// for it), with the checkpoint-offload and selective-recompute instructions the Trainer cannot express.
std::string gradient_checkpointing_args(const planner::Workload& w, const planner::ZeroConfig& z) {
  std::string s;
  switch (z.checkpointing) {
    case planner::Checkpointing::Full:
      // Full recomputation of every decoder layer: only the layer inputs stay saved. It is set in the
      // training script; the DeepSpeed config has no switch for it.
      s += "    gradient_checkpointing=True,\n";
      // The recompute the plan timed (planner/op_model.cpp recompute_stops_early): non-reentrant is
      // transformers 5's default but not 4.x's (use_reentrant=True there), so say it either way.
      s += fmt::format("    gradient_checkpointing_kwargs={{\"use_reentrant\": {}}},\n",
                       w.train.checkpoint_reentrant ? "True" : "False");
      if (!w.train.deepspeed_checkpointing &&
          planner::checkpoint_offload_plan(w.train, w.model.num_layers, z.checkpointing).active)
        // DeepSpeed >= 0.19.6 runtime/activation_checkpointing/offload_activations.py: the context marks
        // each GradientCheckpointingLayer's hidden_states and offloads them; the Trainer has no switch.
        s += "    # Checkpoint offload (the plan assumes it): run each training step inside\n"
             "    #   from deepspeed.runtime.activation_checkpointing.offload_activations import \\\n"
             "    #       get_checkpoint_hidden_states_offloading_ctx_manager\n"
             "    #   with get_checkpoint_hidden_states_offloading_ctx_manager(): loss = ...; "
             "loss.backward()\n"
             "    # (a Trainer subclass overriding training_step), with non-reentrant checkpointing.\n";
      break;
    case planner::Checkpointing::Selective:
      s +=
          "    # The plan assumes selective recomputation (Korthikanti et al. 2022 §4.2: only the attention\n"
          "    # score/softmax tensors are recomputed). The HF Trainer has no switch for it; "
          "FlashAttention/SDPA\n"
          "    # (attn_implementation=\"flash_attention_2\" or \"sdpa\") never stores those tensors, which "
          "gives the same saving.\n"
          "    gradient_checkpointing=False,\n";
      break;
    case planner::Checkpointing::None:
      s += "    gradient_checkpointing=False,\n";
      break;
  }
  return s;
}

// The kernel lines (--kernels): use_liger_kernel, and the TiledMLP and FlashAttention instructions for
// the model code, since the plan's loss, MLP and attention figures assumed those kernels.
std::string kernel_args(const planner::Workload& w) {
  std::string s;
  // --kernels liger: the Trainer applies Liger-Kernel to the model (transformers integrations/liger.py);
  // the plan's loss memory assumed its fused linear cross-entropy.
  if (w.train.liger) s += "    use_liger_kernel=True,\n";
  // --kernels fa3: the model must be loaded with FlashAttention-3 (a from_pretrained argument, not a
  // TrainingArguments field); the plan's attention time assumed it.
  if (w.train.tiled_mlp)
    // ulysses_sp.py TiledMLP's docstring: the recipe patches the MLP class before the model is built.
    s += fmt::format(
        "    # The plan assumes DeepSpeed's TiledMLP ({} shards): before building the model, replace the "
        "MLP's\n"
        "    # forward by one returning "
        "deepspeed.runtime.sequence_parallel.ulysses_sp.TiledMLP.apply(mlp_forward,\n"
        "    # self, x, {}, [down_proj.weight, gate_proj.weight, up_proj.weight]) (see TiledMLP's "
        "docstring).\n",
        planner::tiled_mlp_shards(w), planner::tiled_mlp_shards(w));
  if (w.train.flash_attention_3)
    s += "    # The plan assumes FlashAttention-3: load the model with\n"
         "    # AutoModelForCausalLM.from_pretrained(..., attn_implementation=\"flash_attention_3\")\n"
         "    # (pip install flash_attn_3; Hopper GPUs only).\n";
  if (w.train.flash_attention_2)
    s += "    # The plan assumes FlashAttention-2: load the model with\n"
         "    # AutoModelForCausalLM.from_pretrained(..., attn_implementation=\"flash_attention_2\")\n"
         "    # (pip install flash-attn).\n";
  return s;
}

// The parallelism_config argument for Ulysses SP (--sp), so the Trainer builds the SP groups the
// config's sequence_parallel_size counts; "" without it.
std::string sequence_parallel_args(const planner::Workload& w, const planner::Plan& p) {
  if (p.sequence_parallel <= 1) return "";
  // transformers docs deepspeed_alst.md (Ulysses sequence parallelism, accelerate >= 1.12): the Trainer
  // shards the batch, builds position_ids and aggregates the loss across the SP group.
  return fmt::format(
      "    # Ulysses sequence parallelism (the plan assumes sp {}): needs accelerate>=1.12, and a "
      "collator\n"
      "    # padding to a multiple of {} (pad_to_multiple_of={}).\n"
      "    parallelism_config=ParallelismConfig(\n"
      "        sp_backend=\"deepspeed\",\n"
      "        sp_size={},\n"
      "        dp_replicate_size={},\n"
      "        sp_handler=DeepSpeedSequenceParallelConfig(\n"
      "            sp_seq_length_is_variable=True,\n"
      "            sp_attn_implementation=\"{}\",\n"
      "        ),\n"
      "    ),\n",
      p.sequence_parallel, p.sequence_parallel, p.sequence_parallel, p.sequence_parallel,
      planner::data_parallel_size(w),
      w.train.flash_attention_3   ? "flash_attention_3"
      : w.train.flash_attention_2 ? "flash_attention_2"
                                  : "sdpa");
}

// A vision-language model's tower and projector (planner/vision.h): the freeze the plan assumes, as code
// over the wrapper's own module names (the vision groups' top-level modules: "model.visual" for the Qwen
// models, "model.vision_tower" and "model.multi_modal_projector" for the others).
std::string vision_setup_note(const planner::Workload& w) {
  if (w.model.vision_groups.empty()) return "";
  // Under LoRA the tower is frozen with everything but the adapters (peft.get_peft_model): nothing to add.
  if (!w.train.freeze_vision && planner::vision_tower_frozen(w)) return "";
  if (!w.train.freeze_vision)
    return "# The vision tower and projector train with the language model (the plan holds their gradients "
           "and\n"
           "# optimizer states); zeroplan --freeze vision plans them frozen.\n";
  std::vector<std::string> prefixes;
  for (const auto& g : w.model.vision_groups)
    for (const auto& t : g.tensors) {
      const auto first = t.name.find('.');
      const auto second = first == std::string::npos ? first : t.name.find('.', first + 1);
      const std::string prefix = second == std::string::npos ? t.name : t.name.substr(0, second + 1);
      if (std::find(prefixes.begin(), prefixes.end(), prefix) == prefixes.end()) prefixes.push_back(prefix);
    }
  std::string names;  // a Python tuple's items
  for (const auto& p : prefixes) names += (names.empty() ? "" : ", ") + py_string(p);
  if (prefixes.size() == 1) names += ",";
  return fmt::format(
      "# --freeze vision: the plan holds the vision tower and projector frozen (16-bit weights, no gradients "
      "or\n"
      "# optimizer states). Freeze them before the Trainer is built:\n"
      "#   for name, p in model.named_parameters():\n"
      "#       if name.startswith(({})):\n"
      "#           p.requires_grad_(False)\n",
      names);
}

// The comment lines after the TrainingArguments call: what the script must do to the model itself
// (QLoRA's package versions, AutoEP's expert layers, the PEFT wrapper).
std::string model_setup_notes(const planner::Workload& w, const planner::Plan& p) {
  const auto& z = p.zero;
  std::string s;
  for (const auto& warning : emit_warnings(w, p))
    if (warning.rfind("QLoRA", 0) == 0) s += "# " + warning + "\n";
  if (z.ep_size > 1)
    s += fmt::format(
        "# Expert parallelism: the DeepSpeed config's \"expert_parallel\" section (autoep_size {}) makes\n"
        "# deepspeed.initialize replace each HF MoE block by "
        "deepspeed.module_inject.auto_ep_layer.AutoEPMoELayer\n"
        "# ({} of the {} experts per rank); no model code changes and no optimizer param-group split are "
        "needed\n"
        "# (AutoEP tags the expert parameters itself; deepspeed.moe.utils.\n"
        "# split_params_into_different_moe_groups_for_optimizer is for models written with "
        "deepspeed.moe.layer.MoE).\n",
        z.ep_size, w.model.num_experts / z.ep_size, w.model.num_experts);
  if (w.train.method != planner::Method::Full)
    s += fmt::format(
        "# {}: wrap the model with peft.get_peft_model(model, LoraConfig(r={}, ...)) before the Trainer.\n",
        planner::to_string(w.train.method), w.train.lora_rank);
  s += vision_setup_note(w);
  return s;
}

}  // namespace

std::string training_args_snippet(const planner::Workload& w, const planner::Plan& p,
                                  const std::string& config_path) {
  const auto& z = p.zero;
  std::string s = "# Generated by zeroplan: HF TrainingArguments matching " + config_path + ".\n";
  s += "# The Trainer checks these against the DeepSpeed config (and fills its \"auto\" values from them).\n";
  s += autotp_note(w, p);
  if (p.sequence_parallel > 1)
    s += "from accelerate.utils import DeepSpeedSequenceParallelConfig, ParallelismConfig\n";
  s += "from transformers import TrainingArguments\n\n";
  s += "training_args = TrainingArguments(\n";
  s += "    output_dir=\"output\",\n";
  s += fmt::format("    per_device_train_batch_size={},\n", z.micro_batch);
  s += fmt::format("    gradient_accumulation_steps={},\n", z.grad_accum);
  s += fmt::format("    max_grad_norm={:.1f},\n", kGradientClipping);
  if (p.precision == Precision::BF16) s += "    bf16=True,\n";
  if (p.precision == Precision::FP16) s += "    fp16=True,\n";
  s += gradient_checkpointing_args(w, z);
  s += kernel_args(w);
  s += sequence_parallel_args(w, p);
  s += fmt::format("    deepspeed={},\n", py_string(config_path));
  s += ")\n";
  s += model_setup_notes(w, p);
  return s;
}

std::string accelerate_config(const planner::Workload& w, const planner::Plan& p,
                              const std::string& config_path) {
  const bool multi = w.cluster.nodes > 1;
  std::string s =
      "# Generated by zeroplan: `accelerate launch --config_file THIS_FILE train.py`.\n"
      "# Mixed precision, batch sizes and ZeRO settings come from the DeepSpeed config file;\n"
      "# accelerate refuses duplicates of them here.\n";
  s += "compute_environment: LOCAL_MACHINE\n";
  s += "debug: false\n";
  s += "deepspeed_config:\n";
  s += fmt::format("  deepspeed_config_file: {}\n", json(config_path).dump());
  if (multi) s += "  deepspeed_multinode_launcher: standard\n";
  s += fmt::format("  zero3_init_flag: {}\n", (p.zero.stage == 3 && p.zero.zero_init) ? "true" : "false");
  s += "distributed_type: DEEPSPEED\n";
  s += "machine_rank: 0\n";
  if (multi) {
    s += "# Set machine_rank per node (0 .. num_machines-1) and the first node's address:\n";
    s += "main_process_ip: CHANGE_ME\n";
    s += "main_process_port: 29500\n";
  }
  s += "main_training_function: main\n";
  s += fmt::format("num_machines: {}\n", w.cluster.nodes);
  s += fmt::format("num_processes: {}\n", w.cluster.world_size());
  if (p.sequence_parallel > 1) {
    // transformers docs deepspeed_alst.md, "Accelerate config file".
    s += "parallelism_config:\n";
    s += fmt::format("  parallelism_config_sp_size: {}\n", p.sequence_parallel);
    s += fmt::format("  parallelism_config_dp_replicate_size: {}\n", planner::data_parallel_size(w));
    s += "  parallelism_config_sp_backend: deepspeed\n";
    s += "  parallelism_config_sp_seq_length_is_variable: true\n";
    s += fmt::format("  parallelism_config_sp_attn_implementation: {}\n",
                     w.train.flash_attention_3   ? "flash_attention_3"
                     : w.train.flash_attention_2 ? "flash_attention_2"
                                                 : "sdpa");
  }
  s += "rdzv_backend: static\n";
  s += "same_network: true\n";
  s += "use_cpu: false\n";
  return s;
}

std::vector<std::string> emit_warnings(const planner::Workload& w, const planner::Plan& p) {
  std::vector<std::string> out;
  const auto& z = p.zero;
  if (z.offload_optimizer == Offload::NVMe || (z.stage == 3 && z.offload_param == Offload::NVMe))
    out.push_back(
        fmt::format("the config offloads to NVMe: replace \"nvme_path\": \"{}\" with a directory on a local "
                    "NVMe drive before running",
                    kNvmePathPlaceholder));
  // PEFT v0.10.0 release notes and docs ("Use PEFT QLoRA and DeepSpeed with ZeRO3"): QLoRA under
  // ZeRO-3 needs bitsandbytes >= 0.43.0, accelerate >= 0.28.0, transformers > 4.38.2 and the 4-bit
  // weights stored in the compute dtype (BitsAndBytesConfig bnb_4bit_quant_storage).
  if (w.train.method == planner::Method::QLoRA && z.stage == 3)
    out.push_back(fmt::format(
        "QLoRA with ZeRO-3 needs bitsandbytes>=0.43.0, accelerate>=0.28.0, transformers>4.38.2 and "
        "BitsAndBytesConfig(bnb_4bit_quant_storage={}) so the 4-bit weights can be partitioned",
        p.precision == Precision::FP16 ? "torch.float16" : "torch.bfloat16"));
  // Measured (tests/deepspeed/harness.py _autoep_transformers_shim): DeepSpeed 0.19.8's AutoEP calls
  // registry.get(key, default) (auto_ep_presets/base.py:326) on transformers' _CanRecordRegistry, whose
  // get(model) takes no default in transformers 5.24 (utils/output_capturing.py:48): initialize raises
  // TypeError. Older transformers 5.x releases were not tried.
  if (z.ep_size > 1)
    out.push_back(
        "expert parallelism (AutoEP): with transformers 5.24, DeepSpeed 0.19.8's deepspeed.initialize raises "
        "\"TypeError: _CanRecordRegistry.get() takes 2 positional arguments but 3 were given\" "
        "(deepspeed/module_inject/auto_ep_presets/base.py:326); zeroplan's recordings patch that get() to "
        "accept "
        "a default (tests/deepspeed/harness.py _autoep_transformers_shim)");
  if (w.cluster.nodes > 1)
    out.push_back(
        "multi-node: replace the node names in the hostfile with your hosts (passwordless ssh from the "
        "first)");
  return out;
}

std::vector<EmittedFile> emitted_files(const planner::Workload& w, const planner::Plan& p,
                                       const EmitOptions& o) {
  if (o.path.empty()) throw UserError("--emit needs a file name, e.g. --emit ds_config.json");
  const std::string stem = stem_of(o.path);
  // The snippets name the config by the file name the user gave (relative paths stay relative).
  std::vector<EmittedFile> files;
  files.push_back(
      {o.path, deepspeed_config(w, p, ConfigOptions{o.hf_auto, o.with_optimizer}).dump(2) + "\n"});
  files.push_back({stem + ".launch.sh", launch_script(w, o.path, stem + ".hostfile")});
  if (w.cluster.nodes > 1) files.push_back({stem + ".hostfile", hostfile(w)});
  files.push_back({stem + ".training_args.py", training_args_snippet(w, p, o.path)});
  files.push_back({stem + ".accelerate.yaml", accelerate_config(w, p, o.path)});
  return files;
}

std::string emit_files(const planner::Workload& w, const planner::Plan& p, const EmitOptions& o) {
  namespace fs = std::filesystem;
  const auto files = emitted_files(w, p, o);
  // Check every target before writing any, so a refusal leaves nothing behind.
  std::vector<std::string> existing;
  std::error_code ec;
  for (const auto& f : files) {
    if (fs::is_directory(f.path, ec))
      throw_user_error("output path '{}' is a directory; give a file name", f.path);
    if (fs::exists(f.path, ec)) existing.push_back(f.path);
  }
  if (!existing.empty() && !o.force) {
    std::string list;
    for (const auto& e : existing) list += (list.empty() ? "'" : ", '") + e + "'";
    throw_user_error("{} already exist{}; pass --force to overwrite (nothing was written)", list,
                     existing.size() == 1 ? "s" : "");
  }
  std::vector<std::string> created;
  try {
    for (const auto& f : files) {
      const bool existed = fs::exists(f.path, ec);
      write_file_atomically(f.path, f.content, o.force);
      if (!existed) created.push_back(f.path);
    }
  } catch (...) {
    for (const auto& c : created) std::remove(c.c_str());
    throw;
  }
  // The launch script is meant to be run directly.
  fs::permissions(files[1].path, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);

  std::string s = "Wrote ";
  for (size_t i = 0; i < files.size(); ++i) s += (i ? ", " : "") + files[i].path;
  s += "\n  plan: " + plan_summary(w, p) + "\n";
  s += "  launch: " + launch_command(w, o.path) + "\n";
  for (const auto& warning : emit_warnings(w, p)) s += "  warning: " + warning + "\n";
  return s;
}

}  // namespace zeroplan::configs
