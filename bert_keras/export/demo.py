"""`demo_export`: the export step of `bert-keras demo` (SavedModel + TFLite, reloaded and timed)."""

from __future__ import annotations

import os

import numpy as np


def demo_export(best_dir, out_dir, sentences) -> dict:
    """Exports a fine-tuned classifier folder, reloads every export and runs `sentences`.

    Writes ``out_dir/saved_model`` (both signatures), ``out_dir/tflite/model.tflite``
    and ``model_text.tflite`` (float32) and ``model_float16.tflite``; reloads
    the SavedModel the way a server does (`tf.saved_model.load`, text
    signature) and the TFLite text model on LiteRT.

    Returns:
      {"saved_model_dir", "tflite_path", "tflite_text_path", "saved_model_mb",
       "tflite_mb", "tflite_fp16_mb", "saved_model_latency_ms",
       "tflite_latency_ms" (median, one sentence: model.tflite, ids in at its length bucket -> logits),
       "tflite_text_latency_ms" (model_text.tflite: text in, padded to max_seq_len -> logits),
       "max_abs_diff_vs_keras" (largest logit difference of either export
       from the Keras model on `sentences`)}.
    """
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 - the text signature's tokenizer op

    from bert_keras.export.saved_model import export_saved_model, saved_model_size_mb
    from bert_keras.export.spec import resolve
    from bert_keras.export.tflite import TFLiteModel, export_tflite, file_size_mb, latency_ms
    from bert_keras.text.tokenizer import BertTokenizer

    sentences = [str(s) for s in sentences]
    model, spec = resolve(best_dir)
    # the folder's facts, so the in-memory model is exported without reloading it
    same = dict(max_seq_len=spec.max_seq_len, pair=spec.pair, vocab_path=spec.vocab_path,
                lower_case=spec.lower_case, labels=spec.labels or None)
    sm_dir = export_saved_model(model, os.path.join(out_dir, "saved_model"), **same)
    tfl_dir = os.path.join(out_dir, "tflite")
    # model.tflite with length buckets: one sentence runs at the smallest bucket that holds it
    f32 = export_tflite(model, tfl_dir, quantize="none", length_buckets="auto", **same)
    f16 = export_tflite(model, tfl_dir, quantize="float16", text_model=False, **same)

    tokenizer = BertTokenizer.from_vocab(spec.vocab_path, lower_case=spec.lower_case)
    feats = tokenizer(sentences, seq_len=spec.max_seq_len)
    reference = np.asarray(model(feats, training=False))

    serving = tf.saved_model.load(sm_dir).signatures["serving_default"]
    sm_logits = serving(text=tf.constant(sentences))["logits"].numpy()
    lite = TFLiteModel(f32["text"])
    lite_logits = lite(text=np.array(sentences, dtype=object))["logits"]
    one = sentences[:1]
    ids = TFLiteModel(f32["ids"])
    one_ids = {k: np.asarray(v) for k, v in tokenizer(one, seq_len=spec.max_seq_len).items()}
    return {
        "saved_model_dir": sm_dir,
        "tflite_path": f32["ids"],
        "tflite_text_path": f32["text"],
        "saved_model_mb": saved_model_size_mb(sm_dir),
        "tflite_mb": file_size_mb(f32["ids"]),
        "tflite_fp16_mb": file_size_mb(f16["ids"]),
        "saved_model_latency_ms": latency_ms(lambda: serving(text=tf.constant(one))),
        "tflite_latency_ms": latency_ms(lambda: ids(**one_ids)),
        "tflite_text_latency_ms": latency_ms(lambda: lite(text=np.array(one, dtype=object))),
        "max_abs_diff_vs_keras": float(max(np.abs(sm_logits - reference).max(),
                                           np.abs(lite_logits - reference).max())),
    }
