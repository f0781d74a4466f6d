"""Pre-training step throughput: bert-keras vs keras-hub vs Hugging Face, with MFU.

    python benchmarks/bench_pretrain.py                      # the full grid, ~25 min on 2 cores
    python benchmarks/bench_pretrain.py --configs small:128:32 --precisions bf16 --repeats 2
    python benchmarks/bench_pretrain.py --frameworks ours,ours_xla,keras_hub,hf --json out.json

For each (preset, sequence length, batch) and precision, three peers train on identical random
batches (all tokens real, ``round(0.15 L)`` masked positions, random MLM targets and NSP labels):

  ours       `BertPretrainer`'s step as `bert-keras pretrain` runs it on TensorFlow (Keras' train
             function, `tensorflow_steps.train_steps`; MLM + NSP loss, global-norm clip 1.0,
             AdamW); ``ours_xla`` adds ``jit_compile``.  Run in a checkout from before the
             runner took Keras' step (`benchmarks/bench_checkouts.py`), it is `PretrainLoop`.
  fit        `BertPretrainer.compile(optimizer=AdamW)` + ``train_on_batch``, as a Keras user
             trains it (Keras' compiled step); ``fit_xla`` compiles with ``jit_compile=True``,
             the whole step one XLA computation (the layers then run their plain keras.ops
             math: no fused kernel nests inside it).
  keras_hub  `keras_hub.models.BertMaskedLM` on a `BertBackbone` of the same sizes, compiled
             with the same AdamW and its usual sparse cross-entropy, trained with
             ``train_on_batch`` (Keras' compiled train step; XLA is off on CPU by Keras'
             "auto"; ``keras_hub_xla`` compiles with ``jit_compile=True``, the peer of
             ``fit_xla``).  keras-hub has no NSP head: it does slightly less work.
  hf         transformers `BertForPreTraining` (PyTorch, SDPA attention), MLM labels -100
             outside the masked positions and ``next_sentence_label``, AdamW, clip 1.0;
             bf16 through ``torch.autocast("cpu", dtype=torch.bfloat16)``.

Every peer runs in its own fresh process (mixed-precision policies and thread pools cannot leak),
with the framework's default threading; the first ``--warmup`` steps (tracing, compilation,
allocator warm-up) are excluded and the child reports the median of its timed steps and its peak
RSS.  Peers are interleaved (the order rotates per configuration and repeat) and the table shows
the median over repeats.  MFU = model FLOPs per second / the machine's measured matmul peak in
the same precision (largest of tf.matmul and torch.matmul on 1024^2 to 4096^2), with

    model FLOPs per sequence = 6 * L * N_layers_params             (dense weights of the blocks)
                             + 12 * layers * L^2 * H                (QK^T and PV, forward x3)
                             + 6 * P * (H^2 + H V)                  (MLM transform + projection at
                                                                     the P masked positions)
                             + 6 * (2 H^2)                          (pooler + NSP, negligible)

the same for every peer (Hugging Face computes its MLM projection at all L positions; that
extra work is not counted), so MFU ratios equal throughput ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

VOCAB = 30522
PRESETS = {"tiny": (2, 128, 2), "mini": (4, 256, 4), "small": (4, 512, 8), "medium": (8, 512, 8),
           "base": (12, 768, 12), "large": (24, 1024, 16)}
DEFAULT_CONFIGS = "small:128:32,base:128:16,base:512:4"
FRAMEWORKS = ("ours", "ours_xla", "fit", "fit_xla", "keras_hub", "keras_hub_xla", "hf")


def predictions(seq_len):
    return max(1, round(0.15 * seq_len))


def model_flops_per_sequence(preset, seq_len, vocab=VOCAB):
    """Training FLOPs (forward + backward = 3x forward) of one sequence; see the module doc."""
    layers, hidden, _ = PRESETS[preset]
    ffn = 4 * hidden
    block_weights = 4 * hidden * hidden + 2 * hidden * ffn  # QKV + output, FFN in and out
    p = predictions(seq_len)
    return (6 * seq_len * layers * block_weights + 12 * layers * seq_len * seq_len * hidden
            + 6 * p * (hidden * hidden + hidden * vocab) + 6 * 2 * hidden * hidden)


def batch_arrays(seq_len, batch, vocab=VOCAB, seed=0):
    """The identical random batch every peer trains on (numpy)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    p = predictions(seq_len)
    token_ids = rng.integers(5, vocab, (batch, seq_len)).astype(np.int32)
    token_ids[:, 0], token_ids[:, seq_len // 2], token_ids[:, -1] = 2, 3, 3  # [CLS] A [SEP] B [SEP]
    segment_ids = (np.arange(seq_len)[None] > seq_len // 2).repeat(batch, 0).astype(np.int32)
    positions = np.sort(np.stack([rng.choice(np.arange(1, seq_len - 1), p, replace=False)
                                  for _ in range(batch)]), -1).astype(np.int32)
    return {"token_ids": token_ids, "segment_ids": segment_ids,
            "padding_mask": np.ones((batch, seq_len), np.int32), "masked_positions": positions,
            "masked_ids": rng.integers(5, vocab, (batch, p)).astype(np.int32),
            "masked_weights": np.ones((batch, p), np.float32),
            "next_sentence_label": rng.integers(0, 2, (batch,)).astype(np.int32)}


# =========================================================================== children
# Process CPU seconds of each timed step (all threads): on a shared machine wall time swings
# with the other jobs' load, CPU time much less, so it tells whether a change did less work.
CPU_TIMES = []
# Resident memory (MB) before and after the timed steps: a step that keeps compiling grows it.
RSS_MB = []


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _timed(step, steps, warmup):
    for _ in range(warmup):
        step()
    RSS_MB.append(_rss_mb())
    times = []
    for _ in range(steps):
        start, cpu = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - start)
        CPU_TIMES.append(time.process_time() - cpu)
    RSS_MB.append(_rss_mb())
    return times


def ours_step(preset, seq_len, batch, precision, jit=False):
    """The `ours` peer's step, ready to call: one optimiser step on the fixed batch, returning its
    statistics (the loss first)."""
    import tensorflow as tf

    from bert_keras.training.distribute import resolve_strategy
    from bert_keras.training.optimization import create_optimizer
    from bert_keras.training.pretrain import PretrainConfig, build_pretrainer

    try:
        from bert_keras.training.tensorflow_steps import train_steps
    except ImportError:  # a checkout of the earlier runner: its `PretrainLoop`
        train_steps = None
    arrays = batch_arrays(seq_len, batch)
    strategy = resolve_strategy("cpu")
    cfg = PretrainConfig(preset=preset, phase1_seq_len=seq_len, phase2_steps=0,
                         phase1_max_predictions=predictions(seq_len),
                         mixed_precision="bf16" if precision == "bf16" else "none")
    with strategy.scope():
        model = build_pretrainer(cfg, VOCAB)
        optimizer = create_optimizer("adamw", 1e-4, total_steps=10**6, clipnorm=1.0 if train_steps else None)
        optimizer.build(model.trainable_variables)
        if train_steps:
            model.compile(optimizer=optimizer)
    if train_steps:
        from bert_keras.training.tensorflow_steps import train_function

        function = train_function(model, jit)
        train = lambda iterator, n: train_steps(model, iterator, n, function)  # noqa: E731
    else:
        from bert_keras.training.loop import PretrainLoop

        train = PretrainLoop(model, optimizer, strategy, clipnorm=1.0, jit_compile=jit).train
    features = {k: arrays[k] for k in ("token_ids", "segment_ids", "padding_mask", "masked_positions")}
    labels = {k: arrays[k] for k in ("masked_ids", "masked_weights", "next_sentence_label")}
    dataset = tf.data.Dataset.from_tensors((features, labels)).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    return lambda: train(iterator, 1)


def run_ours(preset, seq_len, batch, precision, steps, warmup, jit=False):
    train, losses = ours_step(preset, seq_len, batch, precision, jit), []
    times = _timed(lambda: losses.append(train()[0]), steps, warmup)
    return times, losses[-1]


def run_fit(preset, seq_len, batch, precision, steps, warmup, jit=False):
    import keras

    import bert_keras as bk

    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    arrays = batch_arrays(seq_len, batch)
    keras.utils.set_random_seed(0)
    model = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset(preset, vocab_size=VOCAB)))
    model.compile(optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
                  jit_compile=jit)
    x = {k: arrays[k] for k in ("token_ids", "segment_ids", "padding_mask", "masked_positions")}
    y = {k: arrays[k] for k in ("masked_ids", "masked_weights", "next_sentence_label")}
    losses = []

    def step():
        losses.append(float(model.train_on_batch(x, y)[0]))

    times = _timed(step, steps, warmup)
    return times, losses[-1]


