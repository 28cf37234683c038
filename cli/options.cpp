#include "cli/options.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/checked.h"
#include "common/errors.h"
#include "common/names.h"
#include "hwprofiles/cluster.h"
#include "models/model_spec.h"
#include "planner/checkpoint_offload.h"
#include "planner/ds_runtime.h"
#include "planner/hpz.h"
#include "planner/muon.h"
#include "planner/op_model.h"
#include "planner/parallel.h"
#include "planner/sequence_parallel.h"
#include "planner/tensor_parallel.h"
#include "planner/tiled_mlp.h"
#include "planner/torch_version.h"
#include "planner/vision.h"

namespace zeroplan::cli {
namespace {

// Documented input limits (README "Limits"): far above any real run, low enough that every byte
// count stays inside checked 64-bit arithmetic.
constexpr int64_t kMaxParams = 1'000'000'000'000'000;  // 1e15 parameters: 16 bytes each < 2^63
constexpr int64_t kMaxMicroBatch = 65'536;
constexpr int64_t kMaxGradAccum = 1'000'000;
constexpr int64_t kMaxGlobalBatch = 1'000'000'000;
constexpr int64_t kMaxLoraRank = 65'536;

template <typename E>
E parse_choice(const std::string& value, std::string_view flag,
               std::initializer_list<std::pair<const char*, E>> choices) {
  const std::string v = to_lower(value);
  std::vector<std::string> names;
  for (const auto& [n, e] : choices) {
    if (v == n) return e;
    names.emplace_back(n);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : "|") + n;
  const std::string near = nearest_name(value, names);
  if (!near.empty())
    throw_user_error("{} '{}' is not one of {}; did you mean '{}'?", flag, value, list, near);
  throw_user_error("{} '{}' is not one of {}", flag, value, list);
}

planner::Offload parse_offload(const std::string& v, std::string_view flag) {
  using planner::Offload;
  return parse_choice<Offload>(v, flag,
                               {{"none", Offload::None}, {"cpu", Offload::CPU}, {"nvme", Offload::NVMe}});
}

planner::Checkpointing parse_checkpointing(const std::string& v) {
  using planner::Checkpointing;
  return parse_choice<Checkpointing>(v, "--checkpointing",
                                     {{"none", Checkpointing::None},
                                      {"selective", Checkpointing::Selective},
                                      {"full", Checkpointing::Full}});
}

// "512GB", "512GiB", "512e9", "1.5TB" -> bytes.
int64_t parse_bytes(const std::string& text, std::string_view flag) {
  std::string s = to_lower(text);
  double mult = 1;
  const std::pair<const char*, double> units[] = {{"tib", 1099511627776.0},
                                                  {"gib", 1073741824.0},
                                                  {"mib", 1048576.0},
                                                  {"tb", 1e12},
                                                  {"gb", 1e9},
                                                  {"mb", 1e6}};
  for (const auto& [u, m] : units) {
    if (s.size() > std::strlen(u) && s.ends_with(u)) {
      s.resize(s.size() - std::strlen(u));
      mult = m;
      break;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0)
    throw_user_error("{} '{}' is not a size; write e.g. 512GB or 1TiB", flag, text);
  const double bytes = v * mult;
  if (bytes > 1e18) throw_user_error("{} '{}' is beyond zeroplan's limit of 1e18 bytes", flag, text);
  return static_cast<int64_t>(bytes);
}

double parse_positive_real(const std::string& text, std::string_view flag, double max) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0 || v > max)
    throw_user_error("{} '{}' must be a positive number no larger than {}", flag, text, max);
  return v;
}

std::optional<int64_t> optional_count(const std::string& text, std::string_view flag, int64_t max) {
  if (text.empty()) return std::nullopt;
  return parse_positive_count(text, flag, max);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) throw_user_error("--lora-targets '{}' has an empty name; write e.g. q_proj,v_proj", s);
    out.push_back(item);
  }
  if (!s.empty() && s.back() == ',') throw_user_error("--lora-targets '{}' ends with a comma", s);
  return out;
}

}  // namespace

