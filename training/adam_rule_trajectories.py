"""Pre-training loss, step for step, against Hugging Face + torch and against Google's update rule.

One random BERT-tiny is written to the Hugging Face layout; both sides start from it
and see the same batches of `bert_keras.data.pretraining_dataset` (materialised once):
phase 1 at sequence length 128 (20 predictions), phase 2 at 512 (80); dropout 0,
float32, AdamW with weight decay 0.01 except LayerNorm and biases, betas (0.9, 0.999),
BERT's epsilon 1e-6, global-norm clipping 1.0, linear warm-up (10%) and decay.

Ours: `BertPretrainer`'s step as the runner runs it on the process's Keras backend
(``KERAS_BACKEND``: TensorFlow's step, or `KerasSteps` on JAX and PyTorch) +
`create_optimizer("adamw", adam_rule=RULE)`.
References (the model is transformers' BertForPreTraining in each):
  torch   torch.optim.AdamW + get_linear_schedule_with_warmup
  google  a numpy transcription of google-research/bert's AdamWeightDecayOptimizer
  keras   a numpy transcription of keras.optimizers.AdamW's documented update
With ``--accumulation 4`` ours takes 4 micro-batches per step and the reference one
batch 4 times larger (the same rows).

    python training/adam_rule_trajectories.py                 # 400 steps, all rules, k=1 and k=4
    python training/adam_rule_trajectories.py --steps 100 --rules torch
    python training/adam_rule_trajectories.py --rules torch,google --accumulation 1 \\
        --out training/results/pretrain_loss_vs_reference_k1

Writes OUT.json (per-step losses, the worst relative difference over the first 20
steps and of every 50-step window mean) and OUT.png (both curves per run); OUT is
training/results/pretrain_loss_vs_reference by default.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESERVED = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
BETAS, EPSILON, WEIGHT_DECAY, CLIP = (0.9, 0.999), 1e-6, 0.01, 1.0


def build_corpus(folder, articles=10, sentences=30):
    """(text, vocab): real Wikipedia articles and a WordPiece vocabulary of their characters and words."""
    from bert_keras import samples

    text = samples.fetch("wiki").read_text(encoding="utf-8")
    docs = [d.strip().split("\n")[:sentences] for d in text.split("\n\n") if d.strip()][:articles]
    os.makedirs(folder, exist_ok=True)
    corpus = os.path.join(folder, "wiki_slice.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n\n".join("\n".join(d) for d in docs) + "\n")
    words = collections.Counter(w for d in docs for line in d for w in re.findall(r"\w+|[^\w\s]", line.lower()))
    chars = sorted({c for w in words for c in w})
    vocab = RESERVED + chars + ["##" + c for c in chars if c.isalnum()]
    vocab += [w for w, _ in words.most_common(300) if w not in vocab]
    vocab_path = os.path.join(folder, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    return corpus, vocab_path


def materialise(corpus, vocab, steps, micro_batch, accumulation, seed=0):
    """[(phase, [micro-batches of numpy dicts])] per optimiser step: 90% at 128, 10% at 512."""
    import bert_keras as bk

    phase2 = max(1, steps // 10)
    plan = []
    for phase, n, seq_len, preds in ((1, steps - phase2, 128, 20), (2, phase2, 512, 80)):
        ds = bk.data.pretraining_dataset(corpus, vocab, seq_len=seq_len, max_predictions=preds,
                                         batch_size=micro_batch, seed=seed * 1000 + phase)
        it = iter(ds)
        for _ in range(n):
            micro = []
            for _ in range(accumulation):
                features, labels = next(it)
                micro.append(({k: v.numpy() for k, v in features.items()}, {k: v.numpy() for k, v in labels.items()}))
            plan.append((phase, micro))
    return plan


def write_initial_model(folder, vocab, seed=0):
    """A random BERT-tiny (dropout 0) with MLM/NSP heads, in the Hugging Face layout."""
    import keras

    import bert_keras as bk

    keras.utils.set_random_seed(seed)
    n = sum(1 for _ in open(vocab, encoding="utf-8"))
    pre = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=n, dropout=0.0,
                                                               attention_dropout=0.0)))
    bk.save_checkpoint(pre, folder, vocab_path=vocab, flavor="huggingface")
    return folder


def schedule_lambda(total, warmup):
    """transformers' get_linear_schedule_with_warmup, as a multiplier of the peak rate."""
    return lambda step: step / max(1, warmup) if step < warmup else max(0.0, (total - step) / max(1, total - warmup))


