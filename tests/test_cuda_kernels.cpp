// The cuda backend's kernels and GEMM against fp64 references on the CPU (small shapes, random
// data, outputs poisoned with NaN before each run so an unwritten element fails). Skipped without
// a CUDA device (CI has nvcc but no GPU).
//
// Tolerances (relative L2 error ||out - ref|| / ||ref||, METHOD.md's scale):
//  - fp32 results from bf16 inputs (GEMM fp32 out, losses, Adam): 1e-4 or tighter: fp32 rounding only.
//  - one bf16 rounding of the output (elementwise kernels, RMSNorm, bf16 GEMM out): bf16 keeps 8
//    significant bits, so each element is off by at most 2^-9 relative and the RMS over many
//    elements is about 2^-9/sqrt(3) = 1.1e-3; we allow 5e-3.
//  - attention forward: the probabilities are rounded to bf16 before the P.V product (as in
//    FlashAttention-2) plus the output rounding: 1e-2 (METHOD.md: bf16 operands land between 1e-3
//    and 1e-2).
//  - attention backward: P and dS both enter tensor-core products as bf16 and dQ sums over many key
//    tiles: 2e-2.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "executor/cuda/cuda_check.h"
#include "executor/cuda/device.h"
#include "executor/cuda/gemm.h"
#include "executor/cuda/host_adam.h"
#include "executor/cuda/kernels.h"

namespace zeroplan::exec::cuda {
namespace {

// ---------------------------------------------------------------- helpers

std::vector<float> random_bf16_values(size_t n, uint32_t seed, float scale = 1.0f, float offset = 0.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v)
    x = bf16_bits_to_float(float_to_bf16_bits(offset + scale * d(rng)));  // exactly representable
  return v;
}

class Dev {
 public:
  Dev(size_t n, DType t) : n_(n), t_(t) {
    ZP_CUDA_CHECK(cudaMalloc(&p_, bytes()));
    poison();
  }
  Dev(const std::vector<float>& h, DType t) : Dev(h.size(), t) { upload(h); }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  size_t bytes() const { return n_ * static_cast<size_t>(dtype_bytes(t_)); }
  void poison() { ZP_CUDA_CHECK(cudaMemset(p_, 0xff, bytes())); }  // 0xffff.. is NaN in bf16 and fp32
  void upload(const std::vector<float>& h) {
    if (t_ == DType::F32) {
      ZP_CUDA_CHECK(cudaMemcpy(p_, h.data(), bytes(), cudaMemcpyHostToDevice));
    } else {
      std::vector<uint16_t> b(n_);
      for (size_t i = 0; i < n_; ++i) b[i] = float_to_bf16_bits(h[i]);
      ZP_CUDA_CHECK(cudaMemcpy(p_, b.data(), bytes(), cudaMemcpyHostToDevice));
    }
  }
  std::vector<float> host() const {
    ZP_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> h(n_);
    if (t_ == DType::F32) {
      ZP_CUDA_CHECK(cudaMemcpy(h.data(), p_, bytes(), cudaMemcpyDeviceToHost));
    } else {
      std::vector<uint16_t> b(n_);
      ZP_CUDA_CHECK(cudaMemcpy(b.data(), p_, bytes(), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < n_; ++i) h[i] = bf16_bits_to_float(b[i]);
    }
    return h;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  bf16* b() const { return static_cast<bf16*>(p_); }
  float* f() const { return static_cast<float*>(p_); }

 private:
  void* p_ = nullptr;
  size_t n_;
  DType t_;
};

double rel_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  EXPECT_EQ(got.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;  // unwritten (poisoned) or overflowed
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    const DeviceAvailability d = probe_devices();
    if (d.count == 0) GTEST_SKIP() << "no CUDA device: " << d.reason;
    ZP_CUDA_CHECK(cudaSetDevice(0));
    ZP_CUDA_CHECK(cudaStreamCreate(&s));
  }
  void TearDown() override {
    if (s) cudaStreamDestroy(s);
  }
  cudaStream_t s = nullptr;
};

// ---------------------------------------------------------------- GEMM

std::vector<double> ref_gemm(const GemmShape& g, const std::vector<float>& A, const std::vector<float>& B,
                             const std::vector<float>* C0, float alpha, float beta) {
  std::vector<double> C(static_cast<size_t>(g.m * g.n));
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double a =
            g.trans_a ? A[static_cast<size_t>(p * g.lda + i)] : A[static_cast<size_t>(i * g.lda + p)];
        const double b =
            g.trans_b ? B[static_cast<size_t>(j * g.ldb + p)] : B[static_cast<size_t>(p * g.ldb + j)];
        acc += a * b;
      }
      const size_t o = static_cast<size_t>(i * g.n + j);
      C[o] = alpha * acc + (C0 ? beta * (*C0)[o] : 0.0);
    }
  return C;
}

