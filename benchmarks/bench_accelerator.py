"""Accelerator benchmark without TensorFlow: parity, pre-training step and inference vs peers.

    KERAS_BACKEND=jax python benchmarks/bench_accelerator.py                 # on a GPU: BERT-base
    python benchmarks/bench_accelerator.py --preset tiny --steps 3           # CPU smoke run (~2 min on 2 cores)
    python benchmarks/bench_accelerator.py --runners bert_keras,hf_compile --configs 128:256 --json out.jsonl

Needs JAX (with CUDA on a GPU machine), keras, torch and transformers; keras-hub is optional.
TensorFlow is never imported: bert-keras' model path runs on Keras' JAX backend (the default
here; ``KERAS_BACKEND=torch`` also works for the bert-keras and keras-hub runners).

Prints one JSON object per line on stdout, each with a ``kind``:

  machine        backend, library versions, accelerator kind, CPU model and its bf16/VNNI flags.
  matmul_peak    the best bf16 matmul throughput measured here (8192^2 and 4096^2 on an
                 accelerator, 1024^2 on a CPU), in the framework of the Keras backend; the
                 denominator of every MFU below.
  parity         a randomly initialised transformers `BertForPreTraining` of the preset's sizes,
                 saved with ``save_pretrained`` (safetensors) and read back by
                 ``bert_keras.load_checkpoint(folder, task="pretraining")``; float32 at full
                 precision (JAX matmul precision "highest", no TF32), a padded batch; the max
                 abs differences of sequence_output (real positions), the MLM logits at the
                 masked positions and the NSP logits.
  pretrain_step  one training step (forward, backward, AdamW) in bf16 mixed precision, per
                 ``--configs`` entry (seq_len:batch), on one random batch placed on the device
                 once and repeated; runners:
                   bert_keras  `BertPretrainer` (MLM + NSP), policy "mixed_bfloat16",
                               ``compile(AdamW(1e-4))`` and ``train_on_batch``;
                   hf_eager    transformers `BertForPreTraining`, SDPA attention,
                               ``torch.autocast`` bf16, ``torch.optim.AdamW`` (fused on CUDA);
                   hf_compile  the same through ``torch.compile`` (CUDA only unless
                               ``--cpu-compile``);
                   keras_hub   `keras_hub.models.BertMaskedLM` on a `BertBackbone` of the same
                               sizes (no NSP head), "mixed_bfloat16", ``train_on_batch``.
                 Each reports the median of ``--steps`` timed steps after ``--warmup`` untimed
                 ones (the device synchronised before every clock read), seq/s, TFLOP/s and MFU.
  inference      a 2-class classifier's bf16 forward at length 128 and the first config's batch:
                 bert-keras `BertClassifier.predict_on_batch` vs transformers
                 `BertForSequenceClassification` under autocast bf16 (inference mode), ex/s.
  summary        per config: bert-keras seq/s over torch.compile, HF eager and keras-hub, and
                 every runner's MFU; and the inference ratio.

Model FLOPs per training sequence (the same count for every runner, so MFU ratios equal
throughput ratios; Hugging Face's MLM projection over all L positions is not counted):

    6 * layers * L * 12 H^2  +  12 * layers * L^2 * H  +  6 * P * (H^2 + H V)  +  12 H^2

L = sequence length, H = hidden size, V = vocabulary (30522), P = round(0.15 L) masked
positions: the blocks' dense weights (QKV, output, FFN with 4H), the attention scores and
values, the MLM transform and tied projection at the masked positions, pooler and NSP.

Every runner runs in a child process of this script, so that JAX and torch never contend for
one device's memory (the two children that hold both, and ``--inline``, which runs every runner
in this process, turn JAX's preallocation off).  A runner that needs something absent prints a
line with ``skipped`` and the reason; a runner that fails prints a line with ``error`` and the
exit status becomes 1 (as it does when parity exceeds ``--parity-tol``).  Progress and the
children's tracebacks go to stderr.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# The presets, batch and FLOPs count are the CPU pre-training benchmark's (its module imports
# no framework at its top).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pretrain import PRESETS, VOCAB, batch_arrays, model_flops_per_sequence, predictions  # noqa: E402,F401

MAX_POSITIONS = 512
DEFAULT_CONFIGS = {"tiny": "128:8,512:2"}  # every other preset: the BERT-base batches below
GPU_CONFIGS = "128:256,512:64"
PRETRAIN_RUNNERS = ("bert_keras", "hf_eager", "hf_compile", "keras_hub")
RUNNERS = ("parity",) + PRETRAIN_RUNNERS + ("inference",)
MARK = "@bench_accelerator "  # prefix of a child's result lines on its stdout


# =========================================================================== timing
def hf_config(preset, **kwargs):
    import transformers

    layers, hidden, heads = PRESETS[preset]
    return transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=4 * hidden, max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
        hidden_act="gelu", attn_implementation="sdpa", **kwargs)


def bert_keras_config(preset):
    import bert_keras as bk

    return bk.BertConfig.preset(preset, vocab_size=VOCAB, max_position_embeddings=MAX_POSITIONS)


def to_device(arrays):
    """numpy -> tensors of the Keras backend on its default device (done once, outside timing)."""
    from keras import ops

    return {k: ops.convert_to_tensor(v) for k, v in arrays.items()}


def torch_device():
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def torch_sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def timed_steps(step, steps, warmup, sync=lambda: None):
    """(first step's seconds incl. compilation, median of the timed steps' seconds)."""
    sync()
    start = time.perf_counter()
    step()
    sync()
    first = time.perf_counter() - start
    for _ in range(max(0, warmup - 1)):
        step()
    sync()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times)


def step_record(kind, runner, preset, seq_len, batch, first_s, median_s, **extra):
    record = {"kind": kind, "runner": runner, "preset": preset, "config": f"{seq_len}:{batch}",
              "seq_len": seq_len, "batch": batch, "first_step_s": round(first_s, 3),
              "median_step_ms": round(1e3 * median_s, 3)}
    if kind == "pretrain_step":
        seq_per_s = batch / median_s
        record.update(seq_per_s=round(seq_per_s, 2),
                      tflops=round(model_flops_per_sequence(preset, seq_len) * seq_per_s / 1e12, 4))
    else:
        record["ex_per_s"] = round(batch / median_s, 2)
    record.update(extra)
    return record


def _clear_keras():
    import gc

    import keras

    keras.backend.clear_session()
    gc.collect()


# =========================================================================== machine and peak
def cpu_info():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import machine

    info = machine.cpu()
    return {"cpu": info["model"] or platform.processor() or platform.machine(), "cpu_count": info["cores"],
            "cpu_flags": info["flags"]}


def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def run_machine(spec):
    record = {"kind": "machine", "backend": os.environ["KERAS_BACKEND"], "python": platform.python_version(),
              **{name: _version(name) for name in ("jax", "jaxlib", "torch", "keras", "keras-hub",
                                                   "transformers", "tensorflow")}}
    if importlib.util.find_spec("jax"):
        import jax

        device = jax.devices()[0]
        record.update(jax_platform=device.platform, device_kind=device.device_kind,
                      jax_device_count=jax.device_count())
    if importlib.util.find_spec("torch"):
        import torch

        record["torch_cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    record.update(cpu_info())
    yield record
    yield matmul_peak()


def matmul_peak(repeats=5, calls=10):
    """Best bf16 matmul FLOP/s in the Keras backend's framework on its default device."""
    backend = os.environ["KERAS_BACKEND"]
    results = {}
    if backend == "jax":
        import jax
        import jax.numpy as jnp

        accelerator = jax.devices()[0].platform != "cpu"
        sizes = (4096, 8192) if accelerator else (1024,)
        matmul = jax.jit(jnp.matmul)
        for n in sizes:
            a = jax.random.normal(jax.random.key(0), (n, n), jnp.bfloat16)
            b = jax.random.normal(jax.random.key(1), (n, n), jnp.bfloat16)
            matmul(a, b).block_until_ready()
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(calls if accelerator else 2):
                    out = matmul(a, b)
                out.block_until_ready()
                best = min(best, (time.perf_counter() - start) / (calls if accelerator else 2))
            results[n] = 2 * n ** 3 / best
        device = jax.devices()[0].device_kind
    elif backend == "torch":
        import torch

        dev = torch_device()
        accelerator = dev != "cpu"
        sizes = (4096, 8192) if accelerator else (1024,)
        for n in sizes:
            a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
            b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
            torch.matmul(a, b)
            torch_sync(dev)
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                for _ in range(calls if accelerator else 2):
                    torch.matmul(a, b)
                torch_sync(dev)
                best = min(best, (time.perf_counter() - start) / (calls if accelerator else 2))
            results[n] = 2 * n ** 3 / best
        device = torch.cuda.get_device_name(0) if accelerator else "cpu"
    else:
        raise RuntimeError(f"KERAS_BACKEND={backend!r}: this benchmark runs on jax or torch")
    n_best = max(results, key=results.get)
    return {"kind": "matmul_peak", "framework": backend, "device": device, "dtype": "bfloat16",
            "tflops": round(results[n_best] / 1e12, 3), "size": n_best,
            "by_size_tflops": {str(n): round(v / 1e12, 3) for n, v in results.items()}}


