"""Pre-training input throughput: tokenize + pair + mask at seq_len 128.

Three pipelines on the same real text (the 106-article Wikipedia sample,
`bert_keras.samples.fetch("wiki")`) and the same real uncased vocabulary, in
the same run:

- ours: `bert_keras.data.pretraining_dataset` (in-graph Google-exact WordPiece,
  Google's document-aware NSP pairs, in-graph dynamic 80/10/10 masking);
- keras-hub: `keras_hub.models.BertMaskedLMPreprocessor` (in-graph tokenizer,
  packer and masker) mapped over batches of (A, B) text pairs in `tf.data`;
- Hugging Face: `BertTokenizerFast` (Rust) on the same (A, B) text pairs, then
  a vectorised numpy 80/10/10 masker (the rule of `DataCollatorForLanguageModeling`).

keras-hub and Hugging Face have no document-aware pair builder, so their (A, B)
pairs are built once in Python from the same sentences (consecutive sentences
up to ~the target length, half the B segments from a random document); that
step is timed as part of their "pair" cost.

Sequences/s are reported for one full pass that includes reading and
tokenizing the text ("first pass"), and for the following passes ("steady"):
our pipeline tokenizes once and rebuilds pairs and masks every pass, while the
two others redo everything each pass.  Optionally (`--bert-base-steps N`) a
BERT-BASE MLM+NSP training step (batch 32, seq 128) is timed on the same
machine, to show how many times faster than training the input is.

    python benchmarks/bench_input_pipeline.py [--batch-size 32] [--passes 2] [--bert-base-steps 3]
"""

import argparse
import os
import random
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SEQ_LEN = 128
MAX_PREDICTIONS = 20


def text_pairs(documents, rng, target_words=95):
    """(A, B) strings: consecutive sentences of ~target_words, half B random."""
    a_list, b_list = [], []
    for d, document in enumerate(documents):
        i = 0
        while i < len(document) - 1:
            chunk, words = [], 0
            while i < len(document) and (words < target_words or len(chunk) < 2):
                chunk.append(document[i])
                words += len(document[i].split())
                i += 1
            if len(chunk) < 2:
                break
            cut = rng.randint(1, len(chunk) - 1)
            a = " ".join(chunk[:cut])
            if rng.random() < 0.5:
                other = documents[rng.randrange(len(documents))]
                start = rng.randrange(len(other))
                b = " ".join(other[start:start + len(chunk) - cut])
            else:
                b = " ".join(chunk[cut:])
            a_list.append(a)
            b_list.append(b)
    return a_list, b_list


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def bench_ours(wiki, vocab, batch_size, passes):
    from bert_keras.data import pretraining_dataset

    ds, build = timed(lambda: pretraining_dataset(wiki, vocab, seq_len=SEQ_LEN,
                                                  max_predictions=MAX_PREDICTIONS,
                                                  batch_size=batch_size, seed=0, repeat=1))
    times, counts = [], []
    for _ in range(passes):
        n, t = timed(lambda: sum(int(f["token_ids"].shape[0]) for f, _ in ds))
        times.append(t)
        counts.append(n)
    return counts, [build + times[0]] + times[1:]


def bench_keras_hub(vocab, pairs_fn, batch_size, passes):
    import keras_hub

    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocab, lowercase=True)
    preprocessor = keras_hub.models.BertMaskedLMPreprocessor(
        tokenizer, sequence_length=SEQ_LEN, mask_selection_rate=0.15,
        mask_selection_length=MAX_PREDICTIONS)
    counts, times = [], []
    for p in range(passes):
        def run():
            a, b = pairs_fn(p)
            ds = (tf.data.Dataset.from_tensor_slices((a, b)).batch(batch_size)
                  .map(lambda x, y: preprocessor((x, y)), num_parallel_calls=tf.data.AUTOTUNE)
                  .prefetch(tf.data.AUTOTUNE))
            return sum(int(x["token_ids"].shape[0]) for x, _, _ in ds)
        n, t = timed(run)
        counts.append(n)
        times.append(t)
    return counts, times


def numpy_mask(input_ids, special, vocab_size, mask_id, rng, prob=0.15):
    """Hugging Face's DataCollatorForLanguageModeling rule, in numpy."""
    labels = input_ids.copy()
    chosen = (rng.random(input_ids.shape) < prob) & ~special
    labels[~chosen] = -100
    ids = input_ids.copy()
    draw = rng.random(input_ids.shape)
    ids[chosen & (draw < 0.8)] = mask_id
    random_ids = rng.integers(0, vocab_size, input_ids.shape)
    replace = chosen & (draw >= 0.8) & (draw < 0.9)
    ids[replace] = random_ids[replace]
    return ids, labels