TEST_F(CudaKernels, GemmAllTransposesMatchReference) {
  void* ws = nullptr;
  ZP_CUDA_CHECK(cudaMalloc(&ws, kHopperGemmWorkspaceBytes));
  {
    GemmRunner runner(ws, kHopperGemmWorkspaceBytes);
    // k = 172: the tiny CI model's intermediate size, rows only 8-byte aligned.
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{48, 80, 64}, {64, 256, 172}, {40, 24, 96}}) {
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          GemmShape g{ta, tb, m, n, k, ta ? m : k, tb ? k : n, n};
          const auto A = random_bf16_values(static_cast<size_t>(m * k), 1);
          const auto B = random_bf16_values(static_cast<size_t>(k * n), 2);
          const auto C0 = random_bf16_values(static_cast<size_t>(m * n), 3);
          Dev dA(A, DType::BF16), dB(B, DType::BF16);
          // bf16 out, beta = 0
          Dev dC(static_cast<size_t>(m * n), DType::BF16);
          runner.gemm(s, g, dA.b(), dB.b(), dC.as<void>(), DType::BF16);
          EXPECT_LT(rel_l2(dC.host(), ref_gemm(g, A, B, nullptr, 1.f, 0.f)), 5e-3)
              << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb;
          // fp32 out, alpha 0.5, accumulate into C0 (beta = 1): gradient accumulation
          Dev dC32(C0, DType::F32);
          runner.gemm(s, g, dA.b(), dB.b(), dC32.as<void>(), DType::F32, 0.5f, 1.0f);
          EXPECT_LT(rel_l2(dC32.host(), ref_gemm(g, A, B, &C0, 0.5f, 1.0f)), 1e-5) << "fp32 out";
          // fp32 inputs (the engine's fp32 mode): plain fp32 arithmetic
          Dev fA(A, DType::F32), fB(B, DType::F32), fC(static_cast<size_t>(m * n), DType::F32);
          runner.gemm(s, g, fA.as<void>(), fB.as<void>(), DType::F32, fC.as<void>(), DType::F32);
          EXPECT_LT(rel_l2(fC.host(), ref_gemm(g, A, B, nullptr, 1.f, 0.f)), 1e-5) << "fp32 in";
        }
    }
    EXPECT_GT(runner.cached_plans(), 0u);
  }
  cudaFree(ws);
}

// ---------------------------------------------------------------- RMSNorm

