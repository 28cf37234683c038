// The ZeRO engine. One readable path through a training step (llm.c's style): setup allocates the
// model states of this rank's ZeRO stage; each micro-step runs forward and backward, handing every
// weight gradient to the stage's reduction as soon as it exists; the boundary reduces what is left,
// steps the optimizer and restores the 16-bit parameters.
//
// DeepSpeed references are to deepspeed/runtime/zero/ at commit edaa7221 (github:deepspeedai/DeepSpeed):
//  S12 = stage_1_and_2.py (DeepSpeedZeroOptimizer), S3 = stage3.py (DeepSpeedZeroOptimizer_Stage3),
//  PPC = partitioned_param_coordinator.py, PP = partition_parameters.py.
#include "executor/engine.h"

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <tuple>

#include "common/errors.h"
#include "executor/dtype_io.h"

namespace zeroplan::exec {

namespace {

// ---------------------------------------------------------------------------------------------
// Parameter layout, from the ModelSpec's fields. Order = HF LlamaForCausalLM.named_parameters()
// (module registration order), which is the order of DeepSpeed's flat buffers: embed_tokens;
// per layer self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj, input_layernorm,
// post_attention_layernorm; norm; lm_head.
// A MoE layer (Mixtral in transformers 5.x, modeling_mixtral.py MixtralSparseMoeBlock) has instead of
// gate/up/down the router mlp.gate.weight [E, C] (MixtralTopKRouter) and the fused experts
// mlp.experts.gate_up_proj [E, 2F, C] and mlp.experts.down_proj [E, C, F] (MixtralExperts), in
// that registration order; F = moe_intermediate_size. Absent weights are -1.
// Qwen3 / Qwen3-MoE add self_attn.q_norm and k_norm (RMSNorm over head_dim, shared by the heads)
// after o_proj, and register the MoE block's experts before its router (Qwen3MoeSparseMoeBlock).
enum LayerParam {
  kQ,
  kK,
  kV,
  kO,
  kGate,
  kUp,
  kDown,
  kLn1,
  kLn2,
  kRouter,
  kExpGateUp,
  kExpDown,
  kQNorm,
  kKNorm,
  kNumLayerParams
};

struct Param {
  std::string name;
  int module = 0;  // stage-3 gather unit: 0 embed, 1..L layers, L+1 final norm, L+2 lm_head
  int64_t numel = 0;
  int64_t flat_offset = 0;  // stages 0-2: offset in the flat 16-bit buffer of its kind (trainable/frozen)
  bool frozen = false;      // LoRA: no gradient, no optimizer state
  int64_t fan_in = 0;       // LoRA A: in_features (its kaiming-uniform bound is 1/sqrt(fan_in))
  bool lora_b = false;      // LoRA B: starts at zero (PEFT reset_lora_parameters)
  int init_id = 0;          // seeds its initial values: a model weight's index in the full model's
                            // layout, so LoRA's frozen weights start equal to full fine-tuning's
  // Tensor parallelism (AutoTP, deepspeed/module_inject/layers.py): what this rank holds of the full
  // weight [out, in]. Whole: replicated (embeddings, norms; always with tp = 1); Rows: rows
  // [t*out/tp, (t+1)*out/tp) (LinearLayer, column-parallel: q/k/v/gate/up_proj, lm_head); Cols:
  // columns [t*in/tp, (t+1)*in/tp) (LinearAllreduce, row-parallel: o_proj, down_proj).
  enum class Shard : uint8_t { Whole, Rows, Cols } shard = Shard::Whole;
  int64_t full_in = 0;      // Cols: the full weight's in_features
  int64_t full_offset = 0;  // offset in the flat layout of the whole (tp = 1) model
};

struct Layout {
  std::vector<Param> params;
  std::vector<std::vector<int>> modules;  // params of each module, in order
  int64_t total = 0;                      // trainable elements
  int64_t frozen_total = 0;               // frozen elements (LoRA)
  int64_t C = 0, L = 0, Hq = 0, Hkv = 0, D = 0, I = 0, V = 0;
  int64_t E = 0, K = 0, F = 0;  // MoE: experts, experts per token (top-k), expert width
  bool renorm = true;           // MoE: top-k weights renormalised to sum 1 (Mixtral; Qwen norm_topk_prob)
  bool qk_norm = false;         // Qwen3: per-head RMSNorm of q and k before rotary
  std::vector<bool> moe;        // per layer: a sparse MoE block instead of the dense MLP
  int embed = 0, final_norm = 0, lm_head = 0;
  // Tensor parallelism: tp ranks, this rank's slot t, and the sizes above are this rank's shard
  // (Hq, Hkv, I: heads and intermediate per rank). V stays the full vocabulary (embeddings are
  // replicated, the loss sees gathered logits); Vl is lm_head's rows on this rank.
  int64_t tp = 1, tp_rank = 0, Vl = 0;
  int64_t full_total = 0;  // elements of the whole (tp = 1) model's trainable layout
  int64_t lora_rank = 0;
  float lora_scale = 0;                                  // alpha / r
  std::vector<std::array<int, kNumLayerParams>> layers;  // param id of each layer's weights
  std::vector<int> lora_a, lora_b;                       // per base param: its adapter ids, or -1
  int layer(int64_t l, LayerParam p) const { return layers[static_cast<size_t>(l)][p]; }
  bool frozen(int pid) const { return params[static_cast<size_t>(pid)].frozen; }
  // Index in the whole (tp = 1) weight of element j of this rank's shard of `p`.
  int64_t global_index(const Param& p, int64_t j) const {
    switch (p.shard) {
      case Param::Shard::Rows:
        return tp_rank * p.numel + j;  // contiguous block of rows
      case Param::Shard::Cols: {
        const int64_t in_l = p.full_in / tp;
        return (j / in_l) * p.full_in + tp_rank * in_l + j % in_l;
      }
      default:
        return j;
    }
  }
};

// True when `module` (q_proj ... down_proj) is a LoRA target of `lora`.
bool lora_targets_module(const LoraSettings& lora, const std::string& module) {
  if (lora.rank <= 0) return false;
  if (lora.targets.empty()) return true;
  for (const auto& t : lora.targets)
    if (t == module || t == "all-linear") return true;
  return false;
}

// `tp` > 1: the shard of TP rank `t` (AutoTP, deepspeed/module_inject/auto_tp.py + layers.py): q/k/v
// split by KV-head groups (kv/tp KV heads and heads/tp query heads per rank, contiguous), gate/up by
// rows, o/down by columns, lm_head by vocabulary rows; embeddings and norms whole. check_run_config
// ensures tp divides what it splits.
Layout make_layout(const models::ModelSpec& m, const LoraSettings& lora, int64_t tp = 1, int64_t t = 0) {
  Layout lo;
  lo.tp = tp;
  lo.tp_rank = t;
  lo.C = m.hidden_size;
  lo.L = m.num_layers;
  lo.Hq = m.num_heads / tp;
  lo.Hkv = m.kv_heads() / tp;
  lo.D = m.head_width();
  lo.I = m.intermediate_size / tp;
  lo.V = m.vocab_size;
  lo.Vl = m.vocab_size / tp;
  lo.E = m.num_experts;
  lo.K = m.experts_per_token;
  lo.F = m.moe_intermediate_size > 0 ? m.moe_intermediate_size : m.intermediate_size;
  lo.renorm = m.model_type == "mixtral" || m.norm_topk_prob;
  lo.qk_norm = m.qk_norm == models::QkNorm::PerHead;
  const bool peft = lora.rank > 0;
  lo.lora_rank = lora.rank;
  lo.lora_scale = peft ? lora.alpha / static_cast<float>(lora.rank) : 0.0f;
  int model_weights = 0, adapters = 0;
  auto add = [&](std::string name, int module, int64_t numel) {
    lo.params.push_back(Param{std::move(name), module, numel, 0, peft, 0, false, model_weights++});
    if (static_cast<int>(lo.modules.size()) <= module) lo.modules.resize(static_cast<size_t>(module) + 1);
    lo.modules[static_cast<size_t>(module)].push_back(static_cast<int>(lo.params.size()) - 1);
    lo.lora_a.push_back(-1);
    lo.lora_b.push_back(-1);
    return static_cast<int>(lo.params.size()) - 1;
  };
  // A targeted Linear becomes PEFT's lora.Linear: base_layer, then the lora_A and lora_B
  // ModuleDicts, registered in that order (named_parameters order).
  auto add_linear = [&](const std::string& prefix, const std::string& module, int mod, int64_t out,
                        int64_t in) {
    if (!lora_targets_module(lora, module)) {
      const int w = add(prefix + module + ".weight", mod, out * in);
      if (tp > 1) {  // q/k/v/gate/up: `out` is already this rank's rows; o/down: `in` its columns
        const bool row_parallel = module == "o_proj" || module == "down_proj";
        lo.params[static_cast<size_t>(w)].shard = row_parallel ? Param::Shard::Cols : Param::Shard::Rows;
        lo.params[static_cast<size_t>(w)].full_in = row_parallel ? in * tp : in;
      }
      return w;
    }
    const int w = add(prefix + module + ".base_layer.weight", mod, out * in);
    const int a = add(prefix + module + ".lora_A.default.weight", mod, lora.rank * in);
    const int b = add(prefix + module + ".lora_B.default.weight", mod, out * lora.rank);
    lo.params[static_cast<size_t>(a)].frozen = lo.params[static_cast<size_t>(b)].frozen = false;
    --model_weights, --model_weights;  // adapters are not model weights: their own seed space
    lo.params[static_cast<size_t>(a)].init_id = 1'000'000 + adapters++;
    lo.params[static_cast<size_t>(b)].init_id = 1'000'000 + adapters++;
    lo.params[static_cast<size_t>(a)].fan_in = in;
    lo.params[static_cast<size_t>(b)].lora_b = true;
    lo.lora_a[static_cast<size_t>(w)] = a;
    lo.lora_b[static_cast<size_t>(w)] = b;
    return w;
  };
  lo.embed = add("model.embed_tokens.weight", 0, lo.V * lo.C);
  for (int64_t l = 0; l < lo.L; ++l) {
    const int mod = 1 + static_cast<int>(l);
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::array<int, kNumLayerParams> ids{};
    ids.fill(-1);
    ids[kQ] = add_linear(p + "self_attn.", "q_proj", mod, lo.Hq * lo.D, lo.C);
    ids[kK] = add_linear(p + "self_attn.", "k_proj", mod, lo.Hkv * lo.D, lo.C);
    ids[kV] = add_linear(p + "self_attn.", "v_proj", mod, lo.Hkv * lo.D, lo.C);
    ids[kO] = add_linear(p + "self_attn.", "o_proj", mod, lo.C, lo.Hq * lo.D);
    if (lo.qk_norm) {
      ids[kQNorm] = add(p + "self_attn.q_norm.weight", mod, lo.D);
      ids[kKNorm] = add(p + "self_attn.k_norm.weight", mod, lo.D);
    }
    lo.moe.push_back(m.is_moe_layer(l));
    if (lo.moe.back()) {
      const bool experts_first = m.model_type == "qwen3_moe";
      if (!experts_first) ids[kRouter] = add(p + "mlp.gate.weight", mod, lo.E * lo.C);
      ids[kExpGateUp] = add(p + "mlp.experts.gate_up_proj", mod, lo.E * 2 * lo.F * lo.C);
      ids[kExpDown] = add(p + "mlp.experts.down_proj", mod, lo.E * lo.C * lo.F);
      if (experts_first) ids[kRouter] = add(p + "mlp.gate.weight", mod, lo.E * lo.C);
    } else {
      ids[kGate] = add_linear(p + "mlp.", "gate_proj", mod, lo.I, lo.C);
      ids[kUp] = add_linear(p + "mlp.", "up_proj", mod, lo.I, lo.C);
      ids[kDown] = add_linear(p + "mlp.", "down_proj", mod, lo.C, lo.I);
    }
    ids[kLn1] = add(p + "input_layernorm.weight", mod, lo.C);
    ids[kLn2] = add(p + "post_attention_layernorm.weight", mod, lo.C);
    lo.layers.push_back(ids);
  }
  lo.final_norm = add("model.norm.weight", static_cast<int>(lo.L) + 1, lo.C);
  lo.lm_head = add("lm_head.weight", static_cast<int>(lo.L) + 2, lo.Vl * lo.C);
  if (tp > 1) {
    lo.params[static_cast<size_t>(lo.lm_head)].shard = Param::Shard::Rows;
    lo.params[static_cast<size_t>(lo.lm_head)].full_in = lo.C;
  }
  for (auto& p : lo.params) {
    int64_t& space = p.frozen ? lo.frozen_total : lo.total;
    p.flat_offset = space;
    space += p.numel;
    // The whole model's layout (trainable parameters; LoRA is refused with tp > 1).
    if (!p.frozen) {
      p.full_offset = lo.full_total;
      lo.full_total += p.shard == Param::Shard::Whole ? p.numel : p.numel * tp;
    }
  }
  return lo;
}

// Deterministic initial values, independent of rank and stage: a hash of (seed, param, element)
// mapped to U(-a, a) with a = 0.02 sqrt(3), i.e. std 0.02 (HF initializer_range); norms start at 1.
uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// LoRA (PEFT reset_lora_parameters): lora_A kaiming_uniform_(a=sqrt(5)), whose bound
// gain * sqrt(3 / fan_in) with gain = sqrt(2 / (1 + 5)) is 1/sqrt(fan_in); lora_B zeros.
// `is_norm`: p.name holds "norm" (RMSNorm weights start at one), decided once per parameter by the
// caller rather than by a string search per element.
float init_value(uint64_t seed, const Param& p, int64_t i, bool is_norm) {
  if (is_norm) return 1.0f;
  if (p.lora_b) return 0.0f;
  const uint64_t h = splitmix64(
      seed ^ splitmix64(static_cast<uint64_t>(p.init_id) * 0x100000001B3ull + static_cast<uint64_t>(i)));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  const double bound = p.fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(p.fan_in)) : 0.02 * std::sqrt(3.0);
  return static_cast<float>((2.0 * u - 1.0) * bound);
}

// Runs fn(pid, i0, i1) over every parameter's elements [0, numel) in chunks, on the host's cores
// when the model is large. Setup's initial values are a pure function of (seed, parameter, index), so
// the chunks are independent and the result does not depend on the split. One thread filled 7B
// values in over a minute on the H200 machine (docs/validation.md, 2026-11-26: the 7B plans timed
// out in setup); small models (every test) stay on the calling thread.
template <class Fn>
void for_each_param_chunk(const std::vector<Param>& P, Fn fn) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<std::tuple<size_t, int64_t, int64_t>> work;
  int64_t total = 0;
  for (size_t pid = 0; pid < P.size(); ++pid) {
    for (int64_t i = 0; i < P[pid].numel; i += kChunk)
      work.emplace_back(pid, i, std::min(P[pid].numel, i + kChunk));
    total += P[pid].numel;
  }
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const int threads = total < (int64_t{1} << 24) ? 1 : static_cast<int>(std::min(32u, hw));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k; (k = next.fetch_add(1)) < work.size();) {
      const auto& [pid, i0, i1] = work[k];
      fn(pid, i0, i1);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

// Training data: sequences of an affine recurrence t_{i+1} = (a t_i + c) mod V from a seeded start,
// so the loss can fall. Global micro-batch index g picks the sequences.
void make_tokens(const RunConfig& cfg, int64_t V, int step, int64_t g, std::vector<int32_t>& inp,
                 std::vector<int32_t>& tgt) {
  const int64_t B = cfg.micro_batch, T = cfg.seq_len;
  inp.resize(static_cast<size_t>(B * T));
  tgt.resize(static_cast<size_t>(B * T));
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t key =
        (cfg.fixed_batch ? 0u : static_cast<uint64_t>(step)) * 1000003ull + static_cast<uint64_t>(g * B + b);
    int64_t t = static_cast<int64_t>(splitmix64(cfg.seed * 31 + key) % static_cast<uint64_t>(V));
    const int64_t a = 5, c = 7;
    for (int64_t i = 0; i <= T; ++i) {
      if (i < T) inp[static_cast<size_t>(b * T + i)] = static_cast<int32_t>(t);
      if (i > 0) tgt[static_cast<size_t>(b * T + i - 1)] = static_cast<int32_t>(t);
      t = (a * t + c) % V;
    }
  }
}

