"""TFLite export for LiteRT: an ids model and a model with the tokenizer inside.

    export_tflite("runs/sentiment/best", "tflite/", quantize="none")

writes

* ``model.tflite``: inputs ``token_ids``, ``segment_ids``, ``padding_mask``
  int32 [B, max_seq_len] ([B, K, max_seq_len] for multiple choice); builtin
  ops only, runs on a stock `ai_edge_litert.interpreter.Interpreter`.
* ``model_text.tflite``: input ``text`` tf.string [B] (and ``text_b``), the
  tokenizer inside.  LiteRT has no TensorFlow (Flex) ops, and the exact
  tokenizer's Unicode decoding and ragged bookkeeping are TensorFlow ops, so
  this file tokenises with tensorflow-text's TFLite-ready kernels
  (`FastBertNormalize` + `FastWordpieceTokenize`, i.e. `FastBertTokenizer`)
  and packs with dense builtin ops (gather/select over the flat WordPiece
  values, no ragged slicing).  Run it with
  `InterpreterWithCustomOps(custom_op_registerers=tensorflow_text.tflite_registrar.SELECT_TFTEXT_OPS)`.
  FastBertNormalize is not Google's BasicTokenizer character for character;
  `tokenizer_exact_match` measures how often the two agree.
* ``bert_keras_export.json``: labels, casing, sequence length, names.

Outputs: as `heads.named_outputs(..., with_labels=False)`: ``logits``,
``probabilities`` and ``label_id`` (names in the JSON) for classifiers,
``score`` for regression, ``start_logits``/``end_logits`` for spans,
``choice`` for multiple choice; the text model of span / NER models also
returns the ``token_ids`` and ``padding_mask`` it built.

Quantisation (`quantize`): "none" (float32), "float16" (weights in float16),
"dynamic" (int8 weights, float activations), "int8" (int8 weights and
activations, calibrated on `calibration_texts` tokenised with the exact
tokenizer; ops without an int8 kernel stay float), "int8_mixed" (as "int8",
but the residual stream stays float: every residual add, every LayerNorm and
the feed-forward output dense that feeds the residual, see `MIXED_FLOAT_NODES`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time

import numpy as np
import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.export import heads
from bert_keras.export.spec import (check_out_dir, keep_other_variants, may_replace_export, read_spec, resolve,
                                   write_spec)
from bert_keras.utils import atomic_folder, atomic_write

QUANTIZE = ("none", "float16", "dynamic", "int8", "int8_mixed")
CALIBRATED = ("int8", "int8_mixed")
# "int8_mixed" keeps these ops float (regular expressions over the converted
# ops' output tensor names, which follow the Keras layer names): the residual
# adds of every block, every LayerNorm (its statistics and its affine output,
# which is the next block's residual input) and the feed-forward output dense
# whose output joins the residual.  Per-tensor int8 scales cannot hold the
# residual stream's few outlier channels (Bondarenko et al. 2021, "Understanding
# and Overcoming the Challenges of Efficient Transformer Quantization"); on the
# fine-tuned MiniLM each of these three groups alone left argmax agreement with
# float32 at 87-90%, all three together at 98% (README, Export).
MIXED_FLOAT_NODES = (
    r"transformer_layer_\d+(_\d+)?/add(_\d+)?$",        # residual adds
    r"layer_norm",                                        # every LayerNorm op
    r"transformer_layer_\d+(_\d+)?/output(_\d+)?/",     # FFN output dense (kernel, bias)
)
IDS_FILE = "model.tflite"
TEXT_FILE = "model_text.tflite"
INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


# --------------------------------------------------------------------------- in-TFLite tokenizer
def _read_vocab(vocab_path):
    from bert_keras.text.vocab import load_vocab, token_ids

    vocab = [str(t) for t in load_vocab(vocab_path)]
    return vocab, token_ids(vocab)


class DenseTextPacker(tf.Module):
    """Text -> BERT inputs with TFLite-convertible ops only.

    WordPiece by tensorflow-text's `FastBertTokenizer` (normalisation,
    punctuation/CJK splitting and WordPiece in two kernels that have TFLite
    implementations), then Google's packing and longest-first truncation on
    the flat values and row splits with gathers and selects.

    Args:
      vocab_path: vocab.txt.
      lower_case: uncased (lower-case, NFD, strip accents).
      seq_len: packed length.
      max_chars_per_word: words longer than this many UTF-8 bytes become
        [UNK] (tensorflow-text counts bytes; Google counts characters).
    """

    def __init__(self, vocab_path, lower_case=True, seq_len=128, max_chars_per_word=200):
        super().__init__()
        import tensorflow_text as tf_text

        from bert_keras.text.tokenizer import _usable

        vocab, ids = _read_vocab(vocab_path)
        for name in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"):
            if name not in ids:
                raise BertKerasError(f"{vocab_path}: no {name!r} token in the vocabulary")
        # As in BertTokenizer: unique matchable tokens, mapped back to the file's ids.
        matcher = sorted((i, t) for t, i in ids.items() if _usable(t))
        self._remap = tf.constant([i for i, _ in matcher], tf.int32)
        self._needs_remap = [i for i, _ in matcher] != list(range(len(vocab)))
        self.seq_len = int(seq_len)
        self.cls_id, self.sep_id, self.pad_id = ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]
        self._tokenizer = tf_text.FastBertTokenizer(
            vocab=[t for _, t in matcher], suffix_indicator="##", max_bytes_per_word=int(max_chars_per_word),
            token_out_type=tf.int32, unknown_token="[UNK]", lower_case_nfd_strip_accents=bool(lower_case),
            support_detokenization=False)

    def _flat(self, texts):
        ragged = self._tokenizer.tokenize(texts)
        values = ragged.flat_values
        if self._needs_remap:
            values = tf.gather(self._remap, values)
        splits = tf.cast(ragged.row_splits, tf.int32)
        return values, splits[:-1], splits[1:] - splits[:-1]

    @staticmethod
    def _take(values, starts, offsets, valid):
        # Gather from the flat values with clipped indices, selected where valid:
        # dense ops only (ragged slicing has no TFLite lowering).
        padded = tf.concat([values, tf.zeros([1], values.dtype)], 0)
        idx = tf.clip_by_value(starts[:, None] + offsets, 0, tf.shape(padded)[0] - 1)
        return tf.where(valid, tf.gather(padded, idx), 0)

    def __call__(self, text, text_b=None):
        """text (and text_b): tf.string [B] -> dict of int32 [B, seq_len]."""
        from bert_keras.text.packing import truncated_lengths

        L = self.seq_len
        j = tf.range(L, dtype=tf.int32)[None, :]
        values_a, start_a, len_a = self._flat(text)
        if text_b is None:
            keep_a = tf.minimum(len_a, L - 2)[:, None]
            keep_b = tf.zeros_like(keep_a)
        else:
            values_b, start_b, len_b = self._flat(text_b)
            keep_a, keep_b = truncated_lengths(len_a, len_b, L - 3)
            keep_a, keep_b = keep_a[:, None], keep_b[:, None]
        in_a = (j >= 1) & (j <= keep_a)
        tokens = self._take(values_a, start_a, j - 1, in_a)
        tokens = tf.where(j == 0, self.cls_id, tokens)
        tokens = tf.where(j == keep_a + 1, self.sep_id, tokens)
        end = keep_a + 2  # length of [CLS] A [SEP]
        segment = tf.zeros_like(tokens)
        if text_b is not None:
            in_b = (j >= end) & (j < end + keep_b)
            tokens = tf.where(in_b, self._take(values_b, start_b, j - end, in_b), tokens)
            tokens = tf.where(j == end + keep_b, self.sep_id, tokens)
            # 0/1 by integer clipping, not a cast of a boolean: the converter
            # folds `cast(bool) < 0` (the embedding lookup's index check) into
            # a boolean zeros_like that TFLite has no kernel for.
            segment = tf.clip_by_value(j - end + 1, 0, 1) * tf.clip_by_value(end + keep_b - j + 1, 0, 1)
            end = end + keep_b + 1
        mask = tf.clip_by_value(end - j, 0, 1)
        tokens = tf.where(mask > 0, tokens, self.pad_id)
        return {"token_ids": tokens, "segment_ids": segment, "padding_mask": mask}


# --------------------------------------------------------------------------- conversion
def _converter(fn, signature, workdir):
    """A TFLiteConverter for fn, through a SavedModel written by ExportArchive.

    Converting a concrete function directly keeps Keras 3 weights as TFLite
    resource variables that nothing initialises (NaN outputs); the SavedModel
    path freezes them into constants.
    """
    from bert_keras.export.saved_model import _write_archive

    path = os.path.join(workdir, f"sm_{len(os.listdir(workdir))}")
    _write_archive(path, None, [("serving_default", fn, signature)])
    return tf.lite.TFLiteConverter.from_saved_model(path, signature_keys=["serving_default"])


def _quantize(conv, quantize, representative=None):
    if quantize == "none":
        return
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        conv.target_spec.supported_types = [tf.float16]
    elif quantize in CALIBRATED:
        conv.representative_dataset = representative
        # int8 kernels where they exist, float kernels for the rest (e.g. the
        # string tokenizer ops of the text model); integer inputs stay int32.
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS]


def _convert(conv, what, float_nodes=None):
    """Converts; with float_nodes (regexes), calibrates, then quantises all but those ops."""
    import logging

    # The MLIR converter logs pages at INFO/WARNING; keep the progress readable.
    logging.getLogger("absl").setLevel(logging.ERROR)
    try:
        if not float_nodes:
            return conv.convert()
        conv._experimental_calibrate_only = True  # min/max recorded, nothing quantised yet
        calibrated = conv.convert()
        keep = _matching_nodes(calibrated, float_nodes)
        missing = [r for r in float_nodes if not any(re.search(r, n) for n in keep)]
        if missing:
            raise BertKerasError(f"TFLite conversion of {what}: no op matches {missing[0]!r} (layer names changed?)")
        from tensorflow.lite.python import convert as tflite_convert

        # the converter's own full-integer quantiser, per-channel weights, with
        # these ops denylisted (left float, with quantize/dequantize around them)
        return tflite_convert.mlir_quantize(calibrated, denylisted_nodes=keep)
    except BertKerasError:
        raise
    except Exception as e:  # noqa: BLE001 - converter errors are long; keep the first line
        raise BertKerasError(f"TFLite conversion of {what} failed: {str(e).strip().splitlines()[0]}") from e


def _matching_nodes(content, patterns):
    """Output tensor names of the ops in a TFLite model matching any of the regexes."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=content)
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    return sorted({names[i] for op in interpreter._get_ops_details() for i in op["outputs"]
                   if any(re.search(p, names[i]) for p in patterns)})


