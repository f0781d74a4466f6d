"""Export for deployment: SavedModel (TF Serving) and TFLite (LiteRT).

    from bert_keras.export import export_saved_model, export_tflite, load_predictor
    export_saved_model("runs/sentiment/best", "serving/sentiment/1")
    export_tflite("runs/sentiment/best", "tflite/", quantize="dynamic")
    load_predictor("serving/sentiment/1").predict(["a gorgeous film."])

* `saved_model`: `serving_default` on raw text (the Google-exact in-graph
  tokenizer) and `serve_ids` on ids; core TensorFlow ops only.
* `tfhub`: TF Hub's text APIs, `preprocessor/` + `encoder/` (`tfhub.export_tfhub`).
* `tflite`: `model.tflite` (ids) and `model_text.tflite` (Unicode codepoints
  in, Google-exact tokenizer inside), builtin ops only; float32, float16,
  dynamic-range int8 and calibrated full int8.
* `predict`: one predictor over a SavedModel, a TFLite file or a model folder.
* `demo_export`: what `bert-keras demo` runs (both formats, reloaded and timed).
"""

from bert_keras.export.demo import demo_export
from bert_keras.export.predict import Predictor, load_predictor
from bert_keras.export.saved_model import export_saved_model
from bert_keras.export.spec import ExportSpec, read_spec, resolve
from bert_keras.export.tflite import QUANTIZE, TFLiteModel, export_tflite, export_tokenizer_tflite

__all__ = ["export_saved_model", "export_tflite", "demo_export", "load_predictor", "Predictor", "TFLiteModel",
           "export_tokenizer_tflite", "ExportSpec", "resolve", "read_spec", "QUANTIZE"]
