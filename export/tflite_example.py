"""Run bert-keras TFLite files with the LiteRT interpreter (no bert-keras import).

  model_text.tflite  raw text in; needs tensorflow-text's TFLite kernels:
                     InterpreterWithCustomOps(custom_op_registerers=SELECT_TFTEXT_OPS)
  model.tflite       token ids in; builtin ops only (the stock Interpreter)

usage:
  python export/tflite_example.py tflite/ "a gorgeous, witty film." "the jokes fall flat."
"""

import json
import os
import sys

import numpy as np
from ai_edge_litert.interpreter import Interpreter, InterpreterWithCustomOps
from tensorflow_text import tflite_registrar


def main(folder, texts):
    with open(os.path.join(folder, "bert_keras_export.json"), encoding="utf-8") as f:
        spec = json.load(f)  # task, labels, max_seq_len, input/output names
    text_model = InterpreterWithCustomOps(custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS,
                                          model_path=os.path.join(folder, "model_text.tflite"))
    run = text_model.get_signature_runner()  # the batch size follows the input
    out = run(text=np.array([t.encode("utf-8") for t in texts], dtype=object))
    for text, probs, label_id in zip(texts, out["probabilities"], out["label_id"]):
        print(json.dumps({"text": text, "label": spec["labels"][int(label_id)],
                          "probabilities": [round(float(p), 4) for p in probs]}))

    # the ids model: feed ids made by any Google-compatible BERT tokenizer, padded to max_seq_len
    ids_model = Interpreter(model_path=os.path.join(folder, "model.tflite"))
    run_ids = ids_model.get_signature_runner()
    length = spec["max_seq_len"]
    token_ids = np.zeros((1, length), np.int32)
    token_ids[0, :8] = [101, 1037, 9882, 1010, 25591, 2143, 1012, 102]  # [CLS] a gorgeous, witty film. [SEP]
    mask = (token_ids > 0).astype(np.int32)
    out = run_ids(token_ids=token_ids, segment_ids=np.zeros_like(token_ids), padding_mask=mask)
    print(json.dumps({"ids": "a gorgeous, witty film.", "probabilities": out["probabilities"][0].round(4).tolist()}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["a gorgeous, witty film."])
