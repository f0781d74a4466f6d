"""Transfer check: Rotten Tomatoes polarity fine-tuned from the pre-trained checkpoint vs random init.

    python training/transfer_rotten_tomatoes.py runs/pretrain_mini_wiki/final

The same architecture (the checkpoint's config) and the same fine-tuning (AdamW 1e-4,
10% warm-up, batch 32, 2 epochs, length 64, seed 0) on the project's fixed split of
the Rotten Tomatoes snippets (`samples.rotten_tomatoes_split`: 10,246 train, 2,562
dev); prints the dev accuracy of both as JSON.  Plain Keras `fit` on the library's
models; `bert-keras finetune` is the full runner.
"""
import json, sys, time
import numpy as np, tensorflow as tf, keras
import bert_keras as bk
from bert_keras import samples
from bert_keras.training.optimization import create_optimizer

final = sys.argv[1]
(tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split()
tok = bk.BertTokenizer.from_vocab(final + "/vocab.txt", lower_case=True)
def feats(texts):
    out = {}
    for i in range(0, len(texts), 1024):
        f = tok(tf.constant(texts[i:i + 1024]), seq_len=64)
        for k, v in f.items():
            out.setdefault(k, []).append(np.asarray(v))
    return {k: np.concatenate(v).astype("int32") for k, v in out.items()}
xtr, xdev = feats(tr_x), feats(dev_x)
ytr, ydev = np.array(tr_y, "int32"), np.array(dev_y, "int32")
results = {}
epochs, batch = 2, 32
steps = epochs * (len(ytr) // batch)
for init in ("pretrained", "random"):
    keras.utils.set_random_seed(0)
    if init == "pretrained":
        model = bk.load_checkpoint(final, task="classification", num_classes=2)
    else:
        cfg = bk.load_checkpoint(final).config
        model = bk.BertClassifier(bk.BertEncoder(cfg), num_classes=2)
    model.compile(optimizer=create_optimizer("adamw", 1e-4, total_steps=steps, warmup_fraction=0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    t = time.time()
    ds = tf.data.Dataset.from_tensor_slices((xtr, ytr)).shuffle(20000, seed=0).batch(batch, drop_remainder=True)
    model.fit(ds, epochs=epochs, verbose=2)
    acc = model.evaluate(xdev, ydev, batch_size=128, verbose=0)[1]
    results[init] = {"dev_accuracy": float(acc), "seconds": time.time() - t}
    print(init, results[init], flush=True)
print(json.dumps(results))
