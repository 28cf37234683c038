#include "executor/cpu_backend.h"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

#include "common/errors.h"
#include "executor/dtype_io.h"
#include "executor/memory.h"
#include "executor/thread_comm.h"

namespace zeroplan::exec {

namespace {

using MatF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapF = Eigen::Map<MatF>;
using CMapF = Eigen::Map<const MatF>;

// Widens n elements into `buf` (or returns the fp32 pointer itself).
const float* widen(const void* p, DType t, int64_t n, std::vector<float>& buf) {
  if (t == DType::F32) return static_cast<const float*>(p);
  buf.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = load_elem(p, t, i);
  return buf.data();
}

std::vector<float> to_float(const void* p, DType t, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = load_elem(p, t, i);
  return v;
}

void from_float(void* p, DType t, const std::vector<float>& v) {
  for (size_t i = 0; i < v.size(); ++i) store_elem(p, t, static_cast<int64_t>(i), v[i]);
}

class CpuTimer final : public Timer {
 public:
  void begin() override { t0_ = std::chrono::steady_clock::now(); }
  void end() override {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  double seconds() override { return total_; }
  void reset() override { total_ = 0; }

 private:
  std::chrono::steady_clock::time_point t0_{};
  double total_ = 0;
};

class CpuRuntime final : public Runtime {
 public:
  CpuRuntime(int n, int64_t budget) : world_(std::make_shared<ThreadWorld>(n)) {
    for (int r = 0; r < n; ++r) {
      backends_.push_back(std::make_unique<CpuBackend>(budget));
      comms_.push_back(std::make_unique<ThreadCommunicator>(world_, r));
    }
  }
  int world_size() const override { return world_->world_size(); }
  std::vector<int> local_ranks() const override {
    std::vector<int> r;
    for (int i = 0; i < world_size(); ++i) r.push_back(i);
    return r;
  }
  Backend& backend(int rank) override { return *backends_[static_cast<size_t>(rank)]; }
  Communicator& communicator(int rank) override { return *comms_[static_cast<size_t>(rank)]; }

 private:
  std::shared_ptr<ThreadWorld> world_;
  std::vector<std::unique_ptr<CpuBackend>> backends_;
  std::vector<std::unique_ptr<ThreadCommunicator>> comms_;
};

}  // namespace

std::unique_ptr<Runtime> make_cpu_runtime(int world_size, int64_t device_budget_bytes) {
  return std::make_unique<CpuRuntime>(world_size, device_budget_bytes);
}

void* CpuBackend::allocate(int64_t bytes, MemTier tier) {
  const int64_t size = aligned_size(bytes);
  const bool device = tier == MemTier::Device;
  if (device && budget_ > 0 && device_live_ + size > budget_)
    throw OutOfMemory(fmt::format("out of device memory: asked for {} bytes with {} of {} bytes in use (the "
                                  "thread rank's budget: the CPU profile's memory or --gpu-mem)",
                                  size, device_live_, budget_),
                      size, "device");
  // Untouched pages of a large allocation cost no physical memory (Linux overcommit), like
  // torch.empty on the host: a 5e8-element default bucket is cheap until written.
  void* p = std::aligned_alloc(static_cast<size_t>(kAllocAlignment), static_cast<size_t>(size));
  if (p == nullptr) throw std::bad_alloc();
  if (device) {
    device_live_ += size;
    device_sizes_[p] = size;
  }
  return p;
}
void CpuBackend::release(void* p, MemTier tier) {
  if (tier == MemTier::Device) {
    if (auto it = device_sizes_.find(p); it != device_sizes_.end()) {
      device_live_ -= it->second;
      device_sizes_.erase(it);
    }
  }
  std::free(p);
}
void CpuBackend::copy(void* dst, const void* src, int64_t bytes, CopyKind) {
  std::memmove(dst, src, static_cast<size_t>(bytes));
}
void CpuBackend::zero(void* dst, int64_t bytes, MemTier) {
  std::memset(dst, 0, static_cast<size_t>(bytes));
}
void CpuBackend::upload(void* d, const void* s, int64_t bytes) {
  std::memcpy(d, s, static_cast<size_t>(bytes));
}
void CpuBackend::download(void* d, const void* s, int64_t bytes) {
  std::memcpy(d, s, static_cast<size_t>(bytes));
}
std::unique_ptr<Timer> CpuBackend::make_timer() {
  return std::make_unique<CpuTimer>();
}

void CpuBackend::gemm(int64_t m, int64_t n, int64_t k, const void* A, bool trans_a, const void* B,
                      bool trans_b, DType ab, void* C, DType c, float alpha, float beta) {
  const float* a = widen(A, ab, m * k, wa_);
  const float* b = widen(B, ab, k * n, wb_);
  CMapF Am(a, trans_a ? k : m, trans_a ? m : k);
  CMapF Bm(b, trans_b ? n : k, trans_b ? k : n);
  float* cptr = nullptr;
  if (c == DType::F32) {
    cptr = static_cast<float*>(C);
  } else {
    wc_.resize(static_cast<size_t>(m * n));
    cptr = wc_.data();
    if (beta != 0.0f)
      for (int64_t i = 0; i < m * n; ++i) wc_[static_cast<size_t>(i)] = load_elem(C, c, i);
  }
  MapF Cm(cptr, m, n);
  if (beta == 0.0f)
    Cm.setZero();
  else if (beta != 1.0f)
    Cm *= beta;
  if (trans_a && trans_b)
    Cm.noalias() += alpha * (Am.transpose() * Bm.transpose());
  else if (trans_a)
    Cm.noalias() += alpha * (Am.transpose() * Bm);
  else if (trans_b)
    Cm.noalias() += alpha * (Am * Bm.transpose());
  else
    Cm.noalias() += alpha * (Am * Bm);
  if (c != DType::F32)
    for (int64_t i = 0; i < m * n; ++i) store_elem(C, c, i, wc_[static_cast<size_t>(i)]);
}

void CpuBackend::cast(void* dst, DType dt, const void* src, DType st, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_elem(dst, dt, i, load_elem(src, st, i));
}
void CpuBackend::scale(void* x, DType t, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) store_elem(x, t, i, load_elem(x, t, i) * alpha);
}
void CpuBackend::add(void* y, DType yt, const void* x, DType xt, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) store_elem(y, yt, i, load_elem(y, yt, i) + alpha * load_elem(x, xt, i));
}
double CpuBackend::sum_squares(const void* x, DType t, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = load_elem(x, t, i);
    s += v * v;
  }
  return s;
}