TEST_F(CudaKernels, RmsNormForwardBackward) {
  const int64_t T = 37, h = 320;  // h not a multiple of the 256-thread block
  const float eps = 1e-5f;
  const auto x = random_bf16_values(static_cast<size_t>(T * h), 11);
  const auto w = random_bf16_values(static_cast<size_t>(h), 12, 0.1f, 1.0f);
  const auto dy = random_bf16_values(static_cast<size_t>(T * h), 13);
  const auto dx0 = random_bf16_values(static_cast<size_t>(T * h), 14, 0.5f);
  const auto dw0 = random_bf16_values(static_cast<size_t>(h), 15, 0.5f);
  std::vector<double> y(x.size()), r(T), dx(x.size()), dw(h);
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += double(x[t * h + j]) * x[t * h + j];
    r[t] = 1.0 / std::sqrt(ss / h + eps);
    double dot = 0;  // sum_j dy_j w_j xhat_j
    for (int64_t j = 0; j < h; ++j) {
      y[t * h + j] = x[t * h + j] * r[t] * w[j];
      dot += double(dy[t * h + j]) * w[j] * x[t * h + j] * r[t];
    }
    // dx_j = r (dy_j w_j - xhat_j * dot / h)  (derivative of x_j r w_j; r depends on all x)
    for (int64_t j = 0; j < h; ++j) {
      const double xhat = x[t * h + j] * r[t];
      dx[t * h + j] = dx0[t * h + j] + r[t] * (double(dy[t * h + j]) * w[j] - xhat * dot / h);
      dw[j] += double(dy[t * h + j]) * xhat;
    }
  }
  for (int64_t j = 0; j < h; ++j) dw[j] += dw0[j];
  Dev dX(x, DType::BF16), dW(w, DType::BF16), dY(static_cast<size_t>(T * h), DType::BF16), dR(T, DType::F32);
  rmsnorm_fwd(s, dX.b(), dW.b(), dY.b(), dR.f(), T, h, eps);
  EXPECT_LT(rel_l2(dY.host(), y), 5e-3);
  const auto rg = dR.host();
  for (int64_t t = 0; t < T; ++t) EXPECT_NEAR(rg[t], r[t], 1e-5 * r[t]);
  Dev ddY(dy, DType::BF16), ddX(dx0, DType::BF16), ddW(dw0, DType::BF16), scratch(h, DType::F32);
  rmsnorm_bwd(s, ddY.b(), dX.b(), dW.b(), dR.f(), ddX.b(), ddW.b(), scratch.f(), T, h, true, true);
  EXPECT_LT(rel_l2(ddX.host(), dx), 5e-3);
  EXPECT_LT(rel_l2(ddW.host(), dw), 5e-3);
}

// ---------------------------------------------------------------- rotary

TEST_F(CudaKernels, RotaryMatchesReferenceAndInverts) {
  const int64_t B = 2, S = 7, H = 3, D = 16;
  const float theta = 10000.f;
  const auto x = random_bf16_values(static_cast<size_t>(B * S * H * D), 21);
  std::vector<double> ref(x.size());
  for (int64_t t = 0; t < B * S; ++t)
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t i = 0; i < D / 2; ++i) {
        const double ang = double(t % S) * std::pow(double(theta), -2.0 * double(i) / double(D));
        const size_t o = static_cast<size_t>((t * H + hh) * D);
        const double a = x[o + i], b = x[o + i + D / 2];
        ref[o + i] = a * std::cos(ang) - b * std::sin(ang);
        ref[o + i + D / 2] = b * std::cos(ang) + a * std::sin(ang);
      }
  Dev d(x, DType::BF16);
  rotary_fwd(s, d.b(), B * S, S, H, D, theta);
  EXPECT_LT(rel_l2(d.host(), ref), 5e-3);
  rotary_bwd(s, d.b(), B * S, S, H, D, theta);  // R^T R = I: back to x, up to two bf16 roundings
  std::vector<double> xd(x.begin(), x.end());
  EXPECT_LT(rel_l2(d.host(), xd), 1e-2);
}

// ---------------------------------------------------------------- SwiGLU

TEST_F(CudaKernels, SwigluForwardBackward) {
  const size_t n = 1000;
  const auto g = random_bf16_values(n, 31, 2.f), u = random_bf16_values(n, 32),
             dy = random_bf16_values(n, 33);
  std::vector<double> y(n), dg(n), du(n);
  for (size_t i = 0; i < n; ++i) {
    const double sg = 1.0 / (1.0 + std::exp(-double(g[i])));
    y[i] = g[i] * sg * u[i];
    du[i] = dy[i] * g[i] * sg;
    dg[i] = dy[i] * u[i] * (sg + g[i] * sg * (1 - sg));
  }
  Dev G(g, DType::BF16), U(u, DType::BF16), Y(n, DType::BF16), DY(dy, DType::BF16), DG(n, DType::BF16),
      DU(n, DType::BF16);
  swiglu_fwd(s, G.b(), U.b(), Y.b(), static_cast<int64_t>(n));
  swiglu_bwd(s, DY.b(), G.b(), U.b(), DG.b(), DU.b(), static_cast<int64_t>(n));
  EXPECT_LT(rel_l2(Y.host(), y), 5e-3);
  EXPECT_LT(rel_l2(DG.host(), dg), 5e-3);
  EXPECT_LT(rel_l2(DU.host(), du), 5e-3);
}

