"""Do a pre-trained encoder's frozen features know more about Rotten Tomatoes polarity than random ones?

    python training/diagnostics/probe_rotten_tomatoes.py RUN/final [--seq-len 64]

Fits a logistic regression (scikit-learn, L2, C=1) on frozen features of the project's
Rotten Tomatoes split (`samples.rotten_tomatoes_split(seed=0)`: 10,246 train / 2,562 dev) and
prints dev accuracy for the checkpoint's encoder and for a fresh random initialisation of the
same config (seed 0), each with two feature sets: the pooled [CLS] output and the mean of the
last layer over real tokens.  Pre-training that learned something useful for the task shows
as a probe accuracy above the random encoder's; fine-tuning results alone cannot tell "useless
features" from "hard to fine-tune".  Prints one JSON line per (encoder, features).
"""
import argparse
import json

import numpy as np


def features(encoder, tokenizer, texts, seq_len, batch_size=256):
    import tensorflow as tf

    cls, mean = [], []
    for i in range(0, len(texts), batch_size):
        feats = tokenizer(tf.constant(texts[i:i + batch_size]), seq_len=seq_len)
        out = encoder(feats, training=False)
        mask = tf.cast(feats["padding_mask"], tf.float32)[..., None]
        cls.append(out["pooled_output"].numpy())
        mean.append((tf.reduce_sum(out["sequence_output"] * mask, 1) / tf.reduce_sum(mask, 1)).numpy())
    return {"cls": np.concatenate(cls), "mean": np.concatenate(mean)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a folder load_checkpoint reads, with vocab.txt")
    p.add_argument("--seq-len", type=int, default=64)
    args = p.parse_args(argv)

    import keras
    from sklearn.linear_model import LogisticRegression

    import bert_keras as bk
    from bert_keras import samples
    from bert_keras.finetuning import checkpoint_tokenizer

    (train_x, train_y), (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    tokenizer = checkpoint_tokenizer(args.checkpoint)
    pretrained = bk.load_checkpoint(args.checkpoint)
    keras.utils.set_random_seed(0)
    random = bk.BertEncoder(pretrained.config)
    for name, encoder in (("pretrained", pretrained), ("random", random)):
        train, dev = features(encoder, tokenizer, train_x, args.seq_len), features(encoder, tokenizer, dev_x, args.seq_len)
        for kind in ("cls", "mean"):
            probe = LogisticRegression(max_iter=2000, C=1.0).fit(train[kind], train_y)
            print(json.dumps({"encoder": name, "features": kind,
                              "dev_accuracy": round(100 * probe.score(dev[kind], dev_y), 2)}), flush=True)


if __name__ == "__main__":
    main()