def run_keras_hub(preset, seq_len, batch, precision, steps, warmup, jit="auto"):
    import keras
    import keras_hub

    if precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    layers, hidden, heads = PRESETS[preset]
    arrays = batch_arrays(seq_len, batch)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=hidden,
        intermediate_dim=4 * hidden, dropout=0.1, max_sequence_length=512, num_segments=2)
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4, weight_decay=0.01, epsilon=1e-6, global_clipnorm=1.0),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()], jit_compile=jit)
    x = {"token_ids": arrays["token_ids"], "segment_ids": arrays["segment_ids"],
         "padding_mask": arrays["padding_mask"], "mask_positions": arrays["masked_positions"]}
    losses = []

    def step():
        losses.append(float(model.train_on_batch(x, arrays["masked_ids"],
                                                 sample_weight=arrays["masked_weights"])[0]))

    times = _timed(step, steps, warmup)
    return times, losses[-1]


def run_hf(preset, seq_len, batch, precision, steps, warmup):
    import contextlib

    import numpy as np
    import torch
    import transformers

    layers, hidden, heads = PRESETS[preset]
    torch.manual_seed(0)
    arrays = batch_arrays(seq_len, batch)
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers,
                                     num_attention_heads=heads, intermediate_size=4 * hidden,
                                     max_position_embeddings=512, type_vocab_size=2)
    model = transformers.BertForPreTraining(config)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6)
    labels = np.full((batch, seq_len), -100, np.int64)
    np.put_along_axis(labels, arrays["masked_positions"], arrays["masked_ids"], axis=1)
    inputs = {"input_ids": torch.from_numpy(arrays["token_ids"].astype(np.int64)),
              "token_type_ids": torch.from_numpy(arrays["segment_ids"].astype(np.int64)),
              "attention_mask": torch.from_numpy(arrays["padding_mask"].astype(np.int64)),
              "labels": torch.from_numpy(labels),
              "next_sentence_label": torch.from_numpy(arrays["next_sentence_label"].astype(np.int64))}
    losses = []

    def step():
        context = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                   else contextlib.nullcontext())
        with context:
            loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))

    times = _timed(step, steps, warmup)
    return times, losses[-1]


