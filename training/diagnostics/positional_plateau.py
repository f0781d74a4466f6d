"""How fast does a small BERT learn to use its context in masked-LM training? bert-keras vs Hugging Face.

    python training/diagnostics/positional_plateau.py --task bag  --framework ours
    python training/diagnostics/positional_plateau.py --task pair --framework hf

Two synthetic masked-LM tasks on BERT-tiny (L2/H128/A2, no dropout), 500-token vocabulary,
sequences of 64, 8 [MASK]ed targets per sequence, batch 32, AdamW 1e-3, clipping 1.0:

  bag   every sequence repeats one random token: any visible token gives the answer, so
        position-blind (uniform) attention suffices.
  pair  tokens come in adjacent pairs (a a b b ...): the answer is the token next door,
        and which side depends on the position, so attention must learn positions.

Prints the MLM accuracy at the masked targets every 50 steps (chance: 1/490).  The same
batches feed both frameworks; Hugging Face's `BertForMaskedLM` (PyTorch) is the reference.
"""
import argparse
import json

import numpy as np

VOCAB, LENGTH, BATCH, TARGETS = 500, 64, 32, 8


def batches(task, steps, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        if task == "bag":
            tokens = np.repeat(rng.integers(10, VOCAB, size=(BATCH, 1)), LENGTH, axis=1)
        else:
            tokens = np.repeat(rng.integers(10, VOCAB, size=(BATCH, LENGTH // 2)), 2, axis=1)
        tokens[:, 0] = 2  # [CLS]
        positions = np.stack([rng.choice(np.arange(1, LENGTH), TARGETS, replace=False) for _ in range(BATCH)])
        targets = np.take_along_axis(tokens, positions, 1).copy()
        np.put_along_axis(tokens, positions, 4, 1)  # [MASK]
        yield tokens, positions, targets


def ours(task, steps, lr):
    import keras
    import tensorflow as tf

    import bert_keras as bk

    cfg = bk.BertConfig(vocab_size=VOCAB, hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512,
                        dropout=0.0, attention_dropout=0.0, max_position_embeddings=128)
    keras.utils.set_random_seed(0)
    model = bk.BertPretrainer(bk.BertEncoder(cfg))
    optimizer = keras.optimizers.AdamW(learning_rate=lr, weight_decay=0.01, global_clipnorm=1.0)

    @tf.function
    def step(features, labels):
        with tf.GradientTape() as tape:
            outputs = model(features, training=True)
            loss = model.compute_loss(features, labels, outputs)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return tf.argmax(outputs["mlm_logits"], -1, output_type=tf.int32)

    for tokens, positions, targets in batches(task, steps):
        features = {"token_ids": tf.constant(tokens, tf.int32), "segment_ids": tf.zeros_like(tokens, tf.int32),
                    "padding_mask": tf.ones_like(tokens, tf.int32), "masked_positions": tf.constant(positions, tf.int32)}
        labels = {"masked_ids": tf.constant(targets, tf.int32), "masked_weights": tf.ones(targets.shape),
                  "next_sentence_label": tf.zeros((BATCH,), tf.int32)}
        yield step(features, labels).numpy() == targets


def hf(task, steps, lr):
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=VOCAB, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=512, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                  max_position_embeddings=128)
    model = transformers.BertForMaskedLM(cfg)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    for tokens, positions, targets in batches(task, steps):
        labels = np.full_like(tokens, -100)
        np.put_along_axis(labels, positions, targets, 1)
        out = model(input_ids=torch.tensor(tokens), labels=torch.tensor(labels))
        optimizer.zero_grad()
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        yield np.take_along_axis(out.logits.detach().argmax(-1).numpy(), positions, 1) == targets


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=["bag", "pair"], default="pair")
    p.add_argument("--framework", choices=["ours", "hf"], default="ours")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--lr", type=float, default=1e-3)
    args = p.parse_args(argv)
    window = []
    for i, hits in enumerate((ours if args.framework == "ours" else hf)(args.task, args.steps, args.lr), 1):
        window.append(hits.mean())
        if i % 50 == 0:
            print(json.dumps({"framework": args.framework, "task": args.task, "step": i,
                              "mask_accuracy": round(float(np.mean(window)), 3)}), flush=True)
            window = []


if __name__ == "__main__":
    main()
