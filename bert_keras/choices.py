"""Named choices shared by the library and the CLI (no TensorFlow import, so `--help` stays fast).

- `MIXED_PRECISION`: `--mixed-precision` / `mixed_precision=` of pre-training
  and fine-tuning -> the Keras dtype policy of the model (None: float32).
- `QUANTIZE`: TFLite quantisation variants (`export.tflite.convert` explains
  each); `CALIBRATED`: the ones calibrated on real sentences.
"""

MIXED_PRECISION = {"none": None, "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}

QUANTIZE = ("none", "float16", "dynamic", "int8", "int8_mixed")
CALIBRATED = ("int8", "int8_mixed")
