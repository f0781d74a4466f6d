"""TF Model Garden (tf-models-official) TF2 checkpoints, read by their object-graph names.

A ``tf.train.Checkpoint`` of ``official.nlp.modeling.networks.BertEncoder`` names each variable
by the path of attributes that leads to it: ``encoder/layer_with_weights-0/embeddings/...`` for
``tf.train.Checkpoint(encoder=...)`` and ``BertPretrainerV2.checkpoint_items``,
``model/encoder_network/...`` for ``tf.train.Checkpoint(model=pretrainer)``.  The encoder's
layers with weights are numbered in the order the functional network creates them: word
embeddings, position embeddings, type embeddings, the embedding LayerNorm, one
``TransformerEncoderBlock`` per layer (``_attention_layer/_query_dense``, ...), the pooler.  The
masked-LM head (``masked_lm/dense``, ``layer_norm``, ``output_bias.Sbias``) sits beside the
encoder.  Everything is offered under Hugging Face's names, so the one name table in `mapping`
loads it.

Model Garden's ``BertEncoder`` computes GELU with the tanh approximation by default; when no
``bert_config.json`` says otherwise, the config read here does too (``gelu_approximate``).
"""

from __future__ import annotations

import re

from bert_keras.checkpoints.mapping import keras_to_hf, keras_to_hf_shape
from bert_keras.errors import CheckpointError

VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
_ENCODER_PREFIXES = ("encoder/", "model/encoder_network/", "encoder_network/", "model/encoder/")


def is_object_based(shapes) -> bool:
    """Whether a TensorFlow checkpoint's names are TF2 object-graph paths (not TF1 variable names)."""
    return any(name.endswith(VALUE) for name in shapes)


def _prefix(shapes, source):
    for prefix in _ENCODER_PREFIXES:
        if f"{prefix}layer_with_weights-1/embeddings{VALUE}" in shapes:  # the position embeddings
            return prefix
    raise CheckpointError(f"{source}: a TF2 object-based checkpoint without a Model Garden BertEncoder "
                          f"(no {_ENCODER_PREFIXES[0]}layer_with_weights-1/embeddings)")


def _tensors(shapes, source):
    """Hugging Face name -> (checkpoint name, how to reshape), and the number of layers."""
    prefix = _prefix(shapes, source)
    blocks = sorted({int(m.group(1)) for n in shapes
                     if (m := re.match(re.escape(prefix) + r"layer_with_weights-(\d+)/_attention_layer/", n))})
    if not blocks or blocks != list(range(4, 4 + len(blocks))):
        raise CheckpointError(f"{source}: Model Garden BertEncoder with transformer blocks at layers {blocks}, "
                              "expected 4, 5, ... (an embedding projection or another encoder is not read here)")

    def at(k, *path):
        return f"{prefix}layer_with_weights-{k}/{'/'.join(path)}{VALUE}"

    head = prefix[: -len("encoder_network/")] if prefix.endswith("encoder_network/") else ""
    mlm = f"{head}masked_lm/"
    # a variable two objects share is stored once: the word embeddings tied to the masked-LM
    # head's output projection may be under the head's name only
    word = at(0, "embeddings") if at(0, "embeddings") in shapes else f"{mlm}embedding_table{VALUE}"
    out = {"embeddings.word_embeddings.weight": (word, "copy"),
           "embeddings.position_embeddings.weight": (at(1, "embeddings"), "copy"),
           "embeddings.token_type_embeddings.weight": (at(2, "embeddings"), "copy"),
           "embeddings.LayerNorm.weight": (at(3, "gamma"), "copy"),
           "embeddings.LayerNorm.bias": (at(3, "beta"), "copy")}
    for i, k in enumerate(blocks):
        hf = f"encoder.layer.{i}."
        for part in ("query", "key", "value"):
            out[f"{hf}attention.self.{part}.weight"] = (at(k, "_attention_layer", f"_{part}_dense", "kernel"), "heads_in")
            out[f"{hf}attention.self.{part}.bias"] = (at(k, "_attention_layer", f"_{part}_dense", "bias"), "flat")
        out[f"{hf}attention.output.dense.weight"] = (at(k, "_attention_layer", "_output_dense", "kernel"), "heads_out")
        out[f"{hf}attention.output.dense.bias"] = (at(k, "_attention_layer", "_output_dense", "bias"), "copy")
        for ours, theirs in (("attention.output.LayerNorm", "_attention_layer_norm"),
                             ("output.LayerNorm", "_output_layer_norm")):
            out[f"{hf}{ours}.weight"] = (at(k, theirs, "gamma"), "copy")
            out[f"{hf}{ours}.bias"] = (at(k, theirs, "beta"), "copy")
        for ours, theirs in (("intermediate.dense", "_intermediate_dense"), ("output.dense", "_output_dense")):
            out[f"{hf}{ours}.weight"] = (at(k, theirs, "kernel"), "t")
            out[f"{hf}{ours}.bias"] = (at(k, theirs, "bias"), "copy")
    pooler = 4 + len(blocks)
    if at(pooler, "kernel") in shapes:
        out["pooler.dense.weight"] = (at(pooler, "kernel"), "t")
        out["pooler.dense.bias"] = (at(pooler, "bias"), "copy")
    if f"{mlm}dense/kernel{VALUE}" in shapes:
        out.update({"cls.predictions.transform.dense.weight": (f"{mlm}dense/kernel{VALUE}", "t"),
                    "cls.predictions.transform.dense.bias": (f"{mlm}dense/bias{VALUE}", "copy"),
                    "cls.predictions.transform.LayerNorm.weight": (f"{mlm}layer_norm/gamma{VALUE}", "copy"),
                    "cls.predictions.transform.LayerNorm.bias": (f"{mlm}layer_norm/beta{VALUE}", "copy"),
                    "cls.predictions.bias": (f"{mlm}output_bias.Sbias{VALUE}", "copy")})
    missing = [theirs for theirs, _ in out.values() if theirs not in shapes]
    if missing:
        raise CheckpointError(f"{source}: Model Garden checkpoint without {missing[0]!r}")
    return out, len(blocks)


def inferred_config(shapes, source) -> dict:
    """A Hugging Face-style config from the weights' shapes (Model Garden keeps its config elsewhere)."""
    tensors, layers = _tensors(shapes, source)
    query = shapes[tensors["encoder.layer.0.attention.self.query.weight"][0]]  # (hidden, heads, size)
    return {"model_type": "bert", "vocab_size": int(shapes[tensors["embeddings.word_embeddings.weight"][0]][0]),
            "hidden_size": int(query[0]), "num_hidden_layers": layers, "num_attention_heads": int(query[1]),
            "intermediate_size": int(shapes[tensors["encoder.layer.0.intermediate.dense.weight"][0]][1]),
            "max_position_embeddings": int(shapes[tensors["embeddings.position_embeddings.weight"][0]][0]),
            "type_vocab_size": int(shapes[tensors["embeddings.token_type_embeddings.weight"][0]][0]),
            "hidden_act": "gelu_approximate", "layer_norm_eps": 1e-12}


def renamed(shapes, getter, source):
    """(shapes, getter) of the checkpoint under Hugging Face's names."""
    tensors, _ = _tensors(shapes, source)
    new_shapes = {hf: keras_to_hf_shape(shapes[theirs], kind) for hf, (theirs, kind) in tensors.items()}

    def get(hf):
        theirs, kind = tensors[hf]
        return keras_to_hf(getter(theirs), kind)

    return new_shapes, get
