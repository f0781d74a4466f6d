"""`inference_function`: a model's compiled inference call, traced once for every shape;
`InMemoryPredict`: the base of our models, whose ``predict`` batches arrays without Keras'
per-call array pipeline."""

import weakref

import keras
import numpy as np

from bert_keras.models.inputs import INPUT_NAMES

# model -> its function; not an attribute of the model, which Keras and SavedModel would track.
_FUNCTIONS = weakref.WeakKeyDictionary()

# On JAX and torch, inputs are padded up to a multiple of this length: each new shape costs
# a compilation there (XLA on JAX), and real sentences have nearly every length.
LENGTH_MULTIPLE = 8


def inference_function(model, constant_weights=False):
    """``fn(inputs) -> outputs``: ``model(inputs, training=False)``, compiled once per model.

    On TensorFlow: one graph whose input signature leaves the batch and the sequence length
    open, so it is traced once, not once per new length (a `tf.function` without a signature
    traces each new shape until it relaxes, and an XLA function compiles each); what runs
    inside is the model's own inference (the per-sequence task models on the real tokens only,
    their ``real_tokens_only`` default, `bert_keras.layers.unpadded`).  On JAX and torch:
    the backend's compiled predict step (``predict_on_batch``), the length padded up to a
    multiple of `LENGTH_MULTIPLE` and the outputs cut back, so a set of real sentences costs
    at most max_len / 8 compilations; the padding is masked, so the real positions get the
    same numbers.  Cached on the model.

    With ``constant_weights=True`` (TensorFlow only) the graph holds the weights as they are
    now as constants instead of reading the variables: TensorFlow then folds what depends on
    the weights alone (a mixed_bfloat16 model's casts of its float32 weights) and its oneDNN
    kernels keep their weights reordered between calls, so bf16 inference on a oneDNN CPU runs
    about 1.4x faster (MiniLM and BERT-base, docs/results.md); float32 runs as before.  Same
    outputs to bf16 rounding; the function does not see later changes of the weights
    (training, `set_weights`), so it is built anew at each call of `inference_function` and not
    cached.  Its costs: building and the first calls take seconds (BERT-base: 7 s and 17 s),
    and it holds about 7x the float32 weights' bytes more memory (BERT-base: +2.8 GB).  Use
    trained weights: freshly initialised ones (zero biases, unit LayerNorm scales) let
    TensorFlow simplify the graph until its fused kernels no longer match, which is slower.

    Args:
      model: a `BertEncoder`, `BertPretrainer` or task model.
      constant_weights: bake the current weights into the graph (see above).
    Returns:
      a callable taking the model's dict of int32 arrays or tensors ([B, L], or [B, K, L]
      for multiple choice) and returning its outputs (tensors on TensorFlow, numpy arrays
      elsewhere) with the inputs' length.

    Example:
      >>> fn = inference_function(clf)
      >>> logits = fn({"token_ids": ids, "segment_ids": segments, "padding_mask": mask})
    """
    import keras

    if constant_weights:
        if keras.backend.backend() != "tensorflow":
            raise ValueError("inference_function(constant_weights=True) needs the TensorFlow backend; "
                             f"this is {keras.backend.backend()!r}: leave constant_weights off")
        return _constant_weights_function(model)
    fn = _FUNCTIONS.get(model)
    if fn is None:
        fn = _tensorflow_function(model) if keras.backend.backend() == "tensorflow" else _padded_predict(model)
        _FUNCTIONS[model] = fn
    return fn


def _input_signature(model):
    """The model's inputs as int32 specs open in every axis (batch, length, choices)."""
    import tensorflow as tf

    return {name: tf.TensorSpec([None] * len(x.shape), tf.int32, name=name) for name, x in model.input.items()}


def _tensorflow_function(model):
    import tensorflow as tf

    signature = _input_signature(model)

    # The function keeps the model by a weak reference: the cache's value must not hold its key
    # (a WeakKeyDictionary would then never let the model go).  The traced graph holds the
    # variables themselves.
    model_ref = weakref.ref(model)

    @tf.function(input_signature=[signature], autograph=False)
    def fn(inputs):
        return model_ref()(inputs, training=False)

    return fn


