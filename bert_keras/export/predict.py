"""Predictions from an exported SavedModel, a TFLite file or a model folder, as JSON-ready dicts.

    predictor = load_predictor("serving/sentiment/1")     # or .../model_text.tflite, or runs/x/best
    for record in predictor.predict(["a gorgeous film."]):
        print(record)   # {"text": ..., "label": "positive", "probabilities": {"negative": .., "positive": ..}}

All three sources go through the same text signature (`serving_default`, the
TFLite text model, or the same serving functions built in process for a
folder), so what `bert-keras predict` prints is what a server returns.
"""

from __future__ import annotations

import os

import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.export.spec import read_spec
from bert_keras.text.vocab import load_vocab, token_ids


def _softmax_dict(labels, probs):
    return {str(n): round(float(p), 6) for n, p in zip(labels, probs)}


class Predictor:
    """Runs texts through an export's text signature and decodes the outputs.

    Attributes:
      spec: the export JSON (task, labels, pair, ...).
      kind: "saved_model", "tflite" or "folder".
    """

    def __init__(self, call, spec: dict, kind: str, vocab=None):
        self._call, self.spec, self.kind = call, spec, kind
        self._vocab = vocab

    @property
    def pair(self) -> bool:
        return bool(self.spec.get("pair"))

    def raw(self, texts, texts_b=None) -> dict:
        """Named numpy outputs of the text signature for a batch."""
        texts = [str(t) for t in texts]
        if self.pair:
            if texts_b is None or len(texts_b) != len(texts):
                raise BertKerasError("this model takes pairs: give text_b for every text (TAB-separated lines "
                                     "or JSON lines with 'text' and 'text_b')")
        out = self._call(texts, texts_b if self.pair else None)
        return {k: np.asarray(v) for k, v in out.items()}

    def predict(self, texts, texts_b=None, batch_size=32):
        """Yields one JSON-ready dict per text."""
        texts = list(texts)
        for i in range(0, len(texts), batch_size):
            a = texts[i:i + batch_size]
            b = None if texts_b is None else list(texts_b[i:i + batch_size])
            out = self.raw(a, b)
            for n in range(len(a)):
                yield self._record(a[n], None if b is None else b[n], {k: v[n] for k, v in out.items()})

    def _tokens(self, ids, mask):
        if self._vocab is None:
            return [int(t) for t in ids[mask > 0]]
        return [self._vocab[int(t)] if 0 <= int(t) < len(self._vocab) else str(int(t)) for t in ids[mask > 0]]

    def _record(self, text, text_b, out):
        spec = self.spec
        rec = {"text": text}
        if text_b is not None:
            rec["text_b"] = text_b
        task = spec.get("task")
        if task == "classification" and spec.get("regression"):
            rec["score"] = float(np.ravel(out["logits"])[0])
        elif task == "classification":
            probs = out["probabilities"]
            best = int(np.argmax(probs))
            rec["label"] = spec["labels"][best]
            rec["probabilities"] = _softmax_dict(spec["labels"], probs)
        elif task == "token_classification":
            mask = out["padding_mask"]
            best = np.argmax(out["logits"], -1)[mask > 0]
            tokens = self._tokens(out["token_ids"], mask)
            # [CLS] and [SEP] carry no label
            rec["tokens"] = tokens[1:-1]
            rec["labels"] = [spec["labels"][int(x)] for x in best[1:-1]]
        elif task == "span":
            rec.update(self._span(out))
        elif task == "multiple_choice":
            probs = out["probabilities"]
            rec["choice"] = int(np.argmax(probs))
            rec["probabilities"] = [round(float(p), 6) for p in probs]
        return rec

    def _span(self, out, max_answer_len=30):
        ids, mask = out["token_ids"], out["padding_mask"]
        length = int(mask.sum())
        sep = self.spec.get("sep_id")
        seps = [i for i in range(length) if int(ids[i]) == sep] if sep is not None else []
        first, last = (seps[0] + 1, length - 1) if seps else (1, length - 1)
        start, end = out["start_logits"], out["end_logits"]
        best, best_score = None, -np.inf
        for i in range(first, last):
            for j in range(i, min(last, i + max_answer_len)):
                s = float(start[i] + end[j])
                if s > best_score:
                    best, best_score = (i, j), s
        null_score = float(start[0] + end[0])
        if best is None:
            return {"answer": "", "score": None, "null_score": null_score}
        pieces = self._tokens(ids[best[0]:best[1] + 1], np.ones(best[1] - best[0] + 1))
        answer = " ".join(str(p) for p in pieces).replace(" ##", "")
        return {"answer": answer, "start_token": best[0], "end_token": best[1], "score": best_score,
                "null_score": null_score}