// ---------------------------------------------------------------- attention

struct AttnRef {
  std::vector<double> o, lse, dq, dk, dv;
};

// Naive causal GQA attention in fp64: the definition, O(S^2) memory.
AttnRef ref_attention(const AttentionShape& a, const std::vector<float>& q, const std::vector<float>& k,
                      const std::vector<float>& v, const std::vector<float>& dout) {
  const int64_t B = a.batch, S = a.seq, H = a.heads, KV = a.kv_heads, D = a.head_dim, G = H / KV;
  const double scale = 1.0 / std::sqrt(double(D));
  AttnRef r;
  r.o.assign(q.size(), 0);
  r.dq.assign(q.size(), 0);
  r.dk.assign(k.size(), 0);
  r.dv.assign(v.size(), 0);
  r.lse.assign(static_cast<size_t>(B * H * S), 0);
  auto qi = [&](int64_t b, int64_t s, int64_t h) { return static_cast<size_t>(((b * S + s) * H + h) * D); };
  auto ki = [&](int64_t b, int64_t s, int64_t h) { return static_cast<size_t>(((b * S + s) * KV + h) * D); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kh = h / G;
      for (int64_t i = 0; i < S; ++i) {
        std::vector<double> p(static_cast<size_t>(i + 1));
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < D; ++c) d += double(q[qi(b, i, h) + c]) * k[ki(b, j, kh) + c];
          p[j] = d * scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (auto& x : p) sum += std::exp(x - mx);
        r.lse[static_cast<size_t>((b * H + h) * S + i)] = mx + std::log(sum);
        for (auto& x : p) x = std::exp(x - mx) / sum;
        for (int64_t j = 0; j <= i; ++j)
          for (int64_t c = 0; c < D; ++c) r.o[qi(b, i, h) + c] += p[j] * v[ki(b, j, kh) + c];
        // backward: dP_j = dO . v_j; dS_j = P_j (dP_j - sum_l P_l dP_l)
        std::vector<double> dp(p.size());
        double pdp = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t c = 0; c < D; ++c) d += double(dout[qi(b, i, h) + c]) * v[ki(b, j, kh) + c];
          dp[j] = d;
          pdp += p[j] * d;
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - pdp) * scale;
          for (int64_t c = 0; c < D; ++c) {
            r.dv[ki(b, j, kh) + c] += p[j] * dout[qi(b, i, h) + c];
            r.dq[qi(b, i, h) + c] += ds * k[ki(b, j, kh) + c];
            r.dk[ki(b, j, kh) + c] += ds * q[qi(b, i, h) + c];
          }
        }
      }
    }
  return r;
}

// Parameters: (batch, seq, heads, kv_heads, head_dim) and the tile variant. Both variants run on
// every GPU (the 32-row tiles are what A100/A40 launch for head_dim 128, see attention_tiles.h), and
// Auto exercises the device query that picks one.
using AttentionCase = std::tuple<std::tuple<int, int, int, int, int>, AttentionTiles>;
class CudaAttention : public CudaKernels, public ::testing::WithParamInterface<AttentionCase> {};