void CpuBackend::embedding_forward(void* out, const void* wte, const int32_t* tokens, int64_t N, int64_t C,
                                   DType t) {
  const int64_t row = C * dtype_bytes(t);
  for (int64_t n = 0; n < N; ++n)
    std::memcpy(static_cast<char*>(out) + n * row, static_cast<const char*>(wte) + tokens[n] * row,
                static_cast<size_t>(row));
}
void CpuBackend::embedding_backward(void* dwte, const void* dout, const int32_t* tokens, int64_t N, int64_t C,
                                    DType t) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = tokens[n] * C + c;
      store_elem(dwte, t, i, load_elem(dwte, t, i) + load_elem(dout, t, n * C + c));
    }
}

void CpuBackend::rmsnorm_forward(void* out, float* rstd, const void* inp, const void* weight, int64_t N,
                                 int64_t C, float eps, DType t) {
  for (int64_t n = 0; n < N; ++n) {
    double ss = 0;
    for (int64_t c = 0; c < C; ++c) {
      const double v = load_elem(inp, t, n * C + c);
      ss += v * v;
    }
    const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(C) + eps));
    rstd[n] = r;
    for (int64_t c = 0; c < C; ++c)
      store_elem(out, t, n * C + c, load_elem(inp, t, n * C + c) * r * load_elem(weight, t, c));
  }
}
// y_i = x_i r w_i, r = (mean x^2 + eps)^-1/2:  dx_i = r w_i g_i - x_i r^3/C sum_j g_j w_j x_j,  dw_i = sum_n
// g_i x_i r
void CpuBackend::rmsnorm_backward(void* dinp, void* dweight, const void* dout, const void* inp,
                                  const void* weight, const float* rstd, int64_t N, int64_t C, DType t) {
  std::vector<float> dw = to_float(dweight, t, C);
  for (int64_t n = 0; n < N; ++n) {
    const float r = rstd[n];
    double dot = 0;
    for (int64_t c = 0; c < C; ++c)
      dot += static_cast<double>(load_elem(dout, t, n * C + c)) * load_elem(weight, t, c) *
             load_elem(inp, t, n * C + c);
    const float k = static_cast<float>(dot) * r * r * r / static_cast<float>(C);
    for (int64_t c = 0; c < C; ++c) {
      const int64_t i = n * C + c;
      const float g = load_elem(dout, t, i), x = load_elem(inp, t, i);
      store_elem(dinp, t, i, load_elem(dinp, t, i) + r * load_elem(weight, t, c) * g - x * k);
      dw[static_cast<size_t>(c)] += g * x * r;
    }
  }
  from_float(dweight, t, dw);
}

