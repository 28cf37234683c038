#pragma once
// ZeRO++ quantized communication as DeepSpeed 0.19.8 runs it at stage 3 (ZeRO++ paper, arXiv 2306.10209,
// sections 3.1 and 3.3). Both need CUDA kernels (op_builder QuantizerBuilder), so the CPU harness cannot
// record them (tests/deepspeed/fixtures-hpz/failures-0.19.8.json): every rule below is read from the code
// and cited, and the per-call sizes are checked by hand counts (tests/test_zeropp_quant.cpp).
//
// qwZ, zero_optimization.zero_quantized_weights:
//  - Every parameter fetch (partitioned_param_coordinator.py __all_gather_params_ -> partition_parameters.py
//    all_gather_coalesced with quantize=True) concatenates the rank's partitions, casts them to fp16 and
//    quantizes them to int8 in groups (CUDAQuantizer.quantize, symmetric, one fp32 scale per group), then
//    issues two all-gathers: the int8 data (1 B per partition element) and the fp32 scales. A fetch of one
//    parameter takes _all_gather_sequential, which does the same per parameter.
//  - On wait (AllGatherCoalescedHandle.wait), the gathered int8 buffer is dequantized to fp16 in one
//    kernel and each parameter is rebuilt with torch.cat(...).to(its dtype).
//  - The hpZ secondary gathers are quantized the same way (use_secondary_tensor).
// qgZ, zero_optimization.zero_quantized_gradients:
//  - stage3.py __avg_scatter_grads calls runtime/comm/coalesced_collectives.py all_to_all_quant_reduce
//    when world / GPUs per node > 1, once per IPG bucket, which treats every gradient on its own:
//    * a 1-D gradient, or one whose numel is not a multiple of 2 x world, is reduce-scattered alone
//      (reduce_scatter_coalesced([tensor]));
//    * any other: swizzle_quant to int4 with G = max(dim0, dim1, world) groups (one fp32 scale each), an
//      all-to-all of the data (numel / 2 bytes) and one of the scales (4 G bytes) inside the node,
//      quantized_reduction (the node's sum, re-quantized: numel / (2 L) bytes, G / L scales), an all-to-all
//      of each across the nodes (the ranks of one local index), dequantize and a sum over the nodes.
#include <cstdint>
#include <vector>

namespace zeroplan::planner {

// CUDAQuantizer.target_group_size (partition_parameters.py): "the optimal size is 4k, so we set the
// target to be below 8k".
inline constexpr int64_t kQwzTargetGroupSize = 8000;

// The number of quantization groups CUDAQuantizer.quantize picks for an n-element input (its
// group_size_cache search: start at ceil(n / 8000), step up to the first count g with n % (8 g) == 0,
// then double while n % (16 g) == 0 and n / g > 8000). 0 when no such count exists (n not a multiple
// of 8): DeepSpeed then fails its assertion "Qantized weight requires the number of weights be a
// multiple of 8".
int64_t qwz_groups(int64_t n);

// The callers the per-call list names qgZ's all-to-alls by (their groups are tagged CallGroup::kQgzNode
// and kQgzAcross, which collective_families.cpp prices on the node's link, or one rank per node across
// the network).
inline constexpr const char* kQgzIntraCaller = "all_to_all_quant_reduce (intra-node)";
inline constexpr const char* kQgzInterCaller = "all_to_all_quant_reduce (inter-node)";

// One qgZ exchange of a gradient tensor, as all_to_all_quant_reduce issues it (sizes in bytes, this
// rank's input).
struct QgzExchange {
  bool quantized = false;  // false: the tensor is reduce-scattered alone (1-D, or numel % (2 world) != 0)
  int64_t intra_data = 0, intra_scales = 0;  // all_to_all_single in the node's group (L ranks)
  int64_t inter_data = 0, inter_scales = 0;  // all_to_all_single across the nodes (world / L ranks)
};
// `lead` = max(shape[0], shape[1]) for a tensor of two or more dimensions, 0 for a 1-D one.
QgzExchange qgz_exchange(int64_t numel, int64_t lead, int world, int gpus_per_node);

// Element-wise traffic the quantized paths add on the GPU (bytes per element, read + written), for the
// time model's operator table:
//  - qwZ, per gathered element: dequantize int8 -> fp16 (1 + 2) and the parameter's .to(bf16) (2 + 2)
//    after the torch.cat both paths share; fp16 training needs no cast (3 only).
//  - qwZ, per element of the rank's partition before the gather: torch.cat (2 + 2), .to(fp16) (2 + 2),
//    quantize (2 + 1).
//  - qgZ, per gradient element of a quantized tensor: swizzle_quant (2 + 0.5); quantized_reduction
//    reads the node's L int4 slices and writes one (0.5 + 0.5 / L); dequantize (0.5 / L + 2 / L); the
//    sum over nodes (2 / L + 2 / (L nodes)).
double qwz_gathered_bytes_per_elem(bool bf16);
inline constexpr double kQwzPartitionBytesPerElem = 11.0;
double qgz_bytes_per_grad_elem(int gpus_per_node, int nodes);

}  // namespace zeroplan::planner
