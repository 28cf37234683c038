#include "cli/plan_json.h"

#include "configs/emit.h"
#include "planner/checkpoint_offload.h"
#include "planner/ds_runtime.h"
#include "planner/op_model.h"
#include "planner/parallel.h"
#include "planner/tiled_mlp.h"
#include "planner/torch_version.h"
#include "planner/vision.h"

namespace zeroplan::cli {

using nlohmann::json;
using planner::Category;

json model_to_json(const planner::Workload& w) {
  const auto& m = w.full_model();  // as given; under --tp, w.model is one TP rank's shard
  // A vision-language model's count is the whole model's: the language tower and the vision tower and
  // projector (planner/vision.h), each also given on its own.
  const int64_t vision = m.vision_parameters();
  const int64_t total = m.num_parameters() + vision;
  int64_t trainable = total - m.num_frozen_parameters() - (w.train.freeze_vision ? vision : 0);
  if (w.train.method != planner::Method::Full)
    trainable = models::lora_trainable_parameters(m, w.train.lora_rank, w.train.lora_targets);
  json j = {{"name", m.name}, {"parameters", total}, {"trainable_parameters", trainable}};
  if (vision > 0) {
    j["language_parameters"] = m.num_parameters();
    j["vision_parameters"] = vision;
    j["vision_tower"] = m.vision_tower;
    j["vision_frozen"] = planner::vision_tower_frozen(w);
    j["images_per_sample"] = w.train.images_per_sample;
    if (w.train.images_per_sample > 0) {
      j["image_size"] = {w.train.image_h, w.train.image_w};
      j["image_tokens_per_sample"] =
          w.train.images_per_sample * m.vision_geometry.tokens(w.train.image_h, w.train.image_w);
    }
  }
  if (m.params_only) j["architecture_known"] = false;
  if (w.train.tensor_parallel > 1) j["parameters_per_tp_rank"] = w.model.num_parameters();
  return j;
}

json cluster_to_json(const planner::Workload& w) {
  const auto& c = w.cluster;
  json j = {{"nodes", c.nodes},
            {"gpus_per_node", c.gpus_per_node},
            {"gpu", c.gpu.name},
            {"gpu_memory_bytes", c.gpu.memory_bytes},
            {"intra_node_link", c.intra_node.name}};
  if (c.nodes > 1) j["inter_node_link"] = c.inter_node.name;
  return j;
}

namespace {

// --checkpoint-offload cpu (planner/checkpoint_offload.h): where the checkpoints wait and what their
// copies cost; null (the key absent) otherwise.
json checkpoint_offload_json(const planner::Workload& w, const planner::Plan& p) {
  const planner::CheckpointOffloadPlan off =
      planner::checkpoint_offload_plan(w.train, w.model.num_layers, p.zero.checkpointing);
  if (!off.active) return nullptr;
  return {{"path", off.async ? "offload_engine" : "blocking_copies"},
          {"host_pinned", off.pinned},
          {"checkpoints_on_gpu", off.gpu_checkpoints},
          {"checkpoints_on_host", off.host_checkpoints},
          {"copies_per_step", p.time.checkpoint_copies},
          {"bytes_per_copy", p.time.checkpoint_copy_bytes},
          {"copy_s", p.time.checkpoint_copy_s},
          {"exposed_s", p.time.checkpoint_offload_s}};
}

// The plan's collectives per step, as the report's table lists them.
// zero_group: the ZeRO group's size (planner::layout_of(...).zero()), the group of every entry without one.
json collectives_json(const planner::StepTime& t, int zero_group) {
  json collectives = json::array();
  for (int i = 0; i < t.num_collectives; ++i) {
    const auto& c = t.collectives[static_cast<size_t>(i)];
    collectives.push_back({{"name", c.name},
                           {"kind", planner::collective_name(c.kind)},
                           {"group", c.group != nullptr ? c.group : "zero"},
                           {"group_size", c.group != nullptr ? c.group_size : zero_group},
                           {"calls_per_step", c.count},
                           {"message_bytes", c.message_bytes},
                           {"bytes_per_rank", c.bytes_per_rank},
                           {"time_s", c.time_s},
                           {"exposed_s", c.exposed_s}});
  }
  return collectives;
}

// The training script's kernels the plan assumed (--kernels; issue 24 items 3 and 6):
// attn_implementation as transformers names it, and the loss.
json kernels_json(const planner::Workload& w) {
  return {{"attention", w.train.attention == planner::Attention::Eager ? "eager"
                        : w.train.flash_attention_3                    ? "flash_attention_3"
                        : w.train.flash_attention_2                    ? "flash_attention_2"
                                                                       : "sdpa"},
          // The kernel that attention runs on this GPU (SDPA's own pick resolved by --torch-version).
          {"attention_backend", planner::to_string(planner::attention_backend(w.cluster.gpu, w.train))},
          {"loss", w.train.liger ? "liger_fused_linear_cross_entropy" : "transformers_cross_entropy"},
          // --kernels tiled-mlp (planner/tiled_mlp.h): DeepSpeed's TiledMLP and its shard count.
          {"mlp", w.train.tiled_mlp ? "tiled_mlp" : "module"},
          {"tiled_mlp_shards",
           w.train.tiled_mlp ? nlohmann::json(planner::tiled_mlp_shards(w)) : nlohmann::json()}};
}

// Predicted memory: one GPU's categories at its peak against its capacity, and one node's host RAM.
json memory_json(const planner::Workload& w, const planner::Plan& p) {
  const auto& mem = p.memory;
  json gpu = {{"parameters", mem.category(Category::Parameters)},
              {"gradients", mem.category(Category::Gradients)},
              {"optimizer_states", mem.category(Category::OptimizerStates)},
              {"model_states", mem.model_states()},
              {"activations", mem.category(Category::Activations)},
              {"buffers", mem.category(Category::Buffers)},
              {"overhead", mem.category(Category::Overhead)},
              {"peak", mem.peak},
              {"peak_phase", std::string(planner::phase_name(mem.peak_phase))},
              {"capacity", w.cluster.gpu.memory_bytes},
              {"usable", p.capacity_bytes}};
  return {{"gpu", gpu},
          {"cpu",
           {{"per_node", mem.host_per_node},
            {"pinned_per_node", mem.host_pinned_per_node},
            {"load_per_node", mem.host_load_per_node},
            {"capacity_per_node", w.cluster.host_memory_bytes_per_node}}}};
}

// The checkpoint save (planner/save_phase.h): disk bytes of DeepSpeed's checkpoint and of the 16-bit
// model, and the host RAM the save adds on node 0.
json save_json(const planner::SaveEstimate& save) {
  return {{"checkpoint_bytes", save.checkpoint_total_bytes},
          {"checkpoint_optim_file_bytes_per_rank", save.checkpoint_optim_file_bytes},
          {"checkpoint_model_file_bytes", save.checkpoint_model_file_bytes},
          {"model16_file_bytes", save.model16_file_bytes},
          {"host_bytes_node0", save.host_bytes_node0},
          {"host_ok", save.host_ok}};
}

}  // namespace

json plan_to_json(const planner::Workload& w, const planner::Plan& p) {
  const json collectives = collectives_json(p.time, planner::layout_of(w, p.zero).zero());
  const auto& z = p.zero;
  json out =
      json{{"zero_stage", z.stage},
           // DeepSpeed AutoEP autoep_size (planner/expert_parallel.h); 1 = none.
           {"expert_parallel_size", z.ep_size},
           // Ulysses sequence_parallel_size (--sp, planner/sequence_parallel.h); 1 = none.
           {"sequence_parallel_size", p.sequence_parallel},
           // DeepSpeed AutoTP tensor_parallel.autotp_size (--tp, planner/tensor_parallel.h); 1 = none.
           {"tensor_parallel_size", p.tensor_parallel},
           // The ranks DeepSpeed's batch arithmetic counts (planner/parallel.h data_parallel_size):
           // global_batch = micro_batch x grad_accum x this.
           {"data_parallel_size", planner::data_parallel_size(w)},
           // The ranks ZeRO partitions dense parameters over: data-parallel x sequence-parallel (world / tp).
           {"zero_group_size", planner::layout_of(w, z).zero()},
           // ZeRO++ zero_hpz_partition_size (--hpz, planner/hpz.h); 1 = none (always 1 below stage 3).
           {"hpz_partition_size", z.hpz(w.cluster.world_size())},
           // ZeRO++ qwZ / qgZ in force (--qwz, --qgz, planner/zeropp_quant.h): qgZ only on several nodes.
           {"qwz", z.qwz()},
           {"qgz", z.qgz(w.cluster.nodes)},
           {"offload_optimizer", planner::to_string(z.offload_optimizer)},
           {"offload_param", planner::to_string(z.offload_param)},
           {"micro_batch", z.micro_batch},
           {"grad_accum", z.grad_accum},
           {"seq_len", p.seq_len},
           {"global_batch", p.global_batch},
           {"activation_checkpointing", planner::to_string(z.checkpointing)},
           {"precision", planner::to_string(p.precision)},
           {"method", planner::to_string(w.train.method)},
           {"deepspeed_version", planner::to_string(w.train.deepspeed_version)},
           {"host_speed", w.train.host_speed},  // --host-speed (planner/training_spec.h)
           // --cpu-threads (planner/cpu_optimizer.h); null: the per-node assumption.
           {"cpu_threads", w.train.cpu_threads > 0 ? nlohmann::json(w.train.cpu_threads) : nlohmann::json()},
           {"kernels", kernels_json(w)},
           {"torch_version", planner::torch_version_string(w.train.torch_version)},
           {"fits", p.fits},
           {"zero",
            {{"reduce_bucket_size", z.reduce_bucket_size},
             {"allgather_bucket_size", z.allgather_bucket_size},
             {"overlap_comm", z.overlap_comm},
             {"contiguous_gradients", z.contiguous_gradients},
             {"stage3_prefetch_bucket_size", z.prefetch_bucket_size},
             {"stage3_param_persistence_threshold", z.param_persistence_threshold},
             {"stage3_max_live_parameters", z.max_live_parameters},
             {"sub_group_size", z.sub_group_size},
             // bf16.bf16_master_weights_and_grads / bf16_optimizer_states (--allow bf16-master).
             {"bf16_master_weights_and_grads", z.bf16_master_weights},
             {"bf16_optimizer_states", z.bf16_optimizer_states},
             // optimizer.type: "muon" with --optimizer muon (planner/muon.h), else AdamW.
             {"optimizer", z.muon ? "muon" : "adamw"}}},
           {"memory", memory_json(w, p)},
           {"time",
            {{"step_s", p.time.step_s},
             {"compute_s", p.time.compute_s},
             {"communication_s", p.time.communication_s},
             {"exposed_communication_s", p.time.exposed_communication_s},
             {"offload_s", p.time.offload_s},
             {"hook_overhead_s", p.time.hook_overhead_s},
             {"hook_host_s", p.time.hook_host_s},
             {"hooked_module_calls", p.time.hooked_module_calls},
             {"overlap_slowdown_s", p.time.overlap_slowdown_s},
             {"kernels_per_step", p.time.kernels_per_step},
             {"error_band", p.time.error_band}}},
           {"communication",
            {{"bytes_per_rank_per_step", p.time.comm_bytes_per_rank}, {"collectives", collectives}}},
           {"save", save_json(p.save)},
           {"throughput",
            {{"tokens_per_s", p.tokens_per_s},
             {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
             {"mfu", p.mfu},
             {"hfu", p.time.hfu}}},
           {"deepspeed_config", configs::deepspeed_config(w, p, false)}};
  if (json co = checkpoint_offload_json(w, p); !co.is_null()) out["checkpoint_offload"] = std::move(co);
  return out;
}

}  // namespace zeroplan::cli