float round_to(DType t, float v) {
  if (t == DType::BF16) return static_cast<float>(Eigen::bfloat16(v));
  if (t == DType::F16) return static_cast<float>(Eigen::half(v));
  return v;
}

// Saved tensors of one decoder layer's forward ([N = B*T] rows). With full checkpointing one set
// is recomputed per layer during backward.
// A MoE layer's gate/up/act hold the routed rows ([N*K, F]) and it adds the routing buffers.
struct LayerActs {
  DeviceBuffer ln1, q, k, v, att, xmid, ln2, gate, up, act;  // act dtype
  DeviceBuffer rstd1, rstd2, lse;                            // F32
  std::array<DeviceBuffer, kNumLayerParams> xa;              // LoRA: x A^T of each adapted linear [N, r]
  DeviceBuffer qraw, kraw, rstdq, rstdk;                     // q/k norm: projections (act), rstd (F32)
  DeviceBuffer probs, topk_w;                                // MoE, F32: softmax [N, E], top-k weights [N, K]
  DeviceBuffer topk_idx, pairs;      // MoE, int32: experts [N, K], rows by expert [N*K]
  DeviceBuffer xg, eo;               // MoE, act: gathered inputs, expert outputs [N*K, C]
  std::vector<int64_t> expert_rows;  // MoE (host): row offset of each expert, E + 1
};

// ---------------------------------------------------------------------------------------------
class RankEngine {
 public:
  // `tp`: the rank's tensor-parallel group (nullptr with tp = 1); `comm` is its data-parallel group.
  RankEngine(const RunConfig& cfg, const Layout& lo, Backend& be, Communicator& comm,
             Communicator* tp = nullptr)
      : cfg_(cfg),
        lo_(lo),
        be_(be),
        comm_(comm),
        tp_comm_(tp),
        N_(comm.world_size()),
        r_(comm.rank()),
        act_(cfg.mixed_precision ? DType::BF16 : DType::F32),
        stage_(cfg.zero.stage),
        pool_(be) {
    partitioned_ = stage_ > 0 || cfg.mixed_precision;
    timer_fwd_ = be_.make_timer();
    timer_bwd_ = be_.make_timer();
    timer_step_ = be_.make_timer();
  }

  // Where the engine was when something failed (for OutOfMemory reports).
  std::string_view current_phase() const { return setup_done_ ? step_phase_name(tracker_.phase()) : "setup"; }
  int64_t device_live_bytes() const { return tracker_.device().live_total(); }
  void run(RankMeasurement& meas, std::vector<double>& micro_losses, std::vector<float>& master_out,
           std::vector<float>& first_grads);

 private:
  // ---- helpers
  DeviceBuffer buf(MemCategory c, int64_t numel, DType t, MemTier tier = MemTier::Device) {
    return DeviceBuffer(pool_, tracker_, tier, c, numel, t);
  }
  int64_t B() const { return cfg_.micro_batch; }
  int64_t T() const { return cfg_.seq_len; }
  int64_t Ntok() const { return cfg_.micro_batch * cfg_.seq_len; }
  bool offload() const { return cfg_.zero.offload_optimizer; }
  MemTier opt_tier() const { return offload() ? MemTier::Host : MemTier::Device; }
  bool has_master() const { return cfg_.mixed_precision || stage_ > 0; }

  void setup();
  // ---- streams (Backend::wait semantics). Collectives that overlap compute are issued on the Comm
  // stream after it waited for the compute issued so far (so a caching-pool block released by
  // compute can be reused by them); compute waits for Comm before it reads their results. Every
  // collective issued on Compute first waits for pending Comm work as well, so the collectives of
  // one communicator run in the order they were issued on every rank, which NCCL requires when one
  // communicator is used from two streams (ncclGroup semantics aside, each rank must launch the
  // same sequence).
  void compute_waits_for_comm() {
    if (!comm_pending_) return;
    be_.wait(Stream::Compute, Stream::Comm);
    comm_pending_ = false;
    std::fill(in_flight_.begin(), in_flight_.end(), false);
    comm_retained_.clear();  // Comm no longer uses them: back to the pool
  }
  void begin_comm_stream() {
    be_.wait(Stream::Comm, Stream::Compute);
    be_.set_stream(Stream::Comm);
  }
  void end_comm_stream() {
    be_.set_stream(Stream::Compute);
    comm_pending_ = true;
  }
  // Switches the memory tracker's phase and attributes the collectives since the last switch to
  // the phase that ends.
  void enter_phase(StepPhase p) {
    const CommCounters& now = comm_.counters();
    CommCounters& acc = comm_by_phase_[static_cast<size_t>(tracker_.phase())];
    for (size_t k = 0; k < now.calls.size(); ++k) {
      acc.calls[k] += now.calls[k] - comm_mark_.calls[k];
      acc.bytes_sent[k] += now.bytes_sent[k] - comm_mark_.bytes_sent[k];
    }
    comm_mark_ = now;
    if (tp_comm_ != nullptr) {
      const CommCounters& tnow = tp_comm_->counters();
      CommCounters& tacc = tp_comm_by_phase_[static_cast<size_t>(tracker_.phase())];
      for (size_t k = 0; k < tnow.calls.size(); ++k) {
        tacc.calls[k] += tnow.calls[k] - tp_mark_.calls[k];
        tacc.bytes_sent[k] += tnow.bytes_sent[k] - tp_mark_.bytes_sent[k];
      }
      tp_mark_ = tnow;
    }
    tracker_.set_phase(p);
  }
  void forward(int micro_index_global, int step, double& loss);
  void backward(bool boundary_step);
  void reduce_at_boundary();
  void boundary(int step);
  const void* W(int pid) const;
  void use(int pid);
  void done(int pid);
  void use_module(std::initializer_list<int> pids);
  void done_module(std::initializer_list<int> pids);
  int module_offset_ = 0;  // stage 3: position of the weight being fetched within its module
  void* grad_slot(int pid);
  void grad_ready(int pid);
  void layer_forward(int64_t l, const void* x_in, void* x_out, LayerActs& a);
  void layer_backward(int64_t l, const void* x_in, LayerActs& a);
  void moe_forward(int64_t l, void* x_out, LayerActs& a);
  DeviceBuffer moe_backward(int64_t l, LayerActs& a);
  // dres_ += RMSNorm backward; the weight gradient goes to its slot, or (frozen) to a scratch.
  void norm_backward(int pid, const void* dy, const void* x, const float* rstd);
  LayerActs alloc_layer_acts(int64_t l);

  // stages 1/2 reduction
  void reduce_ipg_bucket();
  void accumulate_into_partition(int pid, const void* grad_src);
  // stage 3
  void s3_fetch(int pid);
  void s3_gather(int pid, bool on_comm);
  void s3_release(int pid);
  void s3_reduce_bucket();
  void s3_begin_micro_step();

  const RunConfig& cfg_;
  const Layout& lo_;
  Backend& be_;
  Communicator& comm_;
  Communicator* tp_comm_;  // tensor parallelism (AutoTP): the TP group's collectives; nullptr with tp = 1
  const int N_, r_;
  const DType act_;
  const int stage_;
  CachingPool pool_;  // declared before every buffer: destroyed after them
  MemoryTracker tracker_;
  bool setup_done_ = false;
  std::unique_ptr<Timer> timer_fwd_, timer_bwd_, timer_step_;

  // stages 0-2: padded flat buffer and this rank's partition [part_lo_, part_lo_ + part_size_)
  int64_t padded_total_ = 0, part_size_ = 0, part_lo_ = 0;
  DeviceBuffer params16_;     // stages 0-2: full flat; stage 3: this rank's flat partition
  DeviceBuffer frozen16_;     // LoRA's frozen weights: stages 0-2 full flat; stage 3 this rank's partition
  DeviceBuffer grads16_;      // stage 1 (and stage 0 in fp32): full flat param.grad, accumulating
  DeviceBuffer grads32_;      // stage 0 in bf16: BF16_Optimizer's fp32 gradient accumulation buffer
  DeviceBuffer grad_tmp_;     // stage 0 in bf16: one parameter's 16-bit gradient before accumulation
  bool partitioned_ = false;  // optimizer states partitioned over ranks (stages 1-3; stage 0 in bf16)
  DeviceBuffer
      grad_part_;  // stages 1/2/3: the rank's gradient partition (16-bit; fp32 on the host with offload)
  DeviceBuffer master_, exp_avg_, exp_avg_sq_;  // fp32 partition (optimizer states)
  std::array<DeviceBuffer, 2> ipg_;             // gradient buckets
  int ipg_index_ = 0;
  int64_t ipg_elements_ = 0;
  std::vector<std::pair<int, int64_t>> ipg_params_;  // (param, offset in bucket)
  DeviceBuffer extra_large_grad_;                    // a gradient bigger than the bucket, reduced alone

  // stage 3 state
  int64_t s3_part_total_ = 0;
  std::vector<int64_t> part_numels_;   // per param: ceil(numel / N) (PP _partition_param)
  std::vector<int64_t> part_offsets_;  // per param: offset in this rank's flat partition
  std::vector<bool> persistent_;       // numel <= stage3_param_persistence_threshold
  int prefetch_cursor_ = 0;
  std::vector<DeviceBuffer> gathered_;  // per param: full (padded) 16-bit copy when available
  std::vector<int> trace_;              // parameter uses of one micro-step, recorded by the first
  bool trace_complete_ = false;
  int trace_pos_ = 0;
  std::vector<int> most_recent_fetched_for_;  // per param: latest trace position a prefetch covered
  std::vector<bool> in_flight_;               // per param: all-gathered on Comm, not yet waited for
  std::vector<int64_t> gather_event_;         // per param: the event recorded after its prefetch gather
  int64_t n_available_ = 0;
  int64_t gathered_live_bytes_ = 0, gathered_peak_bytes_ = 0;

  // activations of the current micro-step
  DeviceBuffer tok_in_, tok_tgt_;
  std::vector<DeviceBuffer> x_;  // residual stream: x_[l] = input of layer l, x_[L] = final
  std::vector<LayerActs> acts_;  // per layer (no checkpointing)
  DeviceBuffer rstdf_, lnf_, logits_, losses_, dres_;
  int64_t scalar_comm_bytes_ = 0;
  std::array<CommCounters, kNumStepPhases> comm_by_phase_{};
  CommCounters comm_mark_{};
  std::array<CommCounters, kNumStepPhases> tp_comm_by_phase_{};
  CommCounters tp_mark_{};
  bool comm_pending_ = false;  // work issued on Comm that Compute has not waited for
  // Buffers that work on Comm still reads or writes: they go back to the pool only once Compute
  // waited for Comm (what torch's record_stream does for DeepSpeed's side-stream tensors).
  std::vector<DeviceBuffer> comm_retained_;
  bool capture_ = false;
  std::vector<float>* first_grads_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Setup: the model states of this rank.
std::vector<char> to_16bit_layout(const std::vector<float>& v, DType t) {
  std::vector<char> out(v.size() * static_cast<size_t>(dtype_bytes(t)));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F32) {
      std::memcpy(out.data() + i * 4, &v[i], 4);
    } else {
      const Eigen::bfloat16 b(v[i]);
      std::memcpy(out.data() + i * 2, &b, 2);
    }
  }
  return out;
}

void host_add(float* dst, const void* src, DType t, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += load_elem(src, t, i);
}

