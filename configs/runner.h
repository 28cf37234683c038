#pragma once
// Who hands the config to DeepSpeed decides what "auto" and absent keys become:
//  - DeepSpeed: deepspeed.initialize(config=...) directly. Nothing fills "auto": DeepSpeedConfigModel
//    sections drop it (default applies), plain keys keep the string (runtime/config.py).
//  - HF: the transformers Trainer (integrations/deepspeed.py HfTrainerDeepSpeedConfig): "auto" filled
//    from TrainingArguments and the model's hidden_size; a fixed value that differs from the
//    TrainingArguments value is a hard error (trainer_config_finalize: "Please correct the following
//    DeepSpeed config values that mismatch TrainingArguments values").
//  - Accelerate: `accelerate launch` + Accelerator.prepare (accelerate/accelerator.py
//    _prepare_deepspeed): the same keys filled, but with must_match=False (no mismatch error); the
//    micro-batch comes from the dataloader.
#include <string>
#include <string_view>

namespace zeroplan::configs {

enum class Runner { DeepSpeed, HF, Accelerate };

std::string_view runner_name(Runner r);  // "deepspeed" | "hf" | "accelerate"
// Throws UserError naming --runner for anything else.
Runner parse_runner(std::string_view s);

}  // namespace zeroplan::configs
