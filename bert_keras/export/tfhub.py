"""Export in TF Hub's "Common SavedModel APIs for Text": a preprocessor and an encoder.

    export_tfhub("runs/sentiment/best", "hub/")   # or a pre-trained folder such as MiniLM

writes two SavedModels that code written for tfhub.dev's
``bert_en_uncased_preprocess`` and ``bert_en_uncased_L-12_H-768_A-12`` runs on
unchanged (``hub.KerasLayer("hub/preprocessor")``, ``tf.saved_model.load``):

``OUT/preprocessor/`` (core TensorFlow ops only, no variables to train):
  * ``preprocessor(sentences)``: tf.string [B] -> dict of int32 [B, seq_length]
    ``input_word_ids`` (``[CLS] ... [SEP]`` then ``[PAD]``), ``input_mask``
    (1 = real token), ``input_type_ids`` (all 0).
  * ``preprocessor.tokenize(sentences)``: tf.RaggedTensor int32
    [B, (words), (pieces)], the basic-tokenizer words and their WordPiece ids
    (Google-exact; no special tokens).
  * ``preprocessor.bert_pack_inputs(segments, seq_length=seq_length)``: a list
    of one or two int32 ragged tensors [B, (words), (pieces)] or [B, (pieces)]
    -> the same dict, ``[CLS] A [SEP] (B [SEP])``, type ids 0 then 1, the
    pair truncated round-robin (A keeps ceil(budget / 2) when both are long,
    which is also Google's longest-first rule), ``seq_length`` any int32.
  * ``preprocessor.tokenize.get_special_tokens_dict()``: int32 scalars
    ``vocab_size``, ``start_of_sequence_id``, ``end_of_segment_id``,
    ``padding_id``, ``mask_id``.
  * ``vocab_file`` (asset) and ``do_lower_case`` (bool variable).

``OUT/encoder/``:
  * ``encoder(inputs, training=False)`` with the dict above (int32 [B, L]
    each) -> ``pooled_output`` [B, H], ``sequence_output`` [B, L, H],
    ``encoder_outputs`` (list, one [B, L, H] per Transformer layer, the last
    equal to ``sequence_output``) and ``default`` (= ``pooled_output``);
    float32.  Dropout only with ``training=True``.
  * ``variables``, ``trainable_variables``, ``regularization_losses`` (empty),
    as ``hub.KerasLayer(..., trainable=True)`` expects for fine-tuning.
  * the ``serving_default`` signature (TF Serving): the inference call with
    the per-layer list flattened to ``encoder_outputs_0`` ..
    ``encoder_outputs_{N-1}`` (signatures cannot return lists).
  * ``vocab_file`` and ``do_lower_case``, like the tfhub.dev encoders.
"""

from __future__ import annotations

import os

import tensorflow as tf

from bert_keras.errors import BertKerasError
from bert_keras.text.packing import pack_ragged
from bert_keras.locks import writes

PREPROCESSOR = "preprocessor"
ENCODER = "encoder"
INPUT_NAMES = ("input_word_ids", "input_mask", "input_type_ids")


def bert_pack_inputs(segments, seq_length, cls_id, sep_id, pad_id):
    """TF Hub's `bert_pack_inputs` for one or two segments, `seq_length` a python int or int tensor.

    Args:
      segments: list of 1 or 2 tf.RaggedTensor int [B, (pieces)] or
        [B, (words), (pieces)] (the words are merged).
      seq_length: output length (scalar).
      cls_id, sep_id, pad_id: ids of `[CLS]`, `[SEP]` and `[PAD]`.

    Returns:
      dict of int32 [B, seq_length]: input_word_ids, input_mask, input_type_ids.
    """
    if not 1 <= len(segments) <= 2:
        raise ValueError(f"bert_pack_inputs takes 1 or 2 segments, got {len(segments)}")
    segs = []
    for s in segments:
        if not isinstance(s, tf.RaggedTensor):
            raise TypeError(f"bert_pack_inputs expects ragged tensors, got {type(s).__name__}")
        segs.append(s.merge_dims(-2, -1) if s.ragged_rank == 2 else s)
    packed = pack_ragged(segs, seq_length, cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)
    return {"input_word_ids": packed["token_ids"], "input_mask": packed["padding_mask"],
            "input_type_ids": packed["segment_ids"]}