# =========================================================================== parity
def run_parity(spec):
    import numpy as np
    import torch
    import transformers

    import bert_keras as bk
    import keras

    preset, tol = spec["preset"], spec["parity_tol"]
    backend = keras.backend.backend()
    saved = {"policy": keras.mixed_precision.global_policy().name,
             "tf32": (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
             "torch_precision": torch.get_float32_matmul_precision()}
    if backend == "jax":
        import jax

        saved["jax_precision"] = jax.config.jax_default_matmul_precision
        jax.config.update("jax_default_matmul_precision", "highest")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    keras.mixed_precision.set_global_policy("float32")
    try:
        torch.manual_seed(0)
        hf = transformers.BertForPreTraining(hf_config(preset))
        with torch.no_grad():  # perturb every weight so LayerNorms and biases are not 1 and 0
            for param in hf.parameters():
                param.add_(0.02 * torch.randn_like(param))
        hf.eval()
        with tempfile.TemporaryDirectory() as folder:
            hf.save_pretrained(folder, safe_serialization=True)
            pretrainer = bk.load_checkpoint(folder, task="pretraining", dtype="float32")

        # A padded batch: four rows of decreasing length, two segments each.
        seq_len, p = 128, predictions(128)
        rng = np.random.default_rng(1)
        lengths = [seq_len, seq_len - 27, seq_len // 2, 11]
        batch = len(lengths)
        token_ids = np.zeros((batch, seq_len), np.int32)
        segment_ids = np.zeros((batch, seq_len), np.int32)
        padding_mask = np.zeros((batch, seq_len), np.int32)
        positions = np.zeros((batch, p), np.int32)
        for row, n in enumerate(lengths):
            token_ids[row, :n] = rng.integers(5, VOCAB, n)
            token_ids[row, [0, n // 2, n - 1]] = [2, 3, 3]
            segment_ids[row, n // 2 + 1:n] = 1
            padding_mask[row, :n] = 1
            positions[row] = np.sort(rng.integers(1, n - 1, p))  # may repeat in short rows
        features = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}

        device = torch_device()
        hf.to(device)
        with torch.no_grad():
            out = hf(input_ids=torch.from_numpy(token_ids.astype(np.int64)).to(device),
                     token_type_ids=torch.from_numpy(segment_ids.astype(np.int64)).to(device),
                     attention_mask=torch.from_numpy(padding_mask.astype(np.int64)).to(device),
                     output_hidden_states=True)
        hf_seq = out.hidden_states[-1].float().cpu().numpy()
        hf_mlm = np.take_along_axis(out.prediction_logits.float().cpu().numpy(), positions[:, :, None], axis=1)
        hf_nsp = out.seq_relationship_logits.float().cpu().numpy()

        ours_seq = keras.ops.convert_to_numpy(pretrainer.encoder(features, training=False)["sequence_output"])
        ours = pretrainer({**features, "masked_positions": positions}, training=False)
        ours_mlm = keras.ops.convert_to_numpy(ours["mlm_logits"])
        ours_nsp = keras.ops.convert_to_numpy(ours["nsp_logits"])

        real = padding_mask.astype(bool)
        diffs = {"sequence_output": float(np.abs(ours_seq - hf_seq)[real].max()),
                 "mlm_logits": float(np.abs(ours_mlm - hf_mlm).max()),
                 "nsp_logits": float(np.abs(ours_nsp - hf_nsp).max())}
        scale = {"sequence_output": float(np.abs(hf_seq[real]).max()), "mlm_logits": float(np.abs(hf_mlm).max()),
                 "nsp_logits": float(np.abs(hf_nsp).max())}
        yield {"kind": "parity", "runner": "parity", "preset": preset, "dtype": "float32",
               "hf_device": device, "batch": batch, "seq_len": seq_len, "lengths": lengths,
               "max_abs_diff": {k: float(f"{v:.3g}") for k, v in diffs.items()},
               "max_abs_value": {k: round(v, 4) for k, v in scale.items()},
               "tolerance": tol, "ok": all(v <= tol for v in diffs.values())}
    finally:
        keras.mixed_precision.set_global_policy(saved["policy"])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved["tf32"]
        torch.set_float32_matmul_precision(saved["torch_precision"])
        if "jax_precision" in saved:
            import jax

            jax.config.update("jax_default_matmul_precision", saved["jax_precision"])


# =========================================================================== pre-training step
def _per_config(spec, runner, body, kind="pretrain_step"):
    """Runs ``body(seq_len, batch)`` (a record) per config; an exception becomes an error record."""
    for seq_len, batch in spec["configs"]:
        try:
            yield body(seq_len, batch)
        except Exception as e:  # noqa: BLE001 - reported, the other configs still run
            traceback.print_exc()
            yield {"kind": kind, "runner": runner, "preset": spec["preset"], "config": f"{seq_len}:{batch}",
                   "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"}


def run_bert_keras(spec):
    import keras

    import bert_keras as bk

    preset = spec["preset"]
    keras.mixed_precision.set_global_policy("mixed_bfloat16")

    def body(seq_len, batch):
        _clear_keras()
        model = bk.BertPretrainer(bk.BertEncoder(bert_keras_config(preset), dtype="mixed_bfloat16"))
        model.compile(optimizer=keras.optimizers.AdamW(1e-4))
        arrays = to_device(batch_arrays(seq_len, batch))
        x = {k: arrays[k] for k in ("token_ids", "segment_ids", "padding_mask", "masked_positions")}
        y = {k: arrays[k] for k in ("masked_ids", "masked_weights", "next_sentence_label")}
        losses = []

        def step():  # train_on_batch returns host floats: the step has finished on the device
            losses.append(model.train_on_batch(x, y, return_dict=True)["loss"])

        first, median = timed_steps(step, spec["steps"], spec["warmup"])
        return step_record("pretrain_step", "bert_keras", preset, seq_len, batch, first, median,
                           framework=keras.backend.backend(), loss=round(float(losses[-1]), 4))

    yield from _per_config(spec, "bert_keras", body)


def run_keras_hub(spec):
    import keras
    import keras_hub

    preset = spec["preset"]
    layers, hidden, heads = PRESETS[preset]
    keras.mixed_precision.set_global_policy("mixed_bfloat16")

    def body(seq_len, batch):
        _clear_keras()
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=hidden,
            intermediate_dim=4 * hidden, dropout=0.1, max_sequence_length=MAX_POSITIONS, num_segments=2)
        model = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
        model.compile(optimizer=keras.optimizers.AdamW(1e-4),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()])
        arrays = to_device(batch_arrays(seq_len, batch))
        x = {"token_ids": arrays["token_ids"], "segment_ids": arrays["segment_ids"],
             "padding_mask": arrays["padding_mask"], "mask_positions": arrays["masked_positions"]}
        losses = []

        def step():
            losses.append(model.train_on_batch(x, arrays["masked_ids"], sample_weight=arrays["masked_weights"],
                                               return_dict=True)["loss"])

        first, median = timed_steps(step, spec["steps"], spec["warmup"])
        return step_record("pretrain_step", "keras_hub", preset, seq_len, batch, first, median,
                           framework=keras.backend.backend(), loss=round(float(losses[-1]), 4))

    yield from _per_config(spec, "keras_hub", body)


def run_hf(spec, compiled=False):
    import gc

    import numpy as np
    import torch
    import transformers

    runner, preset = ("hf_compile" if compiled else "hf_eager"), spec["preset"]
    device = torch_device()
    if compiled and device != "cuda" and not spec["cpu_compile"]:
        for seq_len, batch in spec["configs"]:
            yield {"kind": "pretrain_step", "runner": runner, "preset": preset, "config": f"{seq_len}:{batch}",
                   "skipped": "no CUDA device: torch.compile runs on CUDA only (--cpu-compile to force)"}
        return

    def body(seq_len, batch):
        gc.collect()
        if compiled:
            torch._dynamo.reset()
        if device == "cuda":
            torch.cuda.empty_cache()
        torch.manual_seed(0)
        model = transformers.BertForPreTraining(hf_config(preset)).to(device).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device == "cuda")
        forward = torch.compile(model) if compiled else model
        arrays = batch_arrays(seq_len, batch)
        labels = np.full((batch, seq_len), -100, np.int64)
        np.put_along_axis(labels, arrays["masked_positions"].astype(np.int64), arrays["masked_ids"], axis=1)
        inputs = {"input_ids": arrays["token_ids"], "token_type_ids": arrays["segment_ids"],
                  "attention_mask": arrays["padding_mask"], "labels": labels,
                  "next_sentence_label": arrays["next_sentence_label"]}
        inputs = {k: torch.from_numpy(v.astype(np.int64)).to(device) for k, v in inputs.items()}
        losses = []

        def step():
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                loss = forward(**inputs).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.detach())

        first, median = timed_steps(step, spec["steps"], max(spec["warmup"], 2 if compiled else 1),
                                    lambda: torch_sync(device))
        return step_record("pretrain_step", runner, preset, seq_len, batch, first, median, framework="torch",
                           device=device, fused_adamw=device == "cuda", loss=round(float(losses[-1]), 4))

    yield from _per_config(spec, runner, body)


