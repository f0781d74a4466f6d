"""Each operation of the model once: its plain math and its fast variants side by side.

One module per operation, every variant a function of tensors (tensors in, tensors out), the
plain one the reference the tests hold the others to:

| module | plain | fast variants |
| --- | --- | --- |
| `layer_norm` | `layer_norm` (keras.ops, float32 statistics) | `layer_norm_xla`, `layer_norm_onednn`, `dropout_residual_layer_norm`, `embeddings_layer_norm_dropout`, `scaled_layer_norm` (int8 export) |
| `gelu` | `gelu` (erf form, float32 inside) | `gelu_xla`, `dense_gelu` |
| `softmax` | `masked_softmax_float32` | `masked_softmax` (TensorFlow's, oneDNN's on bf16), `masked_softmax_dropout`, `select_masked_softmax` (int8 export) |
| `attention` | `ATTENTION["plain"]` | `ATTENTION["sdpa"]`, `ATTENTION["xla"]` (`qkv_heads`) |
| `dropout` | Keras' dropout | `dropout_tf`, `mask_args` + `apply_mask` inside the kernels above |
| `dense` | `keras.layers.Dense` | `dense_rows`, `tied_logits_float32` |

Which variant runs is the kernel plan's choice (`bert_keras.layers.plan`); nothing here looks
at the hardware or the trace.  `xla.compiled` holds the XLA-compiled functions, one per name.
"""
