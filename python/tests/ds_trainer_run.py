"""One rank of a real HF Trainer + DeepSpeed (ZeRO-2, CPU accelerator, gloo) run with
ZeroplanCallback(strict=True); launched 2x by test_integrations.DeepSpeedTrainerTest via torchrun.
Args: fit|nofit OUT_DIR. Prints one "RESULT {json}" line per rank."""
import os, sys, json
os.environ.setdefault("DS_ACCELERATOR", "cpu")
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments, TrainerCallback
from zeroplan.integrations import ZeroplanCallback, ZeroplanRunRefused

mode = sys.argv[1]
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
model = LlamaForCausalLM(cfg)
ids = torch.randint(0, 128, (8, 32))
data = [{"input_ids": r, "labels": r} for r in ids]
ds = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
      "zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}}
steps = []
class Count(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw): steps.append(state.global_step)
args = TrainingArguments(output_dir=sys.argv[2], per_device_train_batch_size=2, max_steps=2, report_to=[],
                         use_cpu=True, save_strategy="no", logging_strategy="no", deepspeed=ds, bf16=True)
knobs = {"gpu_mem": "0.55GB"} if mode == "nofit" else {}
cb = ZeroplanCallback(gpus=f"{args.world_size}xA40", strict=True, seq_len=32, **knobs)
tr = Trainer(model=model, args=args, train_dataset=data, callbacks=[cb, Count()])
try:
    tr.train()
    out = {"rank": args.process_index, "world": args.world_size, "steps": len(steps), "verdict": cb.result.verdict, "refused": False,
           "resolved_micro": cb.result.config.get("train_micro_batch_size_per_gpu")}
except ZeroplanRunRefused as e:
    out = {"rank": args.process_index, "world": args.world_size, "steps": len(steps), "verdict": cb.result.verdict, "refused": True}
print("RESULT", json.dumps(out), flush=True)
