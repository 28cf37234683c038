"""The Python API against the CLI (issue 30): for each command, the API's ``to_dict()`` must equal
what the ``zeroplan`` program prints with ``--json`` for the same arguments, and user errors must
carry the CLI's own one-line message. The CLI binary is the reference: ZEROPLAN_CLI (default
build/zeroplan). Runs with the installed wheel (scripts/test_wheel.sh) or with PYTHONPATH pointing
at a built extension.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import zeroplan

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI = os.environ.get("ZEROPLAN_CLI", os.path.join(SRC, "build", "zeroplan"))


def cli(*args):
    """(exit code, stdout, stderr) of the real program."""
    p = subprocess.run([CLI, *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def cli_json(*args):
    code, out, err = cli(*args, "--json")
    assert code in (0, 1), f"zeroplan {' '.join(args)} exited {code}: {err}"
    return code, json.loads(out)


# A small sweep over models, clusters, stages and methods (README "Using it"), including a case
# where nothing fits (exit 1, recommendation null) and a parameter-count-only model.
PLAN_SWEEP = [
    (("--model", "13b", "--gpus", "4xA40"), dict(model="13b", gpus="4xA40")),
    (("--model", "gemma-3-4b", "--gpus", "2xA100-80GB", "--freeze", "vision", "--images-per-sample", "2"),
     dict(model="gemma-3-4b", gpus="2xA100-80GB", freeze="vision", images_per_sample=2)),
    (("--model", "7b", "--gpus", "8xA100-80GB", "--stage", "2", "--micro-batch", "1"),
     dict(model="7b", gpus="8xA100-80GB", stage=2, micro_batch=1)),
    (("--model", "70b", "--gpus", "2x8xH100", "--global-batch", "512"),
     dict(model="70b", gpus="2x8xH100", global_batch=512)),
    (("--model", "llama-3.1-8b", "--gpus", "2xA100-80GB", "--method", "lora", "--lora-rank", "16"),
     dict(model="llama-3.1-8b", gpus="2xA100-80GB", method="lora", lora_rank=16)),
    (("--model", "qwen3-0.6b", "--gpus", "1xRTX3090", "--stage", "0", "--checkpointing", "full"),
     dict(model="qwen3-0.6b", gpus="1xRTX3090", stage=0, checkpointing="full")),
    (("--model", "70b", "--gpus", "1xA40", "--offload-optimizer", "none", "--offload-param", "none"),
     dict(model="70b", gpus="1xA40", offload_optimizer="none", offload_param="none")),
    (("--params", "7.5e9", "--gpus", "64xA100-80GB", "--stage", "3"),
     dict(params=7.5e9, gpus="64xA100-80GB", stage=3)),
]


class PlanTest(unittest.TestCase):
    def test_sweep_equals_cli_json(self):
        for cli_args, kwargs in PLAN_SWEEP:
            with self.subTest(args=" ".join(cli_args)):
                code, expected = cli_json(*cli_args)
                r = zeroplan.plan(**kwargs)
                self.assertIsInstance(r, zeroplan.PlanResult)
                self.assertEqual(r.to_dict(), expected)
                # exit code 1 <=> nothing fits <=> no recommendation (then `reason` says why)
                self.assertEqual(code == 1, r.recommended is None)
                if r.recommended is None:
                    self.assertTrue(r.reason)

    def test_typed_fields(self):
        r = zeroplan.plan(model="13b", gpus="4xA40")
        rec = r.recommended
        self.assertIsInstance(rec, zeroplan.Plan)
        self.assertIsInstance(rec.memory.gpu, zeroplan.GpuMemory)
        self.assertIsInstance(rec.communication.collectives[0], zeroplan.Collective)
        self.assertEqual(rec.memory.gpu.peak, r.to_dict()["recommendation"]["memory"]["gpu"]["peak"])
        self.assertLessEqual(rec.memory.gpu.peak, rec.memory.gpu.usable)
        self.assertEqual(sorted(p.zero_stage for p in r.plans), [0, 1, 2, 3])
        self.assertIn(f"ZeRO-{rec.zero_stage}", str(rec))

    def test_vision_language_model_fields(self):
        # Gemma-3-4B: transformers 5.24 counts 3,880,263,168 in the language tower (Gemma3ForCausalLM,
        # tests/data/models/param_counts.json) and 416,866,032 + 2,950,272 in the SigLIP tower and projector
        # (tests/test_vision_tower.cpp).
        r = zeroplan.plan(model="gemma-3-4b", gpus="2xA100-80GB", freeze="vision", images_per_sample=2)
        self.assertEqual(r.model.language_parameters, 3_880_263_168)
        self.assertEqual(r.model.vision_parameters, 416_866_032 + 2_950_272)
        self.assertEqual(r.model.parameters, 3_880_263_168 + 416_866_032 + 2_950_272)
        self.assertEqual(r.model.trainable_parameters, 3_880_263_168)
        self.assertEqual(r.model.vision_tower, "siglip_vision_model")
        self.assertTrue(r.model.vision_frozen)
        self.assertEqual(r.model.images_per_sample, 2)
        self.assertIsNone(zeroplan.plan(model="13b", gpus="4xA40").model.vision_parameters)

    def test_tensor_parallel_layout_and_groups(self):
        # AutoTP (--tp): the plan carries the layout and each collective its group (README contract).
        r = zeroplan.plan(model="llama-3.1-8b", gpus="4xA100-80GB", tp=2, stage=2)
        rec = r.recommended
        self.assertEqual(rec.tensor_parallel_size, 2)
        self.assertEqual(rec.data_parallel_size, 2)
        self.assertEqual(rec.zero_group_size, 2)
        groups = {c.group: c.group_size for c in rec.communication.collectives}
        self.assertEqual(groups.get("tensor_parallel"), 2)
        self.assertEqual(groups.get("zero"), 2)
        self.assertEqual(rec.deepspeed_config["tensor_parallel"], {"autotp_size": 2})

    def test_hpz_secondary_group(self):
        # ZeRO++ hpZ (--hpz): the backward's gathers run in the hpZ group, the forward's over every GPU.
        r = zeroplan.plan(model="7b", gpus="2x8xA100", hpz=8, stage=3, micro_batch=1)
        rec = r.recommended
        self.assertEqual(rec.hpz_partition_size, 8)
        groups = {c.name: (c.group, c.group_size) for c in rec.communication.collectives}
        self.assertEqual(groups["stage-3 backward parameter all-gathers"], ("hpz", 8))
        self.assertEqual(groups["stage-3 forward parameter all-gathers"], ("zero", 16))
        self.assertEqual(rec.deepspeed_config["zero_optimization"]["zero_hpz_partition_size"], 8)

    def test_hf_config_dict_and_object(self):
        path = os.path.join(SRC, "models", "zoo", "llama-2-7b.json")
        with open(path) as f:
            config = json.load(f)
        _, expected = cli_json("--model", path, "--gpus", "4xA40", "--stage", "3")
        got = zeroplan.plan(model=config, gpus="4xA40", stage=3).to_dict()
        # The temporary config.json's path is replaced by the config's own name.
        self.assertNotEqual(got["model"]["name"], expected["model"]["name"])
        got["model"]["name"] = expected["model"]["name"]
        self.assertEqual(got, expected)

        class FakePretrainedConfig:  # what transformers.PretrainedConfig offers: to_dict()
            def to_dict(self):
                return dict(config, _name_or_path="my-llama")

        r = zeroplan.plan(model=FakePretrainedConfig(), gpus="4xA40", stage=3)
        self.assertEqual(r.model.name, "my-llama")
        self.assertEqual(r.model.parameters, expected["model"]["parameters"])

    def test_hub_id_of_a_zoo_model(self):
        # The zoo records the Hub repo each config came from: no network needed for these.
        _, expected = cli_json("--model", "llama-2-7b", "--gpus", "4xA40")
        self.assertEqual(zeroplan.plan(model="meta-llama/Llama-2-7b-hf", gpus="4xA40").to_dict(), expected)

    def test_emit_writes_the_cli_files(self):
        with tempfile.TemporaryDirectory() as d:
            api_path, cli_path = os.path.join(d, "api.json"), os.path.join(d, "cli.json")
            r = zeroplan.plan(model="13b", gpus="4xA40", emit=api_path)
            cli("--model", "13b", "--gpus", "4xA40", "--emit", cli_path)
            with open(api_path) as a, open(cli_path) as c:
                self.assertEqual(json.load(a), json.load(c))
            self.assertEqual(r.emitted["path"], api_path)


class ErrorTest(unittest.TestCase):
    CASES = [
        (("--model", "13b", "--gpus", "4xNOSUCHGPU"), dict(model="13b", gpus="4xNOSUCHGPU")),
        (("--model", "13bb", "--gpus", "4xA40"), dict(model="13bb", gpus="4xA40")),
        (("--model", "13b", "--gpus", "4xA40", "--micro-batch", "0"), dict(model="13b", gpus="4xA40", micro_batch=0)),
        (("--model", "13b", "--gpus", "4xA40", "--no-such-flag", "1"), dict(model="13b", gpus="4xA40", no_such_flag=1)),
        (("--gpus", "4xA40"), dict(gpus="4xA40")),
    ]

    def test_messages_equal_cli(self):
        for cli_args, kwargs in self.CASES:
            with self.subTest(args=" ".join(cli_args)):
                code, out, err = cli(*cli_args, "--json")
                self.assertEqual(code, 2)
                self.assertEqual(out, "")
                prefix = "zeroplan: error: "
                self.assertTrue(err.startswith(prefix), err)
                with self.assertRaises(zeroplan.ZeroplanError) as ctx:
                    zeroplan.plan(**kwargs)
                self.assertEqual(str(ctx.exception), err[len(prefix):].rstrip("\n"))

    def test_validate_is_refused_in_process(self):
        # `validate` replaces the CLI process with zeroplan-exec; in Python it must not end the interpreter.
        with self.assertRaises(zeroplan.ZeroplanError) as ctx:
            zeroplan.run_json(["validate", "--backend", "cpu"])
        self.assertIn("zeroplan-exec", str(ctx.exception))


class CheckTest(unittest.TestCase):
    def test_examples_equal_cli_json(self):
        cases = [
            ("13b-4xA40-zero3.json", "13b", "4xA40", {}),
            ("13b-4xA40-zero2.json", "13b", "4xA40", {"checkpointing": "full"}),
            ("7b-4xA40-zero1.json", "7b", "4xA40", {}),
            ("13b-4xA40-zero3-hf-auto.json", "13b", "4xA40", {"micro_batch": 2}),
        ]
        for name, model, gpus, knobs in cases:
            path = os.path.join(SRC, "configs", "examples", name)
            extra = zeroplan.knob_args(knobs)
            with self.subTest(config=name):
                code, expected = cli_json("check", path, "--model", model, "--gpus", gpus, *extra)
                r = zeroplan.check(path, model=model, gpus=gpus, **knobs)
                self.assertIsInstance(r, zeroplan.CheckResult)
                self.assertEqual(r.to_dict(), expected)
                self.assertEqual(r.ok, code == 0)

    def test_refused_dict_config(self):
        config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 7}}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "ds.json")
            with open(path, "w") as f:
                json.dump(config, f)
            code, expected = cli_json("check", path, "--model", "7b", "--gpus", "2xA40")
        self.assertEqual(code, 1)
        r = zeroplan.check(config, model="7b", gpus="2xA40")
        self.assertEqual(r.config_path, "<dict>")
        got = r.to_dict()
        got["config_path"] = expected["config_path"]
        self.assertEqual(got, expected)
        self.assertEqual(r.verdict, "refused")
        self.assertTrue(r.deepspeed_would_reject)
        self.assertEqual(r.first_issue.severity, "error")

    def test_missing_file_message(self):
        code, _, err = cli("check", "/no/such.json", "--model", "7b", "--gpus", "2xA40")
        self.assertEqual(code, 2)
        with self.assertRaises(zeroplan.ZeroplanError) as ctx:
            zeroplan.check("/no/such.json", model="7b", gpus="2xA40")
        self.assertEqual("zeroplan: error: " + str(ctx.exception) + "\n", err)


class DiagnoseTest(unittest.TestCase):
    def test_logs_equal_cli_json(self):
        d = os.path.join(SRC, "tests", "diagnose")
        for log, args in [("z2_tiny_buckets.log", ()), ("z2_offload.log", ("--model", "7b", "--gpus", "4xA40"))]:
            with self.subTest(log=log):
                _, expected = cli_json("diagnose", os.path.join(d, log), *args)
                kw = dict(zip(("model", "gpus"), args[1::2]))
                r = zeroplan.diagnose(os.path.join(d, log), **kw)
                self.assertIsInstance(r, zeroplan.DiagnoseResult)
                self.assertEqual(r.to_dict(), expected)
                self.assertTrue(all(isinstance(c, zeroplan.Cause) for c in r.causes))


class ListsTest(unittest.TestCase):
    def test_models_and_gpus(self):
        self.assertEqual(zeroplan.models(), cli_json("models")[1])
        self.assertEqual(zeroplan.gpus(), cli_json("gpus")[1])


if __name__ == "__main__":
    unittest.main()
