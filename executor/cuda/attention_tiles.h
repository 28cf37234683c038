#pragma once
// Shared-memory layout of the cuda backend's flash-style attention tiles (kernels_attention.cu) and
// the choice of tile size for a GPU. Host-only and constexpr (no CUDA headers), so the choice is
// unit-tested without a GPU (tests/test_cuda_host.cpp) and the kernels read their section offsets
// from the same formulas.
//
// A block works on one tile of `rows` query rows (Br) against tiles of `rows` key rows (Bc = Br),
// one warp per 16 rows (WMMA 16x16x16 fragments), so 64-row tiles run 4 warps and 32-row tiles 2.
// The per-block opt-in limits that decide the tile size (CUDA C++ Programming Guide, "Technical
// Specifications per Compute Capability", maximum shared memory per thread block):
//   sm_80 (A100) 163 KB = 166912 B; sm_86 / sm_89 (A40, L40S, RTX 30xx/40xx) 99 KB = 101376 B;
//   sm_90 (H100/H200) 227 KB = 232448 B.
#include <cstdint>

namespace zeroplan::exec::cuda {

enum class AttentionPass { Forward, Backward };

// Which tiles to launch: Auto = the largest that fits the device (64 rows, else 32); Rows64 and
// Rows32 force one (tests run both variants on every GPU; a forced variant that does not fit the
// device is refused like an Auto launch that fits nothing).
enum class AttentionTiles { Auto = 0, Rows64 = 64, Rows32 = 32 };

// Tile sizes the kernels are instantiated for, largest first (more rows per block = fewer K/V
// re-reads from global memory, so prefer the largest that fits).
inline constexpr int kAttentionTileRows[] = {64, 32};

// Byte layout of one block's dynamic shared memory. Leading dimensions (elements) are padded: WMMA
// needs ldm % 8 == 0 for 16-bit and % 4 == 0 for fp32 operands and 32-byte aligned fragment
// pointers; the padding also spreads rows over the shared-memory banks.
struct AttentionSmemLayout {
  int64_t ld_q = 0;  // bf16 [rows][D] tiles (Q, K, V, dO): D + 8
  int64_t ld_s = 0;  // fp32 [rows][rows] score tiles (S, dP): rows + 4
  int64_t ld_p = 0;  // bf16 [rows][rows] probability tiles (P, dS): rows + 8
  int64_t ld_o = 0;  // fp32 [rows][D] accumulators (O, dK, dV, dQ): D + 4
  int64_t bf_tile = 0, s_tile = 0, p_tile = 0, o_tile = 0, stats = 0;  // section sizes in bytes
  // forward sections: Q, K, V, S, P, O, row max m, row sum l
  int64_t fwd_q = 0, fwd_k = 0, fwd_v = 0, fwd_s = 0, fwd_p = 0, fwd_o = 0, fwd_m = 0, fwd_l = 0;
  int64_t fwd_bytes = 0;
  // backward sections: K, V, Q, dO, S|dP (two fp32 score tiles, reused for the fp32 dQ tile once dS
  // is formed, so the region is the larger of the two), P, dS, dK, dV, lse, delta
  int64_t bwd_k = 0, bwd_v = 0, bwd_q = 0, bwd_do = 0, bwd_s = 0, bwd_dp = 0, bwd_p = 0, bwd_ds = 0;
  int64_t bwd_dk = 0, bwd_dv = 0, bwd_lse = 0, bwd_delta = 0;
  int64_t bwd_bytes = 0;
};

constexpr AttentionSmemLayout attention_smem_layout(int64_t head_dim, int64_t rows) {
  AttentionSmemLayout l;
  l.ld_q = head_dim + 8;
  l.ld_s = rows + 4;
  l.ld_p = rows + 8;
  l.ld_o = head_dim + 4;
  l.bf_tile = rows * l.ld_q * 2;
  l.s_tile = rows * l.ld_s * 4;
  l.p_tile = rows * l.ld_p * 2;
  l.o_tile = rows * l.ld_o * 4;
  l.stats = rows * 4;
  l.fwd_q = 0;
  l.fwd_k = l.fwd_q + l.bf_tile;
  l.fwd_v = l.fwd_k + l.bf_tile;
  l.fwd_s = l.fwd_v + l.bf_tile;
  l.fwd_p = l.fwd_s + l.s_tile;
  l.fwd_o = l.fwd_p + l.p_tile;
  l.fwd_m = l.fwd_o + l.o_tile;
  l.fwd_l = l.fwd_m + l.stats;
  l.fwd_bytes = l.fwd_l + l.stats;
  const int64_t sdp_region = 2 * l.s_tile > l.o_tile ? 2 * l.s_tile : l.o_tile;
  l.bwd_k = 0;
  l.bwd_v = l.bwd_k + l.bf_tile;
  l.bwd_q = l.bwd_v + l.bf_tile;
  l.bwd_do = l.bwd_q + l.bf_tile;
  l.bwd_s = l.bwd_do + l.bf_tile;
  l.bwd_dp = l.bwd_s + l.s_tile;
  l.bwd_p = l.bwd_s + sdp_region;
  l.bwd_ds = l.bwd_p + l.p_tile;
  l.bwd_dk = l.bwd_ds + l.p_tile;
  l.bwd_dv = l.bwd_dk + l.o_tile;
  l.bwd_lse = l.bwd_dv + l.o_tile;
  l.bwd_delta = l.bwd_lse + l.stats;
  l.bwd_bytes = l.bwd_delta + l.stats;
  return l;
}

constexpr int64_t attention_smem_bytes(AttentionPass pass, int64_t head_dim, int64_t rows) {
  const AttentionSmemLayout l = attention_smem_layout(head_dim, rows);
  return pass == AttentionPass::Forward ? l.fwd_bytes : l.bwd_bytes;
}

// The largest instantiated tile whose `pass` fits in `optin_bytes` (the device's
// cudaDevAttrMaxSharedMemoryPerBlockOptin); 0 when none does (the launcher then refuses, naming
// the shortfall).
constexpr int attention_tile_rows_for(AttentionPass pass, int64_t head_dim, int64_t optin_bytes) {
  for (const int rows : kAttentionTileRows)
    if (attention_smem_bytes(pass, head_dim, rows) <= optin_bytes) return rows;
  return 0;
}

}  // namespace zeroplan::exec::cuda