def _special_ids(tok):
    for kind in ("cls", "sep", "pad"):
        if getattr(tok, f"{kind}_id") is None:
            raise BertKerasError(f"the vocabulary has no {tok._special[kind]!r} token; cannot pack BERT inputs")
    return tok.cls_id, tok.sep_id, tok.pad_id


def preprocessor_module(tok, seq_length: int = 128) -> tf.Module:
    """The preprocessor object (see the module docstring) for a core-op `BertTokenizer`."""
    cls_id, sep_id, pad_id = _special_ids(tok)
    strings = tf.TensorSpec([None], tf.string, name="sentences")
    root = tf.Module()

    @tf.function(input_signature=[strings])
    def call(sentences):
        return bert_pack_inputs([tok.tokenize(sentences)], seq_length, cls_id, sep_id, pad_id)

    root.__call__ = call
    root.tokenize = tf.Module()
    root.tokenize.__call__ = tf.function(lambda sentences: tok.tokenize_words(sentences), input_signature=[strings])
    special = {"vocab_size": tok.vocab_size, "start_of_sequence_id": cls_id, "end_of_segment_id": sep_id,
               "padding_id": pad_id, "mask_id": tok.mask_id if tok.mask_id is not None else -1}
    root.tokenize.get_special_tokens_dict = tf.Module()
    root.tokenize.get_special_tokens_dict.__call__ = tf.function(
        lambda: {k: tf.constant(v, tf.int32) for k, v in special.items()}, input_signature=[])

    default_length = int(seq_length)

    @tf.function(autograph=False)
    def pack(inputs, seq_length=default_length):
        return bert_pack_inputs(list(inputs), seq_length, cls_id, sep_id, pad_id)

    # the loaded function dispatches among these traces: one or two segments, each [B, (words),
    # (pieces)] or [B, (pieces)]
    specs = [tf.RaggedTensorSpec([None] * (rank + 1), tf.int32, ragged_rank=rank) for rank in (1, 2)]
    for segments in [[a] for a in specs] + [[a, b] for a in specs for b in specs]:
        pack.get_concrete_function(segments, seq_length=tf.TensorSpec([], tf.int32))
    root.bert_pack_inputs = tf.Module()
    root.bert_pack_inputs.__call__ = pack
    return root


def encoder_module(encoder) -> tf.Module:
    """The encoder object (see the module docstring) around a Keras `BertEncoder`."""
    from bert_keras.layers import attention_bias_from_padding_mask

    root = tf.train.Checkpoint()  # a plain trackable (tf.Module's `variables` is read-only)
    # tf.Variables of the Keras variables (seed-generator states included: dropout when training)
    root.variables = [v.value for v in encoder.variables]
    root.trainable_variables = [v.value for v in encoder.trainable_variables]
    root.regularization_losses = []

    def call(inputs, training=False):
        x = encoder.embeddings(inputs["input_word_ids"], inputs["input_type_ids"], training=training)
        bias = attention_bias_from_padding_mask(inputs["input_mask"])
        layers = []
        for block in encoder.transformer_layers:
            x = block(x, bias, training=training)
            layers.append(tf.cast(x, tf.float32))
        pooled = tf.cast(encoder.pooler(x), tf.float32)
        return {"pooled_output": pooled, "sequence_output": layers[-1], "encoder_outputs": layers,
                "default": pooled}

    fn = tf.function(call)
    spec = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in INPUT_NAMES}
    for training in (False, True):
        fn.get_concrete_function(spec, training=training)
    root.__call__ = fn

    @tf.function(input_signature=[spec])
    def serve(inputs):
        # signatures take flat outputs: the per-layer list as encoder_outputs_0 .. _{N-1}
        out = dict(fn(inputs, training=False))
        for i, x in enumerate(out.pop("encoder_outputs")):
            out[f"encoder_outputs_{i}"] = x
        return out

    return root, serve.get_concrete_function()