namespace {

void add_cluster_flags(CLI::App& app, PlanFlags& f) {
  auto* g = "Model and cluster";
  app.add_option("--model,-m", f.model,
                 "Model: alias (7b, 13b, 70b), zoo name (see `zeroplan models`) or a config.json path")
      ->group(g);
  app.add_option("--params", f.params,
                 "Describe the model by its parameter count alone, e.g. 7.5e9 (model states only)")
      ->group(g);
  app.add_option("--gpus,-g", f.gpus, "Cluster: 4xA40 (one node), 2x8xH100 (nodes x GPUs), or NxPROFILE.json")
      ->group(g);
  app.add_option("--intra-link", f.intra_link, "Override the intra-node GPU link (e.g. pcie4, nvlink3)")
      ->group(g);
  app.add_option("--network", f.network,
                 "Override the inter-node network (e.g. ib-hdr-200, ib-ndr-400, roce-100)")
      ->group(g);
  app.add_option("--host-mem", f.host_mem, "Host RAM per node (e.g. 512GB)")->group(g);
  app.add_option("--nvme-bw", f.nvme_bw, "NVMe bandwidth per node in GB/s (for nvme offload)")->group(g);
  app.add_option("--nvme-capacity", f.nvme_capacity,
                 "NVMe space per node for nvme offload (e.g. 30TB; default 2TB)")
      ->group(g);
  app.add_option("--nics", f.nics,
                 "Network adapters per node used by NCCL (inter-node bandwidth = busbw x NICs)")
      ->group(g);
  app.add_option("--gpu-mem", f.gpu_mem,
                 "Override usable memory per GPU (e.g. 40GB for a MIG slice, or a CPU rank budget)")
      ->group(g);
}

// What is trained: stage, batch, sequence, precision, method, offload, checkpointing.
void add_training_flags(CLI::App& app, PlanFlags& f) {
  auto* t = "Training";
  app.add_option("--stage", f.stage, "Fix the ZeRO stage (0-3) instead of searching")->group(t);
  app.add_option("--ep", f.ep,
                 "Expert-parallel size (DeepSpeed AutoEP, MoE models; 1 = none; searched when absent)")
      ->group(t);
  app.add_option("--tp", f.tp,
                 "Tensor-parallel size (DeepSpeed AutoTP training, tensor_parallel.autotp_size; 1 = none; auto = "
                 "search 1, 2, 4, 8 inside a node): Llama-layout dense models, ZeRO over GPUs / N")
      ->group(t);
  app.add_option(
         "--hpz", f.hpz,
         "ZeRO++ hierarchical partitioning at stage 3 (zero_hpz_partition_size): each parameter also "
         "kept split over N consecutive GPUs, so the backward's gathers stay inside them; N must divide "
         "the GPUs (1 = none; auto = also try the GPUs per node on several nodes)")
      ->group(t);
  app.add_option(
         "--qwz", f.qwz,
         "ZeRO++ qwZ at stage 3 (zero_quantized_weights): parameter gathers in int8 with fp32 scales, "
         "dequantized on arrival: on|off (default off)")
      ->group(t);
  app.add_option("--qgz", f.qgz,
                 "ZeRO++ qgZ at stage 3 (zero_quantized_gradients): on several nodes the gradient "
                 "reduce-scatter becomes int4 all-to-alls inside and across nodes: on|off (default off)")
      ->group(t);
  app.add_option(
         "--sp", f.sp,
         "Sequence-parallel size (DeepSpeed Ulysses/ALST, UlyssesSPAttentionHF): each GPU holds seq/N "
         "tokens, attention runs the whole sequence on heads/N; must divide the heads, the GPUs and the "
         "sequence (1 = none; --max-seq picks one when absent)")
      ->group(t);
  app.add_option("--micro-batch", f.micro_batch, "Micro-batch per GPU (searched when absent)")->group(t);
  app.add_option("--seq-len", f.seq_len, "Sequence length in tokens (default 2048)")->group(t);
  app.add_option("--grad-accum", f.grad_accum,
                 "Gradient accumulation steps (default 1, or derived from --global-batch)")
      ->group(t);
  app.add_option("--global-batch", f.global_batch, "Global batch in sequences (= micro x accum x GPUs)")
      ->group(t);
  app.add_option("--precision", f.precision, "bf16 | fp16 | fp32 (default bf16)")->group(t);
  app.add_option("--method", f.method, "full | lora | qlora (default full)")->group(t);
  app.add_option("--lora-rank", f.lora_rank, "LoRA rank r (default 16)")->group(t);
  app.add_option("--lora-targets", f.lora_targets,
                 "Comma-separated HF module names, e.g. q_proj,v_proj (default: all linear projections)")
      ->group(t);
  app.add_option("--offload-optimizer", f.offload_optimizer, "none | cpu | nvme (searched when absent)")
      ->group(t);
  app.add_option("--offload-param", f.offload_param, "none | cpu | nvme (stage 3; searched when absent)")
      ->group(t);
  app.add_option("--checkpointing", f.checkpointing,
                 "Activation checkpointing: none | selective | full (searched when absent)")
      ->group(t);
}

// The training stack the plan assumes (kernels, releases, checkpointing implementation, host) and the
// levers searched only on request; listed under "Training" too.
void add_stack_flags(CLI::App& app, PlanFlags& f) {
  auto* t = "Training";
  app.add_option("--attention", f.attention,
                 "flash (SDPA/flash, memory linear in sequence) | eager (s^2 scores)")
      ->group(t);
  app.add_option("--kernels", f.kernels,
                 "Comma list of the kernels the training script runs: sdpa (the default: PyTorch picks, "
                 "cuDNN on Hopper from torch 2.11, else FlashAttention-2; see --torch-version) | fa2 | "
                 "flash (attn_implementation=flash_attention_2) | fa3 "
                 "(attn_implementation=flash_attention_3, Hopper only) | eager (attention scores "
                 "materialised) | liger "
                 "(Liger-Kernel, use_liger_kernel=True: fused linear cross-entropy, no b*s*V logits) | "
                 "tiled-mlp (DeepSpeed's TiledMLP, the ALST recipe: the MLP runs in sequence shards, saving "
                 "only its input, and is recomputed in the backward)")
      ->group(t);
  app.add_option("--torch-version", f.torch_version,
                 "PyTorch release of the training stack, X.Y (default 2.11): from 2.11 SDPA runs cuDNN "
                 "attention on Hopper")
      ->group(t);
  app.add_option("--deepspeed-version", f.deepspeed_version,
                 "DeepSpeed release whose runtime is modelled: 0.16.9 | 0.18.9 | 0.19.8 (default, newest)")
      ->group(t);
  app.add_option("--z3-leaf-moe", f.z3_leaf_moe,
                 "ZeRO-3: HF MoE blocks as leaf modules (one gather per block): auto (DeepSpeed's default "
                 "classes) | on | off")
      ->group(t);
  app.add_option(
         "--checkpoint-impl", f.checkpoint_impl,
         "How the script checkpoints layers: non-reentrant (transformers 5 default; its recompute stops "
         "at the last saved tensor) | reentrant (transformers 4.x default) | deepspeed "
         "(deepspeed.checkpointing.checkpoint, as Megatron-DeepSpeed: reentrant, and the config's "
         "activation_checkpointing section acts)")
      ->group(t);
  app.add_option(
         "--checkpoint-offload", f.checkpoint_offload,
         "none (default) | cpu: the checkpointed layer inputs wait in host memory for the backward "
         "(DeepSpeed's activation offload: cpu_checkpointing with --checkpoint-impl deepspeed, else HF "
         "checkpointing inside CheckpointHiddenStatesOffload, DeepSpeed >= 0.19.6); implies --checkpointing "
         "full. "
         "--max-seq tries it when the flag is absent")
      ->group(t);
  app.add_option("--memory-efficient-linear", f.memory_efficient_linear,
                 "ZeRO-3 zero_optimization.memory_efficient_linear: on (DeepSpeed default) | off (torch's "
                 "linear, as in PyTorch FSDP)")
      ->group(t);
  app.add_option("--memory-margin", f.memory_margin, "Fraction of GPU memory kept free (default 0.05)")
      ->group(t);
  app.add_option(
         "--host-speed", f.host_speed,
         "Training host's single-thread speed relative to the reference host (a 16-vCPU Xeon beside an "
         "H100, where 24.5 us per kernel launch and 376 us per ZeRO-3 module pass were measured); "
         "host times are divided by it (default 1)")
      ->group(t);
  app.add_option("--cpu-threads", f.cpu_threads,
                 "OpenMP threads each rank's CPU optimizer runs on (OMP_NUM_THREADS): 1 under torchrun and "
                 "accelerate launch, every core under the deepspeed launcher, cores/ranks with "
                 "--bind_cores_to_rank. Prices the offloaded optimizer step as DeepSpeed 0.19.8 measured at "
                 "that count (default: a per-node assumption)")
      ->group(t);
  app.add_flag(
         "--max-seq", f.max_seq,
         "Find the longest sequence that fits (micro-batch 1 unless fixed), with a table of peak memory "
         "and tokens/s against the sequence length; --seq-len is ignored")
      ->group(t);
  app.add_option(
         "--optimizer", f.optimizer,
         "adamw (default) | muon: DeepSpeed's Muon (optimizer.type muon: Newton-Schulz on the hidden "
         "matrices, AdamW on embeddings, head and norms), planned at ZeRO stages 1-2 with the optimizer "
         "on the GPU, as DeepSpeed 0.19.8 runs it")
      ->group(t);
  app.add_option(
         "--freeze", f.freeze,
         "vision: freeze a vision-language model's vision tower and projector (requires_grad False, "
         "as LLaMA-Factory's freeze_vision_tower and freeze_multi_modal_projector, both true by default "
         "there): they hold 16-bit weights only, no gradients or optimizer states")
      ->group(t);
  app.add_option("--images-per-sample", f.images_per_sample,
                 "Images each sample carries through a frozen vision tower (with --freeze vision; default 0: "
                 "text only). Their placeholder tokens are part of --seq-len")
      ->group(t);
  app.add_option("--image-size", f.image_size,
                 "Image size in pixels, HxW or one number for a square: needed by the Qwen towers (dynamic "
                 "resolution, rounded as their processor rounds); the SigLIP/CLIP towers take their config's "
                 "image_size")
      ->group(t);
  app.add_option("--allow", f.allow,
                 "Levers that change the numerics, searched only when allowed (comma list): bf16-master "
                 "(bf16 master weights, gradients and Adam states: DeepSpeed >= 0.18.3, ZeRO 1-3, bf16)")
      ->group(t);
}

void add_output_flags(CLI::App& app, PlanFlags& f) {
  auto* o = "Output";
  app.add_flag("--json", f.json, "Print one JSON object on stdout (the documented contract)")->group(o);
  app.add_flag("--explain", f.explain,
               "List every buffer of the recommended (or --stage) plan with size and phase")
      ->group(o);
  app.add_flag(
         "--explain-time", f.explain_time,
         "Per-operator step time of the recommended (or --stage) plan: forward, backward, recompute, step")
      ->group(o);
  app.add_option("--compare", f.compare, "Show another estimator beside zeroplan's prediction: deepspeed")
      ->group(o);
  app.add_option("--emit", f.emit,
                 "Write the plan as a DeepSpeed config (plus launch command and snippets) to this path")
      ->group(o);
  app.add_flag("--hf-auto", f.hf_auto, "With --emit: write \"auto\" where the HF Trainer fills values in")
      ->group(o);
  app.add_flag("--emit-optimizer", f.emit_optimizer,
               "With --emit: add AdamW optimizer and WarmupLR scheduler sections (the HF Trainer fills them "
               "otherwise)")
      ->group(o);
  app.add_option(
         "--html", f.html,
         "Also write a self-contained HTML report (memory by buffer, memory over the step, micro-batch "
         "sweep, collectives, reasons, ds_config) to this path; plan, check and diagnose")
      ->group(o);
  app.add_flag("--force", f.force, "Overwrite existing output files")->group(o);
}

}  // namespace