TEST_P(CudaAttention, ForwardAndBackwardMatchNaiveReference) {
  const auto [shape, tiles] = GetParam();
  const auto [B, S, H, KV, D] = shape;
  AttentionShape a{B, S, H, KV, D};
  const size_t qn = static_cast<size_t>(B * S * H * D), kn = static_cast<size_t>(B * S * KV * D);
  const auto q = random_bf16_values(qn, 41), k = random_bf16_values(kn, 42), v = random_bf16_values(kn, 43);
  const auto dout = random_bf16_values(qn, 44);
  const AttnRef r = ref_attention(a, q, k, v, dout);
  Dev Q(q, DType::BF16), K(k, DType::BF16), V(v, DType::BF16), O(qn, DType::BF16),
      L(static_cast<size_t>(B * H * S), DType::F32);
  attention_fwd(s, a, Q.b(), K.b(), V.b(), O.b(), L.f(), tiles);
  EXPECT_LT(rel_l2(O.host(), r.o), 1e-2);
  const auto lse = L.host();
  double max_lse_err = 0;
  for (size_t i = 0; i < lse.size(); ++i) max_lse_err = std::max(max_lse_err, std::abs(lse[i] - r.lse[i]));
  EXPECT_LT(max_lse_err, 1e-3);  // fp32 softmax statistics from exact bf16 inputs
  Dev dO(dout, DType::BF16), dQ(qn, DType::BF16), dK(kn, DType::BF16), dV(kn, DType::BF16);
  Dev scratch(static_cast<size_t>(AttentionBwdScratch::bytes(a) / 4), DType::F32);
  AttentionBwdScratch sc;
  sc.dq_accum = scratch.f();
  sc.delta = scratch.f() + qn;
  attention_bwd(s, a, Q.b(), K.b(), V.b(), O.b(), dO.b(), L.f(), dQ.b(), dK.b(), dV.b(), sc, tiles);
  EXPECT_LT(rel_l2(dV.host(), r.dv), 2e-2);
  if (S == 1) {
    // One key: softmax is exactly 1, so dS = P (dP - rowsum(dO o O)) = dO.v - dO.v = 0 and the exact dQ
    // and dK are zero (the reference's are exactly 0.0). The kernel's fp32 dP and delta differ by
    // summation order only, so it returns values at rounding level (|x| ~ 1e-6 on the H200,
    // 2026-11-26), where a relative error has no meaning; a wrong kernel gives O(0.1) values.
    double max_dq = 0, max_dk = 0;
    for (const float x : dQ.host())
      max_dq = std::max(max_dq, std::isfinite(x) ? std::abs(double(x)) : INFINITY);
    for (const float x : dK.host())
      max_dk = std::max(max_dk, std::isfinite(x) ? std::abs(double(x)) : INFINITY);
    EXPECT_LT(max_dq, 1e-3);
    EXPECT_LT(max_dk, 1e-3);
    return;
  }
  EXPECT_LT(rel_l2(dK.host(), r.dk), 2e-2);
  EXPECT_LT(rel_l2(dQ.host(), r.dq), 2e-2);
}

std::string attention_case_name(const ::testing::TestParamInfo<AttentionCase>& p) {
  const auto& [shape, tiles] = p.param;
  const auto [B, S, H, KV, D] = shape;
  const char* variant = tiles == AttentionTiles::Auto     ? "auto"
                        : tiles == AttentionTiles::Rows64 ? "rows64"
                                                          : "rows32";
  return "B" + std::to_string(B) + "_S" + std::to_string(S) + "_H" + std::to_string(H) + "_KV" +
         std::to_string(KV) + "_D" + std::to_string(D) + "_" + variant;
}

// Sequences that end inside a 64-row and a 32-row tile (100, 130, 77, 1), one that fills 32-row
// tiles but ends inside a 64-row one (96), GQA groups of 2 and 4, MHA, every head dim; each with the
// 64-row tiles, the 32-row tiles and the device's own choice.
INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaAttention,
    ::testing::Combine(::testing::Values(std::make_tuple(2, 100, 4, 2, 16), std::make_tuple(1, 64, 2, 2, 32),
                                         std::make_tuple(2, 130, 4, 1, 64), std::make_tuple(1, 77, 3, 3, 96),
                                         std::make_tuple(1, 130, 4, 2, 128),
                                         std::make_tuple(2, 96, 4, 2, 128), std::make_tuple(1, 1, 2, 1, 128)),
                       ::testing::Values(AttentionTiles::Rows64, AttentionTiles::Rows32,
                                         AttentionTiles::Auto)),
    attention_case_name);

// ---------------------------------------------------------------- cross-entropy