def export_tflite(model_dir, out_dir, quantize="none", max_seq_len=None, calibration_texts=None, pair=None,
                  text_model=True, suffix=None, num_choices=None, ids_model=True, vocab_path=None,
                  lower_case=None, labels=None) -> dict:
    """Exports `model.tflite` (ids) and `model_text.tflite` (tokenizer inside).

    Args:
      model_dir: a model folder (or an in-memory task model, see
        `spec.resolve`).
      out_dir: output folder, written as a whole (a temporary sibling renamed
        into place).  An existing non-empty folder is replaced only when it
        is a previous TFLite export of ours; its other ``.tflite`` files
        (other quantisations) are kept when their export JSON matches this
        one.  A folder equal to or containing the model folder is refused.
      quantize: "none", "float16", "dynamic", "int8" (full integer,
        calibrated on `calibration_texts`) or "int8_mixed" (as "int8" with
        the residual adds, LayerNorms and FFN output dense left float).
      max_seq_len: fixed sequence length of both files (default: the folder's,
        else 128).
      calibration_texts: strings (or (text, text_b) pairs) for int8 and
        int8_mixed calibration; a few hundred real sentences of the task's kind.
      pair: second text input (default from the folder).
      text_model: write the text model.
      ids_model: write the ids model.
      suffix: file name suffix, e.g. "_int8" -> model_int8.tflite (default:
        none for float32, "_<quantize>" otherwise).
      num_choices: multiple choice only: fixed K of the TFLite inputs
        (default 4).
      vocab_path, lower_case, labels: override what the folder records
        (needed for an in-memory model without a folder).

    Returns:
      {"ids": path or None, "text": path or None, "spec": json path, "quantize": ...}.
    """
    if quantize not in QUANTIZE:
        raise BertKerasError(f"quantize={quantize!r}; choose one of {', '.join(QUANTIZE)}")
    if quantize in CALIBRATED and not calibration_texts:
        raise BertKerasError(f"quantize={quantize!r} needs calibration_texts (real sentences of the task's kind)")
    model, spec = resolve(model_dir, max_seq_len=max_seq_len, pair=pair, vocab_path=vocab_path,
                          lower_case=lower_case, labels=labels)
    L = spec.max_seq_len
    mc = spec.task == "multiple_choice"
    k = int(num_choices or 4)
    suffix = ("" if quantize == "none" else f"_{quantize}") if suffix is None else suffix
    out_dir = os.fspath(out_dir)
    check_out_dir(out_dir, model_dir, "tflite")
    shape = [None, k, L] if mc else [None, L]
    # Full int8 traces the attention with bounded masking (see `attention_masking`).
    with tempfile.TemporaryDirectory(prefix="bert-keras-tflite-") as workdir, \
            attention_masking(model, "select" if quantize in CALIBRATED else "additive"), \
            atomic_folder(out_dir, may_replace=may_replace_export("tflite")) as tmp:
        paths = _export_files(model, spec, tmp, quantize, calibration_texts, text_model, ids_model, suffix, mc,
                              k, L, shape, workdir)
        keep_other_variants(out_dir, tmp)
    return {key: os.path.join(out_dir, os.path.relpath(p, tmp)) if key != "quantize" and p else p
            for key, p in paths.items()}


