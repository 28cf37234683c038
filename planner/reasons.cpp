// Reasons behind a recommendation. Every sentence quotes numbers from evaluated plans (the
// recommendation, the best plan of each other stage, and a few what-if plans evaluated here), so a
// user can check each claim against the table.
#include "planner/reasons.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/search.h"

namespace zeroplan::planner {
namespace {

std::string gb(int64_t bytes) {
  return fmt::format("{:.1f} GB", static_cast<double>(bytes) / 1e9);
}
std::string ms(double s) {
  return fmt::format("{:.0f} ms", s * 1e3);
}
std::string ms1(double s) {
  return s < 0.1 ? fmt::format("{:.1f} ms", s * 1e3) : ms(s);
}

std::string link_names(const Workload& w) {
  if (w.cluster.world_size() <= 1) return "no link (one GPU)";
  if (w.cluster.nodes > 1 && w.cluster.gpus_per_node > 1)
    return fmt::format("{} inside nodes and {} between them", w.cluster.intra_node.name,
                       w.cluster.inter_node.name);
  if (w.cluster.nodes > 1) return w.cluster.inter_node.name;
  return w.cluster.intra_node.name;
}

const char* ckpt_name(Checkpointing c) {
  switch (c) {
    case Checkpointing::None:
      return "no activation checkpointing";
    case Checkpointing::Selective:
      return "selective activation checkpointing";
    case Checkpointing::Full:
      return "full activation checkpointing";
  }
  return "";
}

const char* offload_name(Offload o) {
  switch (o) {
    case Offload::None:
      return "none";
    case Offload::CPU:
      return "cpu";
    case Offload::NVMe:
      return "nvme";
  }
  return "";
}

// The category holding the most bytes at the peak.
Category largest_category(const MemoryBreakdown& m) {
  int best = 0;
  for (int c = 1; c < kNumCategories; ++c)
    if (m.at_peak[c] > m.at_peak[best]) best = c;
  return static_cast<Category>(best);
}

double per_token(double seconds, const Plan& p) {
  const double tokens = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len);
  return tokens > 0 ? seconds / tokens : 0;
}

// Why `rec` beats `other` (another stage's best plan), in one sentence.
std::string compare_stage(const Workload& w, const Plan& rec, const Plan& other) {
  const int k = other.zero.stage;
  if (!other.fits) {
    const Category c = largest_category(other.memory);
    return fmt::format(
        "ZeRO-{} does not fit: its best candidate needs {} per GPU of {} usable ({} of it {}).", k,
        gb(other.memory.peak), gb(other.capacity_bytes), gb(other.memory.at_peak[static_cast<int>(c)]),
        category_name(c));
  }
  const double slower = rec.tokens_per_s > 0 ? (1.0 - other.tokens_per_s / rec.tokens_per_s) * 100.0 : 0.0;
  // Attribute the difference per token to compute, exposed communication and offload, and name the
  // largest contributor.
  const double d_comp = per_token(other.time.compute_s, other) - per_token(rec.time.compute_s, rec);
  const double d_comm =
      per_token(other.time.exposed_communication_s, other) - per_token(rec.time.exposed_communication_s, rec);
  const double d_off = per_token(other.time.offload_s, other) - per_token(rec.time.offload_s, rec);
  std::string why;
  if (d_comm >= d_comp && d_comm >= d_off) {
    why = fmt::format("it exposes {}/step of communication over {} ({} of {} total), against {}/step here",
                      ms1(other.time.exposed_communication_s), link_names(w),
                      ms1(other.time.exposed_communication_s), ms1(other.time.communication_s),
                      ms1(rec.time.exposed_communication_s));
  } else if (d_off >= d_comp) {
    why = fmt::format("it needs {} of offload traffic and CPU Adam per step", ms1(other.time.offload_s));
  } else if (other.zero.micro_batch != rec.zero.micro_batch ||
             other.zero.checkpointing != rec.zero.checkpointing) {
    why = fmt::format("it fits micro-batch {} with {} (compute {}/step for {} tokens/GPU, here {} for {})",
                      other.zero.micro_batch, ckpt_name(other.zero.checkpointing), ms(other.time.compute_s),
                      other.global_batch * other.seq_len / std::max(1, w.cluster.world_size()),
                      ms(rec.time.compute_s),
                      rec.global_batch * rec.seq_len / std::max(1, w.cluster.world_size()));
  } else {
    why = fmt::format("its compute takes {}/step against {} here", ms(other.time.compute_s),
                      ms(rec.time.compute_s));
  }
  if (slower <= 0.5)
    return fmt::format("ZeRO-{} is as fast ({:.0f} tokens/s) but needs {} per GPU against {} here.", k,
                       other.tokens_per_s, gb(other.memory.peak), gb(rec.memory.peak));
  return fmt::format("ZeRO-{} is {:.0f}% slower ({:.0f} tokens/s): {}.", k, slower, other.tokens_per_s, why);
}

}  // namespace

