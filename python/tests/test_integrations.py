"""zeroplan.integrations with real transformers on CPU (issue 30): a run that fits trains, one that
does not is stopped by ZeroplanCallback(strict=True) before its first step, and a DeepSpeed config
DeepSpeed would refuse is stopped too. Skipped where transformers/torch are not installed (the wheel's
CI venv); run it in the pinned stack:
    PYTHONPATH=<dir holding the installed zeroplan package> .venv-ds/bin/python -m unittest test_integrations
"""

import importlib.util
import os
import tempfile
import unittest

HAVE_HF = all(importlib.util.find_spec(m) for m in ("torch", "transformers", "accelerate"))


@unittest.skipUnless(HAVE_HF, "needs torch, transformers and accelerate")
class TrainerCallbackTest(unittest.TestCase):
    def setUp(self):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM, TrainerCallback

        torch.manual_seed(0)
        self.config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        self.model = LlamaForCausalLM(self.config)
        ids = torch.randint(0, 128, (8, 32))
        self.data = [{"input_ids": r, "labels": r} for r in ids]
        self.steps = []
        steps = self.steps

        class CountSteps(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                steps.append(state.global_step)

        self.count = CountSteps()
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def trainer(self, callback, **args):
        from transformers import Trainer, TrainingArguments

        a = TrainingArguments(output_dir=self.tmp.name, per_device_train_batch_size=2, max_steps=2, report_to=[],
                              use_cpu=True, save_strategy="no", logging_strategy="no", **args)
        return Trainer(model=self.model, args=a, train_dataset=self.data, callbacks=[callback, self.count])

    def test_fitting_run_trains(self):
        from zeroplan.integrations import ZeroplanCallback

        cb = ZeroplanCallback(gpus="1xA40", strict=True, seq_len=32)
        self.trainer(cb).train()
        self.assertEqual(len(self.steps), 2)
        self.assertIsNotNone(cb.result.recommended)
        # What the callback planned is the run: this model's parameter count, its micro-batch.
        self.assertEqual(cb.result.model.parameters, sum(p.numel() for p in self.model.parameters()))
        self.assertEqual(cb.result.plans[0].micro_batch, 2)

    def test_non_fitting_run_stops_before_first_step(self):
        from zeroplan.integrations import ZeroplanCallback, ZeroplanRunRefused

        # 0.55 GB per GPU: 5% margin kept free, the rest (0.52 GB) is less than the A40 profile's CUDA context
        # (512 MiB = 0.537 GB), so nothing fits.
        cb = ZeroplanCallback(gpus="1xA40", strict=True, seq_len=32, gpu_mem="0.55GB")
        with self.assertRaises(ZeroplanRunRefused) as ctx:
            self.trainer(cb).train()
        self.assertEqual(self.steps, [])
        self.assertIn("does_not_fit", str(ctx.exception))
        # Not strict: the same run only logs and trains.
        self.steps.clear()
        with self.assertLogs("zeroplan", level="WARNING"):
            self.trainer(ZeroplanCallback(gpus="1xA40", seq_len=32, gpu_mem="0.55GB")).train()
        self.assertEqual(len(self.steps), 2)

    def test_refused_deepspeed_config_stops(self):
        from types import SimpleNamespace

        from zeroplan.integrations import ZeroplanRunRefused, check_training_run, summarize

        # What the Trainer exposes once DeepSpeed is configured: the resolved config on args.
        ds = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "train_batch_size": 2,
              "bf16": {"enabled": True}, "zero_optimization": {"stage": 3, "reduce_bucket_size": 0}}
        args = SimpleNamespace(world_size=1, per_device_train_batch_size=2, gradient_accumulation_steps=1,
                               gradient_checkpointing=False, bf16=True, fp16=False,
                               hf_deepspeed_config=SimpleNamespace(config=ds))
        r = check_training_run(args, self.model, gpus="1xA40", seq_len=32)
        self.assertEqual(r.verdict, "refused")
        self.assertIn("refuse", summarize(r))
        from zeroplan.integrations import ZeroplanCallback

        cb = ZeroplanCallback(gpus="1xA40", strict=True, seq_len=32)
        with self.assertRaises(ZeroplanRunRefused):
            cb.on_train_begin(args, SimpleNamespace(is_world_process_zero=True), None, model=self.model)

    def test_sequence_parallel_from_parallelism_config(self):
        from types import SimpleNamespace

        from zeroplan.integrations import check_training_run

        # TrainingArguments(parallelism_config=ParallelismConfig(sp_backend="deepspeed", sp_size=2)) on 2 GPUs:
        # the plan is the Ulysses one (4 heads over 2 ranks, 32 tokens -> 16 per rank). The DeepSpeed config
        # need not say so (accelerate hands DeepSpeed the SP mpu), so only the ParallelismConfig tells.
        ds = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
              "zero_optimization": {"stage": 2}}
        args = SimpleNamespace(world_size=2, per_device_train_batch_size=2, gradient_accumulation_steps=1,
                               gradient_checkpointing=False, bf16=True, fp16=False,
                               parallelism_config=SimpleNamespace(sp_backend="deepspeed", sp_size=2),
                               hf_deepspeed_config=SimpleNamespace(config=ds))
        r = check_training_run(args, self.model, gpus="2xA40", seq_len=32)
        self.assertEqual(r.predicted.sequence_parallel_size, 2)
        self.assertEqual(r.predicted.data_parallel_size, 1)

    def test_check_accelerator(self):
        from accelerate import Accelerator

        from zeroplan.accelerate import check_accelerator
        from zeroplan.integrations import ZeroplanRunRefused

        acc = Accelerator(cpu=True)
        r = check_accelerator(acc, self.model, gpus="1xA40", seq_len=32, micro_batch=2)
        self.assertIsNotNone(r.recommended)
        with self.assertRaises(ZeroplanRunRefused):
            check_accelerator(acc, self.model, gpus="1xA40", seq_len=32, micro_batch=2, gpu_mem="0.55GB", strict=True)