def run_peak(_preset=None, _seq_len=None, _batch=None, _precision=None, steps=5, warmup=1):
    """Largest measured matmul GFLOP/s per precision over TF and torch, n^2 for n = 1024, 2048,
    4096; a (framework, precision) stops growing n once one call takes over a second (torch's bf16
    on a CPU without bf16 instructions would take minutes at 4096)."""
    import tensorflow as tf
    import torch

    best = {}
    matmul = tf.function(lambda a, b: tf.matmul(a, b))
    for precision, tf_dtype, torch_dtype in (("fp32", tf.float32, torch.float32),
                                             ("bf16", tf.bfloat16, torch.bfloat16)):
        for name in ("tf", "torch"):
            for n in (1024, 2048, 4096):
                if name == "tf":
                    a = tf.cast(tf.random.normal((n, n)), tf_dtype)
                    b = tf.cast(tf.random.normal((n, n)), tf_dtype)
                    times = _timed(lambda: matmul(a, b).numpy(), steps, warmup)
                else:
                    ta, tb = torch.randn(n, n, dtype=torch_dtype), torch.randn(n, n, dtype=torch_dtype)
                    times = _timed(lambda: torch.matmul(ta, tb), steps, warmup)
                value = 2 * n ** 3 / min(times) / 1e9
                if value > best.get(precision, (0, ""))[0]:
                    best[precision] = (value, f"{name} {n}")
                if min(times) > 1.0:
                    break
    return {k: {"gflops": v[0], "source": v[1]} for k, v in best.items()}