TEST_F(CudaKernels, CrossEntropyForwardBackward) {
  const int64_t T = 5, V = 1000;
  const auto logits = random_bf16_values(static_cast<size_t>(T * V), 51, 3.f);
  const std::vector<int32_t> targets{3, 999, -100, 0, 512};
  const float scale = 0.25f;
  std::vector<double> loss(T), dl(logits.size());
  for (int64_t t = 0; t < T; ++t) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, double(logits[t * V + j]));
    for (int64_t j = 0; j < V; ++j) sum += std::exp(logits[t * V + j] - mx);
    const double lse = mx + std::log(sum);
    if (targets[t] == -100) continue;  // ignored: loss 0, gradient 0
    loss[t] = lse - logits[t * V + targets[t]];
    for (int64_t j = 0; j < V; ++j)
      dl[t * V + j] = scale * (std::exp(logits[t * V + j] - lse) - (j == targets[t] ? 1.0 : 0.0));
  }
  Dev Lg(logits, DType::BF16), Ls(T, DType::F32);
  int32_t* dT = nullptr;
  ZP_CUDA_CHECK(cudaMalloc(&dT, T * sizeof(int32_t)));
  ZP_CUDA_CHECK(cudaMemcpy(dT, targets.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
  cross_entropy_fwd(s, Lg.b(), dT, Ls.f(), T, V, -100);
  const auto lg = Ls.host();
  for (int64_t t = 0; t < T; ++t) EXPECT_NEAR(lg[t], loss[t], 1e-4 * (1 + loss[t])) << t;
  cross_entropy_bwd(s, Lg.b(), dT, Lg.b(), T, V, -100, scale);  // in place, as the engine may do
  EXPECT_LT(rel_l2(Lg.host(), dl), 5e-3);
  cudaFree(dT);
}

// ---------------------------------------------------------------- embedding

TEST_F(CudaKernels, EmbeddingGatherAndScatterAdd) {
  const int64_t V = 10, h = 48, T = 4;
  const std::vector<int32_t> ids{3, 7, 3, 3};
  std::vector<float> table(static_cast<size_t>(V * h)), dout(static_cast<size_t>(T * h));
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i % 97) - 40.f;  // exact in bf16
  for (size_t i = 0; i < dout.size(); ++i) dout[i] = static_cast<float>(i % 13) - 6.f;
  Dev Tb(table, DType::BF16), Out(static_cast<size_t>(T * h), DType::BF16), Do(dout, DType::BF16),
      Dt(std::vector<float>(table.size(), 0.f), DType::BF16);
  int32_t* dI = nullptr;
  ZP_CUDA_CHECK(cudaMalloc(&dI, T * sizeof(int32_t)));
  ZP_CUDA_CHECK(cudaMemcpy(dI, ids.data(), T * sizeof(int32_t), cudaMemcpyHostToDevice));
  embedding_fwd(s, Tb.b(), dI, Out.b(), T, h);
  embedding_bwd(s, Do.b(), dI, Dt.b(), T, h);
  const auto out = Out.host(), dt = Dt.host();
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < h; ++j) EXPECT_EQ(out[t * h + j], table[ids[t] * h + j]);
  // Row 3 receives tokens 0, 2, 3; row 7 token 1; small integers add exactly in bf16.
  for (int64_t j = 0; j < h; ++j) {
    EXPECT_EQ(dt[3 * h + j], dout[0 * h + j] + dout[2 * h + j] + dout[3 * h + j]);
    EXPECT_EQ(dt[7 * h + j], dout[1 * h + j]);
    EXPECT_EQ(dt[0 * h + j], 0.f);
  }
  cudaFree(dI);
}

// ---------------------------------------------------------------- elementwise