void RankEngine::setup() {
  tracker_.set_phase(StepPhase::Forward);
  const auto& P = lo_.params;
  std::vector<char> is_norm(P.size());
  for (size_t pid = 0; pid < P.size(); ++pid) is_norm[pid] = P[pid].name.find("norm") != std::string::npos;
  // Element i of this rank's tensor is element global_index(i) of the whole model's (tensor
  // parallelism: a shard starts as the slice of the tp = 1 model's initial weight).
  auto value = [&](size_t pid, int64_t i) {
    const int64_t gi = lo_.global_index(P[pid], i);
    if (cfg_.initial_params != nullptr && !P[pid].frozen)
      return (*cfg_.initial_params)[static_cast<size_t>(P[pid].full_offset + gi)];
    return init_value(cfg_.seed, P[pid], gi, is_norm[pid] != 0);
  };
  std::vector<float> host;  // initial values of what this rank holds (rounded to the 16-bit type)
  // LoRA's frozen weights: replicated module parameters in stages 0-2; in stage 3 zero.Init
  // partitions them too (gathered like the others). Their own flat buffer, no optimizer state.
  std::vector<float> frozen;
  int64_t master_lo = 0;
  if (stage_ <= 2) {
    // S12 __init__: the 16-bit group is flattened and padded to a multiple of
    // nccl_start_alignment_factor (2) x world size, then split into N equal partitions.
    // Stage 0 in bf16 runs DeepSpeed's BF16_Optimizer (engine.py _do_optimizer_sanity_check wraps
    // the optimizer when bf16 is on without ZeRO), which partitions the fp32 master and Adam states
    // the same way (bf16_optimizer.py: flatten_dense_tensors_aligned(..., 2 x dp world size)).
    const int64_t align = 2 * N_;
    padded_total_ = (lo_.total + align - 1) / align * align;
    part_size_ = partitioned_ ? padded_total_ / N_ : padded_total_;
    part_lo_ = partitioned_ ? r_ * part_size_ : 0;
    master_lo = part_lo_;
    params16_ = buf(MemCategory::Parameters, padded_total_, act_);
    host.assign(static_cast<size_t>(padded_total_), 0.0f);
    frozen.assign(static_cast<size_t>(lo_.frozen_total), 0.0f);
    for_each_param_chunk(P, [&](size_t pid, int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        (P[pid].frozen ? frozen : host)[static_cast<size_t>(P[pid].flat_offset + i)] =
            round_to(act_, value(pid, i));
    });
  } else {
    // PP _partition_param: every parameter partitioned on its own, ceil(numel/N) per rank, padded.
    part_numels_.resize(P.size());
    part_offsets_.resize(P.size());
    persistent_.assign(P.size(), false);
    int64_t off = 0, frozen_off = 0;  // trainable and frozen partitions are separate flat buffers
    for (size_t pid = 0; pid < P.size(); ++pid) {
      part_numels_[pid] = (P[pid].numel + N_ - 1) / N_;
      int64_t& o = P[pid].frozen ? frozen_off : off;
      part_offsets_[pid] = o;
      o += part_numels_[pid];
      // PPC/S3 persistent_parameters: ds_numel <= stage3_param_persistence_threshold stays gathered.
      persistent_[pid] = P[pid].numel <= cfg_.zero.param_persistence_threshold;
    }
    s3_part_total_ = part_size_ = off;
    params16_ = buf(MemCategory::Parameters, s3_part_total_, act_);
    host.assign(static_cast<size_t>(s3_part_total_), 0.0f);
    frozen.assign(static_cast<size_t>(frozen_off), 0.0f);
    for_each_param_chunk(P, [&](size_t pid, int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < std::min(j1, part_numels_[pid]); ++j) {
        const int64_t i = r_ * part_numels_[pid] + j;
        if (i < P[pid].numel)
          (P[pid].frozen ? frozen : host)[static_cast<size_t>(part_offsets_[pid] + j)] =
              round_to(act_, value(pid, i));
      }
    });
    gathered_.resize(P.size());
    most_recent_fetched_for_.assign(P.size(), -1);
    in_flight_.assign(P.size(), false);
    gather_event_.assign(P.size(), 0);
    // S3 __init__: one reduce bucket (reduce_bucket_size elements, no double buffer) and the flat
    // gradient-partition buffer (sum of partition numels, gradient_accumulation_dtype; on the host,
    // fp32, with offload_optimizer).
    ipg_[0] = buf(MemCategory::Buffers, cfg_.zero.reduce_bucket_size, act_);
    if (offload())
      grad_part_ = buf(MemCategory::Gradients, s3_part_total_, DType::F32, MemTier::Host);
    else
      grad_part_ = buf(MemCategory::Gradients, s3_part_total_, act_);
    be_.zero(grad_part_.data(), grad_part_.bytes(), grad_part_.tier());
  }
  const auto h16 = to_16bit_layout(host, act_);
  be_.upload(params16_.data(), h16.data(), static_cast<int64_t>(h16.size()));
  if (!frozen.empty()) {
    frozen16_ = buf(MemCategory::Parameters, static_cast<int64_t>(frozen.size()), act_);
    const auto f16 = to_16bit_layout(frozen, act_);
    be_.upload(frozen16_.data(), f16.data(), static_cast<int64_t>(f16.size()));
  }
  if (has_master()) {
    // S12: single_partition_of_fp32_groups = the 16-bit partition .clone().float();
    // S3 _create_fp32_partitions: likewise per sub-group. Host tier with offload_optimizer.
    master_ = buf(MemCategory::OptimizerStates, part_size_, DType::F32, opt_tier());
    if (opt_tier() == MemTier::Host)
      std::memcpy(master_.data(), host.data() + master_lo, static_cast<size_t>(part_size_ * 4));
    else
      be_.upload(master_.data(), host.data() + master_lo, part_size_ * 4);
  }
  // Adam exp_avg and exp_avg_sq, fp32, over the master partition (torch creates them lazily at the
  // first step; same bytes, allocated up front).
  exp_avg_ = buf(MemCategory::OptimizerStates, part_size_, DType::F32, opt_tier());
  exp_avg_sq_ = buf(MemCategory::OptimizerStates, part_size_, DType::F32, opt_tier());
  be_.zero(exp_avg_.data(), exp_avg_.bytes(), opt_tier());
  be_.zero(exp_avg_sq_.data(), exp_avg_sq_.bytes(), opt_tier());
  if (stage_ == 0) {
    if (act_ == DType::F32) {
      // fp32 without ZeRO: torch optimizer on the fp32 params; param.grad for every parameter.
      grads16_ = buf(MemCategory::Gradients, padded_total_, act_);
      be_.zero(grads16_.data(), grads16_.bytes(), MemTier::Device);
    } else {
      // BF16_Optimizer fp32_groups_gradients_flat: every gradient accumulates in fp32.
      grads32_ = buf(MemCategory::Gradients, padded_total_, DType::F32);
      be_.zero(grads32_.data(), grads32_.bytes(), MemTier::Device);
    }
  }
  if (stage_ == 2 && offload()) {
    // S12 with cpu_offload: the fp32 gradient partition lives on the host for the whole run.
    grad_part_ = buf(MemCategory::Gradients, part_size_, DType::F32, MemTier::Host);
    be_.zero(grad_part_.data(), grad_part_.bytes(), MemTier::Host);
  }
}

// ---------------------------------------------------------------------------------------------
// Parameters and gradient slots.
const void* RankEngine::W(int pid) const {
  const Param& p = lo_.params[static_cast<size_t>(pid)];
  if (stage_ <= 2) return (p.frozen ? frozen16_ : params16_).at(p.flat_offset);
  ZP_CHECK(static_cast<bool>(gathered_[static_cast<size_t>(pid)]), "param {} used while not gathered",
           lo_.params[static_cast<size_t>(pid)].name);
  return gathered_[static_cast<size_t>(pid)].data();
}

// Where the backward writes (accumulates, "+=") the gradient of `pid`.
//  stages 0/1: param.grad in the full flat gradient buffer, accumulating across micro-steps;
//  stages 2/3: a zeroed slot of the current reduce bucket (contiguous_gradients), reducing the
//  bucket first when the gradient does not fit (S12 reduce_independent_p_g_buckets_and_remove_grads,
//  S3 __add_grad_to_ipg_bucket); gradients larger than the bucket get their own buffer.
void* RankEngine::grad_slot(int pid) {
  const int64_t n = lo_.params[static_cast<size_t>(pid)].numel;
  if (stage_ == 0 && grads32_) {
    // BF16_Optimizer with immediate_grad_update: the 16-bit param.grad is added to the fp32 buffer
    // as soon as it is produced and dropped.
    grad_tmp_ = buf(MemCategory::Gradients, n, act_);
    be_.zero(grad_tmp_.data(), grad_tmp_.bytes(), MemTier::Device);
    return grad_tmp_.data();
  }
  if (stage_ <= 1) return grads16_.at(lo_.params[static_cast<size_t>(pid)].flat_offset);
  if (n > cfg_.zero.reduce_bucket_size) {
    extra_large_grad_ = buf(MemCategory::Gradients, n, act_);
    be_.zero(extra_large_grad_.data(), extra_large_grad_.bytes(), MemTier::Device);
    return extra_large_grad_.data();
  }
  if (ipg_elements_ + n > cfg_.zero.reduce_bucket_size && ipg_elements_ > 0) {
    if (stage_ == 2) {
      reduce_ipg_bucket();
      if (cfg_.zero.overlap_comm) ipg_index_ = 1 - ipg_index_;  // S12: swap between the two buffers
    } else {
      s3_reduce_bucket();
    }
  }
  void* slot = ipg_[static_cast<size_t>(ipg_index_)].at(ipg_elements_);
  be_.zero(slot, n * dtype_bytes(act_), MemTier::Device);
  ipg_params_.emplace_back(pid, ipg_elements_);
  ipg_elements_ += n;
  return slot;
}

void RankEngine::grad_ready(int pid) {
  const int64_t n = lo_.params[static_cast<size_t>(pid)].numel;
  if (grad_tmp_) {
    be_.add(grads32_.at(lo_.params[static_cast<size_t>(pid)].flat_offset), DType::F32, grad_tmp_.data(), act_,
            n, 1.0f);
    grad_tmp_.reset();
    return;
  }
  if (!extra_large_grad_) return;
  if (stage_ == 2) {
    compute_waits_for_comm();
    if (N_ > 1) be_.scale(extra_large_grad_.data(), act_, n, 1.0f / static_cast<float>(N_));
    comm_.all_reduce(extra_large_grad_.data(), n, act_);
    accumulate_into_partition(pid, extra_large_grad_.data());
    extra_large_grad_.reset();
  } else {
    // Reduce it as a bucket of its own: move it into the bucket bookkeeping temporarily.
    auto saved = std::move(ipg_params_);
    const int64_t saved_elems = ipg_elements_;
    ipg_params_ = {{pid, -1}};
    ipg_elements_ = n;
    s3_reduce_bucket();
    ipg_params_ = std::move(saved);
    ipg_elements_ = saved_elems;
  }
}

// The part of param `pid`'s reduced gradient (full tensor at `src`) inside this rank's partition
// is added to the gradient partition (S12 copy_grads_in_partition / async_accumulate on the host).
void RankEngine::accumulate_into_partition(int pid, const void* src) {
  const Param& p = lo_.params[static_cast<size_t>(pid)];
  const int64_t a = std::max(p.flat_offset, part_lo_);
  const int64_t b = std::min(p.flat_offset + p.numel, part_lo_ + part_size_);
  if (a >= b) return;
  const void* s = static_cast<const char*>(src) + (a - p.flat_offset) * dtype_bytes(act_);
  if (grad_part_.tier() == MemTier::Host) {
    DeviceBuffer staging = buf(MemCategory::Buffers, b - a, act_, MemTier::Host);
    be_.copy(staging.data(), s, (b - a) * dtype_bytes(act_), CopyKind::DeviceToHost);
    be_.synchronize();  // the host reads it next
    host_add(grad_part_.as<float>() + (a - part_lo_), staging.data(), act_, b - a);
  } else {
    be_.add(grad_part_.at(a - part_lo_), act_, s, act_, b - a, 1.0f);
  }
}

// S12 reduce_ipg_grads -> average_tensor -> allreduce_and_scatter (use_multi_rank_bucket_allreduce
// defaults to True): the bucket is pre-divided by N and ALL-REDUCED; each rank keeps its slices.
void RankEngine::reduce_ipg_bucket() {
  if (ipg_elements_ == 0) return;
  // overlap_comm: DeepSpeed reduces on its own stream (S12 reduction_stream) while the backward goes
  // on filling the other of the two buckets. Before this bucket's reduction is issued, compute waits
  // for the previous reduction (whose buffer it refills next, after the swap), and the communication
  // stream waits for this bucket's gradients. cpu backend: no-ops.
  const bool overlap = cfg_.zero.overlap_comm;
  compute_waits_for_comm();
  if (overlap) begin_comm_stream();
  DeviceBuffer& bucket = ipg_[static_cast<size_t>(ipg_index_)];
  if (N_ > 1) be_.scale(bucket.data(), act_, ipg_elements_, 1.0f / static_cast<float>(N_));
  comm_.all_reduce(bucket.data(), ipg_elements_, act_);
  for (const auto& [pid, off] : ipg_params_) accumulate_into_partition(pid, bucket.at(off));
  if (overlap) end_comm_stream();
  ipg_params_.clear();
  ipg_elements_ = 0;
}

// S3 __reduce_and_partition_ipg_grads -> __avg_scatter_grads -> reduce_scatter_coalesced
// (runtime/comm/coalesced_collectives.py): every gradient is padded to N x ceil(n/N), the pieces are
// laid out rank-major in one flat buffer, pre-divided by N and reduce-scattered; each rank adds its
// piece to its gradient partition.
//
// overlap_comm (stage 3's default in DeepSpeed): the reduction runs on the Comm stream (S3
// reduce_and_partition_stream) while the backward goes on. Compute first waits for the previous
// bucket's reduction (so at most one is in flight and collectives stay in issue order), then packs
// this bucket on Compute, so the bucket itself can be refilled at once.
void RankEngine::s3_reduce_bucket() {
  if (ipg_elements_ == 0) return;
  compute_waits_for_comm();
  const bool overlap = cfg_.zero.overlap_comm;
  const int64_t eb = dtype_bytes(act_);
  int64_t S = 0;
  for (const auto& pe : ipg_params_) S += part_numels_[static_cast<size_t>(pe.first)];
  DeviceBuffer flat = buf(MemCategory::Buffers, S * N_, act_);
  be_.zero(flat.data(), flat.bytes(), MemTier::Device);
  for (int q = 0; q < N_; ++q) {
    int64_t run = 0;
    for (const auto& [pid, off] : ipg_params_) {
      const int64_t n = lo_.params[static_cast<size_t>(pid)].numel,
                    pn = part_numels_[static_cast<size_t>(pid)];
      const char* g = off < 0 ? static_cast<const char*>(extra_large_grad_.data())
                              : static_cast<const char*>(ipg_[0].at(off));
      const int64_t lo = q * pn, hi = std::min(n, (q + 1) * pn);
      if (hi > lo) be_.copy(flat.at(q * S + run), g + lo * eb, (hi - lo) * eb, CopyKind::DeviceToDevice);
      run += pn;
    }
  }
  if (overlap) begin_comm_stream();
  if (N_ > 1) be_.scale(flat.data(), act_, S * N_, 1.0f / static_cast<float>(N_));
  DeviceBuffer mine = buf(MemCategory::Buffers, S, act_);
  comm_.reduce_scatter(flat.data(), mine.data(), S, act_);
  if (!overlap) flat.reset();
  int64_t run = 0;
  for (const auto& pe : ipg_params_) {
    const size_t pid = static_cast<size_t>(pe.first);
    const int64_t pn = part_numels_[pid];
    if (grad_part_.tier() == MemTier::Host) {
      DeviceBuffer staging = buf(MemCategory::Buffers, pn, act_, MemTier::Host);
      be_.copy(staging.data(), mine.at(run), pn * eb, CopyKind::DeviceToHost);
      be_.synchronize();  // the host reads it next
      host_add(grad_part_.as<float>() + part_offsets_[pid], staging.data(), act_, pn);
    } else {
      be_.add(grad_part_.at(part_offsets_[pid]), act_, mine.at(run), act_, pn, 1.0f);
    }
    run += pn;
  }
  if (overlap) {
    end_comm_stream();
    comm_retained_.push_back(std::move(flat));
    comm_retained_.push_back(std::move(mine));
  }
  ipg_params_.clear();
  ipg_elements_ = 0;
  extra_large_grad_.reset();
}