@contextlib.contextmanager
def attention_masking(model, masking):
    """Sets `BertSelfAttention.masking` on every attention layer of model, restored on exit.

    "select" computes the same softmax without adding the -10,000 padding
    bias to the scores: full-integer quantisation gives each tensor one int8
    scale, and a tensor holding both real scores (a few units) and -10,000
    rounds every real score to the same value (13.5 points of dev accuracy
    lost on the fine-tuned MiniLM sentiment model).
    """
    from bert_keras.layers.attention import MASKINGS, BertSelfAttention

    if masking not in MASKINGS:
        raise BertKerasError(f"masking={masking!r}; choose one of {', '.join(MASKINGS)}")
    layers = [layer for layer in model._flatten_layers(include_self=False, recursive=True)
              if isinstance(layer, BertSelfAttention)]
    before = [layer.masking for layer in layers]
    for layer in layers:
        layer.masking = masking
    try:
        yield layers
    finally:
        for layer, value in zip(layers, before):
            layer.masking = value


def _export_files(model, spec, out_dir, quantize, calibration_texts, text_model, ids_model, suffix, mc, k, L,
                  shape, workdir):

    def run(feats):
        return heads.named_outputs(spec, model(feats, training=False), with_labels=False)

    def serve_ids(token_ids, segment_ids, padding_mask):
        return run({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})

    float_nodes = MIXED_FLOAT_NODES if quantize == "int8_mixed" else None
    ids_path = None
    if ids_model:
        representative = None
        if quantize in CALIBRATED:
            representative = _representative_ids(spec, calibration_texts, mc, k)
        ids_sig = [tf.TensorSpec(shape, tf.int32, name=n) for n in INPUT_NAMES]
        conv = _converter(serve_ids, ids_sig, workdir)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        _quantize(conv, quantize, representative)
        ids_path = os.path.join(out_dir, IDS_FILE.replace(".tflite", f"{suffix}.tflite"))
        _write(ids_path, _convert(conv, f"{spec.source} (ids model)", float_nodes))

    text_path = None
    if text_model:
        packer = DenseTextPacker(spec.vocab_path, spec.lower_case, L)

        def featurize(text, text_b=None):
            if not mc:
                return packer(text, text_b)
            # [B] contexts and [B, K] endings -> [B*K] pairs -> [B, K, L]
            rows = tf.range(tf.shape(text)[0] * k) // k
            feats = packer(tf.gather(text, rows), tf.reshape(text_b, [-1]))
            return {n: tf.reshape(v, [-1, k, L]) for n, v in feats.items()}

        def finish(feats):
            out = run(feats)
            if spec.task in ("token_classification", "span"):
                out["token_ids"], out["padding_mask"] = feats["token_ids"], feats["padding_mask"]
            return out

        sig = [tf.TensorSpec([None], tf.string, name="text")]
        if spec.pair:
            sig.append(tf.TensorSpec([None, k] if mc else [None], tf.string, name="text_b"))

            def serve_text(text, text_b):
                return finish(featurize(text, text_b))
        else:
            def serve_text(text):
                return finish(featurize(text))

        conv = _converter(serve_text, sig, workdir)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        conv.allow_custom_ops = True  # the tensorflow-text tokenizer kernels
        text_representative = None
        if quantize in CALIBRATED:
            from tensorflow_text import tflite_registrar

            text_representative = _representative_texts(spec, calibration_texts, mc, k)
            # the calibrator runs the float model, tokenizer kernels included
            conv.target_spec._experimental_custom_op_registerers = list(tflite_registrar.SELECT_TFTEXT_OPS)
        _quantize(conv, quantize, text_representative)
        text_path = os.path.join(out_dir, TEXT_FILE.replace(".tflite", f"{suffix}.tflite"))
        _write(text_path, _convert(conv, f"{spec.source} (text model)", float_nodes))
    # the vocabulary next to the files: clients decode token ids with it
    vocab_copy = os.path.join(out_dir, "vocab.txt")
    if os.path.abspath(spec.vocab_path) != os.path.abspath(vocab_copy):
        shutil.copyfile(spec.vocab_path, vocab_copy)
    spec.vocab_path = vocab_copy
    spec_path = write_spec(spec, out_dir, num_choices=k if mc else None,
                           tflite_outputs=["label_id" if o == "label" else o for o in spec.text_outputs])
    return {"ids": ids_path, "text": text_path, "spec": spec_path, "quantize": quantize}