RUNNERS = {"ours": run_ours, "ours_xla": lambda *a: run_ours(*a, jit=True), "fit": run_fit,
           "fit_xla": lambda *a: run_fit(*a, jit=True), "keras_hub": run_keras_hub,
           "keras_hub_xla": lambda *a: run_keras_hub(*a, jit=True), "hf": run_hf}


def child(args):
    if args.framework == "peak":
        result = run_peak(steps=args.steps, warmup=args.warmup)
    else:
        times, loss = RUNNERS[args.framework](args.preset, args.seq_len, args.batch, args.precision,
                                              args.steps, args.warmup)
        result = {"step_seconds": times, "median_step_seconds": statistics.median(times),
                  "median_step_cpu_seconds": statistics.median(CPU_TIMES[-len(times):]),
                  "sequences_per_second": args.batch / statistics.median(times), "last_loss": loss,
                  "rss_growth_mb": RSS_MB[-1] - RSS_MB[0]}
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


def spawn(framework, preset=None, seq_len=0, batch=0, precision="fp32", steps=3, warmup=2, nice=0,
          timeout=1200):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", framework, "--preset", str(preset),
           "--seq-len", str(seq_len), "--batch", str(batch), "--precision", precision,
           "--steps", str(steps), "--warmup", str(warmup)]
    if nice:
        cmd = ["nice", "-n", str(nice)] + cmd
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    result = json.loads(lines[-1][len("RESULT "):])
    result["wall_seconds"] = time.perf_counter() - start
    return result