def bench_hugging_face(vocab, pairs_fn, batch_size, passes):
    from transformers import BertTokenizerFast

    tokenizer = BertTokenizerFast(vocab_file=vocab, do_lower_case=True)
    rng = np.random.default_rng(0)
    counts, times = [], []
    for p in range(passes):
        def run():
            a, b = pairs_fn(p)
            n = 0
            for i in range(0, len(a), batch_size):
                enc = tokenizer(a[i:i + batch_size], b[i:i + batch_size], truncation="longest_first",
                                max_length=SEQ_LEN, padding="max_length",
                                return_special_tokens_mask=True, return_tensors="np")
                ids, _ = numpy_mask(enc["input_ids"], enc["special_tokens_mask"].astype(bool),
                                    tokenizer.vocab_size, tokenizer.mask_token_id, rng)
                n += len(ids)
            return n
        n, t = timed(run)
        counts.append(n)
        times.append(t)
    return counts, times


def bench_bert_base_step(steps, batch_size):
    """Seconds per BERT-BASE MLM+NSP training step (forward, backward, Adam)."""
    import keras

    import bert_keras as bk

    model = bk.BertPretrainer(bk.BertEncoder(bk.BertConfig.preset("base")))
    optimizer = keras.optimizers.Adam(1e-4)
    rng = np.random.default_rng(0)
    inputs = {
        "token_ids": rng.integers(1000, 30000, (batch_size, SEQ_LEN)).astype("int32"),
        "segment_ids": np.zeros((batch_size, SEQ_LEN), "int32"),
        "padding_mask": np.ones((batch_size, SEQ_LEN), "int32"),
        "masked_positions": rng.integers(1, SEQ_LEN, (batch_size, MAX_PREDICTIONS)).astype("int32"),
    }
    masked_ids = rng.integers(1000, 30000, (batch_size, MAX_PREDICTIONS)).astype("int32")
    nsp = rng.integers(0, 2, (batch_size,)).astype("int32")

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                masked_ids, out["mlm_logits"], from_logits=True))
            loss += tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(
                nsp, out["nsp_logits"], from_logits=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    step()  # trace and build
    _, t = timed(lambda: [step().numpy() for _ in range(steps)])
    return t / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--bert-base-steps", type=int, default=0,
                        help="also time this many BERT-BASE training steps (0: skip)")
    args = parser.parse_args()

    from bert_keras import samples
    from bert_keras.data.corpus import read_documents

    wiki = str(samples.fetch("wiki"))
    vocab = str(samples.fetch("minilm") / "vocab.txt")
    documents = read_documents(wiki)

    def pairs_fn(p):
        return text_pairs(documents, random.Random(p))

    print(f"text: {wiki} ({len(documents)} documents); vocab: {vocab}; "
          f"seq_len {SEQ_LEN}, batch {args.batch_size}, {os.cpu_count()} CPUs")
    results = {
        "bert_keras.data.pretraining_dataset": bench_ours(wiki, vocab, args.batch_size, args.passes),
        "keras_hub BertMaskedLMPreprocessor": bench_keras_hub(vocab, pairs_fn, args.batch_size,
                                                              args.passes),
        "HF BertTokenizerFast + numpy masker": bench_hugging_face(vocab, pairs_fn, args.batch_size,
                                                                  args.passes),
    }
    rates = {}
    for name, (counts, times) in results.items():
        first = counts[0] / times[0]
        steady = (sum(counts[1:]) / sum(times[1:])) if len(times) > 1 else first
        rates[name] = (first, steady, counts[0])
    ours = rates["bert_keras.data.pretraining_dataset"]
    print(f"\n{'pipeline':40s} {'seqs/pass':>9s} {'first pass seq/s':>17s} {'steady seq/s':>13s} "
          f"{'ours / it (first, steady)':>26s}")
    for name, (first, steady, n) in rates.items():
        print(f"{name:40s} {n:9d} {first:17.0f} {steady:13.0f} "
              f"{ours[0] / first:12.2f}x {ours[1] / steady:12.2f}x")
    if args.bert_base_steps:
        seconds = bench_bert_base_step(args.bert_base_steps, args.batch_size)
        train_rate = args.batch_size / seconds
        print(f"\nBERT-BASE training step (batch {args.batch_size}, seq {SEQ_LEN}): "
              f"{seconds:.2f} s/step = {train_rate:.1f} seq/s; our input pipeline is "
              f"{ours[1] / train_rate:.0f}x that (steady), {ours[0] / train_rate:.0f}x (first pass)")


if __name__ == "__main__":
    main()