def _write(path, content):
    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(content)
    atomic_write(path, write)


def _split_pairs(texts, mc, k):
    a, b = [], []
    for t in texts:
        if isinstance(t, (tuple, list)):
            a.append(str(t[0]))
            rest = t[1]
            b.append(list(rest)[:k] + [""] * (k - len(rest)) if mc else str(rest))
        else:
            a.append(str(t))
            b.append([""] * k if mc else "")
    return a, b


def _representative_ids(spec, texts, mc, k, limit=200):
    """Calibration batches (one example each) tokenised with the exact tokenizer."""
    from bert_keras.text.tokenizer import BertTokenizer

    tok = BertTokenizer.from_vocab(spec.vocab_path, lower_case=spec.lower_case)
    a, b = _split_pairs(list(texts)[:limit], mc, k)

    def gen():
        for x, y in zip(a, b):
            if mc:
                feats = tok([x] * k, pairs=y, seq_len=spec.max_seq_len)
                yield {n: feats[n].numpy()[None] for n in INPUT_NAMES}
            else:
                feats = tok([x], pairs=[y] if spec.pair else None, seq_len=spec.max_seq_len)
                yield {n: feats[n].numpy() for n in INPUT_NAMES}

    return gen


def _representative_texts(spec, texts, mc, k, limit=200):
    a, b = _split_pairs(list(texts)[:limit], mc, k)

    def gen():
        for x, y in zip(a, b):
            item = {"text": np.array([x.encode("utf-8")], dtype=object)}
            if spec.pair:
                item["text_b"] = (np.array([[s.encode("utf-8") for s in y]], dtype=object) if mc
                                  else np.array([y.encode("utf-8")], dtype=object))
            yield item

    return gen