# =========================================================================== parent
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=DEFAULT_CONFIGS, help="preset:seq_len:batch, comma separated")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--frameworks", default="ours,keras_hub,hf",
                        help=f"comma separated, from {', '.join(FRAMEWORKS)}")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per child")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps per child")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds; the table shows medians")
    parser.add_argument("--nice", type=int, default=10, help="nice level of every child alike")
    parser.add_argument("--json", default=None, help="write all results here")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--framework", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--preset", default="small", help=argparse.SUPPRESS)
    parser.add_argument("--seq-len", type=int, default=128, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, default=32, help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.framework = args.child
        return child(args)

    frameworks = args.frameworks.split(",")
    for f in frameworks:
        if f not in FRAMEWORKS:
            parser.error(f"--frameworks: unknown framework {f!r}; choose from {', '.join(FRAMEWORKS)}")
    configs = []
    for item in args.configs.split(","):
        try:
            preset, seq_len, batch = item.split(":")
            configs.append((preset, int(seq_len), int(batch)))
        except ValueError:
            parser.error(f"--configs: {item!r} is not preset:seq_len:batch")
        if preset not in PRESETS:
            parser.error(f"--configs: unknown preset {preset!r}")
    precisions = args.precisions.split(",")
    for p in precisions:
        if p not in ("fp32", "bf16"):
            parser.error(f"--precisions: {p!r} is not fp32 or bf16")

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import machine

    print(machine.describe(), flush=True)
    load_before = os.getloadavg()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}", flush=True)
    peak = spawn("peak", steps=5, warmup=1, nice=args.nice)
    peak = {k: v for k, v in peak.items() if k in ("fp32", "bf16")}
    print("matmul peak: " + ", ".join(f"{k} {v['gflops']:.0f} GFLOP/s ({v['source']})"
                                      for k, v in peak.items()), flush=True)

    runs = {}
    turn = 0
    for repeat in range(args.repeats):
        for preset, seq_len, batch in configs:
            for precision in precisions:
                order = frameworks[turn % len(frameworks):] + frameworks[:turn % len(frameworks)]
                turn += 1
                for framework in order:
                    r = spawn(framework, preset, seq_len, batch, precision, args.steps, args.warmup, args.nice)
                    key = (preset, seq_len, batch, precision, framework)
                    runs.setdefault(key, []).append(r)
                    shown = (f"{r['sequences_per_second']:.2f} seq/s, {r['median_step_cpu_seconds']:.2f} CPU s/step, "
                             f"rss {r['peak_rss_mb']:.0f} MB (+{r['rss_growth_mb']:.0f} over the timed steps), "
                             f"loss {r['last_loss']:.3f}, {r['wall_seconds']:.0f} s" if "error" not in r
                             else r["error"])
                    print(f"[{repeat + 1}/{args.repeats}] {preset}@{seq_len} b{batch} {precision} {framework}: "
                          f"{shown}  (load {os.getloadavg()[0]:.2f})", flush=True)
    load_after = os.getloadavg()

    rows = []
    for (preset, seq_len, batch, precision, framework), results in runs.items():
        good = [r["sequences_per_second"] for r in results if "error" not in r]
        if not good:
            continue
        sps = statistics.median(good)
        flops = model_flops_per_sequence(preset, seq_len) * sps
        rows.append({"preset": preset, "seq_len": seq_len, "batch": batch, "precision": precision,
                     "framework": framework, "sequences_per_second": sps, "runs": good,
                     "model_tflops_per_second": flops / 1e12,
                     "mfu": flops / (peak[precision]["gflops"] * 1e9) if precision in peak else None,
                     "cpu_seconds_per_step": statistics.median(
                         r["median_step_cpu_seconds"] for r in results if "error" not in r),
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in results if "error" not in r),
                     "rss_growth_mb": max(r["rss_growth_mb"] for r in results if "error" not in r)})
    index = {(r["preset"], r["seq_len"], r["batch"], r["precision"], r["framework"]): r for r in rows}
    print(f"\nmodel FLOPs per sequence: see the module docstring; MFU against the measured {', '.join(peak)} "
          f"matmul peak")
    header = f"{'config':<16}{'prec':<6}{'framework':<11}{'seq/s':>8}{'MFU':>8}{'RSS MB':>8}{'+RSS':>6}" \
             f"{frameworks[0] + '/this':>13}{'CPU s/step':>11}{'runs':>6}"
    print(header)
    print("-" * len(header))
    for preset, seq_len, batch in configs:
        for precision in precisions:
            base = index.get((preset, seq_len, batch, precision, frameworks[0]))
            for framework in frameworks:
                r = index.get((preset, seq_len, batch, precision, framework))
                if r is None:
                    print(f"{preset}@{seq_len} b{batch:<5}{precision:<6}{framework:<11}  failed")
                    continue
                ratio = base["sequences_per_second"] / r["sequences_per_second"] if base else float("nan")
                mfu = f"{100 * r['mfu']:.1f}%" if r["mfu"] is not None else "-"
                print(f"{f'{preset}@{seq_len} b{batch}':<16}{precision:<6}{framework:<11}"
                      f"{r['sequences_per_second']:>8.2f}{mfu:>8}{r['peak_rss_mb']:>8.0f}{r['rss_growth_mb']:>6.0f}"
                      f"{ratio:>12.2f}x"
                      f"{r['cpu_seconds_per_step']:>11.2f}{len(r['runs']):>6}")
            for framework in frameworks:
                r = index.get((preset, seq_len, batch, precision, framework))
                if base and r:
                    r[f"{frameworks[0]}_over_this"] = base["sequences_per_second"] / r["sequences_per_second"]
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": machine.cpu(), "peak": peak, "rows": rows, "load_before": load_before, "load_after": load_after,
                       "settings": {"steps": args.steps, "warmup": args.warmup, "repeats": args.repeats,
                                    "nice": args.nice}}, f, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
