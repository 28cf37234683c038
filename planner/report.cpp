// Terminal report for `zeroplan plan` (issue 4 "Display"). Plain ASCII so it reads in any terminal,
// in logs and without colour.
#include "planner/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "planner/op_model.h"
#include "planner/reasons.h"
#include "planner/torch_version.h"
#include "planner/vision.h"

namespace zeroplan::planner {
namespace {

constexpr std::array<char, kNumCategories> kLetters = {'P', 'G', 'O', 'A', 'B', 'X'};

std::string gb(int64_t bytes) {
  return fmt::format("{:.1f}", static_cast<double>(bytes) / 1e9);
}

std::string ms(double s) {
  if (s >= 10) return fmt::format("{:.1f} s", s);
  if (s < 0.00995) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.0f} ms", s * 1e3);
}

const char* short_ckpt(Checkpointing c) {
  switch (c) {
    case Checkpointing::None:
      return "none";
    case Checkpointing::Selective:
      return "select";
    case Checkpointing::Full:
      return "full";
  }
  return "";
}

std::string short_offload(const ZeroConfig& z) {
  auto one = [](Offload o) -> const char* {
    switch (o) {
      case Offload::None:
        return "-";
      case Offload::CPU:
        return "cpu";
      case Offload::NVMe:
        return "nvme";
    }
    return "";
  };
  if (z.offload_optimizer == Offload::None && z.offload_param == Offload::None) return "none";
  if (z.offload_param == Offload::None) return fmt::format("opt:{}", one(z.offload_optimizer));
  return fmt::format("opt:{} par:{}", one(z.offload_optimizer), one(z.offload_param));
}

}  // namespace

std::string memory_bar(const Plan& p, int width) {
  std::string bar;
  const double cap = static_cast<double>(std::max<int64_t>(1, p.capacity_bytes));
  const double per_char = cap / width;
  // Round cumulative boundaries so the letters add up to the rounded total.
  double cum = 0;
  int drawn = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    cum += static_cast<double>(p.memory.at_peak[c]);
    const int upto = static_cast<int>(std::lround(cum / per_char));
    for (; drawn < upto; ++drawn) bar += drawn < width ? kLetters[c] : '!';
  }
  for (; drawn < width; ++drawn) bar += '.';
  if (static_cast<int>(bar.size()) > width) {
    // Over capacity: mark the capacity edge and cap the overflow display.
    bar = bar.substr(0, width) + "|" + std::string(std::min<size_t>(bar.size() - width, 20), '!');
  } else {
    bar += "|";
  }
  return bar;
}

namespace {

// The stack assumed (issue 24 item 6): attention path and loss kernels, DeepSpeed release; for hybrids the
// Gated DeltaNet kernels.
std::string assumed_stack(const Workload& w) {
  std::string out;
  const auto& c = w.cluster;
  const AttentionBackend backend = attention_backend(c.gpu, w.train);
  out += fmt::format(
      "assumed stack: DeepSpeed {}, PyTorch {}, attention {}, loss {} (--kernels, --torch-version, "
      "--deepspeed-version)\n",
      to_string(w.train.deepspeed_version), torch_version_string(w.train.torch_version),
      w.train.attention == Attention::Eager ? "eager (s^2 scores)"
      : w.train.flash_attention_3           ? "FlashAttention-3 (flash_attention_3)"
      : w.train.flash_attention_2           ? "FlashAttention-2 (flash_attention_2)"
      : backend == AttentionBackend::Cudnn  ? "sdpa -> cuDNN (torch picks it on this GPU)"
                                            : "sdpa -> FlashAttention-2",
      w.train.liger ? "Liger fused linear cross-entropy (no b*s*V logits)"
                    : "transformers cross-entropy (fp32 logits)");
  // Hybrids: which Gated DeltaNet kernels the plan assumes (planner/gated_delta_net.h). Without the two
  // packages transformers runs its fp32 torch loop, which the plan does not price (transformers#48718
  // measured Qwen3.5-9B at 1.22 s per step against 0.70 s with flash-linear-attention, 8x B200).
  if (const int64_t n = w.model.layers_of_kind(models::LayerKind::GatedDeltaNet); n > 0)
    out += fmt::format(
        "assumed Gated DeltaNet kernels: flash-linear-attention + causal-conv1d installed ({} of {} layers; "
        "without them transformers falls back to a much slower torch loop that is not priced)\n",
        n, w.model.num_layers);
  // Mamba-2 (planner/mamba2.h): mamba_ssm's fused mamba_split_conv1d_scan_combined, else the torch scan.
  if (const int64_t n = w.model.layers_of_kind(models::LayerKind::Mamba2); n > 0)
    out += fmt::format(
        "assumed Mamba-2 kernels: mamba-ssm + causal-conv1d installed ({} of {} layers; without them "
        "transformers falls back to a much slower torch scan that is not priced)\n",
        n, w.model.num_layers);
  return out;
}

}  // namespace