def _checkpoint_parts(model_dir, lower_case=None):
    """(Keras encoder, core-op tokenizer, vocab.txt path) of a checkpoint folder."""
    from bert_keras.checkpoints import load_checkpoint
    from bert_keras.finetuning import checkpoint_tokenizer

    model_dir = os.fspath(model_dir)
    if not os.path.exists(model_dir):
        raise BertKerasError(f"{model_dir}: no such model folder")
    encoder = load_checkpoint(model_dir)  # any task folder: its encoder
    if not encoder.vocab_path:
        raise BertKerasError(f"{model_dir}: no vocab.txt in the checkpoint folder")
    tok = checkpoint_tokenizer(model_dir, lower_case=lower_case).with_wordpiece("core")
    return encoder, tok, encoder.vocab_path


def _is_previous_export(folder):
    names = set(os.listdir(folder))
    if names != {PREPROCESSOR, ENCODER}:  # anything else in it was not written here
        raise BertKerasError(f"{folder}: folder exists and is not a TF Hub export (only {PREPROCESSOR}/ and "
                             f"{ENCODER}/); refusing to replace it")


@writes("out_dir")
def export_tfhub(model_dir, out_dir, seq_length: int = 128, lower_case=None) -> dict:
    """Writes ``out_dir/preprocessor`` and ``out_dir/encoder`` (TF Hub's text APIs).

    Args:
      model_dir: any folder `load_checkpoint` reads (Hugging Face, Google or
        this project's; pre-trained or fine-tuned: its encoder is exported)
        with a vocab.txt.
      out_dir: the folder to write; replaced only if it is a previous export.
      seq_length: the preprocessor's default sequence length (TF Hub: 128).
      lower_case: casing of the tokenizer (default: what the folder records,
        else uncased).

    Returns:
      {"preprocessor": path, "encoder": path}.
    """
    from bert_keras.export.spec import check_not_model_folder, require_tensorflow_backend

    require_tensorflow_backend("export_tfhub")
    from bert_keras.writing import atomic_folder

    check_not_model_folder(out_dir, model_dir)
    encoder, tok, vocab_path = _checkpoint_parts(model_dir, lower_case)
    limit = encoder.config.max_position_embeddings
    if not 2 <= int(seq_length) <= limit:
        raise BertKerasError(f"seq_length={seq_length} is outside 2..{limit} for this model")
    out_dir = os.fspath(out_dir)
    with atomic_folder(out_dir, may_replace=_is_previous_export) as tmp:
        pre = preprocessor_module(tok, seq_length)
        pre.vocab_file = tf.saved_model.Asset(vocab_path)
        pre.do_lower_case = tf.Variable(tok.lower_case, trainable=False)
        tf.saved_model.save(pre, os.path.join(tmp, PREPROCESSOR),
                            signatures={"serving_default": pre.__call__.get_concrete_function()})
        enc, serving = encoder_module(encoder)
        enc.vocab_file = tf.saved_model.Asset(vocab_path)
        enc.do_lower_case = tf.Variable(tok.lower_case, trainable=False)
        tf.saved_model.save(enc, os.path.join(tmp, ENCODER), signatures={"serving_default": serving})
    return {PREPROCESSOR: os.path.join(out_dir, PREPROCESSOR), ENCODER: os.path.join(out_dir, ENCODER)}


__all__ = ["export_tfhub", "bert_pack_inputs", "preprocessor_module", "encoder_module", "PREPROCESSOR", "ENCODER"]