def _read_vocab_file(path):
    if path and os.path.exists(path):
        return load_vocab(path)
    return None


def _with_ids(spec, vocab):
    spec = dict(spec)
    sep_id = token_ids(vocab).get("[SEP]") if vocab else None
    if sep_id is not None:
        spec["sep_id"] = sep_id
    return spec


def load_predictor(path, max_seq_len=None, pair=None, lower_case=None) -> Predictor:
    """A `Predictor` for a SavedModel folder, a `.tflite` file (or a folder holding
    `model_text.tflite`) or a model folder (`finetune` / `save_checkpoint` output).
    `lower_case` overrides a model folder's casing (exports have theirs built in)."""
    path = os.fspath(path)
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "saved_model.pb")):
        return _saved_model_predictor(path)
    if os.path.isdir(path) and os.path.exists(os.path.join(path, "model_text.tflite")):
        path = os.path.join(path, "model_text.tflite")
    if path.endswith(".tflite"):
        return _tflite_predictor(path)
    if os.path.isdir(path):
        return _folder_predictor(path, max_seq_len, pair, lower_case)
    raise BertKerasError(f"{path}: not a SavedModel folder, a .tflite file or a model folder")


def _saved_model_predictor(path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - registers the tokenizer op the text signature uses

    spec = read_spec(path)
    if not spec:
        raise BertKerasError(f"{path}: no assets.extra/bert_keras_export.json; was it written by bert-keras export?")
    fn = tf.saved_model.load(path).signatures["serving_default"]

    def call(texts, texts_b):
        feeds = {"text": tf.constant(texts)}
        if texts_b is not None:
            feeds["text_b"] = tf.constant(texts_b)
        return {k: v.numpy() for k, v in fn(**feeds).items()}

    vocab = _read_vocab_file(os.path.join(path, "assets", spec.get("vocab_file", "vocab.txt")))
    return Predictor(call, _with_ids(spec, vocab), "saved_model", vocab)


def _tflite_predictor(path):
    from bert_keras.export.tflite import TFLiteModel, codepoints

    model = TFLiteModel(path)
    if not model.is_text:
        raise BertKerasError(f"{path}: an ids-only TFLite file; predict needs model_text.tflite")
    spec = model.spec
    if not spec:
        raise BertKerasError(f"{path}: no bert_keras_export.json next to the file")
    k = spec.get("num_choices")
    n = model.max_codepoints  # None: a string-input file of an earlier version

    def encode(texts):
        if n is None:
            return np.array(texts, dtype=object)
        return codepoints(texts, n)  # the file's input contract: the first n codepoints, 0-padded

    def call(texts, texts_b):
        feeds = {"codepoints" if n else "text": encode(texts)}
        if texts_b is not None:
            if k:
                rows = [list(b)[:k] + [""] * (k - len(b)) for b in texts_b]
                b = np.stack([encode(r) for r in rows]) if n else np.array(rows, dtype=object)
            else:
                b = encode([str(t) for t in texts_b])
            feeds["codepoints_b" if n else "text_b"] = b
        return model(**feeds)

    vocab = _read_vocab_file(os.path.join(os.path.dirname(path), spec.get("vocab_file", "vocab.txt")))
    return Predictor(call, _with_ids(spec, vocab), "tflite", vocab)


def _folder_predictor(path, max_seq_len, pair, lower_case=None):
    import tensorflow as tf

    from bert_keras.export.saved_model import make_serving_functions
    from bert_keras.export.spec import resolve
    from bert_keras.text.tokenizer import BertTokenizer

    model, spec = resolve(path, max_seq_len=max_seq_len, pair=pair, lower_case=lower_case)
    tokenizer = BertTokenizer.from_vocab(spec.vocab_path, lower_case=spec.lower_case)
    serve_text, _ = make_serving_functions(model, spec, tokenizer)

    def call(texts, texts_b):
        args = [tf.constant(texts)] + ([tf.constant(texts_b)] if texts_b is not None else [])
        return {k: v.numpy() for k, v in serve_text(*args).items()}

    vocab = tokenizer.vocab
    return Predictor(call, _with_ids(spec.to_json(), vocab), "folder", vocab)