namespace {

// A vision-language model's tower as planned (planner/vision.h): its size, trained or frozen, and the images.
std::string vision_line(const Workload& w) {
  const auto& m = w.model;
  if (m.vision_groups.empty()) return "";
  const auto& t = w.train;
  const bool frozen = vision_tower_frozen(w);
  const std::string images =
      t.images_per_sample > 0
          ? fmt::format("{} image{} of {}x{} per sample ({} tokens each) through the frozen tower",
                        t.images_per_sample, t.images_per_sample > 1 ? "s" : "", t.image_h, t.image_w,
                        m.vision_geometry.tokens(t.image_h, t.image_w))
          : std::string("text only (--images-per-sample)");
  return fmt::format("vision: {} + projector, {:.2f}B parameters, {}; {}\n", m.vision_tower,
                     static_cast<double>(m.vision_parameters()) / 1e9,
                     frozen ? "frozen" : "trained (--freeze vision to freeze)", images);
}

}  // namespace

std::string render_report(const Workload& w, const SearchResult& r) {
  std::string out;
  const auto& c = w.cluster;
  out += fmt::format(
      "{} on {} GPU{} ({}x{}, {:.0f} GB each), seq {}, {} {}\n", w.model.name, c.world_size(),
      c.world_size() > 1 ? "s" : "",
      c.nodes > 1 ? fmt::format("{}x{}", c.nodes, c.gpus_per_node) : fmt::format("{}", c.gpus_per_node),
      c.gpu.name, static_cast<double>(c.gpu.memory_bytes) / 1e9, w.train.seq_len,
      to_string(w.train.precision), to_string(w.train.method));
  out += assumed_stack(w);
  // ... the host the Python dispatch and ZeRO-3 hooks are priced on (--host-speed) ...
  out += fmt::format(
      "assumed host: {} (24.5 us per kernel launch, 376 us per ZeRO-3 module pass at speed 1, measured on a "
      "16-vCPU Xeon beside an H100) (--host-speed)\n",
      w.train.host_speed == 1.0 ? std::string("the reference host")
                                : fmt::format("{:g}x the reference host's speed", w.train.host_speed));
  // ... and the links the collectives are priced on (the GPU profile's defaults unless overridden).
  if (c.nodes > 1)
    out += fmt::format(
        "assumed links: {} inside a node, {} x {} between nodes (--intra-link, --nics, --network)\n",
        c.intra_node.name, c.nics_per_node, c.inter_node.name);
  else
    out += fmt::format("assumed links: {} between the GPUs (--intra-link)\n", c.intra_node.name);
  out += vision_line(w);
  out += fmt::format("{} candidate plans evaluated; best plan of each ZeRO stage", r.candidates_evaluated);
  if (w.train.global_batch)
    out += fmt::format(" (global batch {} sequences)", *w.train.global_batch);
  else if (!w.train.grad_accum)
    out += " (no --global-batch: gradient accumulation 1)";
  out += ":\n\n";
  // Step and tokens/s carry the calibration error band (StepTime::error_band); MFU and HFU as in
  // time_model.cpp (PaLM model FLOPs; HFU adds the recomputed forward).
  out += fmt::format("{:<6} {:<4} {:>15} {:>5} {:>5} {:>6} {:<17} {:>14} {:>17} {:>10} {:>5} {:>5}\n",
                     "stage", "fits", "peak/usable GB", "micro", "accum", "ckpt", "offload", "step",
                     "comm (exposed)", "tokens/s", "MFU", "HFU");
  for (const Plan& p : r.best_per_stage) {
    const bool rec = r.recommendation && r.recommendation->zero.stage == p.zero.stage;
    out += fmt::format(
        "{:<6} {:<4} {:>15} {:>5} {:>5} {:>6} {:<17} {:>14} {:>17} {:>10.0f} {:>4.0f}% {:>4.0f}%\n",
        fmt::format("{}ZeRO-{}", rec ? "*" : " ", p.zero.stage), p.fits ? "yes" : "NO",
        fmt::format("{}/{}", gb(p.memory.peak), gb(p.capacity_bytes)), p.zero.micro_batch, p.zero.grad_accum,
        short_ckpt(p.zero.checkpointing), short_offload(p.zero),
        fmt::format("{} +-{:.0f}%", ms(p.time.step_s), p.time.error_band * 100),
        fmt::format("{} ({})", ms(p.time.communication_s), ms(p.time.exposed_communication_s)),
        p.tokens_per_s, p.mfu * 100, p.time.hfu * 100);
  }
  out +=
      "\nGPU memory at peak (P params, G grads, O optimizer, A activations, B buffers, X overhead, . free, "
      "| usable limit, ! over):\n";
  for (const Plan& p : r.best_per_stage)
    out += fmt::format("  ZeRO-{} {}  {} GB\n", p.zero.stage, memory_bar(p, 50), gb(p.memory.peak));
  out += "\n";
  if (r.recommendation) {
    out += fmt::format("Recommended: {}\n", describe_config(r.recommendation->zero));
  } else {
    out += "Recommended: nothing fits.\n";
  }
  for (const auto& reason : r.reasons) out += fmt::format("  - {}\n", reason);
  if (r.recommendation && r.recommendation->time.num_collectives > 0) {
    // The collectives behind the communication column, so each number above can be checked.
    const StepTime& t = r.recommendation->time;
    out +=
        "\nCollectives of the recommended plan per step (bytes/rank: nccl-tests bus bytes each GPU sends):\n";
    out += fmt::format("  {:<52} {:>6} {:>10} {:>13} {:>9} {:>9}\n", "collective", "calls", "max msg",
                       "bytes/rank", "time", "exposed");
    for (int i = 0; i < t.num_collectives; ++i) {
      const CollectiveCost& cc = t.collectives[i];
      out += fmt::format("  {:<52} {:>6} {:>7.1f} MB {:>10.2f} GB {:>9} {:>9}\n", cc.name, cc.count,
                         static_cast<double>(cc.message_bytes) / 1e6,
                         static_cast<double>(cc.bytes_per_rank) / 1e9, ms(cc.time_s), ms(cc.exposed_s));
    }
    // Stage 3's per-module hooks are host time, not a collective, but they sit on the same step:
    // their module passes, host time and the part not hidden behind compute (time_model.cpp).
    if (t.hooked_module_calls > 0)
      out += fmt::format("  {:<52} {:>6} {:>10} {:>13} {:>9} {:>9}\n",
                         "stage-3 module hooks (host, not a collective)", t.hooked_module_calls, "-", "-",
                         ms(t.hook_host_s), ms(t.hook_overhead_s));
  }
  if (r.recommendation && r.recommendation->time.checkpoint_copies > 0) {
    // --checkpoint-offload cpu (planner/checkpoint_offload.h): PCIe copies, not collectives.
    const StepTime& t = r.recommendation->time;
    out += fmt::format(
        "\nCheckpoint offload per step: {} copies of {:.1f} MB between GPU and host memory, {} in all, {} "
        "not hidden behind compute\n",
        t.checkpoint_copies, static_cast<double>(t.checkpoint_copy_bytes) / 1e6, ms(t.checkpoint_copy_s),
        ms(t.checkpoint_offload_s));
  }
  return out;
}

}  // namespace zeroplan::planner