// ---------------------------------------------------------------------------------------------
// Stage 3 parameter coordination (PPC fetch_sub_module / release_sub_module). DeepSpeed hooks every
// module but gathers only a module's own parameters (iter_params(recurse=False)), so in a Llama the
// unit is the leaf module, i.e. one weight: the trace is the sequence of weight uses of a micro-step.
// `on_comm`: a prefetch, issued on the Comm stream (the caller brackets it); otherwise a demand
// fetch on Compute.
void RankEngine::s3_gather(int pid, bool on_comm) {
  const size_t p = static_cast<size_t>(pid);
  if (gathered_[p]) return;
  // PP AllGatherHandle: the full parameter lives in a buffer of N x ceil(n/N) elements. Persistent
  // parameters stay gathered for the whole run (parameters); the others are transient (buffers).
  gathered_[p] =
      buf(persistent_[p] ? MemCategory::Parameters : MemCategory::Buffers, part_numels_[p] * N_, act_);
  const DeviceBuffer& partition = lo_.params[p].frozen ? frozen16_ : params16_;
  comm_.all_gather(partition.at(part_offsets_[p]), gathered_[p].data(), part_numels_[p], act_);
  in_flight_[p] = on_comm;
  if (on_comm) gather_event_[p] = be_.record_event(Stream::Comm);
  n_available_ += lo_.params[p].numel;
  if (!persistent_[p]) {
    gathered_live_bytes_ += gathered_[p].bytes();
    gathered_peak_bytes_ = std::max(gathered_peak_bytes_, gathered_live_bytes_);
  }
}

void RankEngine::s3_fetch(int pid) {
  const size_t p = static_cast<size_t>(pid);
  if (!trace_complete_) {
    trace_.push_back(pid);  // PPC record_module: the first micro-step records the trace
  } else {
    const int at = trace_pos_ + module_offset_;
    ZP_CHECK(at < static_cast<int>(trace_.size()) && trace_[static_cast<size_t>(at)] == pid,
             "stage-3 trace diverged at position {}", at);
  }
  if (gathered_[p]) {
    // PPC fetch_sub_module waits on the in-flight all-gather handle of this parameter only (its
    // event), not on the prefetches issued after it, which go on overlapping this module's compute.
    if (in_flight_[p]) {
      be_.wait_event(Stream::Compute, gather_event_[p]);
      in_flight_[p] = false;
    }
  } else {
    compute_waits_for_comm();  // collectives in issue order (see compute_waits_for_comm)
    s3_gather(pid, /*on_comm=*/false);
  }
  // PPC: prefetch only with a complete trace: walk the upcoming uses, gathering parameters not
  // available, until min(max_live - available, prefetch_bucket_size) elements are in flight. The
  // gathers run on the Comm stream (PPC's __allgather_stream) while compute goes on.
  if (!trace_complete_ || cfg_.zero.prefetch_bucket_size <= 0) return;
  prefetch_cursor_ = std::max(prefetch_cursor_, trace_pos_ + module_offset_ + 1);
  const int64_t budget =
      std::min(cfg_.zero.max_live_parameters - n_available_, cfg_.zero.prefetch_bucket_size);
  int64_t prefetching = 0;
  bool opened = false;
  while (prefetch_cursor_ < static_cast<int>(trace_.size()) && prefetching < budget) {
    const int q = trace_[static_cast<size_t>(prefetch_cursor_)];
    most_recent_fetched_for_[static_cast<size_t>(q)] =
        std::max(most_recent_fetched_for_[static_cast<size_t>(q)], prefetch_cursor_);
    if (!gathered_[static_cast<size_t>(q)]) {
      if (!opened) begin_comm_stream();
      opened = true;
      s3_gather(q, /*on_comm=*/true);
      prefetching += lo_.params[static_cast<size_t>(q)].numel;
    }
    ++prefetch_cursor_;
  }
  if (opened) end_comm_stream();
}

void RankEngine::s3_release(int pid) {
  const int pos = trace_pos_++;
  const size_t p = static_cast<size_t>(pid);
  if (persistent_[p] || !gathered_[p]) return;
  if (trace_complete_) {
    // PPC __params_to_release: keep a parameter whose next use a prefetch already covered, or that
    // is used again within max_reuse_distance elements of upcoming uses.
    if (most_recent_fetched_for_[p] > pos) return;
    int64_t traversed = 0;
    for (size_t q = static_cast<size_t>(pos) + 1; q < trace_.size(); ++q) {
      if (traversed >= cfg_.zero.max_reuse_distance) break;
      if (trace_[q] == pid) return;
      traversed += lo_.params[static_cast<size_t>(trace_[q])].numel;
    }
  }
  gathered_live_bytes_ -= gathered_[p].bytes();
  n_available_ -= lo_.params[p].numel;
  gathered_[p].reset();
}

void RankEngine::s3_begin_micro_step() {
  trace_pos_ = 0;
  prefetch_cursor_ = 0;
  std::fill(most_recent_fetched_for_.begin(), most_recent_fetched_for_.end(), -1);
}

// ---------------------------------------------------------------------------------------------
// The model. Shapes: N = B*T rows, C hidden, Hq/Hkv heads, D head dim, I intermediate, V vocab.
LayerActs RankEngine::alloc_layer_acts(int64_t l) {
  const int64_t n = Ntok(), C = lo_.C, I = lo_.I, qd = lo_.Hq * lo_.D, kd = lo_.Hkv * lo_.D;
  const auto A = MemCategory::Activations;
  LayerActs a;
  a.ln1 = buf(A, n * C, act_);             // input_layernorm output            [N, C]
  a.rstd1 = buf(A, n, DType::F32);         //                                   [N]
  a.q = buf(A, n * qd, act_);              // q after rotary                    [B, T, Hq, D]
  a.k = buf(A, n * kd, act_);              // k after rotary                    [B, T, Hkv, D]
  a.v = buf(A, n * kd, act_);              //                                   [B, T, Hkv, D]
  a.att = buf(A, n * qd, act_);            // attention output (o_proj input)   [B, T, Hq, D]
  a.lse = buf(A, lo_.Hq * n, DType::F32);  // softmax log-sum-exp               [B, Hq, T]
  if (lo_.qk_norm) {
    a.qraw = buf(A, n * qd, act_);              // q_proj output (q_norm input)    [N, Hq*D]
    a.kraw = buf(A, n * kd, act_);              // k_proj output (k_norm input)    [N, Hkv*D]
    a.rstdq = buf(A, n * lo_.Hq, DType::F32);   //                                 [N*Hq]
    a.rstdk = buf(A, n * lo_.Hkv, DType::F32);  //                                 [N*Hkv]
  }
  a.xmid = buf(A, n * C, act_);     // residual after attention          [N, C]
  a.ln2 = buf(A, n * C, act_);      // post_attention_layernorm output   [N, C]
  a.rstd2 = buf(A, n, DType::F32);  //                                   [N]
  if (lo_.moe[static_cast<size_t>(l)]) {
    // The sparse MoE block (moe_forward): R = N*K routed rows, grouped by expert.
    const int64_t R = n * lo_.K, F = lo_.F;
    a.probs = buf(A, n * lo_.E, DType::F32);     // router softmax                    [N, E]
    a.topk_idx = buf(A, n * lo_.K, DType::F32);  // int32 selected experts          [N, K]
    a.topk_w = buf(A, n * lo_.K, DType::F32);    // routing weights                 [N, K]
    a.pairs = buf(A, R, DType::F32);             // int32 pair n*K+j of each row    [R]
    a.xg = buf(A, R * C, act_);                  // gathered ln2 rows (experts' in) [R, C]
    a.gate = buf(A, R * F, act_);                // experts' gate outputs           [R, F]
    a.up = buf(A, R * F, act_);                  // experts' up outputs             [R, F]
    a.act = buf(A, R * F, act_);                 // silu(gate) * up (down input)    [R, F]
    a.eo = buf(A, R * C, act_);                  // experts' outputs, unweighted    [R, C]
  } else {
    a.gate = buf(A, n * I, act_);  // gate_proj output                  [N, I]
    a.up = buf(A, n * I, act_);    // up_proj output                    [N, I]
    a.act = buf(A, n * I, act_);   // silu(gate) * up (down_proj input) [N, I]
  }
  // LoRA: lora_B's input x A^T is saved (PEFT: lora_B(lora_A(x)); lora_A saves x, which the
  // buffers above already hold).
  for (int p = kQ; p <= kDown; ++p)
    if (lo_.layer(l, static_cast<LayerParam>(p)) >= 0 &&
        lo_.lora_a[static_cast<size_t>(lo_.layer(l, static_cast<LayerParam>(p)))] >= 0)
      a.xa[static_cast<size_t>(p)] = buf(A, n * lo_.lora_rank, act_);  // [N, r]
  return a;
}

// Every weight use is bracketed by use()/done(): stage 3 gathers before and may release after.
void RankEngine::use(int pid) {
  if (stage_ == 3) s3_fetch(pid);
}
void RankEngine::done(int pid) {
  if (stage_ == 3) s3_release(pid);
}
// A module with several weights (the MoE block, a stage-3 leaf module): PPC fetch_sub_module gathers
// all of its parameters before it runs and release_sub_module releases them after. Its weights keep
// their own positions in the trace (in this order), so reuse distances and prefetch count them.
void RankEngine::use_module(std::initializer_list<int> pids) {
  module_offset_ = 0;
  for (int p : pids) {
    use(p);
    ++module_offset_;
  }
  module_offset_ = 0;
}
void RankEngine::done_module(std::initializer_list<int> pids) {
  for (int p : pids) done(p);
}

void RankEngine::layer_forward(int64_t l, const void* x_in, void* x_out, LayerActs& a) {
  const int64_t n = Ntok(), C = lo_.C, I = lo_.I, qd = lo_.Hq * lo_.D, kd = lo_.Hkv * lo_.D;
  auto id = [&](LayerParam p) { return lo_.layer(l, p); };
  // y[n, out] = x[n, in] W^T with W [out, in] (nn.Linear), bracketed by the weight's use.
  // LoRA (PEFT lora.Linear.forward): y += s * (x A^T) B^T, s = alpha / r.
  auto linear = [&](LayerParam p, const void* x, void* y, int64_t out, int64_t in, float beta) {
    const int w = id(p);
    use(w);
    be_.gemm(n, out, in, x, false, W(w), true, act_, y, act_, 1, beta);
    done(w);
    const int la = lo_.lora_a[static_cast<size_t>(w)], lb = lo_.lora_b[static_cast<size_t>(w)];
    if (la < 0) return;
    void* xa = a.xa[static_cast<size_t>(p)].data();
    const int64_t r = lo_.lora_rank;
    use(la);
    be_.gemm(n, r, in, x, false, W(la), true, act_, xa, act_, 1, 0);  // xa[N, r] = x A^T
    done(la);
    use(lb);
    be_.gemm(n, out, r, xa, false, W(lb), true, act_, y, act_, lo_.lora_scale, 1);  // y += s xa B^T
    done(lb);
  };
  use(id(kLn1));
  be_.rmsnorm_forward(a.ln1.data(), a.rstd1.as<float>(), x_in, W(id(kLn1)), n, C, cfg_.rms_eps, act_);
  done(id(kLn1));
  if (lo_.qk_norm) {
    // Qwen3Attention: q_norm(q_proj(x).view(..., heads, head_dim)), the same for k, then rotary.
    auto head_norm = [&](LayerParam p, void* out, float* rstd, const void* inp, int64_t heads) {
      use(id(p));
      be_.rmsnorm_forward(out, rstd, inp, W(id(p)), n * heads, lo_.D, cfg_.rms_eps, act_);
      done(id(p));
    };
    linear(kQ, a.ln1.data(), a.qraw.data(), qd, C, 0);
    head_norm(kQNorm, a.q.data(), a.rstdq.as<float>(), a.qraw.data(), lo_.Hq);
    linear(kK, a.ln1.data(), a.kraw.data(), kd, C, 0);
    head_norm(kKNorm, a.k.data(), a.rstdk.as<float>(), a.kraw.data(), lo_.Hkv);
  } else {
    linear(kQ, a.ln1.data(), a.q.data(), qd, C, 0);
    linear(kK, a.ln1.data(), a.k.data(), kd, C, 0);
  }
  linear(kV, a.ln1.data(), a.v.data(), kd, C, 0);
  be_.rotary(a.q.data(), B(), T(), lo_.Hq, lo_.D, cfg_.rope_theta, false, act_);
  be_.rotary(a.k.data(), B(), T(), lo_.Hkv, lo_.D, cfg_.rope_theta, false, act_);
  be_.attention_forward(a.att.data(), a.lse.as<float>(), a.q.data(), a.k.data(), a.v.data(), B(), T(), lo_.Hq,
                        lo_.Hkv, lo_.D, act_);
  be_.copy(a.xmid.data(), x_in, n * C * dtype_bytes(act_), CopyKind::DeviceToDevice);
  if (tp_comm_ != nullptr) {
    // Row-parallel o_proj (AutoTP LinearAllreduce.forward, deepspeed/module_inject/layers.py): each
    // rank's partial att_t Wo_t^T is all-reduced in the TP group, then added to the residual.
    DeviceBuffer part = buf(MemCategory::Activations, n * C, act_);
    linear(kO, a.att.data(), part.data(), C, qd, 0);
    tp_comm_->all_reduce(part.data(), n * C, act_);
    be_.add(a.xmid.data(), act_, part.data(), act_, n * C, 1.0f);
  } else {
    linear(kO, a.att.data(), a.xmid.data(), C, qd, 1);  // xmid = x + att Wo^T
  }
  use(id(kLn2));
  be_.rmsnorm_forward(a.ln2.data(), a.rstd2.as<float>(), a.xmid.data(), W(id(kLn2)), n, C, cfg_.rms_eps,
                      act_);
  done(id(kLn2));
  if (lo_.moe[static_cast<size_t>(l)]) {
    be_.copy(x_out, a.xmid.data(), n * C * dtype_bytes(act_), CopyKind::DeviceToDevice);
    moe_forward(l, x_out, a);  // x_out = xmid + sum_j w_j expert_j(ln2)
    return;
  }
  linear(kGate, a.ln2.data(), a.gate.data(), I, C, 0);
  linear(kUp, a.ln2.data(), a.up.data(), I, C, 0);
  be_.swiglu_forward(a.act.data(), a.gate.data(), a.up.data(), n, I, act_);
  be_.copy(x_out, a.xmid.data(), n * C * dtype_bytes(act_), CopyKind::DeviceToDevice);
  if (tp_comm_ != nullptr) {  // row-parallel down_proj, as o_proj above
    DeviceBuffer part = buf(MemCategory::Activations, n * C, act_);
    linear(kDown, a.act.data(), part.data(), C, I, 0);
    tp_comm_->all_reduce(part.data(), n * C, act_);
    be_.add(x_out, act_, part.data(), act_, n * C, 1.0f);
  } else {
    linear(kDown, a.act.data(), x_out, C, I, 1);  // x_out = xmid + act Wd^T
  }
}