void CpuBackend::rotary(void* x, int64_t B, int64_t T, int64_t H, int64_t D, float theta, bool backward,
                        DType t) {
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t tt = 0; tt < T; ++tt)
      for (int64_t i = 0; i < half; ++i) {
        // HF LlamaRotaryEmbedding: inv_freq_i = theta^(-2i/D); angle = position * inv_freq_i.
        const double inv =
            std::pow(static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(D));
        const double ang = static_cast<double>(tt) * inv * (backward ? -1.0 : 1.0);
        const float cs = static_cast<float>(std::cos(ang)), sn = static_cast<float>(std::sin(ang));
        for (int64_t h = 0; h < H; ++h) {
          const int64_t base = ((b * T + tt) * H + h) * D;
          const float x1 = load_elem(x, t, base + i), x2 = load_elem(x, t, base + i + half);
          store_elem(x, t, base + i, x1 * cs - x2 * sn);
          store_elem(x, t, base + i + half, x2 * cs + x1 * sn);
        }
      }
}

void CpuBackend::swiglu_forward(void* out, const void* gate, const void* up, int64_t N, int64_t I, DType t) {
  for (int64_t i = 0; i < N * I; ++i) {
    const float g = load_elem(gate, t, i);
    store_elem(out, t, i, g / (1.0f + std::exp(-g)) * load_elem(up, t, i));
  }
}
// silu(g) = g s, s = sigmoid(g):  d silu/dg = s (1 + g (1 - s))
void CpuBackend::swiglu_backward(void* dgate, void* dup, const void* dout, const void* gate, const void* up,
                                 int64_t N, int64_t I, DType t) {
  for (int64_t i = 0; i < N * I; ++i) {
    const float g = load_elem(gate, t, i), u = load_elem(up, t, i), d = load_elem(dout, t, i);
    const float s = 1.0f / (1.0f + std::exp(-g));
    store_elem(dgate, t, i, d * u * s * (1.0f + g * (1.0f - s)));
    store_elem(dup, t, i, d * g * s);
  }
}

void CpuBackend::attention_forward(void* out, float* lse, const void* q, const void* k, const void* v,
                                   int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) {
  const auto qf = to_float(q, t, B * T * Hq * D), kf = to_float(k, t, B * T * Hkv * D),
             vf = to_float(v, t, B * T * Hkv * D);
  std::vector<float> of(static_cast<size_t>(B * T * Hq * D), 0.0f), s(static_cast<size_t>(T));
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t group = Hq / Hkv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < T; ++i) {
        const float* qi = &qf[static_cast<size_t>(((b * T + i) * Hq + h) * D)];
        float mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {  // causal: keys 0..i
          const float* kj = &kf[static_cast<size_t>(((b * T + j) * Hkv + g) * D)];
          float dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          s[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, s[static_cast<size_t>(j)]);
        }
        double l = 0;
        for (int64_t j = 0; j <= i; ++j) l += std::exp(static_cast<double>(s[static_cast<size_t>(j)] - mx));
        const float L = mx + static_cast<float>(std::log(l));
        lse[(b * Hq + h) * T + i] = L;
        float* oi = &of[static_cast<size_t>(((b * T + i) * Hq + h) * D)];
        for (int64_t j = 0; j <= i; ++j) {
          const float p = std::exp(s[static_cast<size_t>(j)] - L);
          const float* vj = &vf[static_cast<size_t>(((b * T + j) * Hkv + g) * D)];
          for (int64_t d = 0; d < D; ++d) oi[d] += p * vj[d];
        }
      }
    }
  from_float(out, t, of);
}