# --------------------------------------------------------------------------- running
class TFLiteModel:
    """A LiteRT interpreter for an exported file, called like the SavedModel signatures.

    `model_text*.tflite` files get tensorflow-text's TFLite kernels
    (`InterpreterWithCustomOps`); ids files run on the stock interpreter.

    Example:
      >>> m = TFLiteModel("tflite/model_text.tflite")
      >>> m(text=["a gorgeous, witty film."])["probabilities"]
      array([[0.03, 0.97]], dtype=float32)
    """

    def __init__(self, path, num_threads=None):
        from ai_edge_litert.interpreter import Interpreter, InterpreterWithCustomOps

        if not os.path.exists(path):
            raise BertKerasError(f"{path}: no such TFLite file")
        self.path = path
        with open(path, "rb") as f:
            content = f.read()
        self.is_text = b"FastWordpieceTokenize" in content or b"FastBertNormalize" in content
        if self.is_text:
            from tensorflow_text import tflite_registrar

            self.interpreter = InterpreterWithCustomOps(
                custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS, model_content=content,
                num_threads=num_threads)
        else:
            self.interpreter = Interpreter(model_content=content, num_threads=num_threads)
        self._runner = self.interpreter.get_signature_runner()
        self.inputs = self._runner.get_input_details()
        self.spec = read_spec(path)

    def __call__(self, **inputs):
        """Named numpy inputs -> dict of named numpy outputs (batch resized as needed)."""
        feed = {}
        for name, detail in self.inputs.items():
            if name not in inputs:
                raise BertKerasError(f"{self.path}: missing input {name!r}")
            value = inputs[name]
            if detail["dtype"] in (np.bytes_, np.object_) or np.asarray(value).dtype.kind in "USO":
                value = np.array([v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in np.ravel(value)],
                                 dtype=object).reshape(np.shape(value))
            else:
                value = np.asarray(value, dtype=detail["dtype"])
            feed[name] = value
        return self._runner(**feed)


