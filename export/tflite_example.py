"""Run bert-keras TFLite files with the stock LiteRT interpreter (no bert-keras, no tensorflow-text).

  model_text.tflite  text in, as int32 Unicode codepoints [B, N] padded with 0
                     (N = "max_codepoints" in bert_keras_export.json; longer texts
                     keep their first N codepoints); Google-exact tokenizer inside
  model.tflite       token ids in

Both hold TFLite builtin ops only: `Interpreter(model_path=...)`, no custom-op registerer.

usage:
  python export/tflite_example.py tflite/ "a gorgeous, witty film." "the jokes fall flat."
"""

import json
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter


def codepoints(texts, n):
    """The input contract: each text's first n Unicode codepoints, padded with 0."""
    out = np.zeros((len(texts), n), np.int32)
    for i, text in enumerate(texts):
        cps = [ord(c) for c in text[:n]]
        out[i, :len(cps)] = cps
    return out


def main(folder, texts):
    with open(os.path.join(folder, "bert_keras_export.json"), encoding="utf-8") as f:
        spec = json.load(f)  # task, labels, max_seq_len, max_codepoints, input/output names
    text_model = Interpreter(model_path=os.path.join(folder, "model_text.tflite"))
    run = text_model.get_signature_runner()  # the batch size follows the input
    out = run(codepoints=codepoints(texts, spec["max_codepoints"]))
    for text, probs, label_id in zip(texts, out["probabilities"], out["label_id"]):
        print(json.dumps({"text": text, "label": spec["labels"][int(label_id)],
                          "probabilities": [round(float(p), 4) for p in probs]}))

    # the ids model: feed ids made by any Google-compatible BERT tokenizer, padded to max_seq_len
    ids_model = Interpreter(model_path=os.path.join(folder, "model.tflite"))
    # "serving_default" is the full length; a file exported with length buckets also has
    # length_16, length_24, ...: the smallest one holding the ids gives the same outputs, faster
    run_ids = ids_model.get_signature_runner("serving_default")
    length = spec["max_seq_len"]
    token_ids = np.zeros((1, length), np.int32)
    token_ids[0, :8] = [101, 1037, 9882, 1010, 25591, 2143, 1012, 102]  # [CLS] a gorgeous, witty film. [SEP]
    mask = (token_ids > 0).astype(np.int32)
    out = run_ids(token_ids=token_ids, segment_ids=np.zeros_like(token_ids), padding_mask=mask)
    print(json.dumps({"ids": "a gorgeous, witty film.", "probabilities": out["probabilities"][0].round(4).tolist()}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["a gorgeous, witty film."])
