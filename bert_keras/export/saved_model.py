"""SavedModel export for TF Serving: a raw-text signature and an ids signature.

    export_saved_model("runs/sentiment/best", "export/sentiment/1")

writes a SavedModel (through `keras.export.ExportArchive`) with two signatures:

* ``serving_default``: ``text`` tf.string [B] (pair models also ``text_b``
  [B]; multiple choice ``text_b`` [B, K], one ending per choice).  Tokenises
  with the project's Google-exact in-graph tokenizer (WordPiece in core ops,
  `bert_keras.text.wordpiece`), packs ``[CLS] A [SEP] (B [SEP])`` to
  ``max_seq_len`` and runs the model.
* ``serve_ids``: ``token_ids``, ``segment_ids``, ``padding_mask`` int32
  [B, L] ([B, K, L] for multiple choice), any L up to the position table.

Both signatures (every function of the SavedModel) use core TensorFlow ops
only: the folder loads in any TensorFlow process and any TF Serving binary of
the same TensorFlow line, without ``tensorflow_text`` and without anything
from this project.  (Earlier exports needed tensorflow-text's WordPiece op and
wrote an ids-only copy, ``ids_only/``, for consumers without it; that copy is
no longer needed or written.)

Outputs are named (`ExportSpec.text_outputs`): ``logits``, ``probabilities``,
``label`` for classifiers, ``score`` for regression, ``start_logits`` /
``end_logits`` for spans, per-WordPiece ``logits``/``label`` for NER (the
text signature also returns the ``token_ids`` and ``padding_mask`` it built,
so clients can align tokens), ``choice`` for multiple choice.

The vocabulary travels as an asset (``assets/vocab.txt``); the label names,
casing, sequence length and input/output names in
``assets.extra/bert_keras_export.json``.
"""

from __future__ import annotations

import os

import tensorflow as tf

from bert_keras import _private_api
from bert_keras.export import heads
from bert_keras.export.spec import (SPEC_FILE, check_out_dir, may_replace_export, require_tensorflow_backend,
                                    resolve, weights_bytes, write_spec)
from bert_keras.models.copies import with_options
from bert_keras.locks import writes
from bert_keras.writing import atomic_folder

# The ids-only copy earlier exports wrote inside the folder (kept so their size excludes it).
IDS_ONLY = "ids_only"
# Tasks whose outputs are one per sequence: their exports run the encoder on the real tokens
# only (`bert_keras.layers.unpadded`), which no output can tell apart from the padded path
# and which does not pay for the text signature's padding to max_seq_len.  Token-level
# outputs (token classification, span logits) keep the reference's values at the padding
# positions too.
REAL_TOKENS_ONLY = ("classification", "multiple_choice")


def _ids_spec(spec):
    shape = [None, None, None] if spec.task == "multiple_choice" else [None, None]
    return [tf.TensorSpec(shape, tf.int32, name=n) for n in ("token_ids", "segment_ids", "padding_mask")]