HAVE_DS = HAVE_HF and importlib.util.find_spec("deepspeed") is not None


@unittest.skipUnless(HAVE_DS, "needs deepspeed (CPU accelerator) besides torch and transformers")
class DeepSpeedTrainerTest(unittest.TestCase):
    """2 ranks of a real Trainer + DeepSpeed ZeRO-2 on CPU (DS_ACCELERATOR=cpu, gloo), "auto" values
    resolved by the Trainer: a fitting run trains its 2 steps; on 0.55 GB GPUs (less than the CUDA
    context once the margin is kept) both ranks stop before their first step."""

    def run_ranks(self, mode, port):
        import subprocess
        import sys

        import zeroplan

        env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1",
                   PYTHONPATH=os.path.dirname(os.path.dirname(zeroplan.__file__)))
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ds_trainer_run.py")
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                "--master_port", str(port), script, mode, out],
                               capture_output=True, text=True, env=env, timeout=600)
        import json

        results = [json.loads(l.split("RESULT ", 1)[1]) for l in p.stdout.splitlines() if l.startswith("RESULT ")]
        self.assertEqual(len(results), 2, p.stdout[-2000:] + p.stderr[-3000:])
        return sorted(results, key=lambda r: r["rank"])

    def test_fitting_run_trains(self):
        for r in self.run_ranks("fit", 29631):
            self.assertEqual((r["world"], r["steps"], r["verdict"], r["refused"]), (2, 2, "fits", False))
            self.assertEqual(r["resolved_micro"], 2)  # the Trainer's resolved config reached the check

    def test_non_fitting_run_stops_on_every_rank(self):
        for r in self.run_ranks("nofit", 29632):
            self.assertEqual((r["steps"], r["verdict"], r["refused"]), (0, "does_not_fit", True))


if __name__ == "__main__":
    unittest.main()