// The sparse MoE block, as transformers 5.x MixtralSparseMoeBlock computes it: router logits
// ln2 Wr^T [N, E]; softmax in fp32; top-K; weights renormalised to sum 1; each expert e runs its
// gated SiLU MLP on the rows routed to it (gather), and the outputs, scaled by their weights, are
// added to the tokens' rows (index_add_). Stage 3 with moe_leaf: the block is one module (DeepSpeed
// 0.19.8's default z3 leaf classes name MixtralSparseMoeBlock, runtime/zero/leaf_module_config.py):
// its three weights are fetched together at its start and released together at its end. Without it
// DeepSpeed hooks the block's submodules: the router (`gate`) around the routing, then `experts`
// (MixtralExperts: the gather, both GEMMs, the weighting and index_add_) with its two tensors.
void RankEngine::moe_forward(int64_t l, void* x_out, LayerActs& a) {
  const int64_t n = Ntok(), C = lo_.C, E = lo_.E, K = lo_.K, F = lo_.F, R = n * K;
  const int64_t eb = dtype_bytes(act_);
  const int wr = lo_.layer(l, kRouter), wgu = lo_.layer(l, kExpGateUp), wd = lo_.layer(l, kExpDown);
  const bool leaf = cfg_.zero.moe_leaf;
  if (leaf)
    use_module({wr, wgu, wd});
  else
    use(wr);
  {
    DeviceBuffer logits = buf(MemCategory::Activations, n * E, act_);  // router logits [N, E], transient
    be_.gemm(n, E, C, a.ln2.data(), false, W(wr), true, act_, logits.data(), act_, 1, 0);
    be_.moe_route_forward(a.probs.as<float>(), a.topk_idx.as<int32_t>(), a.topk_w.as<float>(), logits.data(),
                          n, E, K, lo_.renorm, act_);
  }
  // The rows of each expert, in token order (torch.where over the expert's mask): the host needs
  // the counts to size each expert's GEMMs (HF's loop reads them too: nonzero / torch.where sync).
  std::vector<int32_t> idx(static_cast<size_t>(n * K)), pairs(static_cast<size_t>(R));
  be_.download(idx.data(), a.topk_idx.data(), n * K * 4);
  a.expert_rows.assign(static_cast<size_t>(E) + 1, 0);
  for (int32_t e : idx) ++a.expert_rows[static_cast<size_t>(e) + 1];
  for (int64_t e = 0; e < E; ++e)
    a.expert_rows[static_cast<size_t>(e) + 1] += a.expert_rows[static_cast<size_t>(e)];
  {
    std::vector<int64_t> fill(a.expert_rows.begin(), a.expert_rows.end() - 1);
    for (int64_t pr = 0; pr < n * K; ++pr)
      pairs[static_cast<size_t>(fill[static_cast<size_t>(idx[static_cast<size_t>(pr)])]++)] =
          static_cast<int32_t>(pr);
  }
  be_.upload(a.pairs.data(), pairs.data(), R * 4);
  if (!leaf) {
    done(wr);
    use_module({wgu, wd});
  }
  be_.gather_rows(a.xg.data(), a.ln2.data(), a.pairs.as<int32_t>(), R, C, K, act_);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t o = a.expert_rows[static_cast<size_t>(e)],
                  c = a.expert_rows[static_cast<size_t>(e) + 1] - o;
    if (c == 0) continue;
    const char* gu = static_cast<const char*>(W(wgu)) + e * 2 * F * C * eb;  // [2F, C]: gate rows, up rows
    be_.gemm(c, F, C, a.xg.at(o * C), false, gu, true, act_, a.gate.at(o * F), act_, 1, 0);
    be_.gemm(c, F, C, a.xg.at(o * C), false, gu + F * C * eb, true, act_, a.up.at(o * F), act_, 1, 0);
  }
  be_.swiglu_forward(a.act.data(), a.gate.data(), a.up.data(), R, F, act_);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t o = a.expert_rows[static_cast<size_t>(e)],
                  c = a.expert_rows[static_cast<size_t>(e) + 1] - o;
    if (c == 0) continue;
    const char* dw = static_cast<const char*>(W(wd)) + e * C * F * eb;  // [C, F]
    be_.gemm(c, C, F, a.act.at(o * F), false, dw, true, act_, a.eo.at(o * C), act_, 1, 0);
  }
  be_.scatter_add_rows(x_out, a.eo.data(), a.pairs.as<int32_t>(), a.topk_w.as<float>(), R, C, K, act_);
  if (leaf)
    done_module({wr, wgu, wd});
  else
    done_module({wgu, wd});
}

void RankEngine::norm_backward(int pid, const void* dy, const void* x, const float* rstd) {
  const int64_t n = Ntok(), C = lo_.C;
  if (lo_.frozen(pid)) {
    // The kernel always produces dweight; a frozen norm's goes to a scratch that is dropped.
    DeviceBuffer scratch = buf(MemCategory::Buffers, C, act_);
    be_.zero(scratch.data(), scratch.bytes(), MemTier::Device);
    be_.rmsnorm_backward(dres_.data(), scratch.data(), dy, x, W(pid), rstd, n, C, act_);
    return;
  }
  void* g = grad_slot(pid);
  be_.rmsnorm_backward(dres_.data(), g, dy, x, W(pid), rstd, n, C, act_);
  grad_ready(pid);
}

// On entry dres_ = dL/dx_out; on exit dL/dx_in. Weight gradients go to grad_slot (accumulating).
void RankEngine::layer_backward(int64_t l, const void* x_in, LayerActs& a) {
  const int64_t n = Ntok(), C = lo_.C, I = lo_.I, qd = lo_.Hq * lo_.D, kd = lo_.Hkv * lo_.D;
  const auto A = MemCategory::Activations;
  auto id = [&](LayerParam p) { return lo_.layer(l, p); };
  // Backward of y = x W^T for weight p: dW += dy^T x, then dx (+)= dy W.
  // A frozen weight (LoRA) gets no dW; its adapter's gradients come first, as autograd reaches
  // lora_B, then lora_A, then the base layer of y = base(x) + s * lora_B(lora_A(x)).
  auto linear_bwd = [&](LayerParam p, const void* dy, const void* x, void* dx, int64_t out, int64_t in,
                        float beta) {
    const int w = id(p);
    const int la = lo_.lora_a[static_cast<size_t>(w)], lb = lo_.lora_b[static_cast<size_t>(w)];
    if (la >= 0) {
      const int64_t r = lo_.lora_rank;
      const float s = lo_.lora_scale;
      DeviceBuffer dxa = buf(A, n * r, act_);  // d(x A^T) [N, r]
      use(lb);
      void* gb = grad_slot(lb);
      be_.gemm(out, r, n, dy, true, a.xa[static_cast<size_t>(p)].data(), false, act_, gb, act_, s,
               1);  // dB += s dy^T xa
      grad_ready(lb);
      be_.gemm(n, r, out, dy, false, W(lb), false, act_, dxa.data(), act_, s, 0);  // dxa = s dy B
      done(lb);
      use(la);
      void* ga = grad_slot(la);
      be_.gemm(r, in, n, dxa.data(), true, x, false, act_, ga, act_, 1, 1);  // dA += dxa^T x
      grad_ready(la);
      be_.gemm(n, in, r, dxa.data(), false, W(la), false, act_, dx, act_, 1, beta);  // dx (+)= dxa A
      done(la);
      beta = 1;
    }
    use(w);
    if (!lo_.frozen(w)) {
      void* g = grad_slot(w);
      be_.gemm(out, in, n, dy, true, x, false, act_, g, act_, 1, 1);
      grad_ready(w);
    }
    if (tp_comm_ != nullptr && (p == kQ || p == kK || p == kV || p == kGate || p == kUp)) {
      // Column-parallel (AutoTP LinearLayer, deepspeed/module_inject/layers.py ColumnParallel.backward):
      // this layer's input gradient dy_t W_t is all-reduced in the TP group, one call per layer.
      DeviceBuffer part = buf(A, n * in, act_);
      be_.gemm(n, in, out, dy, false, W(w), false, act_, part.data(), act_, 1, 0);
      tp_comm_->all_reduce(part.data(), n * in, act_);
      if (beta == 0)
        be_.copy(dx, part.data(), n * in * dtype_bytes(act_), CopyKind::DeviceToDevice);
      else
        be_.add(dx, act_, part.data(), act_, n * in, 1.0f);
    } else {
      be_.gemm(n, in, out, dy, false, W(w), false, act_, dx, act_, 1, beta);
    }
    done(w);
  };
  auto norm_bwd = [&](LayerParam p, const void* dy, const void* x, const float* rstd) {
    use(id(p));
    norm_backward(id(p), dy, x, rstd);
    done(id(p));
  };
  // MLP
  DeviceBuffer dln;
  if (lo_.moe[static_cast<size_t>(l)]) {
    dln = moe_backward(l, a);
  } else {
    DeviceBuffer dact = buf(A, n * I, act_);
    linear_bwd(kDown, dres_.data(), a.act.data(), dact.data(), C, I, 0);
    DeviceBuffer dgate = buf(A, n * I, act_), dup = buf(A, n * I, act_);
    be_.swiglu_backward(dgate.data(), dup.data(), dact.data(), a.gate.data(), a.up.data(), n, I, act_);
    dact.reset();
    dln = buf(A, n * C, act_);
    linear_bwd(kGate, dgate.data(), a.ln2.data(), dln.data(), I, C, 0);
    linear_bwd(kUp, dup.data(), a.ln2.data(), dln.data(), I, C, 1);
    dgate.reset();
    dup.reset();
  }
  norm_bwd(kLn2, dln.data(), a.xmid.data(), a.rstd2.as<float>());  // dres += d(post_attention_layernorm)
  // attention
  DeviceBuffer datt = buf(A, n * qd, act_);
  linear_bwd(kO, dres_.data(), a.att.data(), datt.data(), C, qd, 0);
  DeviceBuffer dq = buf(A, n * qd, act_), dk = buf(A, n * kd, act_), dv = buf(A, n * kd, act_);
  be_.attention_backward(dq.data(), dk.data(), dv.data(), datt.data(), a.q.data(), a.k.data(), a.v.data(),
                         a.att.data(), a.lse.as<float>(), B(), T(), lo_.Hq, lo_.Hkv, lo_.D, act_);
  datt.reset();
  be_.rotary(dq.data(), B(), T(), lo_.Hq, lo_.D, cfg_.rope_theta, true, act_);
  be_.rotary(dk.data(), B(), T(), lo_.Hkv, lo_.D, cfg_.rope_theta, true, act_);
  if (lo_.qk_norm) {
    // Through k_norm and q_norm (autograd: v_proj, k_norm, k_proj, q_norm, q_proj): the projections'
    // output gradients [N, Hkv*D], [N, Hq*D] (zeroed: the kernel adds).
    DeviceBuffer dqr = buf(A, n * qd, act_), dkr = buf(A, n * kd, act_);
    be_.zero(dqr.data(), dqr.bytes(), MemTier::Device);
    be_.zero(dkr.data(), dkr.bytes(), MemTier::Device);
    auto head_norm_bwd = [&](LayerParam p, void* dinp, const void* dy, const void* inp, const float* rstd,
                             int64_t heads) {
      const int w = id(p);
      use(w);
      if (lo_.frozen(w)) {
        DeviceBuffer scratch = buf(MemCategory::Buffers, lo_.D, act_);
        be_.zero(scratch.data(), scratch.bytes(), MemTier::Device);
        be_.rmsnorm_backward(dinp, scratch.data(), dy, inp, W(w), rstd, n * heads, lo_.D, act_);
      } else {
        void* g = grad_slot(w);
        be_.rmsnorm_backward(dinp, g, dy, inp, W(w), rstd, n * heads, lo_.D, act_);
        grad_ready(w);
      }
      done(w);
    };
    linear_bwd(kV, dv.data(), a.ln1.data(), dln.data(), kd, C, 0);
    head_norm_bwd(kKNorm, dkr.data(), dk.data(), a.kraw.data(), a.rstdk.as<float>(), lo_.Hkv);
    linear_bwd(kK, dkr.data(), a.ln1.data(), dln.data(), kd, C, 1);
    head_norm_bwd(kQNorm, dqr.data(), dq.data(), a.qraw.data(), a.rstdq.as<float>(), lo_.Hq);
    linear_bwd(kQ, dqr.data(), a.ln1.data(), dln.data(), qd, C, 1);
  } else {
    linear_bwd(kV, dv.data(), a.ln1.data(), dln.data(), kd, C, 0);
    linear_bwd(kK, dk.data(), a.ln1.data(), dln.data(), kd, C, 1);
    linear_bwd(kQ, dq.data(), a.ln1.data(), dln.data(), qd, C, 1);
  }
  norm_bwd(kLn1, dln.data(), x_in, a.rstd1.as<float>());  // dres += d(input_layernorm)
}