def make_serving_functions(model, spec, tokenizer, constant_weights=False):
    """The signature functions (plain python callables taking tensors).

    `tokenizer` is a `BertTokenizer`; for an export that must hold core ops
    only, one with ``wordpiece="core"`` (what `export_saved_model` passes).
    ``constant_weights``: the model runs as `constant_weights_call` (TensorFlow).

    Returns (serve_text, serve_ids); serve_text takes (text) or (text, text_b).  Called eagerly
    in a JAX or PyTorch process (the folder predictor), the model runs on that backend between
    the TensorFlow tokenizer and the TensorFlow heads.
    """
    import keras

    call = None
    if constant_weights:
        from bert_keras.models.inference import constant_weights_call

        call = constant_weights_call(model)

    def run(feats):
        inputs = {k: feats[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        if call is not None:
            return call(inputs)
        if keras.backend.backend() == "tensorflow":
            return model(inputs, training=False)
        out = model.predict_on_batch({k: v.numpy() for k, v in inputs.items()})
        return tf.nest.map_structure(lambda t: tf.constant(keras.ops.convert_to_numpy(t)), out)

    def serve_ids(token_ids, segment_ids, padding_mask):
        feats = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return heads.named_outputs(spec, run(feats))

    def featurize(text, text_b=None):
        seq_len = spec.max_seq_len
        if spec.task != "multiple_choice":
            return tokenizer(text, pairs=text_b, seq_len=seq_len)
        # every (context, ending) pair packed like any pair, then [B*K, L] -> [B, K, L]
        num_choices = tf.shape(text_b)[1]
        feats = tokenizer(tf.repeat(text, num_choices), pairs=tf.reshape(text_b, [-1]), seq_len=seq_len)
        shape = tf.stack([tf.shape(text_b)[0], num_choices, seq_len])
        return {k: tf.reshape(v, shape) for k, v in feats.items()}

    def finish(feats):
        out = heads.named_outputs(spec, run(feats))
        if spec.task in ("token_classification", "span"):
            out["token_ids"] = feats["token_ids"]
            out["padding_mask"] = feats["padding_mask"]
        return out

    if spec.pair:
        def serve_text(text, text_b):
            return finish(featurize(text, text_b))
    else:
        def serve_text(text):
            return finish(featurize(text))
    return serve_text, serve_ids


def text_input_signature(spec):
    sig = [tf.TensorSpec([None], tf.string, name="text")]
    if spec.pair:
        shape = [None, None] if spec.task == "multiple_choice" else [None]
        sig.append(tf.TensorSpec(shape, tf.string, name="text_b"))
    return sig


def write_archive(path, model, endpoints, assets=()):
    """Writes a SavedModel of ``endpoints`` ((name, function, input signature) triples) at ``path``,
    tracking ``model``'s variables and the ``assets`` files; the TFLite converter reads such a folder."""
    return _write_archive(path, model, endpoints, assets)


def _write_archive(path, model, endpoints, assets=()):
    """Writes endpoints [(name, fn, input_signature)] as a SavedModel (model: unused, kept for callers)."""
    import keras

    archive = keras.export.ExportArchive()
    # Not `archive.track(model)`: the endpoints capture the variables they use
    # (saved once, under `_all_variables`); tracking the model as well stores
    # every weight a second time through its Keras variable wrappers, doubling
    # the SavedModel (Keras 3.15).
    for name, value in assets:
        # tracked assets are copied into assets/ and their paths rewritten on load
        setattr(_private_api.archive_trackable(archive), name, value)
    for name, fn, signature in endpoints:
        archive.add_endpoint(name=name, fn=fn, input_signature=signature)
    archive.write_out(path, verbose=False)


@writes("out_dir")
def export_saved_model(model_dir_or_model, out_dir, max_seq_len=None, pair=None, vocab_path=None,
                       lower_case=None, labels=None, ids_only_copy=True, constant_weights=False) -> str:
    """Exports a task model as a SavedModel with `serving_default` (text) and `serve_ids`.

    Args:
      model_dir_or_model: a model folder (`finetune` / `save_checkpoint`
        output, or another folder `load_checkpoint` reads that has a task
        head) or an in-memory task model from `load_checkpoint`.
      out_dir: the SavedModel folder to write, as a whole.  An existing
        non-empty folder is replaced only when it is a previous SavedModel
        export of ours; anything else, and a folder equal to or containing
        the model folder, is refused (`spec.check_out_dir`).  For TF
        Serving use a numbered version folder, e.g. ``models/sentiment/1``.
      max_seq_len: the text signature's sequence length (default: the
        folder's, else 128).  `serve_ids` takes any length.
      pair: the text signature takes `text_b` (default: from the folder;
        always for span and multiple choice).
      vocab_path, lower_case, labels: override what the folder records.
      ids_only_copy: accepted and ignored, so older calls keep working: the
        folder itself now loads without tensorflow-text (core ops only), so
        no ``ids_only/`` copy is written.
      constant_weights: the weights as constants of the graph instead of
        variables (`bert_keras.models.inference_function`'s option, one copy
        shared by both signatures): for bf16 serving, export a model loaded
        with ``dtype="mixed_bfloat16"`` this way, and TensorFlow folds its
        weight casts and oneDNN keeps its reordered weights (docs/results.md).

    Returns:
      out_dir.
    """
    require_tensorflow_backend("export_saved_model")
    from bert_keras.text.tokenizer import BertTokenizer

    model, spec = resolve(model_dir_or_model, max_seq_len=max_seq_len, pair=pair, vocab_path=vocab_path,
                          lower_case=lower_case, labels=labels)
    # core-op WordPiece: the exported graph must load without tensorflow-text
    tokenizer = BertTokenizer.from_vocab(spec.vocab_path, lower_case=spec.lower_case, wordpiece="core")
    # A copy traces the signatures: per-sequence tasks on the real tokens only, whatever the
    # caller's model was set to; the caller's model is left as it is.
    model = with_options(model, real_tokens_only=spec.task in REAL_TOKENS_ONLY)
    serve_text, serve_ids = make_serving_functions(model, spec, tokenizer, constant_weights=constant_weights)
    out_dir = os.fspath(out_dir)
    check_out_dir(out_dir, model_dir_or_model, "saved_model")
    # Written to a temporary sibling and renamed: TF Serving polls the base
    # folder and must never see a half-written version.  Only a previous
    # export of ours is ever replaced (checked before and again at the swap).
    with atomic_folder(out_dir, may_replace=may_replace_export("saved_model"),
                       needs_bytes=weights_bytes(model, bytes_per_weight=4)) as main:
        vocab_asset = tf.saved_model.Asset(spec.vocab_path)
        # the signatures are traced inside _write_archive
        _write_archive(main, model, [
            ("serving_default", serve_text, text_input_signature(spec)),
            ("serve_ids", serve_ids, _ids_spec(spec)),
        ], assets=[("vocab_file", vocab_asset)])
        write_spec(spec, os.path.join(main, "assets.extra"), max_seq_len_ids="any")
    return out_dir


def saved_model_size_mb(path) -> float:
    """Size of a SavedModel folder (without an older export's ids-only copy), in MB (10^6 bytes)."""
    total = 0
    for root, dirs, files in os.walk(path):
        if root == path and IDS_ONLY in dirs:
            dirs.remove(IDS_ONLY)
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total / 1e6


__all__ = ["export_saved_model", "make_serving_functions", "text_input_signature", "saved_model_size_mb",
           "SPEC_FILE", "IDS_ONLY"]