void add_plan_flags(CLI::App& app, PlanFlags& f) {
  add_cluster_flags(app, f);
  add_training_flags(app, f);
  add_stack_flags(app, f);
  add_output_flags(app, f);
}

namespace {

// --images-per-sample / --image-size against the model's tower (planner/vision.h): images run only through
// a frozen tower, of a size the tower takes, and their tokens fit in the sequence.
void apply_image_flags(const PlanFlags& f, planner::Workload& w) {
  if (f.images_per_sample.empty()) {
    if (!f.image_size.empty()) throw UserError("--image-size needs --images-per-sample");
    return;
  }
  planner::TrainingSpec& t = w.train;
  t.images_per_sample = parse_positive_count(f.images_per_sample, "--images-per-sample", 1024);
  const models::VisionGeometry& geo = w.model.vision_geometry;
  if (w.model.vision_groups.empty())
    throw_user_error("--images-per-sample: model '{}' has no vision tower zeroplan counts", w.model.name);
  if (!geo.supported)
    throw_user_error(
        "--images-per-sample: images through the {} wrapper's tower (any-resolution tiling) are not "
        "modelled; plan text only",
        w.model.text_config_of);
  if (!planner::vision_tower_frozen(w))
    throw UserError(
        "--images-per-sample: training the vision tower on images is not modelled yet (its saved "
        "activations); "
        "pass --freeze vision (the tower and projector frozen, LLaMA-Factory's default)");
  if (t.sequence_parallel > 1 || t.tensor_parallel > 1)
    throw UserError("--images-per-sample with --sp or --tp is not modelled; drop one");
  if (!f.image_size.empty()) {
    const auto x = f.image_size.find('x');
    const std::string hs = f.image_size.substr(0, x),
                      ws = x == std::string::npos ? hs : f.image_size.substr(x + 1);
    t.image_h = parse_positive_count(hs, "--image-size", 1 << 16);
    t.image_w = parse_positive_count(ws, "--image-size", 1 << 16);
    if (geo.fixed_image > 0 && (t.image_h != geo.fixed_image || t.image_w != geo.fixed_image))
      throw_user_error(
          "--image-size {}: the {} tower takes {}x{} images (its processor resizes to that); drop "
          "--image-size",
          f.image_size, w.model.vision_tower, geo.fixed_image, geo.fixed_image);
  } else if (geo.fixed_image > 0) {
    t.image_h = t.image_w = geo.fixed_image;
  } else {
    throw_user_error(
        "--images-per-sample: the {} tower takes images of any size; say which with --image-size "
        "HxW (pixels)",
        w.model.vision_tower);
  }
  const int64_t tokens = checked_mul(t.images_per_sample, geo.tokens(t.image_h, t.image_w));
  if (tokens > t.seq_len)
    throw_user_error("--images-per-sample {}: the images take {} tokens ({} each), more than --seq-len {}",
                     t.images_per_sample, tokens, geo.tokens(t.image_h, t.image_w), t.seq_len);
}

// --kernels, a comma list: it refines --attention (sdpa/fa2/flash/fa3/eager pick the attention path)
// and turns on Liger's loss.
void parse_kernels(const std::string& kernels, planner::TrainingSpec& t) {
  // --kernels refines --attention: sdpa/fa2/flash and eager pick the attention path, liger the loss.
  size_t start = 0;
  while (start <= kernels.size()) {
    const size_t comma = kernels.find(',', start);
    const std::string k =
        kernels.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (k == "sdpa") {
      t.attention = planner::Attention::Flash;
      t.flash_attention_3 = t.flash_attention_2 = false;
    } else if (k == "fa2" || k == "flash") {
      t.attention = planner::Attention::Flash;
      t.flash_attention_3 = false;
      t.flash_attention_2 = true;
    } else if (k == "fa3") {
      t.attention = planner::Attention::Flash;
      t.flash_attention_3 = true;
      t.flash_attention_2 = false;
    } else if (k == "eager") {
      t.attention = planner::Attention::Eager;
      t.flash_attention_3 = t.flash_attention_2 = false;
    } else if (k == "liger") {
      t.liger = true;
    } else if (k == "tiled-mlp") {
      t.tiled_mlp = true;
    } else {
      throw_user_error(
          "--kernels: unknown kernel '{}'; choose from sdpa, fa2, fa3, flash, eager, liger, tiled-mlp", k);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

// --intra-link, --network, --host-mem, --nvme-bw, --nvme-capacity, --nics, --gpu-mem.
hw::ClusterOverrides cluster_overrides(const PlanFlags& f) {
  hw::ClusterOverrides ov;
  if (!f.intra_link.empty()) ov.intra_link = f.intra_link;
  if (!f.network.empty()) ov.inter_link = f.network;
  if (!f.host_mem.empty()) ov.host_memory_bytes = parse_bytes(f.host_mem, "--host-mem");
  if (!f.nvme_bw.empty()) ov.nvme_GBps = parse_positive_real(f.nvme_bw, "--nvme-bw", 1e4);
  if (!f.nvme_capacity.empty()) ov.nvme_bytes = parse_bytes(f.nvme_capacity, "--nvme-capacity");
  if (!f.nics.empty()) ov.nics_per_node = static_cast<int>(parse_positive_count(f.nics, "--nics", 64));
  if (!f.gpu_mem.empty()) ov.device_memory_bytes = parse_bytes(f.gpu_mem, "--gpu-mem");
  return ov;
}

// DeepSpeed needs global = micro x accum x GPUs (runtime/config.py _batch_assertion): --global-batch
// against the GPUs and the fixed --micro-batch / --grad-accum. Under --sp the "GPUs" are the
// data-parallel ranks, GPUs / sp (config.py: world_size = world / sequence_parallel_size).
void check_global_batch(const planner::TrainingSpec& t, int64_t world) {
  if (!t.global_batch) return;
  const char* gpus = t.sequence_parallel > 1 ? "data-parallel ranks (GPUs / --sp)" : "GPUs";
  if (*t.global_batch % world != 0)
    throw_user_error(
        "--global-batch {} is not a multiple of the {} {}; DeepSpeed needs global = micro x accum x {}",
        *t.global_batch, world, gpus, gpus);
  const int64_t per_gpu = *t.global_batch / world;
  if (t.micro_batch && per_gpu % *t.micro_batch != 0)
    throw_user_error(
        "--global-batch {} is not --micro-batch {} x a whole number of accumulation steps x {} {}",
        *t.global_batch, *t.micro_batch, world, gpus);
  if (t.micro_batch && t.grad_accum && *t.micro_batch * *t.grad_accum != per_gpu)
    throw_user_error("--global-batch {} != --micro-batch {} x --grad-accum {} x {} {}", *t.global_batch,
                     *t.micro_batch, *t.grad_accum, world, gpus);
  if (t.grad_accum && per_gpu % *t.grad_accum != 0)
    throw_user_error("--global-batch {} is not --grad-accum {} x a whole micro-batch x {} {}",
                     *t.global_batch, *t.grad_accum, world, gpus);
}

// --checkpointing, --checkpoint-impl and --checkpoint-offload, and whether DeepSpeed can run the offload.
void parse_checkpoint_flags(const PlanFlags& f, planner::TrainingSpec& t) {
  // 0: non-reentrant, 1: reentrant, 2: deepspeed.checkpointing (reentrant too).
  const int impl = parse_choice<int>(f.checkpoint_impl, "--checkpoint-impl",
                                     {{"non-reentrant", 0}, {"reentrant", 1}, {"deepspeed", 2}});
  t.checkpoint_reentrant = impl >= 1;
  t.deepspeed_checkpointing = impl == 2;
  t.checkpoint_offload = parse_choice<planner::CheckpointOffload>(
      f.checkpoint_offload.empty() ? std::string("none") : f.checkpoint_offload, "--checkpoint-offload",
      {{"none", planner::CheckpointOffload::None}, {"cpu", planner::CheckpointOffload::Cpu}});
  if (!f.checkpointing.empty()) t.checkpointing = parse_checkpointing(f.checkpointing);
  if (const std::string why = planner::checkpoint_offload_refusal(t); !why.empty()) throw UserError(why);
}

// At most 6 decimal digits and nothing else (a layout size or --ep / --hpz value std::stoi can read).
bool small_count(const std::string& v) {
  return !v.empty() && v.size() <= 6 && v.find_first_not_of("0123456789") == std::string::npos;
}

// A layout size flag (--tp, --sp, --hpz): a positive integer; "" is 1.
int size_flag(const std::string& v, const char* flag) {
  if (v.empty()) return 1;
  if (!small_count(v) || std::stoi(v) < 1) throw_user_error("{} '{}' must be a positive integer", flag, v);
  return std::stoi(v);
}

// --hpz N (planner/hpz.h): the layout's rules (N divides the GPUs; not beside --tp, --sp or --ep), then the
// model's limits. A malformed --hpz or --ep is build_search_options' to judge.
void check_hpz_flag(const PlanFlags& f, const planner::Workload& w, layout::LayoutSizes sizes) {
  if (f.hpz.empty() || f.hpz == "1") return;
  if (small_count(f.hpz)) {  // "auto" and the malformed: later
    sizes.ep = small_count(f.ep) ? std::max(1, std::stoi(f.ep)) : 1;
    sizes.hpz = size_flag(f.hpz, "--hpz");
    const std::vector<std::string> why =
        layout::validate(w.cluster.nodes, w.cluster.gpus_per_node, sizes, layout::LayoutFacts{}, true);
    if (!why.empty()) throw UserError(why.front());
  }
  if (const std::string why = planner::hpz_refusal(w); !why.empty())
    throw_user_error("--hpz {}: {}", f.hpz, why);
}

// The flags a plan cannot go without: a model (--model or --params, not both) and the GPUs.
void require_model_and_gpus(const PlanFlags& f) {
  if (f.model.empty() && f.params.empty())
    throw UserError(
        "no model given; pass --model (e.g. --model 13b, see `zeroplan models`) or --params (e.g. --params "
        "7e9)");
  if (!f.model.empty() && !f.params.empty()) throw UserError("pass either --model or --params, not both");
  if (f.gpus.empty())
    throw UserError("no GPUs given; pass --gpus, e.g. --gpus 4xA40 or --gpus 2x8xH100 (see `zeroplan gpus`)");
}

// The training choices that pick code paths (--precision, --method, --attention, --kernels), read first
// because the later checks depend on them.
void parse_training_choices(const PlanFlags& f, planner::TrainingSpec& t) {
  t.precision = parse_choice<planner::Precision>(f.precision, "--precision",
                                                 {{"bf16", planner::Precision::BF16},
                                                  {"fp16", planner::Precision::FP16},
                                                  {"fp32", planner::Precision::FP32}});
  t.method = parse_choice<planner::Method>(
      f.method, "--method",
      {{"full", planner::Method::Full}, {"lora", planner::Method::LoRA}, {"qlora", planner::Method::QLoRA}});
  t.attention = parse_choice<planner::Attention>(
      f.attention, "--attention",
      {{"flash", planner::Attention::Flash}, {"eager", planner::Attention::Eager}});
  if (!f.kernels.empty()) parse_kernels(f.kernels, t);
}

// The software and host the plan prices (--deepspeed-version, --torch-version, --host-speed,
// --cpu-threads), each refused with its accepted range.
void parse_host_flags(const PlanFlags& f, planner::TrainingSpec& t) {
  t.deepspeed_version = planner::parse_deepspeed_version(f.deepspeed_version);
  {
    const auto tv = planner::parse_torch_version(f.torch_version);
    // Any 1.x-3.x release reads; only "from 2.11 or not" changes a plan today.
    if (!tv || *tv < 100 || *tv >= 400)
      throw_user_error("--torch-version '{}' must be a PyTorch release X.Y such as 2.10 or 2.11",
                       f.torch_version);
    t.torch_version = *tv;
  }
  {
    char* end = nullptr;
    const double hs = std::strtod(f.host_speed.c_str(), &end);
    // (0.1, 10]: a host ten times slower or faster than the reference is outside what the two measured
    // figures can stand for.
    if (f.host_speed.empty() || *end != '\0' || !std::isfinite(hs) || hs < 0.1 || hs > 10)
      throw_user_error("--host-speed '{}' must be a number in [0.1, 10] (1 = the reference host)",
                       f.host_speed);
    t.host_speed = hs;
  }
  // 1..1024: a count a host can run per rank (the measured table covers 1-16 and holds beyond).
  if (f.cpu_threads < 0 || f.cpu_threads > 1024)
    throw_user_error("--cpu-threads {} must be between 1 and 1024 (OMP_NUM_THREADS per rank)", f.cpu_threads);
  t.cpu_threads = f.cpu_threads;
}

// The model: a bare parameter count (--params, refused where the architecture is needed) or a named or
// file model (--model); LoRA targets are checked against its modules.
models::ModelSpec load_workload_model(const PlanFlags& f, const planner::TrainingSpec& t) {
  models::ModelSpec m;
  if (!f.params.empty()) {
    m = models::model_from_param_count(parse_positive_count(f.params, "--params", kMaxParams));
    if (t.method != planner::Method::Full)
      throw UserError("--method lora/qlora needs the architecture; use --model instead of --params");
    if (t.checkpoint_offload != planner::CheckpointOffload::None)
      throw UserError(
          "--checkpoint-offload needs the architecture (its layer inputs); use --model instead of --params");
  } else {
    m = models::load_model(f.model);
  }
  if (t.method != planner::Method::Full)  // validates the target names against the model's modules
    (void)models::lora_trainable_parameters(m, t.lora_rank, t.lora_targets);
  return m;
}

// The parallel layout (--tp, --sp, --ep, --hpz) against the cluster and the model: shards the model for
// AutoTP and sets the sequence-parallel size, or throws the first refusal.
void apply_layout_flags(const PlanFlags& f, planner::Workload& w) {
  // The parallel layout (layout/parallel_layout.h): DP is what --tp and --sp leave. --ep keeps its
  // refusals in DeepSpeed AutoEP's own terms (planner/expert_parallel.h expert_parallel_refusal).
  // --tp auto: planned at tp 1 here; the plan command searches the sizes (planner/tensor_parallel_choice.h).
  layout::LayoutSizes sizes{f.tp == "auto" ? 1 : size_flag(f.tp, "--tp"), size_flag(f.sp, "--sp"), 1};

  const std::vector<std::string> why = layout::validate(w.cluster.nodes, w.cluster.gpus_per_node, sizes,
                                                        planner::layout_facts(w), /*modelled_tp=*/true);
  if (!why.empty()) throw UserError(why.front());
  w.train.sequence_parallel = sizes.sp;
  // AutoTP (planner/tensor_parallel.h): the workload's model becomes one TP rank's shard.
  if (const std::string tp_why = planner::tensor_parallel_refusal(w, sizes.tp); !tp_why.empty())
    throw UserError(tp_why);
  if (sizes.tp > 1 && !f.ep.empty() && f.ep != "1")
    throw_user_error("--tp {} with --ep {}: AutoTP with AutoEP is not modelled yet", sizes.tp, f.ep);
  planner::apply_tensor_parallel(w, sizes.tp);
  const std::string sp_why = planner::sequence_parallel_refusal(w);
  if (!sp_why.empty()) throw UserError(sp_why);
  if (const std::string tiled_why = planner::tiled_mlp_refusal(w); !tiled_why.empty())
    throw UserError(tiled_why);
  if (sizes.sp > 1 && !f.ep.empty() && f.ep != "1")
    throw_user_error("--sp {} with --ep {}: sequence and expert parallelism together are not modelled yet",
                     sizes.sp, f.ep);
  check_hpz_flag(f, w, sizes);
}

}  // namespace

planner::Workload build_workload(const PlanFlags& f) {
  planner::Workload w;
  require_model_and_gpus(f);

  // Cheap flag checks first, then the files they name.
  planner::TrainingSpec& t = w.train;
  parse_training_choices(f, t);
  parse_host_flags(f, t);
  t.moe_leaf = parse_choice<planner::MoeLeaf>(
      f.z3_leaf_moe, "--z3-leaf-moe",
      {{"auto", planner::MoeLeaf::Auto}, {"on", planner::MoeLeaf::On}, {"off", planner::MoeLeaf::Off}});
  t.memory_efficient_linear = parse_choice<bool>(f.memory_efficient_linear, "--memory-efficient-linear",
                                                 {{"on", true}, {"off", false}});
  t.muon = parse_choice<bool>(f.optimizer, "--optimizer", {{"adamw", false}, {"muon", true}});
  if (!f.freeze.empty()) t.freeze_vision = parse_choice<bool>(f.freeze, "--freeze", {{"vision", true}});
  t.lora_rank = parse_positive_count(f.lora_rank, "--lora-rank", kMaxLoraRank);
  if (!f.lora_targets.empty()) {
    if (t.method == planner::Method::Full)
      throw UserError("--lora-targets needs --method lora or --method qlora");
    t.lora_targets = split_commas(f.lora_targets);
  }
  if (t.method == planner::Method::QLoRA && t.precision == planner::Precision::FP32)
    throw UserError("--method qlora computes in 16-bit; use --precision bf16 or fp16");
  t.seq_len = parse_positive_count(f.seq_len, "--seq-len", kMaxSeqLen);
  t.micro_batch = optional_count(f.micro_batch, "--micro-batch", kMaxMicroBatch);
  t.grad_accum = optional_count(f.grad_accum, "--grad-accum", kMaxGradAccum);
  t.global_batch = optional_count(f.global_batch, "--global-batch", kMaxGlobalBatch);
  parse_checkpoint_flags(f, t);

  w.cluster = hw::parse_cluster(f.gpus, cluster_overrides(f));
  if (t.flash_attention_3 && !planner::flash_attention_3_available(w.cluster.gpu))
    throw_user_error(
        "--kernels fa3: FlashAttention-3 runs on Hopper GPUs only (H100, H200, H800, H20; Shah et al. 2024), "
        "and {} is {}; use sdpa or fa2",
        w.cluster.gpu.name, planner::gpu_architecture(w.cluster.gpu));

  w.model = load_workload_model(f, t);
  apply_layout_flags(f, w);
  if (w.train.freeze_vision && w.model.vision_groups.empty())
    throw_user_error(
        "--freeze vision: model '{}' has no vision tower zeroplan counts (vision-language configs of the "
        "wrappers in models/data/vision_towers.json have one)",
        w.model.name);
  apply_image_flags(f, w);
  if (const int64_t left_out = planner::vision_lora_parameters_left_out(w); left_out > 0)
    w.model.warnings.push_back(fmt::format(
        "--method {} on a vision-language model: PEFT matches target_modules anywhere in the model, so it "
        "would also put adapters on the vision tower's linears ({:.1f}M adapter parameters), which this plan "
        "leaves out; to train what the plan assumes, target the language tower alone, e.g. target_modules="
        "r\"model\\.language_model\\..*\\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\"",
        planner::to_string(t.method), static_cast<double>(left_out) / 1e6));
  if (t.muon)
    if (const std::string why = planner::muon_refusal(w); !why.empty())
      throw_user_error("--optimizer muon: {}", why);
  // DeepSpeed's batch arithmetic counts data-parallel ranks: GPUs / --sp (planner/parallel.h).
  check_global_batch(w.train, planner::data_parallel_size(w));
  return w;
}

planner::SearchOptions build_search_options(const PlanFlags& f) {
  planner::SearchOptions o;
  if (!f.stage.empty()) {
    if (f.stage.size() != 1 || f.stage[0] < '0' || f.stage[0] > '3')
      throw_user_error("--stage '{}' must be 0, 1, 2 or 3", f.stage);
    o.stage = f.stage[0] - '0';
  }
  if (!f.offload_optimizer.empty())
    o.offload_optimizer = parse_offload(f.offload_optimizer, "--offload-optimizer");
  if (!f.offload_param.empty()) {
    o.offload_param = parse_offload(f.offload_param, "--offload-param");
    if (*o.offload_param != planner::Offload::None && o.stage && *o.stage != 3)
      throw UserError(
          "--offload-param needs ZeRO stage 3 (DeepSpeed ignores it below stage 3); use --stage 3");
  }
  if (!f.ep.empty()) {
    // Checked against the model and GPUs by the search (planner/expert_parallel.h expert_parallel_refusal).
    if (!small_count(f.ep) || std::stoi(f.ep) < 1)
      throw_user_error("--ep '{}' must be a positive integer (1 = no expert parallelism)", f.ep);
    o.ep = std::stoi(f.ep);
  }
  // Muon is modelled at stages 1-2 with the optimizer on the GPU (planner/muon.h): a fixed stage or
  // offload outside that is refused here, in DeepSpeed's terms where it has them.
  if (f.optimizer == "muon") {
    if (o.stage && *o.stage == 3)
      throw UserError(
          "--optimizer muon at ZeRO stage 3 is not modelled (DeepSpeed 0.19.8 runs it only with "
          "zero_optimization.reduce_scatter false: stage3.py 'Muon and reduce scatter cannot be used "
          "together'); "
          "use --stage 1 or 2");
    if (o.stage && *o.stage == 0)
      throw UserError("--optimizer muon at ZeRO stage 0 is not modelled; use --stage 1 or 2");
    if ((o.offload_optimizer && *o.offload_optimizer != planner::Offload::None) ||
        (o.offload_param && *o.offload_param != planner::Offload::None))
      throw UserError(
          "--optimizer muon with offload is not modelled (0.19.8 gathers each offloaded matrix's gradient "
          "and "
          "momentum on the GPU: stage_1_and_2.py _apply_muon_updates_cpu_offload); drop the offload flags");
  }
  if (f.hpz == "auto") {
    o.hpz_auto = true;
  } else if (!f.hpz.empty()) {
    // The layout rules (divides the GPUs; not beside TP, SP or EP) are checked by build_workload.
    if (!small_count(f.hpz) || std::stoi(f.hpz) < 1)
      throw_user_error("--hpz '{}' must be a positive integer or auto (1 = no hierarchical partitioning)",
                       f.hpz);
    o.hpz_choices = {std::stoi(f.hpz)};
    if (o.hpz_choices.front() > 1 && o.stage && *o.stage != 3)
      throw_user_error(
          "--hpz {} needs ZeRO stage 3 (DeepSpeed reads zero_hpz_partition_size at stage 3 only); use "
          "--stage 3",
          f.hpz);
  }
  // --qwz / --qgz (planner/zeropp_quant.h): stage-3 settings, like --hpz.
  for (const auto& [flag, value, out] :
       {std::tuple{"--qwz", &f.qwz, &o.qwz}, std::tuple{"--qgz", &f.qgz, &o.qgz}}) {
    if (*value != "on" && *value != "off") throw_user_error("{} '{}' must be on or off", flag, *value);
    *out = *value == "on";
    if (*out && o.stage && *o.stage != 3)
      throw_user_error("{} on needs ZeRO stage 3 (DeepSpeed reads it at stage 3 only); use --stage 3", flag);
  }
  if (o.qgz && o.ep && *o.ep > 1)
    throw UserError(
        "--qgz on with --ep > 1: DeepSpeed 0.19.8 refuses it (\"AutoEP with ZeRO Stage 3 does not support "
        "zero_quantized_gradients yet.\")");
  char* end = nullptr;
  const double m = std::strtod(f.memory_margin.c_str(), &end);
  if (f.memory_margin.empty() || *end != '\0' || !std::isfinite(m) || m < 0 || m >= 0.9)
    throw_user_error("--memory-margin '{}' must be a fraction in [0, 0.9), e.g. 0.05", f.memory_margin);
  o.memory_margin = m;
  // --allow: comma list of levers (planner::SearchOptions).
  for (size_t a = 0; a <= f.allow.size() && !f.allow.empty();) {
    const size_t b = std::min(f.allow.find(',', a), f.allow.size());
    const std::string lever = f.allow.substr(a, b - a);
    if (lever == "bf16-master") {
      if (f.precision != "bf16")
        throw_user_error(
            "--allow bf16-master needs --precision bf16 (DeepSpeed reads it from the bf16 section)");
      if (f.deepspeed_version == "0.16.9")
        throw_user_error(
            "--allow bf16-master needs DeepSpeed >= 0.18.3 (bf16.bf16_master_weights_and_grads); "
            "--deepspeed-version is 0.16.9");
      o.allow_bf16_master = true;
    } else {
      throw_user_error("--allow '{}': unknown lever (known: bf16-master)", lever);
    }
    a = b + 1;
  }
  return o;
}

}  // namespace zeroplan::cli