def run_ours(folder, plan, rule, peak_lr, warmup):
    """Per-step loss of our step as the pre-training runner runs it on this process's Keras backend
    (k micro-batches per step as in ``plan``)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        return _run_ours_keras(folder, plan, rule, peak_lr, warmup)
    import tensorflow as tf

    import bert_keras as bk
    from bert_keras.training.optimization import WarmupPolynomialDecay, create_optimizer
    from bert_keras.training.tensorflow_steps import train_function, train_steps

    model = bk.load_checkpoint(folder, task="pretraining")
    schedule = WarmupPolynomialDecay(peak_lr, len(plan), warmup)
    optimizer = create_optimizer("adamw", schedule, weight_decay=WEIGHT_DECAY, clipnorm=CLIP, beta_1=BETAS[0],
                                 beta_2=BETAS[1], epsilon=EPSILON, adam_rule=rule)
    optimizer.build(model.trainable_variables)
    model.compile(optimizer=optimizer)
    losses, train = [], train_function(model)
    for phase in (1, 2):
        steps = [micro for p, micro in plan if p == phase]
        if not steps:
            continue
        k = len(steps[0])
        flat = [b for micro in steps for b in micro]
        stacked = tuple({key: np.stack([b[i][key] for b in flat]) for key in flat[0][i]} for i in (0, 1))
        # the k micro-batches of each step stacked on a leading axis, as the runner feeds them
        iterator = iter(tf.data.Dataset.from_tensor_slices(stacked).batch(k, drop_remainder=True))
        for _ in steps:
            losses.append(float(train_steps(model, iterator, 1, train)[0]))
    return losses


def _run_ours_keras(folder, plan, rule, peak_lr, warmup):
    """`run_ours` on JAX or PyTorch: the runner's `KerasSteps` (Keras' own step, ``train_on_batch``
    per micro-batch, the optimiser accumulating k of them), on one device."""
    import bert_keras as bk
    from bert_keras.training.keras_runner import KerasSteps
    from bert_keras.training.optimization import WarmupPolynomialDecay
    from bert_keras.training.pretrain_config import PretrainConfig

    k = len(plan[0][1])
    batch = k * len(plan[0][1][0][1]["next_sentence_label"])
    phase1 = sum(1 for p, _ in plan if p == 1)
    cfg = PretrainConfig(preset="tiny", phase1_steps=phase1, phase2_steps=len(plan) - phase1, batch_size=batch,
                         gradient_accumulation_steps=k, adam_rule=rule, learning_rate=peak_lr, warmup_steps=warmup,
                         weight_decay=WEIGHT_DECAY, clipnorm=CLIP, beta_1=BETAS[0], beta_2=BETAS[1],
                         epsilon=EPSILON, strategy="cpu")
    runner = KerasSteps(cfg)
    model = bk.load_checkpoint(folder, task="pretraining")
    optimizer = runner.optimizer(WarmupPolynomialDecay(peak_lr, len(plan), warmup))
    runner.prepare(model, optimizer)
    losses = []
    with runner.active():
        for _, micro in plan:
            losses.append(float(runner.train(iter(micro), 1)[0]))
    return losses


def run_reference(folder, plan, rule, peak_lr, warmup):
    """Per-step loss of transformers' BertForPreTraining with ``rule``'s reference update, one batch a step."""
    import torch
    import transformers

    torch.manual_seed(0)
    torch.set_num_threads(1)  # tiny matrices: threads only contend
    model = transformers.BertForPreTraining.from_pretrained(folder).float().eval()  # dropout is 0 anyway
    named = list(model.named_parameters())  # the tied decoder weight appears once
    decay = [not ("bias" in n or "LayerNorm" in n) for n, _ in named]
    params = [p for _, p in named]
    lr_at = schedule_lambda(len(plan), warmup)
    if rule == "torch":
        optimizer = torch.optim.AdamW(
            [{"params": [p for p, d in zip(params, decay) if d], "weight_decay": WEIGHT_DECAY},
             {"params": [p for p, d in zip(params, decay) if not d], "weight_decay": 0.0}],
            lr=peak_lr, betas=BETAS, eps=EPSILON)
        scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, len(plan))
    else:
        m = [np.zeros(tuple(p.shape), np.float32) for p in params]
        v = [np.zeros(tuple(p.shape), np.float32) for p in params]
    b1, b2, eps, wd = (np.float32(x) for x in (*BETAS, EPSILON, WEIGHT_DECAY))
    losses = []
    for t, (_, micro) in enumerate(plan):
        features = {k: np.concatenate([f[k] for f, _ in micro]) for k in micro[0][0]}
        labels = {k: np.concatenate([lab[k] for _, lab in micro]) for k in micro[0][1]}
        ids = features["token_ids"]
        mlm_labels = np.full(ids.shape, -100, np.int64)
        real = labels["masked_weights"] > 0
        for b in range(ids.shape[0]):
            mlm_labels[b, features["masked_positions"][b][real[b]]] = labels["masked_ids"][b][real[b]]
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    token_type_ids=torch.tensor(features["segment_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(features["padding_mask"], dtype=torch.long))
        vocab = out.prediction_logits.shape[-1]
        loss = (torch.nn.functional.cross_entropy(out.prediction_logits.reshape(-1, vocab),
                                                  torch.tensor(mlm_labels).reshape(-1), ignore_index=-100)
                + torch.nn.functional.cross_entropy(out.seq_relationship_logits,
                                                    torch.tensor(labels["next_sentence_label"], dtype=torch.long)))
        model.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, CLIP)
        losses.append(float(loss))
        if rule == "torch":
            optimizer.step()
            scheduler.step()
            continue
        lr = np.float32(peak_lr * lr_at(t))
        with torch.no_grad():
            for i, p in enumerate(params):
                g, w = p.grad.numpy(), p.numpy()
                m[i] = b1 * m[i] + (np.float32(1) - b1) * g
                v[i] = b2 * v[i] + (np.float32(1) - b2) * g * g
                if rule == "google":  # AdamWeightDecayOptimizer.apply_gradients
                    update = m[i] / (np.sqrt(v[i]) + eps)
                    if decay[i]:
                        update = update + wd * w
                    new = w - lr * update
                else:  # keras: AdamW._apply_weight_decay, then Adam.update_step
                    if decay[i]:
                        w = w - w * wd * lr
                    step = np.float32(t + 1)
                    alpha = lr * np.sqrt(np.float32(1) - b2 ** step) / (np.float32(1) - b1 ** step)
                    new = w - alpha * m[i] / (np.sqrt(v[i]) + eps)
                p.copy_(torch.from_numpy(np.ascontiguousarray(new, np.float32)))
    return losses


def compare(ours, reference, head=20, window=50):
    ours, reference = np.asarray(ours), np.asarray(reference)
    rel = np.abs(ours - reference) / np.abs(reference)
    windows = [(i, i + window) for i in range(0, len(ours) - window + 1, window)]
    window_rel = [float(abs(ours[a:b].mean() - reference[a:b].mean()) / reference[a:b].mean()) for a, b in windows]
    return {"max_relative_first_steps": float(rel[:head].max()), "first_steps": head,
            "max_relative_window_mean": max(window_rel), "window": window, "window_relative": window_rel,
            "final_ours": float(ours[-1]), "final_reference": float(reference[-1])}


_PLANS = {}


def trajectory(workdir, steps, rule, accumulation=1, batch=8, peak_lr=5e-4, seed=0):
    """Both runs of one rule; returns the comparison with the per-step losses."""
    corpus, vocab = build_corpus(os.path.join(workdir, "corpus"))
    folder = os.path.join(workdir, "init")
    if not os.path.exists(os.path.join(folder, "config.json")):
        write_initial_model(folder, vocab, seed)
    key = (steps, batch, accumulation, seed)
    if key not in _PLANS:
        _PLANS[key] = materialise(corpus, vocab, steps, batch // accumulation, accumulation, seed)
    plan = _PLANS[key]
    warmup = int(round(0.1 * steps))
    ours = run_ours(folder, plan, rule, peak_lr, warmup)
    reference = run_reference(folder, plan, rule, peak_lr, warmup)
    return dict(compare(ours, reference), rule=rule, accumulation=accumulation, batch=batch, steps=steps,
                phase1_steps=sum(1 for p, _ in plan if p == 1), peak_learning_rate=peak_lr, ours=ours,
                reference=reference)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--rules", default="torch,google,keras")
    parser.add_argument("--accumulation", default="1,4", help="comma list of k")
    parser.add_argument("--batch", type=int, default=8, help="sequences per optimiser step")
    parser.add_argument("--workdir", default=None, help="corpus and initial model (default: a new temporary folder)")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "pretrain_loss_vs_reference"),
                        help="output path without extension (.json and .png are written)")
    args = parser.parse_args(argv)
    if args.workdir is None:
        import tempfile

        args.workdir = tempfile.mkdtemp(prefix="adam_rule_trajectories_")
    runs = []
    for k in (int(x) for x in args.accumulation.split(",")):
        for rule in args.rules.split(","):
            start = time.time()
            run = trajectory(args.workdir, args.steps, rule, accumulation=k, batch=args.batch)
            run["seconds"] = round(time.time() - start, 1)
            runs.append(run)
            print(f"{rule:6s} k={k}: first {run['first_steps']} steps max rel {run['max_relative_first_steps']:.2e}, "
                  f"50-step means max rel {run['max_relative_window_mean']:.2e}, final {run['final_ours']:.4f} vs "
                  f"{run['final_reference']:.4f} ({run['seconds']} s)", flush=True)
    # How far the Keras rule is from torch's at BERT's epsilon: the gap a user meets by default.
    keras_vs_torch = None
    by = {(r["rule"], r["accumulation"]): r for r in runs}
    if ("keras", 1) in by and ("torch", 1) in by:
        keras_vs_torch = compare(by[("keras", 1)]["ours"], by[("torch", 1)]["reference"])
        print(f"keras rule vs torch reference: first 20 steps max rel {keras_vs_torch['max_relative_first_steps']:.2e}, "
              f"window means max rel {keras_vs_torch['max_relative_window_mean']:.2e}")
    with open(args.out + ".json.tmp", "w") as f:
        json.dump({"epsilon": EPSILON, "weight_decay": WEIGHT_DECAY, "clipnorm": CLIP, "betas": BETAS,
                   "model": "BERT-tiny (2 layers, H=128), random init, dropout 0, float32",
                   "corpus": "10 Wikipedia articles of the wiki sample, 30 sentences each",
                   "runs": runs, "keras_rule_vs_torch_reference": keras_vs_torch}, f, indent=1)
    os.replace(args.out + ".json.tmp", args.out + ".json")
    plot(runs, args.out + ".png")
    return 0


def plot(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), squeeze=False)
    for ax, run in zip(axes[0], runs):
        ax.plot(run["reference"], label="reference", lw=2.5, alpha=0.5)
        ax.plot(run["ours"], label="bert-keras", lw=1)
        ax.axvline(run["phase1_steps"], color="grey", lw=0.5, ls="--")
        ax.set_title(f"{run['rule']} rule, k={run['accumulation']}", fontsize=9)
        ax.set_xlabel("optimiser step")
        ax.set_ylabel("MLM + NSP loss")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=110)
    os.replace(path + ".tmp.png", path)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    sys.exit(main())
