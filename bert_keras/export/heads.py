"""Named serving outputs from raw model outputs, in core TensorFlow ops.

Shared by the SavedModel signatures and the TFLite models, so every export
names and computes its outputs the same way (see `ExportSpec.text_outputs`).
Only builtin-convertible ops are used (softmax, argmax, gather), so the same
code runs inside TF Serving and inside LiteRT.
"""

from __future__ import annotations

import tensorflow as tf


def named_outputs(spec, raw, with_labels: bool = True) -> dict:
    """Named outputs of one forward pass.

    Args:
      spec: the `ExportSpec`.
      raw: the Keras model's output: logits float32 [B, C] (classification),
        [B, L, C] (token classification), [B, K] (multiple choice), or the
        dict {"start_logits", "end_logits"} [B, L] (span).
      with_labels: add the string `label` outputs (TFLite leaves them out:
        string outputs from a gather are not worth an extra kernel there; the
        label names are in the export JSON).

    Returns:
      dict name -> tensor:
        classification: logits [B, C], probabilities [B, C], label tf.string [B];
          regression: logits [B, 1], score [B];
        token classification: logits [B, L, C], probabilities [B, L, C],
          label tf.string [B, L] (per WordPiece position);
        span: start_logits, end_logits [B, L];
        multiple choice: logits [B, K], probabilities [B, K], choice int32 [B].
    """
    if spec.task == "span":
        return {"start_logits": tf.identity(raw["start_logits"]), "end_logits": tf.identity(raw["end_logits"])}
    logits = tf.cast(raw, tf.float32)
    if spec.task == "classification" and spec.regression:
        return {"logits": logits, "score": logits[:, 0]}
    out = {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}
    best = tf.argmax(logits, axis=-1, output_type=tf.int32)
    if spec.task == "multiple_choice":
        out["choice"] = best
    elif with_labels:
        out["label"] = tf.gather(tf.constant(spec.labels, tf.string), best)
    else:
        out["label_id"] = best
    return out
