"""TFLite export for LiteRT: an ids model and a model with the tokenizer inside.

    export_tflite("runs/sentiment/best", "tflite/", quantize="none")

writes

* ``model.tflite``: inputs ``token_ids``, ``segment_ids``, ``padding_mask``
  int32 [B, max_seq_len] ([B, K, max_seq_len] for multiple choice), signature
  ``serving_default``; with ``length_buckets`` also one signature per shorter
  length, ``length_16``, ``length_32``, ... (same inputs and outputs at that
  length, weights shared): LiteRT computes a batch at the smallest bucket
  that holds its longest row instead of at max_seq_len (`TFLiteModel` picks
  it).
* ``model_text.tflite``: input ``codepoints`` int32 [B, N] (pair models also
  ``codepoints_b``, [B, K, N] for multiple choice): the text as Unicode
  codepoints padded with 0, the first N kept (`text` has the
  contract); Google-exact tokenization inside (`text.CodepointTokenizer`).
* ``bert_keras_export.json``: labels, casing, sequence length, the budget
  ``max_codepoints``, names; ``vocab.txt``.

Both files hold TFLite builtin ops only (checked after every conversion) and
run on a stock `ai_edge_litert.interpreter.Interpreter`, no custom-op
registerer.  `export_tokenizer_tflite` writes the tokenizer alone
(codepoints -> packed ids).

Outputs: as `heads.named_outputs(..., with_labels=False)`: ``logits``,
``probabilities`` and ``label_id`` (names in the JSON) for classifiers,
``score`` for regression, ``start_logits``/``end_logits`` for spans,
``choice`` for multiple choice; the text model of span / NER models also
returns the ``token_ids`` and ``padding_mask`` it built.

Quantisation: see `convert` ("none", "float16", "dynamic", "int8",
"int8_mixed").  Modules of this package: `convert` (converter, quantisation, op checks),
`text` and `tables` (the builtin-ops tokenizer), `runtime` (`TFLiteModel`), `calibration`
(the calibration inputs), `tftext` (the previous tensorflow-text front-end).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.export import heads
from bert_keras.export.residual_scaling import DEFAULT_OUTLIER_FACTOR, rescaled_copy, scales_from_maxima, stream_maxima
from bert_keras.export.spec import (check_out_dir, keep_other_variants, may_replace_export,
                                    require_tensorflow_backend, resolve, weights_bytes, write_spec)
from bert_keras.export.tflite.convert import (CALIBRATED, MIXED_FLOAT_NODES, QUANTIZE, convert_model, make_converter,
                                              quantize_model, assert_builtin_only, attention_masking,
                                              builtin_only, op_names)
from bert_keras.export.tflite.calibration import (batched, length_signature, representative_ids,
                                                  representative_texts)
from bert_keras.export.tflite.runtime import TFLiteModel, file_size_mb, latency_ms
from bert_keras.export.tflite.text import CodepointTokenizer, codepoints
from bert_keras.models.copies import with_options
from bert_keras.models.inputs import INPUT_NAMES
from bert_keras.export.tflite.tftext import DenseTextPacker
from bert_keras.locks import writes
from bert_keras.writing import atomic_folder, atomic_write

IDS_FILE = "model.tflite"
TEXT_FILE = "model_text.tflite"
TOKENIZER_FILE = "tokenizer.tflite"
MIN_CODEPOINTS = 512
# "auto" length buckets: these lengths below the file's max_seq_len (steps of 8
# up to 64, where most sentences are, then 16, 32 and 64)
LENGTH_BUCKETS = (16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448)
# tasks whose outputs have no sequence axis (buckets change nothing a caller sees)
BUCKET_TASKS = ("classification", "multiple_choice")


def resolve_length_buckets(length_buckets, max_seq_len, task) -> list:
    """`export_tflite`'s length_buckets -> the sorted bucket lengths to convert (all below max_seq_len).

    None or [] -> none; "auto" -> `LENGTH_BUCKETS` below max_seq_len for
    sequence-level tasks (none for span and token classification); a list
    of lengths, or a string of them separated by commas ("16, 32") -> those,
    each in [2, max_seq_len).
    """
    if not length_buckets:
        return []
    if isinstance(length_buckets, str):
        if length_buckets == "auto":
            return [b for b in LENGTH_BUCKETS if b < max_seq_len] if task in BUCKET_TASKS else []
        if not re.fullmatch(r"[\d,\s]+", length_buckets):
            raise BertKerasError(f"length_buckets={length_buckets!r}; use 'auto' or a list of lengths")
        length_buckets = [b for b in length_buckets.split(",") if b.strip()]
    if task not in BUCKET_TASKS:
        raise BertKerasError(f"length_buckets apply to {' and '.join(BUCKET_TASKS)} models; this one is {task} "
                             f"(its outputs have a sequence axis)")
    out = set()
    for b in length_buckets:
        if isinstance(b, bool) or not isinstance(b, int) and not (isinstance(b, str) and b.strip().isdigit()):
            raise BertKerasError(f"length bucket {b!r}: not a whole number")
        if not 2 <= int(b) < max_seq_len:
            raise BertKerasError(f"length bucket {int(b)}: must be in [2, max_seq_len={max_seq_len})")
        out.add(int(b))
    return sorted(out)


def default_max_codepoints(max_seq_len) -> int:
    """The default budget N: 4 codepoints per token of the sequence, at least 512."""
    return max(MIN_CODEPOINTS, 4 * int(max_seq_len))


def _builtin_convert(conv, what, float_nodes=None):
    content = convert_model(conv, what, float_nodes)
    assert_builtin_only(content, what)
    return content


@writes("out_dir")
def export_tflite(model_dir, out_dir, quantize="none", max_seq_len=None, calibration_texts=None, pair=None,
                  text_model=True, suffix=None, num_choices=None, ids_model=True, vocab_path=None,
                  lower_case=None, labels=None, max_codepoints=None, max_chars_per_word=200,
                  length_buckets=None, outlier_factor=DEFAULT_OUTLIER_FACTOR) -> dict:
    """Exports `model.tflite` (ids) and `model_text.tflite` (tokenizer inside), builtin ops only.

    Args:
      model_dir: a model folder (or an in-memory task model, see
        `spec.resolve`).
      out_dir: output folder, written as a whole (a temporary sibling renamed
        into place).  An existing non-empty folder is replaced only when it
        is a previous TFLite export of ours; its other ``.tflite`` files
        (other quantisations) are kept when their export JSON matches this
        one.  A folder equal to or containing the model folder is refused.
      quantize: "none", "float16", "dynamic", "int8" (full integer,
        calibrated on `calibration_texts`, the residual stream rescaled per
        channel: `residual_scaling`, see ``outlier_factor``) or "int8_mixed" (as "int8" with
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
      max_codepoints: N, the codepoint budget of the text model's inputs
        (default `default_max_codepoints(max_seq_len)`: 512 up to a sequence
        length of 128).
      max_chars_per_word: longer words become [UNK] (Google's 200).
      length_buckets: extra signatures of the ids file at shorter lengths
        ("auto": 16, 24, ..., 64, 80, 96, ... below max_seq_len; or a list of
        lengths; classification, regression and multiple choice only; not
        with "int8_mixed").
        `TFLiteModel` runs each batch at the smallest one that holds its
        longest row: on short sentences several times less work than
        max_seq_len.  Default none (``serving_default`` only).

      outlier_factor: "int8" only: residual-stream channels above this many median channel
        maxima are rescaled (`residual_scaling.scales_from_maxima`; ``float("inf")``: none).

    Returns:
      {"ids": path or None, "text": path or None, "spec": json path, "quantize": ...}.
    """
    require_tensorflow_backend("export_tflite")
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
    n_cp = int(max_codepoints or default_max_codepoints(L))
    if n_cp < 1:
        raise BertKerasError(f"max_codepoints={max_codepoints!r}; it must be at least 1")
    out_dir = os.fspath(out_dir)
    check_out_dir(out_dir, model_dir, "tflite")
    shape = [None, k, L] if mc else [None, L]
    buckets = resolve_length_buckets(length_buckets, L, spec.task)
    if buckets and quantize == "int8_mixed":
        # its float ops are chosen by tensor name in one signature's graph
        raise BertKerasError("length_buckets cannot be combined with quantize='int8_mixed'; use 'int8' or 'dynamic'")
    # The files are traced from a copy of the model (the caller's is never changed): the
    # padded layout (a file takes fixed-length batches); both int8 modes with bounded masking
    # (see `attention_masking`); full int8 also with the residual stream rescaled per channel
    # (`residual_scaling.rescaled_copy`, a copy of that copy with its weights rescaled).
    if quantize == "int8":
        maxima = stream_maxima(model, batched(representative_ids(spec, calibration_texts, mc, k)()))
    model = with_options(model, masking="select" if quantize in CALIBRATED else "additive",
                         real_tokens_only=False)
    if quantize == "int8":
        model = rescaled_copy(model, scales_from_maxima(maxima, outlier_factor))
    with tempfile.TemporaryDirectory(prefix="bert-keras-tflite-") as workdir, \
            atomic_folder(out_dir, may_replace=may_replace_export("tflite"),
                          needs_bytes=_files_bytes(model, quantize, text_model, ids_model)) as tmp:
        paths = _export_files(model, spec, tmp, quantize, calibration_texts, text_model, ids_model, suffix, mc,
                              k, L, shape, workdir, n_cp, int(max_chars_per_word), buckets)
        keep_other_variants(out_dir, tmp)
    return {key: os.path.join(out_dir, os.path.relpath(p, tmp)) if key != "quantize" and p else p
            for key, p in paths.items()}


def _export_files(model, spec, out_dir, quantize, calibration_texts, text_model, ids_model, suffix, mc, k, L,
                  shape, workdir, n_cp, max_chars_per_word, buckets):

    def run(feats):
        return heads.named_outputs(spec, model(feats, training=False), with_labels=False)

    def serve_ids(token_ids, segment_ids, padding_mask):
        return run({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})

    float_nodes = MIXED_FLOAT_NODES if quantize == "int8_mixed" else None
    ids_path = None
    if ids_model:
        representative = None
        if quantize in CALIBRATED:
            representative = representative_ids(spec, calibration_texts, mc, k, buckets=buckets)

        def ids_signature(length):
            return [tf.TensorSpec(shape[:-1] + [length], tf.int32, name=n) for n in INPUT_NAMES]

        more = [(length_signature(b), serve_ids, ids_signature(b)) for b in buckets]
        conv = builtin_only(make_converter(serve_ids, ids_signature(L), workdir, more))
        quantize_model(conv, quantize, representative)
        ids_path = os.path.join(out_dir, IDS_FILE.replace(".tflite", f"{suffix}.tflite"))
        _write(ids_path, _builtin_convert(conv, f"{spec.source} (ids model)", float_nodes))

    text_path = None
    if text_model:
        packer = CodepointTokenizer(vocab_path=spec.vocab_path, lower_case=spec.lower_case, seq_len=L,
                                    max_codepoints=n_cp, max_chars_per_word=max_chars_per_word)

        def featurize(text, text_b=None):
            if not mc:
                return packer(text, text_b)
            # [B, N] contexts and [B, K, N] endings -> [B*K] pairs -> [B, K, L]
            rows = tf.math.floordiv(tf.range(tf.shape(text)[0] * k), k)
            feats = packer(tf.gather(text, rows), tf.reshape(text_b, [-1, n_cp]))
            return {n: tf.reshape(v, [-1, k, L]) for n, v in feats.items()}

        def finish(feats):
            out = run(feats)
            if spec.task in ("token_classification", "span"):
                out["token_ids"], out["padding_mask"] = feats["token_ids"], feats["padding_mask"]
            return out

        sig = [tf.TensorSpec([None, n_cp], tf.int32, name="codepoints")]
        if spec.pair:
            sig.append(tf.TensorSpec([None, k, n_cp] if mc else [None, n_cp], tf.int32, name="codepoints_b"))

            def serve_text(codepoints, codepoints_b):
                return finish(featurize(codepoints, codepoints_b))
        else:
            def serve_text(codepoints):
                return finish(featurize(codepoints))

        conv = builtin_only(make_converter(serve_text, sig, workdir))
        text_representative = None
        if quantize in CALIBRATED:
            text_representative = representative_texts(spec, calibration_texts, mc, k, n_cp)
        quantize_model(conv, quantize, text_representative)
        text_path = os.path.join(out_dir, TEXT_FILE.replace(".tflite", f"{suffix}.tflite"))
        _write(text_path, _builtin_convert(conv, f"{spec.source} (text model)", float_nodes))
    # the vocabulary next to the files: clients decode token ids with it
    vocab_copy = os.path.join(out_dir, "vocab.txt")
    if os.path.abspath(spec.vocab_path) != os.path.abspath(vocab_copy):
        shutil.copyfile(spec.vocab_path, vocab_copy)
    spec.vocab_path = vocab_copy
    spec_path = write_spec(spec, out_dir, num_choices=k if mc else None,
                           tflite_outputs=["label_id" if o == "label" else o for o in spec.text_outputs],
                           tflite_text_inputs=["codepoints", "codepoints_b"] if spec.pair else ["codepoints"],
                           max_codepoints=n_cp, max_chars_per_word=max_chars_per_word)
    return {"ids": ids_path, "text": text_path, "spec": spec_path, "quantize": quantize}


def _files_bytes(model, quantize, text_model, ids_model) -> int:
    """About what the export writes: each file holds the weights, quantised as asked."""
    per_weight = {"none": 4, "float16": 2}.get(quantize, 1)
    return weights_bytes(model, per_weight) * (int(bool(text_model)) + int(bool(ids_model)))


def _write(path, content):
    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(content)
    atomic_write(path, write)


def export_tokenizer_tflite(vocab_path, path, lower_case=True, seq_len=128, max_codepoints=None, pair=False,
                            max_chars_per_word=200) -> str:
    """Writes the text front-end alone: codepoints (and codepoints_b) -> packed ids.

    The file takes the input contract of `model_text.tflite` and returns
    int32 [B, seq_len] ``token_ids``, ``segment_ids``, ``padding_mask`` with
    builtin ops only; it is what `model_text.tflite` computes before the
    encoder, for apps that run the ids model themselves and for checking the
    ids.  Returns path.
    """
    n_cp = int(max_codepoints or default_max_codepoints(seq_len))
    tok = CodepointTokenizer(vocab_path=vocab_path, lower_case=lower_case, seq_len=seq_len,
                             max_codepoints=n_cp, max_chars_per_word=max_chars_per_word)
    sig = [tf.TensorSpec([None, n_cp], tf.int32, name="codepoints")]
    if pair:
        sig.append(tf.TensorSpec([None, n_cp], tf.int32, name="codepoints_b"))

        def tokenize(codepoints, codepoints_b):
            return tok(codepoints, codepoints_b)
    else:
        def tokenize(codepoints):
            return tok(codepoints)

    with tempfile.TemporaryDirectory(prefix="bert-keras-tflite-") as workdir:
        conv = builtin_only(make_converter(tokenize, sig, workdir))
        content = _builtin_convert(conv, f"{vocab_path} (tokenizer)")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _write(path, content)
    return path


__all__ = ["export_tflite", "export_tokenizer_tflite", "TFLiteModel", "CodepointTokenizer", "DenseTextPacker",
           "codepoints", "default_max_codepoints", "file_size_mb", "latency_ms", "op_names", "attention_masking",
           "QUANTIZE", "CALIBRATED", "MIXED_FLOAT_NODES", "IDS_FILE", "TEXT_FILE", "TOKENIZER_FILE", "LENGTH_BUCKETS",
           "length_signature", "resolve_length_buckets"]