TEST_F(CudaKernels, CastAxpyScaleSumSquares) {
  const size_t n = 10000;
  const auto x = random_bf16_values(n, 61, 1.f);
  std::vector<float> xf(n);
  std::mt19937 rng(62);
  std::normal_distribution<float> d(0.f, 1.f);
  for (auto& v : xf) v = d(rng);
  Dev F(xf, DType::F32), Bq(n, DType::BF16);
  cast(s, Bq.as<void>(), DType::BF16, F.as<void>(), DType::F32, static_cast<int64_t>(n));
  const auto bq = Bq.host();
  for (size_t i = 0; i < n; ++i)
    ASSERT_EQ(bq[i], bf16_bits_to_float(float_to_bf16_bits(xf[i]))) << i;  // RNE both
  // y (bf16) += 0.5 * x (fp32)
  Dev Y(x, DType::BF16);
  axpy(s, Y.as<void>(), DType::BF16, F.as<void>(), DType::F32, static_cast<int64_t>(n), 0.5f);
  std::vector<double> y(n);
  for (size_t i = 0; i < n; ++i) y[i] = x[i] + 0.5 * xf[i];
  EXPECT_LT(rel_l2(Y.host(), y), 5e-3);
  scale(s, F.as<void>(), DType::F32, static_cast<int64_t>(n), -2.f);
  const auto fs = F.host();
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(fs[i], -2.f * xf[i]);  // exact: times a power of two
  // sum of squares of n halves = n / 4 = 2500 exactly (partial sums are multiples of 1/4 < 2^22).
  Dev H(std::vector<float>(n, 0.5f), DType::BF16), Acc(std::vector<float>{0.f}, DType::F32);
  sum_squares(s, H.as<void>(), DType::BF16, static_cast<int64_t>(n), Acc.f());
  EXPECT_EQ(Acc.host()[0], 2500.f);
}

// ---------------------------------------------------------------- Adam

TEST_F(CudaKernels, MultiTensorAdamMatchesHostAdam) {
  // Sizes straddle the 65536-element chunk; several tensors share one launch.
  const std::vector<int64_t> sizes{70000, 1, 131073};
  AdamParams ap;
  ap.lr = 1e-3f;
  ap.weight_decay = 0.1f;
  ap.step = 3;
  ap.grad_scale = 0.5f;
  AdamHyper hp;
  hp.lr = ap.lr;
  hp.weight_decay = ap.weight_decay;
  hp.step = 3;
  hp.grad_scale = ap.grad_scale;
  for (DType gt : {DType::F32, DType::BF16}) {
    std::vector<std::unique_ptr<Dev>> keep;
    std::vector<AdamTensor> ts;
    std::vector<std::vector<float>> p, g, m, v;
    uint32_t seed = 70;
    for (int64_t n : sizes) {
      p.push_back(random_bf16_values(static_cast<size_t>(n), seed++));
      g.push_back(random_bf16_values(static_cast<size_t>(n), seed++, 0.01f));
      m.push_back(random_bf16_values(static_cast<size_t>(n), seed++, 0.001f));
      auto vv = random_bf16_values(static_cast<size_t>(n), seed++, 1e-5f);
      for (auto& x : vv) x = std::abs(x);
      v.push_back(vv);
      auto P = std::make_unique<Dev>(p.back(), DType::F32), M = std::make_unique<Dev>(m.back(), DType::F32),
           Vv = std::make_unique<Dev>(v.back(), DType::F32), G = std::make_unique<Dev>(g.back(), gt),
           O = std::make_unique<Dev>(static_cast<size_t>(n), DType::BF16);
      ts.push_back({P->f(), M->f(), Vv->f(), G->as<void>(), O->as<void>(), n});
      for (auto* d : {&P, &M, &Vv, &G, &O}) keep.push_back(std::move(*d));
    }
    multi_tensor_adam(s, ts, gt, DType::BF16, hp);
    for (size_t t = 0; t < sizes.size(); ++t) {
      AdamChunk c;
      c.param = p[t].data();
      c.grad = g[t].data();
      c.exp_avg = m[t].data();
      c.exp_avg_sq = v[t].data();
      c.n = sizes[t];
      host_adam_range(c, ap, 0, c.n, nullptr);
      const auto dp = keep[t * 5 + 0]->host(), dm = keep[t * 5 + 1]->host(), dv = keep[t * 5 + 2]->host(),
                 out = keep[t * 5 + 4]->host();
      std::vector<double> rp(p[t].begin(), p[t].end()), rm(m[t].begin(), m[t].end()),
          rv(v[t].begin(), v[t].end());
      EXPECT_LT(rel_l2(dp, rp), 1e-6);
      EXPECT_LT(rel_l2(dm, rm), 1e-6);
      EXPECT_LT(rel_l2(dv, rv), 1e-6);
      for (size_t i = 0; i < dp.size(); ++i) ASSERT_EQ(out[i], bf16_bits_to_float(float_to_bf16_bits(dp[i])));
    }
  }
}

}  // namespace
}  // namespace zeroplan::exec::cuda