def file_size_mb(path) -> float:
    return os.path.getsize(path) / 1e6


def latency_ms(fn, repeats=20, warmup=3) -> float:
    """Median wall time of fn() in milliseconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * float(np.median(times))


def tokenizer_exact_match(vocab_path, lower_case, texts, seq_len=512, batch_size=64) -> dict:
    """How often the in-TFLite tokenizer agrees with Google's FullTokenizer.

    Both are compared on the packed ids ([CLS] text [SEP], truncated to
    `seq_len`); the TFLite side runs through a converted tokenizer-only model
    on LiteRT (the very kernels `model_text.tflite` uses).

    Returns:
      {"lines", "exact", "rate" (percent), "mismatches": first few texts}.
    """
    from official.nlp.tools import tokenization

    packer = DenseTextPacker(vocab_path, lower_case, seq_len)

    def tokenize(text):
        return packer(text)

    with tempfile.TemporaryDirectory() as tmp:
        conv = _converter(tokenize, [tf.TensorSpec([None], tf.string, name="text")], tmp)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        conv.allow_custom_ops = True
        path = os.path.join(tmp, "tokenizer_text.tflite")
        _write(path, _convert(conv, "tokenizer"))
        lite = TFLiteModel(path)
        google = tokenization.FullTokenizer(vocab_path, do_lower_case=lower_case)
        exact, bad = 0, []
        for i in range(0, len(texts), batch_size):
            chunk = texts[i:i + batch_size]
            got = lite(text=np.array(chunk, dtype=object))
            for t, ids, mask in zip(chunk, got["token_ids"], got["padding_mask"]):
                want = google.convert_tokens_to_ids(["[CLS]"] + google.tokenize(t)[:seq_len - 2] + ["[SEP]"])
                if list(ids[: int(mask.sum())]) == want:
                    exact += 1
                elif len(bad) < 10:
                    bad.append(t)
    return {"lines": len(texts), "exact": exact, "rate": 100.0 * exact / max(len(texts), 1), "mismatches": bad}


__all__ = ["export_tflite", "TFLiteModel", "DenseTextPacker", "tokenizer_exact_match", "file_size_mb",
           "latency_ms", "QUANTIZE", "MIXED_FLOAT_NODES", "IDS_FILE", "TEXT_FILE"]