// With P = softmax(S), S = scale q k^T:  dV = P^T dO;  dP = dO V^T;  dS = P o (dP - rowsum(dO o O));
// dQ = scale dS K;  dK = scale dS^T Q  (FlashAttention-2, Dao 2023, Algorithm 2).
void CpuBackend::attention_backward(void* dq, void* dk, void* dv, const void* dout, const void* q,
                                    const void* k, const void* v, const void* out, const float* lse,
                                    int64_t B, int64_t T, int64_t Hq, int64_t Hkv, int64_t D, DType t) {
  const int64_t nq = B * T * Hq * D, nk = B * T * Hkv * D;
  const auto qf = to_float(q, t, nq), kf = to_float(k, t, nk), vf = to_float(v, t, nk);
  const auto of = to_float(out, t, nq), gf = to_float(dout, t, nq);
  std::vector<float> dqf(static_cast<size_t>(nq), 0.0f), dkf(static_cast<size_t>(nk), 0.0f),
      dvf(static_cast<size_t>(nk), 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const int64_t group = Hq / Hkv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < T; ++i) {
        const size_t qo = static_cast<size_t>(((b * T + i) * Hq + h) * D);
        float Di = 0;
        for (int64_t d = 0; d < D; ++d)
          Di += gf[qo + static_cast<size_t>(d)] * of[qo + static_cast<size_t>(d)];
        const float L = lse[(b * Hq + h) * T + i];
        for (int64_t j = 0; j <= i; ++j) {
          const size_t ko = static_cast<size_t>(((b * T + j) * Hkv + g) * D);
          float sdot = 0, dp = 0;
          for (int64_t d = 0; d < D; ++d) {
            sdot += qf[qo + static_cast<size_t>(d)] * kf[ko + static_cast<size_t>(d)];
            dp += gf[qo + static_cast<size_t>(d)] * vf[ko + static_cast<size_t>(d)];
          }
          const float p = std::exp(sdot * scale - L);
          const float ds = p * (dp - Di) * scale;
          for (int64_t d = 0; d < D; ++d) {
            const size_t di = static_cast<size_t>(d);
            dqf[qo + di] += ds * kf[ko + di];
            dkf[ko + di] += ds * qf[qo + di];
            dvf[ko + di] += p * gf[qo + di];
          }
        }
      }
    }
  from_float(dq, t, dqf);
  from_float(dk, t, dkf);
  from_float(dv, t, dvf);
}

void CpuBackend::cross_entropy_forward(float* losses, const void* logits, const int32_t* targets, int64_t N,
                                       int64_t V, DType t) {
  for (int64_t n = 0; n < N; ++n) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < V; ++c) mx = std::max(mx, load_elem(logits, t, n * V + c));
    double s = 0;
    for (int64_t c = 0; c < V; ++c) s += std::exp(static_cast<double>(load_elem(logits, t, n * V + c) - mx));
    losses[n] = mx + static_cast<float>(std::log(s)) - load_elem(logits, t, n * V + targets[n]);
  }
}
void CpuBackend::cross_entropy_backward(void* dlogits, const void* logits, const int32_t* targets,
                                        float dloss, int64_t N, int64_t V, DType t) {
  std::vector<float> row(static_cast<size_t>(V));
  for (int64_t n = 0; n < N; ++n) {
    float mx = -INFINITY;
    for (int64_t c = 0; c < V; ++c) {
      row[static_cast<size_t>(c)] = load_elem(logits, t, n * V + c);
      mx = std::max(mx, row[static_cast<size_t>(c)]);
    }
    double s = 0;
    for (auto x : row) s += std::exp(static_cast<double>(x - mx));
    for (int64_t c = 0; c < V; ++c) {
      const float p = static_cast<float>(std::exp(static_cast<double>(row[static_cast<size_t>(c)] - mx)) / s);
      store_elem(dlogits, t, n * V + c, (p - (c == targets[n] ? 1.0f : 0.0f)) * dloss);
    }
  }
}

// MoE routing as transformers' MixtralTopKRouter / Qwen3MoeTopKRouter: softmax in fp32, top-k,
// optional renormalisation of the k weights. Ties go to the lower expert index (stable order).
void CpuBackend::moe_route_forward(float* probs, int32_t* idx, float* weights, const void* logits, int64_t N,
                                   int64_t E, int64_t k, bool renorm, DType t) {
  std::vector<int32_t> order(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    float* p = probs + n * E;
    float mx = -INFINITY;
    for (int64_t e = 0; e < E; ++e) mx = std::max(mx, load_elem(logits, t, n * E + e));
    double s = 0;
    for (int64_t e = 0; e < E; ++e) s += std::exp(static_cast<double>(load_elem(logits, t, n * E + e) - mx));
    for (int64_t e = 0; e < E; ++e)
      p[e] = static_cast<float>(std::exp(static_cast<double>(load_elem(logits, t, n * E + e) - mx)) / s);
    for (int64_t e = 0; e < E; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[order[static_cast<size_t>(j)]];
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = order[static_cast<size_t>(j)];
      idx[n * k + j] = e;
      weights[n * k + j] = renorm ? static_cast<float>(p[e] / sum) : p[e];
    }
  }
}