// Backward of moe_forward, from dres_ = dL/dx_out; returns dL/d(ln2) [N, C]. Autograd's order:
// the weighted scatter, the experts' down projections, SwiGLU, gate/up (the rows' input gradients
// index_add_'ed back to their tokens), then the router (softmax, top-k weights). The experts' fused
// weights get their gradients from their own rows only (a zeroed slot, one GEMM per expert with
// rows); each tensor's hook fires once it is complete: down_proj, gate_up_proj, then the router.
DeviceBuffer RankEngine::moe_backward(int64_t l, LayerActs& a) {
  const int64_t n = Ntok(), C = lo_.C, E = lo_.E, K = lo_.K, F = lo_.F, R = n * K;
  const int64_t eb = dtype_bytes(act_);
  const auto A = MemCategory::Activations;
  const int wr = lo_.layer(l, kRouter), wgu = lo_.layer(l, kExpGateUp), wd = lo_.layer(l, kExpDown);
  auto rows = [&](int64_t e) {
    const int64_t o = a.expert_rows[static_cast<size_t>(e)];
    return std::pair<int64_t, int64_t>(o, a.expert_rows[static_cast<size_t>(e) + 1] - o);
  };
  // Autograd runs the experts module's backward first, then the router's.
  const bool leaf = cfg_.zero.moe_leaf;
  if (leaf)
    use_module({wr, wgu, wd});
  else
    use_module({wgu, wd});
  DeviceBuffer dw = buf(A, n * K, DType::F32);  // dL/d(routing weights) [N, K]
  DeviceBuffer deo = buf(A, R * C, act_);       // dL/d(expert outputs)  [R, C]
  be_.scatter_add_rows_backward(deo.data(), dw.as<float>(), dres_.data(), a.eo.data(), a.pairs.as<int32_t>(),
                                a.topk_w.as<float>(), R, C, K, act_);
  DeviceBuffer dact = buf(A, R * F, act_);
  {
    void* g = grad_slot(wd);  // [E, C, F]
    for (int64_t e = 0; e < E; ++e) {
      const auto [o, c] = rows(e);
      if (c == 0) continue;
      be_.gemm(C, F, c, deo.at(o * C), true, a.act.at(o * F), false, act_,
               static_cast<char*>(g) + e * C * F * eb, act_, 1, 1);  // dWd_e += deo_e^T act_e
    }
    grad_ready(wd);
  }
  for (int64_t e = 0; e < E; ++e) {
    const auto [o, c] = rows(e);
    if (c == 0) continue;
    const char* w = static_cast<const char*>(W(wd)) + e * C * F * eb;
    be_.gemm(c, F, C, deo.at(o * C), false, w, false, act_, dact.at(o * F), act_, 1,
             0);  // dact_e = deo_e Wd_e
  }
  deo.reset();
  DeviceBuffer dgate = buf(A, R * F, act_), dup = buf(A, R * F, act_);
  be_.swiglu_backward(dgate.data(), dup.data(), dact.data(), a.gate.data(), a.up.data(), R, F, act_);
  dact.reset();
  DeviceBuffer dxg = buf(A, R * C, act_);  // dL/d(gathered rows) [R, C]
  {
    void* g = grad_slot(wgu);  // [E, 2F, C]
    for (int64_t e = 0; e < E; ++e) {
      const auto [o, c] = rows(e);
      if (c == 0) continue;
      char* ge = static_cast<char*>(g) + e * 2 * F * C * eb;
      be_.gemm(F, C, c, dgate.at(o * F), true, a.xg.at(o * C), false, act_, ge, act_, 1, 1);
      be_.gemm(F, C, c, dup.at(o * F), true, a.xg.at(o * C), false, act_, ge + F * C * eb, act_, 1, 1);
    }
    grad_ready(wgu);
  }
  for (int64_t e = 0; e < E; ++e) {
    const auto [o, c] = rows(e);
    if (c == 0) continue;
    const char* gu = static_cast<const char*>(W(wgu)) + e * 2 * F * C * eb;
    be_.gemm(c, C, F, dgate.at(o * F), false, gu, false, act_, dxg.at(o * C), act_, 1, 0);
    be_.gemm(c, C, F, dup.at(o * F), false, gu + F * C * eb, false, act_, dxg.at(o * C), act_, 1, 1);
  }
  dgate.reset();
  dup.reset();
  DeviceBuffer dln = buf(A, n * C, act_);
  be_.zero(dln.data(), dln.bytes(), MemTier::Device);
  be_.scatter_add_rows(dln.data(), dxg.data(), a.pairs.as<int32_t>(), nullptr, R, C, K, act_);
  dxg.reset();
  if (!leaf) {
    done_module({wgu, wd});
    use(wr);
  }
  DeviceBuffer dlogits = buf(A, n * E, act_);
  be_.moe_route_backward(dlogits.data(), dw.as<float>(), a.probs.as<float>(), a.topk_idx.as<int32_t>(), n, E,
                         K, lo_.renorm, act_);
  dw.reset();
  {
    void* g = grad_slot(wr);
    be_.gemm(E, C, n, dlogits.data(), true, a.ln2.data(), false, act_, g, act_, 1,
             1);  // dWr += dlogits^T ln2
    grad_ready(wr);
  }
  be_.gemm(n, C, E, dlogits.data(), false, W(wr), false, act_, dln.data(), act_, 1, 1);  // dln += dlogits Wr
  dlogits.reset();
  if (leaf)
    done_module({wr, wgu, wd});
  else
    done(wr);
  return dln;
}

// ---------------------------------------------------------------------------------------------
// One micro-step.
void RankEngine::forward(int g, int step, double& loss) {
  enter_phase(StepPhase::Forward);
  timer_fwd_->begin();
  const int64_t n = Ntok(), C = lo_.C, V = lo_.V, L = lo_.L;
  const auto A = MemCategory::Activations;
  if (stage_ == 3) s3_begin_micro_step();
  std::vector<int32_t> in, tgt;
  make_tokens(cfg_, V, step, g, in, tgt);
  tok_in_ = buf(A, n, DType::F32);  // int32 token ids (4 bytes each)
  tok_tgt_ = buf(A, n, DType::F32);
  be_.upload(tok_in_.data(), in.data(), n * 4);
  be_.upload(tok_tgt_.data(), tgt.data(), n * 4);
  x_.clear();
  x_.resize(static_cast<size_t>(L) + 1);
  acts_.clear();
  acts_.resize(cfg_.checkpointing ? 0 : static_cast<size_t>(L));
  x_[0] = buf(A, n * C, act_);  // embedding output = layer 0 input [N, C]
  use(lo_.embed);
  be_.embedding_forward(x_[0].data(), W(lo_.embed), tok_in_.as<int32_t>(), n, C, act_);
  done(lo_.embed);
  for (int64_t l = 0; l < L; ++l) {
    const size_t li = static_cast<size_t>(l);
    x_[li + 1] = buf(A, n * C, act_);  // layer output = next layer's input [N, C]
    if (cfg_.checkpointing) {
      LayerActs tmp = alloc_layer_acts(l);  // discarded: only the layer input is kept
      layer_forward(l, x_[li].data(), x_[li + 1].data(), tmp);
    } else {
      acts_[li] = alloc_layer_acts(l);
      layer_forward(l, x_[li].data(), x_[li + 1].data(), acts_[li]);
    }
  }
  rstdf_ = buf(A, n, DType::F32);
  lnf_ = buf(A, n * C, act_);  // final norm output = lm_head input [N, C]
  use(lo_.final_norm);
  be_.rmsnorm_forward(lnf_.data(), rstdf_.as<float>(), x_[static_cast<size_t>(L)].data(), W(lo_.final_norm),
                      n, C, cfg_.rms_eps, act_);
  done(lo_.final_norm);
  logits_ = buf(A, n * V, act_);  // [N, V]; the loss gradient overwrites it in place
  use(lo_.lm_head);
  if (tp_comm_ != nullptr) {
    // lm_head column-parallel over the vocabulary (AutoTP LmHeadLinearAllreduce's sibling for an
    // untied head, deepspeed/module_inject/layers.py LinearLayer + gather_output): each rank's logits
    // [N, V/tp] are all-gathered in the TP group (rank-major) and laid out as [N, V] for the loss.
    const int64_t Vl = lo_.Vl, tp = lo_.tp, eb = dtype_bytes(act_);
    DeviceBuffer part = buf(A, n * Vl, act_);
    be_.gemm(n, Vl, C, lnf_.data(), false, W(lo_.lm_head), true, act_, part.data(), act_, 1, 0);
    DeviceBuffer all = buf(A, tp * n * Vl, act_);
    tp_comm_->all_gather(part.data(), all.data(), n * Vl, act_);
    part.reset();
    for (int64_t s = 0; s < tp; ++s)
      for (int64_t row = 0; row < n; ++row)
        be_.copy(logits_.at(row * V + s * Vl), all.at((s * n + row) * Vl), Vl * eb, CopyKind::DeviceToDevice);
  } else {
    be_.gemm(n, V, C, lnf_.data(), false, W(lo_.lm_head), true, act_, logits_.data(), act_, 1, 0);
  }
  done(lo_.lm_head);
  losses_ = buf(A, n, DType::F32);
  be_.cross_entropy_forward(losses_.as<float>(), logits_.data(), tok_tgt_.as<int32_t>(), n, V, act_);
  std::vector<float> lh(static_cast<size_t>(n));
  be_.download(lh.data(), losses_.data(), n * 4);
  double s = 0;
  for (float v : lh) s += v;
  loss = s / static_cast<double>(n);
  losses_.reset();
  be_.synchronize();
  timer_fwd_->end();
}

void RankEngine::backward(bool boundary_step) {
  enter_phase(StepPhase::Backward);
  timer_bwd_->begin();
  const int64_t n = Ntok(), C = lo_.C, V = lo_.V, L = lo_.L;
  const auto A = MemCategory::Activations;
  if (stage_ == 1 || stage_ == 2) {
    // S12 setup_buckets (backward prologue): one bucket, a second with overlap_comm.
    const int nb = cfg_.zero.overlap_comm ? 2 : 1;
    for (int i = 0; i < nb; ++i)
      ipg_[static_cast<size_t>(i)] = buf(MemCategory::Buffers, cfg_.zero.reduce_bucket_size, act_);
    ipg_index_ = 0;
  }
  if (stage_ == 1 && !grads16_) {
    // Stage 1: param.grad for every parameter, accumulating until the boundary reduction.
    grads16_ = buf(MemCategory::Gradients, padded_total_, act_);
    be_.zero(grads16_.data(), grads16_.bytes(), MemTier::Device);
  }
  if (stage_ == 2 && !grad_part_) {
    // S12 copy_grads_in_partition: grads_in_partition, 16-bit, the rank's partition.
    grad_part_ = buf(MemCategory::Gradients, part_size_, act_);
    be_.zero(grad_part_.data(), grad_part_.bytes(), MemTier::Device);
  }
  // loss = token mean / grad_accum (the DeepSpeed engine scales the loss by 1/gradient_accumulation_steps)
  const float dloss = 1.0f / static_cast<float>(n * cfg_.grad_accum);
  be_.cross_entropy_backward(logits_.data(), logits_.data(), tok_tgt_.as<int32_t>(), dloss, n, V, act_);
  DeviceBuffer dln = buf(A, n * C, act_);
  use(lo_.lm_head);
  if (tp_comm_ != nullptr) {
    // Column-parallel lm_head: this rank's vocabulary columns of dlogits, dW and dx from them, and
    // the input gradient all-reduced in the TP group (ColumnParallel.backward).
    const int64_t Vl = lo_.Vl, eb = dtype_bytes(act_);
    DeviceBuffer dl = buf(A, n * Vl, act_);
    for (int64_t row = 0; row < n; ++row)
      be_.copy(dl.at(row * Vl), logits_.at(row * V + lo_.tp_rank * Vl), Vl * eb, CopyKind::DeviceToDevice);
    void* g = grad_slot(lo_.lm_head);
    be_.gemm(Vl, C, n, dl.data(), true, lnf_.data(), false, act_, g, act_, 1, 1);
    grad_ready(lo_.lm_head);
    be_.gemm(n, C, Vl, dl.data(), false, W(lo_.lm_head), false, act_, dln.data(), act_, 1, 0);
    tp_comm_->all_reduce(dln.data(), n * C, act_);
  } else {
    if (!lo_.frozen(lo_.lm_head)) {
      void* g = grad_slot(lo_.lm_head);
      be_.gemm(V, C, n, logits_.data(), true, lnf_.data(), false, act_, g, act_, 1,
               1);  // dWlm += dlogits^T lnf
      grad_ready(lo_.lm_head);
    }
    be_.gemm(n, C, V, logits_.data(), false, W(lo_.lm_head), false, act_, dln.data(), act_, 1, 0);
  }
  done(lo_.lm_head);
  logits_.reset();
  dres_ = buf(A, n * C, act_);  // dL/d(residual stream) [N, C]
  be_.zero(dres_.data(), dres_.bytes(), MemTier::Device);
  use(lo_.final_norm);
  norm_backward(lo_.final_norm, dln.data(), x_[static_cast<size_t>(L)].data(), rstdf_.as<float>());
  done(lo_.final_norm);
  dln.reset();
  lnf_.reset();
  rstdf_.reset();
  x_[static_cast<size_t>(L)].reset();
  for (int64_t l = L - 1; l >= 0; --l) {
    const size_t li = static_cast<size_t>(l);
    if (cfg_.checkpointing) {
      // Full recomputation: rerun this layer's forward from its saved input, then its backward.
      LayerActs a = alloc_layer_acts(l);
      DeviceBuffer x_out = buf(A, n * C, act_);
      layer_forward(l, x_[li].data(), x_out.data(), a);
      x_out.reset();
      layer_backward(l, x_[li].data(), a);
    } else {
      layer_backward(l, x_[li].data(), acts_[li]);
      acts_[li] = LayerActs{};
    }
    if (l > 0) x_[li].reset();
  }
  if (!lo_.frozen(lo_.embed)) {  // a frozen embedding's output needs no gradient: no hook fires
    use(lo_.embed);
    void* g = grad_slot(lo_.embed);
    be_.embedding_backward(g, dres_.data(), tok_in_.as<int32_t>(), n, C, act_);
    grad_ready(lo_.embed);
    done(lo_.embed);
  }
  dres_.reset();
  x_.clear();
  acts_.clear();
  tok_in_.reset();
  tok_tgt_.reset();
  // Backward epilogue.
  if (stage_ == 2) {
    reduce_ipg_bucket();  // S12 overlapping_partition_gradients_reduce_epilogue
  } else if (stage_ == 3) {
    s3_reduce_bucket();
    compute_waits_for_comm();  // no gathered buffer goes back to the pool while a gather writes it
    for (size_t p = 0; p < gathered_.size(); ++p)
      if (gathered_[p] && !persistent_[p]) {
        gathered_live_bytes_ -= gathered_[p].bytes();
        n_available_ -= lo_.params[p].numel;
        gathered_[p].reset();
      }
    trace_complete_ = true;  // PPC: the trace of the first micro-step is recorded
  } else if (boundary_step) {
    // DeepSpeedEngine.backward -> allreduce_gradients at the accumulation boundary (stages 0, 1).
    reduce_at_boundary();
  }
  if (stage_ == 1 || stage_ == 2) {  // S12 _release_ipg_buffers after the reduction
    compute_waits_for_comm();        // the last reduction (on Comm) ends before the buckets go back
    ipg_[0].reset();
    ipg_[1].reset();
  }
  be_.synchronize();
  timer_bwd_->end();
}

