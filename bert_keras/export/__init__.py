"""Export for deployment: SavedModel (TF Serving) and TFLite (LiteRT).

    from bert_keras.export import export_saved_model, export_tflite
    export_saved_model("runs/sentiment/best", "serving/sentiment/1")
    export_tflite("runs/sentiment/best", "tflite/", quantize="dynamic")

* `saved_model`: `serving_default` on raw text (in-graph Google-exact
  tokenizer) and `serve_ids` on ids; see that module.
* `tflite`: `model.tflite` (ids, builtin ops) and `model_text.tflite`
  (tensorflow-text's TFLite tokenizer kernels inside); float32, float16,
  dynamic-range int8 and calibrated full int8.
* `demo_export`: what `bert-keras demo` runs (both formats, reloaded and timed).
"""

from bert_keras.export.saved_model import export_saved_model
from bert_keras.export.spec import ExportSpec, read_spec, resolve

__all__ = ["export_saved_model", "ExportSpec", "resolve", "read_spec"]
