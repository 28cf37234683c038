#pragma once
// A vision-language model's vision tower and projector in the plan (issue 29 item 3): their parameters
// are model states beside the language tower's, trained or frozen (--freeze vision), and DeepSpeed
// partitions them like any other parameter (stage 3 partitions frozen ones too). Without images the tower
// does not run: nothing of it is gathered, reduced, saved or timed (a trained tower then gets DeepSpeed's
// zero gradients at stages 1-2). With --images-per-sample the frozen tower runs after the token embedding:
// gathered in the forward at stage 3, no backward, nothing saved, its forward GEMMs priced.
#include <vector>

#include "models/model_spec.h"
#include "planner/compute_stats.h"
#include "planner/training_spec.h"

namespace zeroplan::planner {

// The tower's and projector's groups as this workload holds them: each tensor frozen under --freeze
// vision. Empty for a model without a counted tower.
std::vector<models::LayerInventory> vision_groups_as_trained(const Workload& w);

// Every parameter the run holds, in the order the model registers them: the vision groups first (every
// wrapper zeroplan counts registers its vision model before its language model: transformers 5.24
// Gemma3Model, LlavaModel, Qwen2_5_VLModel, Qwen3VLModel __init__), then `language` (inventory() or
// runtime_inventory()).
std::vector<models::LayerInventory> with_vision(const Workload& w,
                                                std::vector<models::LayerInventory> language);

// Whether the run holds the tower frozen: --freeze vision, or LoRA (whose adapters zeroplan puts on the
// language tower only, everything else frozen).
bool vision_tower_frozen(const Workload& w);

// The frozen tower's forward GEMMs for the workload's images (compute_stats' vision_gemms): each Linear of
// the tower at the patches' rows, each of the projector at the image tokens' rows, and the patch embedding
// (a convolution of stride = kernel: one GEMM of [out, C x (T x) p x p]) at the patches'. Empty without
// images. The tower's attention and element-wise kernels are not priced (its attention: 4 x patches x
// window x width FLOPs per layer, a few percent of its GEMMs' at 1,024 patches and width 1,280).
std::vector<GemmShape> vision_forward_gemms(const Workload& w);

// Under LoRA: the adapter parameters PEFT would also put on the vision tower and projector, which zeroplan
// does not (its adapters go on the language tower only). PEFT matches target_modules by module name
// anywhere in the model (peft/tuners/tuners_utils.py check_target_module_exists) and "all-linear" takes
// every nn.Linear but the output embedding (_maybe_include_all_linear_layers, peft 0.21.2), so the
// tower's linears are targets too: each adds r x (in + out). 0 without LoRA or a tower.
int64_t vision_lora_parameters_left_out(const Workload& w);

}  // namespace zeroplan::planner