// w_j = p_{i_j} / s with s = sum_m p_{i_m}: dL/dp_{i_j} = (dw_j - sum_m dw_m w_m) / s (dw_j without
// renorm), 0 for experts not selected; softmax: dl_e = p_e (dp_e - sum_e' p_e' dp_e').
void CpuBackend::moe_route_backward(void* dlogits, const float* dweights, const float* probs, const int32_t* idx,
                                    int64_t N, int64_t E, int64_t k, bool renorm, DType t) {
  std::vector<double> dp(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    const float* p = probs + n * E;
    const int32_t* ix = idx + n * k;
    const float* dw = dweights + n * k;
    std::fill(dp.begin(), dp.end(), 0.0);
    double s = 0, dot = 0;
    for (int64_t j = 0; j < k; ++j) s += p[ix[j]];
    for (int64_t j = 0; j < k; ++j) dot += static_cast<double>(dw[j]) * (p[ix[j]] / s);
    for (int64_t j = 0; j < k; ++j)
      dp[static_cast<size_t>(ix[j])] = renorm ? (dw[j] - dot) / s : static_cast<double>(dw[j]);
    double pdp = 0;
    for (int64_t e = 0; e < E; ++e) pdp += p[e] * dp[static_cast<size_t>(e)];
    for (int64_t e = 0; e < E; ++e)
      store_elem(dlogits, t, n * E + e, static_cast<float>(p[e] * (dp[static_cast<size_t>(e)] - pdp)));
  }
}

void CpuBackend::gather_rows(void* out, const void* in, const int32_t* pairs, int64_t R, int64_t C, int64_t k,
                             DType t) {
  const int64_t eb = dtype_bytes(t);
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(static_cast<char*>(out) + r * C * eb, static_cast<const char*>(in) + (pairs[r] / k) * C * eb,
                static_cast<size_t>(C * eb));
}

void CpuBackend::scatter_add_rows(void* out, const void* in, const int32_t* pairs, const float* weights, int64_t R,
                                  int64_t C, int64_t k, DType t) {
  for (int64_t r = 0; r < R; ++r) {
    const int64_t row = pairs[r] / k;
    const float w = weights != nullptr ? weights[pairs[r]] : 1.0f;
    for (int64_t c = 0; c < C; ++c)
      store_elem(out, t, row * C + c, load_elem(out, t, row * C + c) + w * load_elem(in, t, r * C + c));
  }
}

void CpuBackend::scatter_add_rows_backward(void* din, float* dweights, const void* dout, const void* in,
                                           const int32_t* pairs, const float* weights, int64_t R, int64_t C,
                                           int64_t k, DType t) {
  for (int64_t r = 0; r < R; ++r) {
    const int64_t row = pairs[r] / k;
    const float w = weights[pairs[r]];
    double dot = 0;
    for (int64_t c = 0; c < C; ++c) {
      const float g = load_elem(dout, t, row * C + c);
      dot += static_cast<double>(g) * load_elem(in, t, r * C + c);
      store_elem(din, t, r * C + c, w * g);
    }
    dweights[pairs[r]] = static_cast<float>(dot);
  }
}

// torch.optim.AdamW / DeepSpeed FusedAdam(adam_w_mode=True): decoupled weight decay
// p *= (1 - lr wd), then p -= lr mhat / (sqrt(vhat) + eps).
void CpuBackend::adam_step(std::span<const AdamChunk> chunks, const AdamParams& a, MemTier) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step));
  for (const AdamChunk& c : chunks) {
    for (int64_t i = 0; i < c.n; ++i) {
      const float g = c.grad[i] * a.grad_scale;
      float m = c.exp_avg[i] = a.beta1 * c.exp_avg[i] + (1.0f - a.beta1) * g;
      float v = c.exp_avg_sq[i] = a.beta2 * c.exp_avg_sq[i] + (1.0f - a.beta2) * g * g;
      const double mhat = m / bc1, vhat = v / bc2;
      float p = c.param[i] * (1.0f - a.lr * a.weight_decay);
      p -= static_cast<float>(a.lr * mhat / (std::sqrt(vhat) + a.eps));
      c.param[i] = p;
      if (c.param16 != nullptr) store_elem(c.param16, c.param16_dtype, i, p);
    }
  }
}

}  // namespace zeroplan::exec