std::string describe_config(const ZeroConfig& z) {
  std::string s = fmt::format("ZeRO-{}, micro-batch {} x grad-accum {}, {}", z.stage, z.micro_batch,
                              z.grad_accum, ckpt_name(z.checkpointing));
  if (z.offload_optimizer != Offload::None)
    s += fmt::format(", optimizer offload {}", offload_name(z.offload_optimizer));
  if (z.offload_param != Offload::None)
    s += fmt::format(", parameter offload {}", offload_name(z.offload_param));
  s += fmt::format(", reduce_bucket_size {:.0e}, overlap_comm {}", static_cast<double>(z.reduce_bucket_size),
                   z.overlap_comm ? "on" : "off");
  return s;
}

void explain(const Workload& w, const ModelStats& s, const SearchOptions& opts, SearchResult& r) {
  r.reasons.clear();
  if (!r.recommendation) {
    // Nothing fits: say by how much, then what would fit.
    const Plan* closest = nullptr;
    for (const Plan& p : r.best_per_stage)
      if (closest == nullptr ||
          static_cast<double>(p.memory.peak) / static_cast<double>(p.capacity_bytes) <
              static_cast<double>(closest->memory.peak) / static_cast<double>(closest->capacity_bytes))
        closest = &p;
    std::string msg;
    if (closest != nullptr) {
      const Category c = largest_category(closest->memory);
      msg = fmt::format(
          "Nothing fits on {}x{} ({} usable per GPU after the {:.0f}% margin): the closest plan, {}, needs "
          "{} per GPU "
          "({} of it {}).",
          w.cluster.world_size(), w.cluster.gpu.name, gb(closest->capacity_bytes), opts.memory_margin * 100,
          describe_config(closest->zero), gb(closest->memory.peak),
          gb(closest->memory.at_peak[static_cast<int>(c)]), category_name(c));
      if (closest->memory.host_per_node > w.cluster.host_memory_bytes_per_node &&
          w.cluster.host_memory_bytes_per_node > 0)
        msg += fmt::format(" Host memory is also short: {} per node needed, {} available.",
                           gb(closest->memory.host_per_node), gb(w.cluster.host_memory_bytes_per_node));
      // What would fit: more GPUs of the same kind with the most memory-frugal configuration.
      ZeroConfig z = ZeroConfig::deepspeed_defaults(3);
      z.offload_optimizer = Offload::CPU;
      z.offload_param = Offload::CPU;
      z.checkpointing = w.train.checkpointing.value_or(Checkpointing::Full);
      z.micro_batch = w.train.micro_batch.value_or(1);
      z.grad_accum = w.train.grad_accum.value_or(1);
      z.reduce_bucket_size = 50'000'000;
      if (!w.train.global_batch) {
        const Plan frugal = evaluate_plan(w, s, z, opts.memory_margin);
        if (frugal.fits)
          msg += fmt::format(" It fits with ZeRO-3 and CPU offload of optimizer and parameters ({} per GPU).",
                             gb(frugal.memory.peak));
      }
      for (int factor = 2; factor <= 64; factor *= 2) {
        Workload bigger = w;
        if (bigger.cluster.nodes > 1 ||
            bigger.cluster.gpus_per_node * factor > bigger.cluster.gpu.gpus_per_node)
          bigger.cluster.nodes *= factor;
        else
          bigger.cluster.gpus_per_node *= factor;
        if (bigger.train.global_batch) bigger.train.global_batch = *bigger.train.global_batch * factor;
        z.offload_optimizer = Offload::None;
        z.offload_param = Offload::None;
        const Plan p = evaluate_plan(bigger, s, z, opts.memory_margin);
        if (p.fits) {
          msg += fmt::format(" With {} GPUs ({}x{}) ZeRO-3 without offload fits ({} per GPU).",
                             bigger.cluster.world_size(),
                             bigger.cluster.nodes > 1
                                 ? fmt::format("{}x{}", bigger.cluster.nodes, bigger.cluster.gpus_per_node)
                                 : fmt::format("{}", bigger.cluster.gpus_per_node),
                             bigger.cluster.gpu.name, gb(p.memory.peak));
          break;
        }
      }
      if (w.train.method == Method::Full && !s.compute.params_only)
        msg +=
            " LoRA (--method lora) or QLoRA (--method qlora) train far fewer parameters and need much less "
            "memory.";
      if (closest->memory.category(Category::Activations) > closest->capacity_bytes / 4 &&
          !w.train.checkpointing)
        msg += " A shorter --seq-len shrinks the activations.";
    }
    r.no_fit_reason = msg;
    r.reasons.push_back(msg);
    return;
  }

  const Plan& rec = *r.recommendation;
  r.reasons.push_back(fmt::format(
      "Recommended {}: {:.0f} tokens/s ({:.0f} per GPU), {}/step, MFU {:.0f}%, peak {} of {} usable per GPU.",
      describe_config(rec.zero), rec.tokens_per_s, rec.tokens_per_s_per_gpu, ms(rec.time.step_s),
      rec.mfu * 100, gb(rec.memory.peak), gb(rec.capacity_bytes)));
  for (const Plan& p : r.best_per_stage)
    if (p.zero.stage != rec.zero.stage) r.reasons.push_back(compare_stage(w, rec, p));

  // Offload.
  if (rec.zero.offload_optimizer != Offload::None || rec.zero.offload_param != Offload::None) {
    r.reasons.push_back(fmt::format(
        "Offload is needed: no plan without it fits; it costs {}/step of PCIe transfers and CPU Adam "
        "({:.0f}% of the step).",
        ms(rec.time.offload_s), rec.time.step_s > 0 ? rec.time.offload_s / rec.time.step_s * 100 : 0.0));
  } else {
    r.reasons.push_back(fmt::format("No offload is needed: the plan fits in GPU memory with {} to spare.",
                                    gb(rec.capacity_bytes - rec.memory.peak)));
  }

  // The micro-batch and what limits it.
  if (!w.train.micro_batch && !w.train.global_batch) {
    ZeroConfig z = rec.zero;
    z.micro_batch += 1;
    const Plan next = evaluate_plan(w, s, z, opts.memory_margin);
    if (!next.fits) {
      const int64_t grow =
          next.memory.category(Category::Activations) - rec.memory.category(Category::Activations);
      r.reasons.push_back(fmt::format(
          "Micro-batch {} is the largest that fits with this configuration: {} would need {} of {} usable "
          "(activations grow by {} per sample).",
          rec.zero.micro_batch, z.micro_batch, gb(next.memory.peak), gb(next.capacity_bytes), gb(grow)));
    } else {
      r.reasons.push_back(
          fmt::format("Micro-batch {} is the fastest; larger ones still fit (micro-batch {}: {:.0f} "
                      "tokens/s) but do not go faster.",
                      rec.zero.micro_batch, z.micro_batch, next.tokens_per_s));
    }
  } else if (w.train.global_batch) {
    r.reasons.push_back(fmt::format("Global batch {} = micro-batch {} x grad-accum {} x {} GPUs, as asked.",
                                    rec.global_batch, rec.zero.micro_batch, rec.zero.grad_accum,
                                    w.cluster.world_size()));
  }

  // What to change to go faster.
  const double step = rec.time.step_s;
  if (step > 0 && rec.time.exposed_communication_s > 0.15 * step) {
    std::string tip =
        fmt::format("Communication is {:.0f}% of the step ({} exposed of {} over {}); ",
                    rec.time.exposed_communication_s / step * 100, ms1(rec.time.exposed_communication_s),
                    ms1(rec.time.communication_s), link_names(w));
    if (rec.zero.grad_accum == 1 && !w.train.global_batch && rec.zero.stage <= 1)
      tip += "gradient accumulation (--grad-accum) amortises the reduction over more tokens";
    else if (rec.zero.stage == 3)
      tip +=
          "a faster interconnect or fewer, larger gathers (stage3_param_persistence_threshold, prefetch "
          "bucket) help";
    else
      tip += "a faster interconnect or a larger global batch (--global-batch) amortise it";
    r.reasons.push_back(tip + ".");
  }
  if (rec.zero.checkpointing != Checkpointing::None && rec.time.recompute_s > 0.05 * step)
    r.reasons.push_back(fmt::format(
        "{} costs {}/step of recomputation ({:.0f}% of the step); more GPUs or a higher ZeRO stage free the "
        "memory to drop it.",
        ckpt_name(rec.zero.checkpointing), ms(rec.time.recompute_s), rec.time.recompute_s / step * 100));
}

}  // namespace zeroplan::planner