void RankEngine::reduce_at_boundary() {
  const int64_t eb = dtype_bytes(act_);
  if (stage_ == 0) {
    // DeepSpeedEngine.allreduce_gradients -> buffered_allreduce_fallback: the full gradients are
    // all-reduced in reduce_bucket_size pieces, pre-divided by N (fp32 accumulation buffer in bf16
    // mode, BF16_Optimizer; param.grad in fp32 mode).
    DeviceBuffer& gbuf = grads32_ ? grads32_ : grads16_;
    for (int64_t off = 0; off < padded_total_; off += cfg_.zero.reduce_bucket_size) {
      const int64_t cnt = std::min(cfg_.zero.reduce_bucket_size, padded_total_ - off);
      if (N_ > 1) be_.scale(gbuf.at(off), gbuf.dtype(), cnt, 1.0f / static_cast<float>(N_));
      comm_.all_reduce(gbuf.at(off), cnt, gbuf.dtype());
    }
    return;
  }
  // Stage 1: S12 reduce_gradients -> reduce_ready_partitions_and_remove_grads: the same bucket path
  // as stage 2, once; each rank copies its slices into grads_in_partition (copy_grads_in_partition
  // also runs for stage 1, "zero stage 1 - partition only optimizer state" branch of reduce_ipg_grads).
  grad_part_ = offload() ? buf(MemCategory::Gradients, part_size_, DType::F32, MemTier::Host)
                         : buf(MemCategory::Gradients, part_size_, act_);
  be_.zero(grad_part_.data(), grad_part_.bytes(), grad_part_.tier());
  for (size_t pid = 0; pid < lo_.params.size(); ++pid) {
    if (lo_.params[pid].frozen) continue;  // LoRA: no gradient
    const int64_t n = lo_.params[pid].numel;
    const void* src = grads16_.at(lo_.params[pid].flat_offset);
    if (n > cfg_.zero.reduce_bucket_size) {
      compute_waits_for_comm();  // collectives in issue order (see compute_waits_for_comm)
      DeviceBuffer big = buf(MemCategory::Gradients, n, act_);
      be_.copy(big.data(), src, n * eb, CopyKind::DeviceToDevice);
      if (N_ > 1) be_.scale(big.data(), act_, n, 1.0f / static_cast<float>(N_));
      comm_.all_reduce(big.data(), n, act_);
      accumulate_into_partition(static_cast<int>(pid), big.data());
      continue;
    }
    if (ipg_elements_ + n > cfg_.zero.reduce_bucket_size) {
      reduce_ipg_bucket();
      if (cfg_.zero.overlap_comm) ipg_index_ = 1 - ipg_index_;
    }
    be_.copy(ipg_[static_cast<size_t>(ipg_index_)].at(ipg_elements_), src, n * eb, CopyKind::DeviceToDevice);
    ipg_params_.emplace_back(static_cast<int>(pid), ipg_elements_);
    ipg_elements_ += n;
  }
  reduce_ipg_bucket();
}

// ---------------------------------------------------------------------------------------------
// The step: clip, step the optimizer one sub-group at a time, restore the 16-bit parameters.
void RankEngine::boundary(int step) {
  enter_phase(StepPhase::Step);
  timer_step_->begin();
  const int64_t eb = dtype_bytes(act_);
  // The rank's gradient partition, as the optimizer reads it.
  const void* gsrc = nullptr;
  DType gt = act_;
  int64_t g_base = 0;  // offset of the partition in gsrc
  if (stage_ == 0) {
    if (grads32_) {
      gsrc = grads32_.data();
      gt = DType::F32;
      g_base = part_lo_;
    } else {
      gsrc = grads16_.data();
    }
  } else {
    gsrc = grad_part_.data();
    gt = grad_part_.dtype();
  }
  const bool host_grads = (stage_ > 0) && grad_part_.tier() == MemTier::Host;
  // Global gradient norm (clipping): squares of this rank's partition, summed over ranks.
  float clip_scale = 1.0f;
  if (cfg_.gradient_clipping > 0) {
    const void* gp = static_cast<const char*>(gsrc) + g_base * dtype_bytes(gt);
    double ss = 0;
    if (host_grads) {
      for (int64_t i = 0; i < part_size_; ++i)
        ss += static_cast<double>(load_elem(gp, gt, i)) * load_elem(gp, gt, i);
    } else {
      ss = be_.sum_squares(gp, gt, part_size_);
    }
    if (partitioned_ && N_ > 1) {
      const int64_t before = comm_.counters().total_bytes_sent();
      DeviceBuffer scalar = buf(MemCategory::Overhead, 1, DType::F32);
      const float f = static_cast<float>(ss);
      be_.upload(scalar.data(), &f, 4);
      comm_.all_reduce(scalar.data(), 1, DType::F32);
      float back = 0;
      be_.download(&back, scalar.data(), 4);
      ss = back;
      scalar_comm_bytes_ += comm_.counters().total_bytes_sent() - before;
    }
    const double norm = std::sqrt(ss);
    // DeepSpeed clip_grad_norm_: coefficient max_norm / (norm + 1e-6) when the norm exceeds max_norm.
    if (norm > cfg_.gradient_clipping)
      clip_scale = static_cast<float>(cfg_.gradient_clipping / (norm + 1e-6));
  }
  if (capture_ && first_grads_ != nullptr) {
    first_grads_->resize(static_cast<size_t>(lo_.total));
    std::vector<char> tmp(static_cast<size_t>(padded_total_ * dtype_bytes(gt)));
    be_.download(tmp.data(), gsrc, static_cast<int64_t>(tmp.size()));
    for (int64_t i = 0; i < lo_.total; ++i)
      (*first_grads_)[static_cast<size_t>(i)] = load_elem(tmp.data(), gt, i);
    capture_ = false;
  }
  AdamParams ap;
  ap.lr = cfg_.lr;
  ap.weight_decay = cfg_.weight_decay;
  ap.step = step + 1;
  ap.grad_scale = clip_scale;
  // Sub-groups: S3 _create_fp16_sub_groups closes a group when its partition numel reaches
  // sub_group_size (or at the last parameter); stages 0-2 step the whole partition at once.
  std::vector<std::pair<int64_t, int64_t>> groups;  // [lo, hi) in the partition
  if (stage_ == 3) {
    int64_t lo = 0, run = 0;
    size_t last = 0;  // the last trainable parameter closes the last group
    for (size_t pid = 0; pid < lo_.params.size(); ++pid)
      if (!lo_.params[pid].frozen) last = pid;
    for (size_t pid = 0; pid < lo_.params.size(); ++pid) {
      if (lo_.params[pid].frozen) continue;
      run += part_numels_[pid];
      if (run >= cfg_.zero.sub_group_size || pid == last) {
        groups.emplace_back(lo, lo + run);
        lo += run;
        run = 0;
      }
    }
  } else {
    groups.emplace_back(0, part_size_);
  }
  const int64_t p16_base = stage_ == 3 ? 0 : part_lo_;
  for (const auto& [glo, ghi] : groups) {
    const int64_t gn = ghi - glo;
    // The optimizer reads a flat fp32 gradient: S12 step builds single_grad_partition =
    // flatten(averaged_gradients).to(fp32) -- a new tensor even in fp32 training, since flatten
    // copies; S3 _prepare_fp32_grad_for_sub_group copies one sub-group. A transient buffer.
    DeviceBuffer g32;
    const float* gp = nullptr;
    if (stage_ == 0 || host_grads) {
      gp = static_cast<const float*>(gsrc) + g_base +
           glo;  // fp32 already (BF16_Optimizer, fp32 param.grad, offload)
    } else {
      g32 = buf(MemCategory::Buffers, gn, DType::F32);
      be_.cast(g32.data(), DType::F32, static_cast<const char*>(gsrc) + (g_base + glo) * eb, gt, gn);
      gp = g32.as<float>();
    }
    AdamChunk c;
    c.param = has_master() ? master_.as<float>() + glo : params16_.as<float>() + p16_base + glo;
    c.grad = gp;
    c.exp_avg = exp_avg_.as<float>() + glo;
    c.exp_avg_sq = exp_avg_sq_.as<float>() + glo;
    c.n = gn;
    if (has_master() && act_ != DType::F32) {
      // The optimizer writes the updated 16-bit working copy itself: on the device in the fused
      // kernel, or -- with offload -- from the CPU Adam through the backend's pinned staging pieces,
      // whose host-to-device copies overlap the update of the next piece (cuda_backend.cpp).
      c.param16 = params16_.at(p16_base + glo);
      c.param16_dtype = act_;
    }
    be_.adam_step(std::span<const AdamChunk>(&c, 1), ap, opt_tier());
    if (has_master() && act_ == DType::F32) {
      // fp32 training keeps an fp32 "working copy" (stages 1-3 partition an fp32 master too): a copy.
      be_.copy(params16_.at(p16_base + glo), master_.at(glo), gn * 4,
               offload() ? CopyKind::HostToDevice : CopyKind::DeviceToDevice);
    }
  }
  // zero_grad: gradients are consumed.
  if (stage_ == 0) {
    DeviceBuffer& gbuf = grads32_ ? grads32_ : grads16_;
    be_.zero(gbuf.data(), gbuf.bytes(), MemTier::Device);
  } else if (stage_ == 1) {
    grads16_.reset();
    grad_part_.reset();
  } else if (stage_ == 2 && !offload()) {
    grad_part_.reset();
  } else {
    be_.zero(grad_part_.data(), grad_part_.bytes(), grad_part_.tier());
  }
  // Restore the full 16-bit parameters.
  if (partitioned_ && stage_ <= 2) {
    // S12 step -> all_gather_dp_groups (BF16_Optimizer.update_lp_params for stage 0 in bf16): each
    // rank's updated partition is all-gathered into the flat buffer, one call over the flat buffer
    // (all_gather_into_tensor).
    comm_.all_gather(params16_.at(part_lo_), params16_.data(), part_size_, act_);
  } else if (stage_ == 3) {
    // S3 _post_step: persistent parameters are gathered again.
    for (size_t pid = 0; pid < lo_.params.size(); ++pid)
      if (persistent_[pid] && gathered_[pid])
        comm_.all_gather((lo_.params[pid].frozen ? frozen16_ : params16_).at(part_offsets_[pid]),
                         gathered_[pid].data(), part_numels_[pid], act_);
  }
  be_.synchronize();
  timer_step_->end();
}