def _constant_weights_function(model):
    fn = constant_weights_call(model)
    fn.get_concrete_function()  # traced now: the weights of this moment
    fn.release_weights()  # the graph holds them
    return fn


def constant_weights_call(model):
    """A `tf.function` of ``model(inputs, training=False)`` (its input signature open in the batch
    and length) whose graph holds the model's weights, read now, as constants: the call runs in
    a `keras.StatelessScope` mapping every variable to a constant, so the graph neither reads
    nor captures a variable (a SavedModel of it saves none).  `export_saved_model`
    (``constant_weights=True``) calls it from both signatures, which then share one copy of the
    weights.  ``fn.release_weights()`` drops the host copy kept for tracing; a trace after that
    raises instead of reading the variables."""
    import tensorflow as tf

    signature = _input_signature(model)
    # read here, eagerly: a read inside the trace would make the function watch the variables
    values = [v.numpy() for v in model.variables]

    @tf.function(input_signature=[signature], autograph=False)
    def fn(inputs):
        if len(values) != len(model.variables):
            raise RuntimeError("a constant-weights function traced again after release_weights(); "
                               "build a new one (inference_function(model, constant_weights=True))")
        constants = [(v, tf.constant(x)) for v, x in zip(model.variables, values)]
        with keras.StatelessScope(state_mapping=constants):
            return model(inputs, training=False)

    fn.release_weights = values.clear
    return fn


def _padded_predict(model):
    # The outputs with a length axis: axis 1 open in the symbolic outputs (mlm_logits' axis 1
    # is the masked positions, which padding does not change).
    symbolic = model.output
    per_token = ({k for k, v in symbolic.items() if len(v.shape) >= 2 and v.shape[1] is None} - {"mlm_logits"}
                 if isinstance(symbolic, dict) else len(symbolic.shape) >= 2 and symbolic.shape[1] is None)

    model_ref = weakref.ref(model)  # as in _tensorflow_function: the cache must not hold its key

    def fn(inputs):
        model = model_ref()
        # Only the sequence inputs ([.., L]) are padded; masked_positions index into them.
        arrays = {name: np.asarray(inputs[name]) for name in model.input}
        length = arrays["padding_mask"].shape[-1]
        padded_length = -(-length // LENGTH_MULTIPLE) * LENGTH_MULTIPLE
        if padded_length != length:
            pad = padded_length - length
            arrays = {name: (np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)]) if name in INPUT_NAMES else x)
                      for name, x in arrays.items()}
        outputs = model.predict_on_batch(arrays)
        if arrays["padding_mask"].ndim != 2 or padded_length == length:
            return outputs  # multiple choice: [B, K] outputs, no length axis

        if isinstance(outputs, dict):
            return {k: np.asarray(v)[:, :length] if k in per_token else np.asarray(v) for k, v in outputs.items()}
        return np.asarray(outputs)[:, :length] if per_token else np.asarray(outputs)

    return fn


def _in_memory_rows(x):
    """The number of rows of ``x`` when it is a dict of numpy arrays of one length, else None."""
    if not isinstance(x, dict) or not x or not all(isinstance(v, np.ndarray) and v.ndim for v in x.values()):
        return None
    rows = {len(v) for v in x.values()}
    return rows.pop() if len(rows) == 1 else None


class InMemoryPredict(keras.Model):
    """``predict`` on a dict of numpy arrays, on TensorFlow: the arrays are batched by a plain
    `tf.data` pipeline (`bert_keras.tasks.common.in_memory_pipeline`: nothing traced per call, no
    autotuning) instead of Keras' array adapter, which traces its batching function at every
    call (most of a small call's time) and whose autotuning optimiser can hold the call's end
    for seconds.  The same batches in the same order, so the same outputs; other inputs (a
    dataset, a generator, tensors) and the other backends go to Keras unchanged."""

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        rows = _in_memory_rows(x) if keras.backend.backend() == "tensorflow" else None
        if rows:
            import tensorflow as tf

            from bert_keras.tasks.common import in_memory_pipeline

            x = in_memory_pipeline(tf.data.Dataset.from_tensor_slices(x).batch(batch_size or 32))
            batch_size = None
        return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)
