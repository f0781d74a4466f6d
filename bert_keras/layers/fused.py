"""The names this module held before the kernels moved to `bert_keras.layers.ops`.

Each operation now lives in one module with its plain math and its fast variants
(`ops.layer_norm`, `ops.gelu`, `ops.softmax`, `ops.attention`, `ops.dropout`, `ops.dense`), and
the kernel plan (`bert_keras.layers.plan`) decides which variant a layer runs.  The old names
keep working here; `use_fused` answers for callers outside the layers.
"""

from bert_keras.layers import plan
from bert_keras.layers.ops.attention import qkv_heads  # noqa: F401
from bert_keras.layers.ops.dense import dense, dense_rows, plain_dense, tied_logits_float32  # noqa: F401
from bert_keras.layers.ops.dropout import dropout_tf, keep_threshold, random_bits_tf  # noqa: F401
from bert_keras.layers.ops.dropout import mask_args as dropout_mask_args  # noqa: F401
from bert_keras.layers.ops.gelu import dense_gelu  # noqa: F401
from bert_keras.layers.ops.gelu import gelu_xla as gelu  # noqa: F401
from bert_keras.layers.ops.layer_norm import (  # noqa: F401
    dropout_residual_layer_norm, embeddings_layer_norm_dropout, layer_norm_onednn)
from bert_keras.layers.ops.layer_norm import layer_norm_xla as layer_norm  # noqa: F401
from bert_keras.layers.ops.softmax import masked_softmax, masked_softmax_dropout  # noqa: F401
from bert_keras.layers.plan import KERNELS, check_kernels  # noqa: F401


def use_fused(kernels, dtype=None) -> bool:
    """Whether the TensorFlow kernels apply to a call traced now, for callers outside the layers.

    Args:
        kernels: the layers' option (`plan.KERNELS`).
        dtype: None for the plan's MLM cross-entropy choice (`plan.KernelPlan.loss`, any dtype);
            a compute dtype for its 16-bit training choice (`plan.KernelPlan.add_norm`).

    Returns:
        True where the plan chooses the TensorFlow kernels.
    """
    if dtype is None:
        return plan.current_plan(kernels, training=True).loss == "xla"
    return plan.current_plan(kernels, dtype, training=True).add_norm == "xla"
