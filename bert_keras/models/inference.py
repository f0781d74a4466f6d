"""`inference_function`: a model's compiled inference call, traced once for every shape."""

import weakref

# model -> its function; not an attribute of the model, which Keras and SavedModel would track.
_FUNCTIONS = weakref.WeakKeyDictionary()


def inference_function(model):
    """``fn(inputs) -> outputs``: ``model(inputs, training=False)`` as one TensorFlow graph.

    The input signature leaves the batch and the sequence length open, so the graph is
    traced once, not once per new length (a `tf.function` without a signature traces each
    new shape until it relaxes, and an XLA function compiles each); the encoder inside runs
    on the real tokens only (`bert_keras.layers.unpadded`).  Cached on the model.

    Args:
      model: a `BertEncoder`, `BertPretrainer` or task model (TensorFlow backend).
    Returns:
      a callable taking the model's dict of int32 arrays or tensors ([B, L], or [B, K, L]
      for multiple choice; numpy is converted) and returning its outputs as tensors.

    Example:
      >>> fn = inference_function(clf)
      >>> logits = fn({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    """
    import tensorflow as tf

    fn = _FUNCTIONS.get(model)
    if fn is None:
        signature = {name: tf.TensorSpec([None] * len(x.shape), tf.int32, name=name)
                     for name, x in model.input.items()}

        @tf.function(input_signature=[signature], autograph=False)
        def fn(inputs):
            return model(inputs, training=False)

        _FUNCTIONS[model] = fn
    return fn