# =========================================================================== inference
def run_inference(spec):
    """bert-keras then Hugging Face (both in this process: they run one after the other)."""
    seq_len, batch = 128, spec["configs"][0][1]
    preset = spec["preset"]
    arrays = batch_arrays(seq_len, batch)
    features = {k: arrays[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    if spec["part"] == "bert_keras":
        import keras

        import bert_keras as bk

        keras.mixed_precision.set_global_policy("mixed_bfloat16")
        _clear_keras()
        model = bk.BertClassifier(bk.BertEncoder(bert_keras_config(preset), dtype="mixed_bfloat16"), 2)
        x = to_device(features)
        first, median = timed_steps(lambda: model.predict_on_batch(x), spec["steps"], spec["warmup"])
        yield step_record("inference", "bert_keras", preset, seq_len, batch, first, median,
                          framework=keras.backend.backend(), dtype="mixed_bfloat16")
    else:
        import numpy as np
        import torch
        import transformers

        device = torch_device()
        torch.manual_seed(0)
        model = transformers.BertForSequenceClassification(hf_config(preset, num_labels=2)).to(device).eval()
        inputs = {"input_ids": features["token_ids"], "token_type_ids": features["segment_ids"],
                  "attention_mask": features["padding_mask"]}
        inputs = {k: torch.from_numpy(v.astype(np.int64)).to(device) for k, v in inputs.items()}

        def step():
            with torch.inference_mode(), torch.autocast(device_type=device, dtype=torch.bfloat16):
                return model(**inputs).logits

        first, median = timed_steps(step, spec["steps"], spec["warmup"], lambda: torch_sync(device))
        yield step_record("inference", "hf_eager", preset, seq_len, batch, first, median, framework="torch",
                          device=device, dtype="autocast bf16")


CHILD_TASKS = {
    "machine": run_machine,
    "parity": run_parity,
    "bert_keras": run_bert_keras,
    "hf_eager": run_hf,
    "hf_compile": lambda spec: run_hf(spec, compiled=True),
    "keras_hub": run_keras_hub,
    "inference": run_inference,
}


def share_device_with_torch():
    """JAX allocates on demand (before it is imported) where torch uses the same device."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def child_main(spec):
    """In a child process: run one task, its records on stdout behind MARK."""
    if spec["task"] in ("machine", "parity"):  # JAX and torch in one process
        share_device_with_torch()
    for record in CHILD_TASKS[spec["task"]](spec):
        print(MARK + json.dumps(record), flush=True)
    return 0


# =========================================================================== parent
class Report:
    """Prints each record as one JSON line (and appends it to --json), remembers them all."""

    def __init__(self, json_path):
        self.records, self.failed = [], False
        self.file = open(json_path, "w", encoding="utf-8") if json_path else None  # noqa: SIM115

    def emit(self, record):
        if "error" in record or record.get("ok") is False:
            self.failed = True
        self.records.append(record)
        line = json.dumps(record)
        print(line, flush=True)
        if self.file:
            self.file.write(line + "\n")
            self.file.flush()

    def close(self):
        if self.file:
            self.file.close()


def run_task(spec, inline, on_record):
    """Run one child task (a subprocess, or here with --inline); hand each record to ``on_record``.

    Returns None, or an error message when the task failed outside its per-config handling
    (an import error, a crash of the child process).
    """
    if inline:
        try:
            for record in CHILD_TASKS[spec["task"]](spec):
                on_record(record)
        except Exception as e:  # noqa: BLE001 - reported as an error line
            traceback.print_exc()
            return f"{type(e).__name__}: {e}"
        return None
    cmd = [sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith(MARK):
            on_record(json.loads(line[len(MARK):]))
        else:
            sys.stderr.write(line)  # stray library output: keep stdout JSON only
    code = proc.wait()
    return f"child process exited with status {code} (its traceback is on stderr)" if code else None


def parse_configs(text, parser):
    configs = []
    for item in text.split(","):
        try:
            seq_len, batch = (int(v) for v in item.split(":"))
        except ValueError:
            parser.error(f"--configs: {item!r} is not seq_len:batch")
        if not 8 <= seq_len <= MAX_POSITIONS or batch < 1:
            parser.error(f"--configs: {item!r}: seq_len in [8, {MAX_POSITIONS}] and batch >= 1")
        configs.append((seq_len, batch))
    return configs


def summaries(records, configs, peak):
    steps = {(r["runner"], r["config"]): r for r in records
             if r.get("kind") == "pretrain_step" and "seq_per_s" in r}
    out = []
    for seq_len, batch in configs:
        config = f"{seq_len}:{batch}"
        ours = steps.get(("bert_keras", config))
        ratios = {}
        for peer in ("hf_compile", "hf_eager", "keras_hub"):
            other = steps.get((peer, config))
            ratios[f"bert_keras_vs_{peer}"] = (round(ours["seq_per_s"] / other["seq_per_s"], 3)
                                              if ours and other else None)
        out.append({"kind": "summary", "section": "pretrain_step", "config": config,
                    "seq_per_s": {r: steps[(r, config)]["seq_per_s"] for r in PRETRAIN_RUNNERS
                                  if (r, config) in steps},
                    **ratios,
                    "mfu": {r: steps[(r, config)].get("mfu") for r in PRETRAIN_RUNNERS if (r, config) in steps},
                    "matmul_peak_tflops": peak})
    infer = {r["runner"]: r for r in records if r.get("kind") == "inference" and "ex_per_s" in r}
    if infer:
        ours, hf = infer.get("bert_keras"), infer.get("hf_eager")
        out.append({"kind": "summary", "section": "inference", "config": (ours or hf)["config"],
                    "ex_per_s": {k: v["ex_per_s"] for k, v in infer.items()},
                    "bert_keras_vs_hf_eager": round(ours["ex_per_s"] / hf["ex_per_s"], 3) if ours and hf else None})
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="base", choices=sorted(PRESETS))
    parser.add_argument("--steps", type=int, default=20, help="timed steps per runner and config (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation; at least 1)")
    parser.add_argument("--runners", default=",".join(RUNNERS),
                        help=f"comma separated subset of {', '.join(RUNNERS)}")
    parser.add_argument("--configs", default=None,
                        help="seq_len:batch,... (default 128:8,512:2 for tiny, else 128:256,512:64); "
                             "inference uses the first one's batch at length 128")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the JSON lines here")
    parser.add_argument("--parity-tol", type=float, default=1e-3, help="max abs difference accepted")
    parser.add_argument("--cpu-compile", action="store_true", help="run hf_compile without CUDA too (slow)")
    parser.add_argument("--inline", action="store_true", help="run every runner in this process")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(json.loads(args.child))

    runners = [r.strip() for r in args.runners.split(",") if r.strip()]
    for r in runners:
        if r not in RUNNERS:
            parser.error(f"--runners: unknown runner {r!r}; choose from {', '.join(RUNNERS)}")
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    configs = parse_configs(args.configs or DEFAULT_CONFIGS.get(args.preset, GPU_CONFIGS), parser)
    base_spec = {"preset": args.preset, "steps": args.steps, "warmup": args.warmup, "configs": configs,
                 "parity_tol": args.parity_tol, "cpu_compile": args.cpu_compile}
    if args.inline:
        share_device_with_torch()
    report = Report(args.json)
    start = time.perf_counter()
    peak = {}

    def on_record(record):
        if record["kind"] == "matmul_peak":
            peak["tflops"] = record["tflops"]
        if record["kind"] == "pretrain_step" and "tflops" in record and peak.get("tflops"):
            record["mfu"] = round(record["tflops"] / peak["tflops"], 4)
        report.emit(record)

    def missing(*modules):
        absent = [m for m in modules if importlib.util.find_spec(m) is None]
        return f"{', '.join(absent)} not installed" if absent else None

    # (task spec, modules it needs, the records it owes: kind and config per line)
    tasks = [({"task": "machine"}, (), [])]
    if "parity" in runners:
        tasks.append(({"task": "parity"}, ("torch", "transformers"), [("parity", None)]))
    needs = {"bert_keras": (), "hf_eager": ("torch", "transformers"), "hf_compile": ("torch", "transformers"),
             "keras_hub": ("keras_hub",)}
    for runner in PRETRAIN_RUNNERS:
        if runner in runners:
            tasks.append(({"task": runner}, needs[runner],
                          [("pretrain_step", f"{s}:{b}") for s, b in configs]))
    if "inference" in runners:
        tasks.append(({"task": "inference", "part": "bert_keras"}, (), [("inference", None)]))
        tasks.append(({"task": "inference", "part": "hf_eager"}, ("torch", "transformers"), [("inference", None)]))

    for spec, modules, owed in tasks:
        spec = {**base_spec, **spec}
        runner = spec.get("part") or spec["task"]
        reason = missing(*modules)
        if reason:
            for kind, config in owed:
                report.emit({"kind": kind, "runner": runner, "preset": args.preset,
                             **({"config": config} if config else {}), "skipped": reason})
            continue
        before, task_start = len(report.records), time.perf_counter()
        error = run_task(spec, args.inline, on_record)
        print(f"[{runner}: {time.perf_counter() - task_start:.1f} s]", file=sys.stderr, flush=True)
        if spec["task"] == "machine" and error:
            report.emit({"kind": "machine", "error": error, **cpu_info()})
            continue
        got = report.records[before:]
        reported = {r.get("config") for r in got}
        for kind, config in owed:  # the lines a crashed child never printed
            if (config is None and not got) or (config is not None and config not in reported):
                report.emit({"kind": kind, "runner": runner, "preset": args.preset,
                             **({"config": config} if config else {}),
                             "error": error or "no result reported"})
        if error and owed and len(report.records) == before + len(got):
            report.emit({"kind": owed[0][0], "runner": runner, "preset": args.preset, "error": error})

    for record in summaries(report.records, configs, peak.get("tflops")):
        report.emit(record)
    print(f"total {time.perf_counter() - start:.1f} s; {'FAILED' if report.failed else 'ok'}",
          file=sys.stderr, flush=True)
    report.close()
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
