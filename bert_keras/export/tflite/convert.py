"""TFLite conversion and quantisation: a converter per exported function, the
quantisation variants, and the checks that a file holds builtin ops only.

Quantisation (`quantize`): "none" (float32), "float16" (weights in float16),
"dynamic" (int8 weights, float activations), "int8" (int8 weights and
activations, calibrated on real sentences, the residual stream's outlier
channels rescaled exactly, see `residual_scaling`; ops without an int8 kernel
stay float), "int8_mixed" (calibrated as "int8", but the residual stream stays float: every
residual add, every LayerNorm and the feed-forward output dense that feeds the
residual, see `MIXED_FLOAT_NODES`).  Integer ops (the tokenizer of the text
model) are left as they are by every variant.
"""

from __future__ import annotations

import os
import re

import tensorflow as tf

from bert_keras import _private_api
from bert_keras.choices import CALIBRATED, QUANTIZE  # noqa: F401 - re-exported by export.tflite
from bert_keras.errors import BertKerasError

# "int8_mixed" keeps these ops float (regular expressions over the converted
# ops' output tensor names, which follow the Keras layer names): the residual
# adds of every block, every LayerNorm (its statistics and its affine output,
# which is the next block's residual input) and the feed-forward output dense
# whose output joins the residual.  Per-tensor int8 scales cannot hold the
# residual stream's few outlier channels (Bondarenko et al. 2021, "Understanding
# and Overcoming the Challenges of Efficient Transformer Quantization"); on the
# fine-tuned MiniLM each of these three groups alone left argmax agreement with
# float32 at 87-90%, all three together at 98% (README, Export).
MIXED_FLOAT_NODES = (
    r"transformer_layer_\d+(_\d+)?/add(_\d+)?$",        # residual adds
    r"layer_norm",                                        # every LayerNorm op
    r"transformer_layer_\d+(_\d+)?/output(_\d+)?/",     # FFN output dense (kernel, bias)
)

def make_converter(fn, signature, workdir, more_signatures=()):
    """A TFLiteConverter for fn, through a SavedModel written by ExportArchive.

    Converting a concrete function directly keeps Keras 3 weights as TFLite
    resource variables that nothing initialises (NaN outputs); the SavedModel
    path freezes them into constants.  more_signatures: [(key, fn, signature)]
    converted into the same file after ``serving_default`` (the weights are
    stored once and shared by every signature).
    """
    from bert_keras.export.saved_model import write_archive

    path = os.path.join(workdir, f"sm_{len(os.listdir(workdir))}")
    endpoints = [("serving_default", fn, signature), *more_signatures]
    write_archive(path, None, endpoints)
    return tf.lite.TFLiteConverter.from_saved_model(path, signature_keys=[e[0] for e in endpoints])


def quantize_model(conv, quantize, representative=None):
    if quantize == "none":
        return
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        conv.target_spec.supported_types = [tf.float16]
    elif quantize in CALIBRATED:
        conv.representative_dataset = representative
        # int8 kernels where they exist, float kernels for the rest (e.g. the
        # integer tokenizer ops of the text model); integer inputs stay int32.
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS]


def convert_model(conv, what, float_nodes=None):
    """Converts; with float_nodes (regexes), calibrates, then quantises all but those ops."""
    import logging

    # The MLIR converter logs pages at INFO/WARNING; keep the progress readable.
    logging.getLogger("absl").setLevel(logging.ERROR)
    try:
        if not float_nodes:
            return conv.convert()
        _private_api.set_calibrate_only(conv)  # min/max recorded, nothing quantised yet
        calibrated = conv.convert()
        keep = _matching_nodes(calibrated, float_nodes)
        missing = [r for r in float_nodes if not any(re.search(r, n) for n in keep)]
        if missing:
            raise BertKerasError(f"TFLite conversion of {what}: no op matches {missing[0]!r} (layer names changed?)")
        # the converter's own full-integer quantiser, per-channel weights, with
        # these ops denylisted (left float, with quantize/dequantize around them)
        return _private_api.mlir_quantize(calibrated, denylisted_nodes=keep)
    except BertKerasError:  # PrivateAPIError included
        raise
    except Exception as e:  # noqa: BLE001 - converter errors are long; keep the first line
        raise BertKerasError(f"TFLite conversion of {what} failed: {(str(e).strip().splitlines() or [type(e).__name__])[0]}") from e


def _matching_nodes(content, patterns):
    """Output tensor names of the ops in a TFLite model matching any of the regexes."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=content)
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    return sorted({names[i] for op in _private_api.ops_details(interpreter) for i in op["outputs"]
                   if any(re.search(p, names[i]) for p in patterns)})


def attention_masking(model, masking):
    """A copy of model (same weights) whose attention layers use ``masking``; model is unchanged.

    "select" computes the same softmax without adding the -10,000 padding
    bias to the scores: full-integer quantisation gives each tensor one int8
    scale, and a tensor holding both real scores (a few units) and -10,000
    rounds every real score to the same value (13.5 points of dev accuracy
    lost on the fine-tuned MiniLM sentiment model).
    """
    from bert_keras.layers.attention import MASKINGS
    from bert_keras.models.copies import with_options

    if masking not in MASKINGS:
        raise BertKerasError(f"masking={masking!r}; choose one of {', '.join(MASKINGS)}")
    return with_options(model, masking=masking)


def builtin_only(conv):
    """Restricts a converter to TFLite builtin ops (no Flex / Select TF ops, no custom ops)."""
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    conv.allow_custom_ops = False
    return conv


def op_names(path_or_content) -> list:
    """Sorted op names of a TFLite file (custom and Flex ops appear under their own names)."""
    from ai_edge_litert.interpreter import Interpreter

    if isinstance(path_or_content, (bytes, bytearray)):
        interpreter = Interpreter(model_content=bytes(path_or_content))
    else:
        interpreter = Interpreter(model_path=os.fspath(path_or_content))
    return sorted({op["op_name"] for op in _private_api.ops_details(interpreter)})


def assert_builtin_only(content, what):
    """Raises BertKerasError when a converted file holds a custom or Flex op."""
    schema = _private_api.tflite_schema()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(bytes(content), 0))
    builtin = {v for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_") and k != "CUSTOM"}
    custom = [c.customCode.decode() if isinstance(c.customCode, bytes) else str(c.customCode)
              for c in model.operatorCodes if max(c.builtinCode, c.deprecatedBuiltinCode) not in builtin]
    if custom:
        raise BertKerasError(f"TFLite conversion of {what}: non-builtin ops {sorted(set(custom))}")