void RankEngine::run(RankMeasurement& meas, std::vector<double>& micro_losses, std::vector<float>& master_out,
                     std::vector<float>& first_grads) {
  setup();
  setup_done_ = true;
  first_grads_ = &first_grads;
  capture_ = cfg_.capture_first_grads;
  CommCounters at_last{};
  int64_t scalar_at_last = 0;
  for (int step = 0; step < cfg_.steps; ++step) {
    if (step == cfg_.steps - 1) {
      enter_phase(StepPhase::Forward);
      comm_by_phase_ = {};
      tp_comm_by_phase_ = {};
      tracker_.reset_peaks();
      gathered_peak_bytes_ = gathered_live_bytes_;
      at_last = comm_.counters();
      scalar_at_last = scalar_comm_bytes_;
      timer_fwd_->reset();
      timer_bwd_->reset();
      timer_step_->reset();
    }
    for (int64_t j = 0; j < cfg_.grad_accum; ++j) {
      // Global micro-batch index: micro-step j of rank r sees micro-batch j*N + r, so a run with one
      // rank and N x grad_accum micro-steps trains on the same global batch.
      const int64_t gidx = j * N_ + r_;
      double loss = 0;
      forward(static_cast<int>(gidx), step, loss);
      micro_losses.push_back(loss);
      backward(j + 1 == cfg_.grad_accum);
    }
    boundary(step);
    if (r_ == 0 && cfg_.on_step) cfg_.on_step(step + 1);
  }
  enter_phase(StepPhase::Forward);  // attribute the step's collectives
  meas.comm_by_phase = comm_by_phase_;
  if (tp_comm_ != nullptr) {
    meas.tp_comm_by_phase = tp_comm_by_phase_;
    for (const auto& ph : tp_comm_by_phase_)
      for (size_t k = 0; k < ph.calls.size(); ++k) {
        meas.tp_comm.calls[k] += ph.calls[k];
        meas.tp_comm.bytes_sent[k] += ph.bytes_sent[k];
      }
  }
  meas.num_parameters = lo_.total;
  meas.rank = r_;
  meas.device = tracker_.device();
  meas.host = tracker_.host();
  meas.alignment_bytes = tracker_.alignment_bytes_peak();
  const CommCounters& now = comm_.counters();
  for (size_t k = 0; k < now.calls.size(); ++k) {
    meas.comm.calls[k] = now.calls[k] - at_last.calls[k];
    meas.comm.bytes_sent[k] = now.bytes_sent[k] - at_last.bytes_sent[k];
  }
  meas.scalar_comm_bytes = scalar_comm_bytes_ - scalar_at_last;
  meas.comm_bytes = meas.comm.total_bytes_sent() - meas.scalar_comm_bytes;
  meas.seconds.forward = timer_fwd_->seconds();
  meas.seconds.backward = timer_bwd_->seconds();
  meas.seconds.step = timer_step_->seconds();
  meas.gradient_bucket_bytes = stage_ >= 1 ? cfg_.zero.reduce_bucket_size * dtype_bytes(act_) : 0;
  meas.num_gradient_buckets = stage_ == 0 ? 0 : (stage_ == 3 ? 1 : (cfg_.zero.overlap_comm ? 2 : 1));
  if (stage_ == 0) meas.gradient_bucket_bytes = 0;
  meas.gathered_params_peak_bytes = gathered_peak_bytes_;
  meas.reserved_device_bytes = pool_.reserved_peak(MemTier::Device);
  meas.reserved_host_bytes = pool_.reserved_peak(MemTier::Host);
  // Export what this rank owns of the fp32 parameters (master, or the fp32 params without one).
  if (!cfg_.export_params) return;
  master_out.assign(static_cast<size_t>(lo_.total), std::nanf(""));
  std::vector<float> mine(static_cast<size_t>(part_size_));
  if (has_master()) {
    if (master_.tier() == MemTier::Host)
      std::memcpy(mine.data(), master_.data(), static_cast<size_t>(part_size_ * 4));
    else
      be_.download(mine.data(), master_.data(), part_size_ * 4);
  } else {
    be_.download(mine.data(), params16_.data(), part_size_ * 4);
  }
  if (stage_ <= 2) {
    for (int64_t i = 0; i < part_size_; ++i)
      if (part_lo_ + i < lo_.total)
        master_out[static_cast<size_t>(part_lo_ + i)] = mine[static_cast<size_t>(i)];
  } else {
    for (size_t pid = 0; pid < lo_.params.size(); ++pid)
      for (int64_t j = 0; j < part_numels_[pid] && !lo_.params[pid].frozen; ++j) {
        const int64_t i = r_ * part_numels_[pid] + j;
        if (i < lo_.params[pid].numel)
          master_out[static_cast<size_t>(lo_.params[pid].flat_offset + i)] =
              mine[static_cast<size_t>(part_offsets_[pid] + j)];
      }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
void check_run_config(const RunConfig& cfg, int world_size) {
  const auto& m = cfg.model;
  if (m.params_only)
    throw_user_error(
        "the executor needs the model's architecture; give --model with a config.json, not --params");
  if (m.model_type != "llama" && m.model_type != "mistral" && m.model_type != "mixtral" &&
      m.model_type != "qwen3" && m.model_type != "qwen3_moe" && !m.model_type.empty())
    throw_user_error(
        "the executor runs Llama-style decoders, Qwen3, Mixtral and Qwen3-MoE only; model '{}' has "
        "model_type '{}'",
        m.name, m.model_type);
  if (m.norm != models::NormKind::RMSNorm || m.mlp != models::MlpKind::Gated ||
      m.position != models::PositionKind::Rotary || m.attention_bias || m.mlp_bias || m.fused_qkv ||
      m.parallel_attention || m.extra_norms || m.tie_word_embeddings ||
      (m.qk_norm != models::QkNorm::None && m.qk_norm != models::QkNorm::PerHead) ||
      m.norm_placement != models::NormPlacement::Pre || m.mla || m.attention_sinks || m.fused_gate_up)
    throw_user_error(
        "the executor runs Llama-style decoders (RMSNorm, rotary, gated SiLU MLP, no biases, untied "
        "embeddings, no q/k norms but Qwen3's per-head ones) and Mixtral/Qwen3-style MoE; model '{}' differs",
        m.name);
  if (m.is_moe()) {
    // Mixtral's sparse block (transformers modeling_mixtral.py): a bias-free router, top-k of softmax
    // renormalised, routed experts only. Shared experts, router biases and score-correction biases
    // (Qwen2-MoE, DeepSeek, gpt-oss, Llama-4) are other blocks the engine does not have.
    if (m.num_shared_experts > 0 || m.shared_expert_intermediate_size > 0 || m.shared_expert_gate ||
        m.router_bias || m.router_score_bias || m.experts_per_token < 1 ||
        m.experts_per_token > m.num_experts || m.num_moe_layers() != m.num_layers)
      throw_user_error(
          "the executor's MoE block is Mixtral's / Qwen3-MoE's (bias-free router, softmax top-k with 1 <= k "
          "<= "
          "experts, no shared experts, every layer sparse); model '{}' differs",
          m.name);
    if (cfg.lora.rank > 0)
      throw_user_error("the executor has no LoRA adapters on MoE blocks; train '{}' with --method full",
                       m.name);
  }
  if (m.hidden_size <= 0 || m.num_layers <= 0 || m.num_heads <= 0 || m.intermediate_size <= 0 ||
      m.vocab_size <= 0)
    throw_user_error(
        "model '{}' lacks hidden_size/num_hidden_layers/num_attention_heads/intermediate_size/vocab_size",
        m.name);
  const int64_t kv = m.kv_heads();
  const int64_t hd = m.head_width();
  if (m.num_heads % kv != 0 || hd % 2 != 0)
    throw_user_error("model '{}': heads ({}) must be a multiple of kv heads ({}) and head_dim ({}) even",
                     m.name, m.num_heads, kv, hd);
  if (world_size < 1) throw_user_error("the executor needs at least one rank");
  if (cfg.zero.stage < 0 || cfg.zero.stage > 3) throw_user_error("ZeRO stage must be 0, 1, 2 or 3");
  if (cfg.zero.offload_optimizer && cfg.zero.stage == 0)
    throw_user_error(
        "optimizer offload needs ZeRO stage 1, 2 or 3 (DeepSpeed offloads only ZeRO-partitioned "
        "optimizer states); pick --stage 1..3");
  if (cfg.micro_batch < 1 || cfg.seq_len < 1 || cfg.grad_accum < 1 || cfg.steps < 1)
    throw_user_error("micro-batch, sequence length, gradient accumulation and steps must be positive");
  if (cfg.zero.reduce_bucket_size < 1) throw_user_error("reduce_bucket_size must be positive");
  if (cfg.lora.rank < 0) throw_user_error("LoRA rank must be positive, got {}", cfg.lora.rank);
  if (cfg.lora.rank > 0) {
    static const std::array<std::string_view, 8> kTargets = {
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "all-linear"};
    for (const auto& t : cfg.lora.targets)
      if (std::find(kTargets.begin(), kTargets.end(), t) == kTargets.end())
        throw_user_error(
            "the executor puts LoRA adapters on decoder linears only (q_proj, k_proj, v_proj, o_proj, "
            "gate_proj, up_proj, down_proj or all-linear); target '{}' is not one of them",
            t);
  }
  const layout::LayoutSizes& pl = cfg.parallel;
  if (pl.tp < 1 || pl.sp < 1 || pl.ep != 1 || world_size % (pl.tp * pl.sp) != 0)
    throw_user_error(
        "the executor's parallel layout needs tp, sp >= 1 with tp x sp dividing the {} ranks and ep = 1 (got "
        "tp {}, sp {}, ep {})",
        world_size, pl.tp, pl.sp, pl.ep);
  if (pl.tp > 1) {
    // AutoTP as the engine runs it (RankEngine, tp_comm_): what it splits must divide by tp.
    const int64_t tp = pl.tp;
    if (m.is_moe())
      throw_user_error(
          "the executor runs tensor parallelism on dense models only; model '{}' is MoE (drop --tp)", m.name);
    if (cfg.lora.rank > 0)
      throw_user_error("the executor has no LoRA with tensor parallelism; drop --tp or LoRA");
    if (pl.sp > 1)
      throw_user_error("the executor does not combine tensor and sequence parallelism (tp {}, sp {})", pl.tp,
                       pl.sp);
    if (m.qk_norm != models::QkNorm::None)
      throw_user_error(
          "the executor has no tensor parallelism for per-head q/k norms (their weights' gradients would be "
          "partial per TP rank); model '{}' has them",
          m.name);
    if (cfg.gradient_clipping > 0)
      throw_user_error(
          "the executor's gradient clipping does not yet sum the norm over the TP group; drop "
          "gradient clipping or --tp");
    if (m.num_heads % tp != 0 || kv % tp != 0 || m.intermediate_size % tp != 0 || m.vocab_size % tp != 0)
      throw_user_error(
          "tensor parallelism {} must divide the heads ({}), KV heads ({}), intermediate size ({}) and "
          "vocabulary ({}) of model '{}'",
          tp, m.num_heads, kv, m.intermediate_size, m.vocab_size, m.name);
  }
  if (cfg.capture_first_grads && (world_size != 1 || cfg.zero.stage != 0))
    throw_user_error("gradient capture needs one rank at stage 0");
}

RunResult run_training(const RunConfig& cfg, Runtime& rt) {
  check_run_config(cfg, rt.world_size());
  const int64_t tp = cfg.parallel.tp;
  // One layout per TP slot (the same sizes; different slices of the whole weights).
  std::vector<Layout> tp_layouts;
  for (int64_t t = 0; t < tp; ++t) tp_layouts.push_back(make_layout(cfg.model, cfg.lora, tp, t));
  const Layout& lo = tp_layouts.front();
  std::vector<int> tp_rank_of(rt.local_ranks().size(), 0);
  const auto ranks = rt.local_ranks();
  if (cfg.model.is_moe())
    for (int r : ranks)
      if (!rt.backend(r).has_moe_kernels())
        throw_user_error(
            "model '{}' is a MoE model; the {} backend has no MoE kernels yet (use --backend cpu)",
            cfg.model.name, rt.backend(r).name());
  RunResult res;
  res.ranks.resize(ranks.size());
  std::vector<std::vector<double>> losses(ranks.size());
  std::vector<std::vector<float>> params(ranks.size());
  std::vector<float> grads;
  std::vector<std::exception_ptr> errors(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<Communicator> dp_group, tp_group;
      try {
        // The rank's DP group: the whole world when tp = sp = 1 (no split, so backends without groups,
        // the one-GPU emulation, run as before); else the ranks sharing its TP and SP slot, ordered by
        // global rank (color: the group's lowest rank).
        Communicator& world = rt.communicator(ranks[i]);
        if (cfg.parallel.tp * cfg.parallel.sp > 1) {
          const layout::ParallelLayout pl(1, rt.world_size(), cfg.parallel, layout::LayoutFacts{});
          dp_group = world.split(pl.group(layout::GroupKind::DataParallel, ranks[i]).ranks.front(), ranks[i]);
          // Tensor parallelism: the rank's TP group (contiguous ranks), ordered by global rank; its
          // rank there is the rank's TP slot.
          if (tp > 1)
            tp_group =
                world.split(pl.group(layout::GroupKind::TensorParallel, ranks[i]).ranks.front(), ranks[i]);
        }
        const int t = tp_group ? tp_group->rank() : 0;
        tp_rank_of[i] = t;
        RankEngine eng(cfg, tp_layouts[static_cast<size_t>(t)], rt.backend(ranks[i]),
                       dp_group ? *dp_group : world, tp_group.get());
        try {
          eng.run(res.ranks[i], losses[i], params[i], grads);
          res.ranks[i].rank = ranks[i];  // the global rank (the engine knows its DP rank)
        } catch (OutOfMemory& oom) {
          oom.phase = eng.current_phase();
          oom.live_bytes = eng.device_live_bytes();
          throw;
        }
      } catch (...) {
        errors[i] = std::current_exception();
        if (tp_group) tp_group->abort();
        if (dp_group) dp_group->abort();    // release its group's ranks waiting for this one...
        rt.communicator(ranks[i]).abort();  // ...and the world's (a split in progress)
      }
    });
  }
  for (auto& t : threads) t.join();
  // Rethrow the original failure rather than the "another rank failed" of the ranks it released.
  std::exception_ptr first;
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const InternalError& ie) {
      if (std::string_view(ie.what()).find("another rank failed") == std::string_view::npos)
        first = e;
      else if (!first)
        first = e;
    } catch (...) {
      first = e;
    }
  }
  if (first) std::rethrow_exception(first);
  // Global loss of each step: mean over ranks and micro-steps.
  const int64_t ga = cfg.grad_accum;
  res.loss_per_step.assign(static_cast<size_t>(cfg.steps), 0.0);
  for (const auto& l : losses)
    for (size_t k = 0; k < l.size(); ++k) res.loss_per_step[k / static_cast<size_t>(ga)] += l[k];
  for (auto& v : res.loss_per_step) v /= static_cast<double>(ga * static_cast<int64_t>(ranks.size()));
  if (cfg.export_params) res.final_params.assign(static_cast<size_t>(lo.full_total), std::nanf(""));
  for (size_t r = 0; r < params.size(); ++r) {
    const auto& p = params[r];
    if (p.empty()) continue;
    if (tp == 1) {
      for (size_t i = 0; i < p.size(); ++i)
        if (!std::isnan(p[i])) res.final_params[i] = p[i];
      continue;
    }
    // A TP shard: each element back to its place in the whole weight (replicated ones agree).
    const Layout& tl = tp_layouts[static_cast<size_t>(tp_rank_of[r])];
    for (const auto& prm : tl.params)
      for (int64_t j = 0; j < prm.numel; ++j) {
        const float v = p[static_cast<size_t>(prm.flat_offset + j)];
        if (!std::isnan(v))
          res.final_params[static_cast<size_t>(prm.full_offset + tl.global_index(prm, j))] = v;
      }
  }
  res.first_grads = std::move(grads);
  res.num_parameters = lo.full_total;
  res.num_frozen_parameters = lo.frozen_total;
  for (const auto& p : lo.params) {
    if (p.frozen) continue;
    res.param_names.push_back(p.name);
    res.param_offsets.push_back(p.full_offset);
  }
  return res;
}

LayoutSizes layout_sizes(const RunConfig& cfg) {
  // tp > 1: one rank's shard (every TP slot holds the same sizes).
  const int64_t tp = cfg.parallel.tp > 1 ? cfg.parallel.tp : 1;
  const Layout lo = make_layout(cfg.model, cfg.lora, tp, 0);
  LayoutSizes s;
  s.total = lo.total;
  s.frozen_total = lo.frozen_total;
  for (const auto& p : lo.params) {
    s.numel.push_back(p.numel);
    s.frozen.push_back(p.frozen);
  }
  return s;
}

}  // namespace zeroplan::exec
