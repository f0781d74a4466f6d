"""Every private TensorFlow / Keras / LiteRT API this project uses, each behind one function.

Nothing else in `bert_keras` touches an underscore attribute or an internal
module of those packages; it calls the functions here.  Each one names the
API it relies on, checks that the installed version is one the API is known
to work with (`KNOWN_VERSIONS`, the range `pyproject.toml` declares) and that
the attribute is there, and otherwise raises `PrivateAPIError` naming both,
instead of failing somewhere deep inside a conversion or a training step.
`tests/test_private_api.py` calls each of them for real.

Why each is needed (there is no public equivalent in these versions):

| function | private API | used by |
| --- | --- | --- |
| `onednn_enabled` | `tensorflow.python.util._pywrap_util_port.IsMklEnabled` | layers/plan.py (the probed hardware of the kernel plan) |
| `in_xla_compile` | `tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext` | layers/plan.py (no XLA kernel nested in an XLA compile, no packing inside one) |
| `set_calibrate_only` | `TFLiteConverter._experimental_calibrate_only` | export/tflite/convert.py ("int8_mixed") |
| `mlir_quantize` | `tensorflow.lite.python.convert.mlir_quantize` | export/tflite/convert.py ("int8_mixed") |
| `ops_details` | `Interpreter._get_ops_details` | export/tflite/convert.py (op names, op outputs) |
| `tflite_schema` | `tensorflow.lite.python.schema_py_generated` | export/tflite/convert.py (builtin-only check) |
| `flatten_layers` | `keras.Layer._flatten_layers` | export/tflite/convert.py (attention masking) |
| `archive_trackable` | `keras.export.ExportArchive._tf_trackable` | export/saved_model.py (vocabulary assets) |
| `accept_raw_inputs` | `keras.Layer._convert_input_args`, `_allow_non_tensor_positional_args` | text/tokenizer.py |
| `has_compiled_loss` | `keras.Model._compile_loss` | models/pretrainer.py |
| `stored_value` | `keras.src.backend.common.variables.AutocastScope` | layers/heads.py (the tied float32 table) |
"""

from __future__ import annotations

import importlib
import re

from bert_keras.errors import BertKerasError

# package -> (lowest version known to work, first version not yet checked; None: open)
KNOWN_VERSIONS = {
    "tensorflow": ((2, 20), (2, 22)),
    "keras": ((3, 10), None),
}


class PrivateAPIError(BertKerasError):
    """A private API this project relies on is missing, or untested with the installed version."""


def _version(package) -> str:
    return importlib.import_module(package).__version__


def _parse(version) -> tuple:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def _range_text(package) -> str:
    if package not in KNOWN_VERSIONS:
        return "the versions this project is tested with"
    low, high = KNOWN_VERSIONS[package]
    text = f"{package}>={'.'.join(map(str, low))}"
    return text + (f",<{'.'.join(map(str, high))}" if high else "")


def check_version(package, api) -> None:
    """Raises PrivateAPIError when the installed `package` is outside `KNOWN_VERSIONS`.

    A package without a range there (ai_edge_litert: it declares none) is only
    checked for the attribute itself.
    """
    if package not in KNOWN_VERSIONS:
        return
    installed = _version(package)
    low, high = KNOWN_VERSIONS[package]
    parsed = _parse(installed)
    if parsed < low or (high is not None and parsed >= high):
        raise PrivateAPIError(
            f"{api} is a private API of {package}, known to work with {_range_text(package)}; "
            f"installed: {package} {installed}")


def _get(obj, name, package, api):
    """obj.name after the version check of `package`; PrivateAPIError when it is missing."""
    check_version(package, api)
    try:
        return getattr(obj, name)
    except AttributeError:
        raise PrivateAPIError(
            f"{api} is missing from {package} {_version(package)} (known to work with "
            f"{_range_text(package)})") from None


def _module(path, package, api):
    check_version(package, api)
    try:
        return importlib.import_module(path)
    except ImportError:
        raise PrivateAPIError(
            f"{api} is missing from {package} {_version(package)} (known to work with "
            f"{_range_text(package)})") from None


# --- TensorFlow ---------------------------------------------------------------

def onednn_enabled() -> bool:
    """Whether TensorFlow runs its oneDNN kernels (x86 builds, unless TF_ENABLE_ONEDNN_OPTS=0)."""
    api = "tensorflow.python.util._pywrap_util_port.IsMklEnabled"
    port = _module("tensorflow.python.util._pywrap_util_port", "tensorflow", api)
    return bool(_get(port, "IsMklEnabled", "tensorflow", api)())


def in_xla_compile() -> bool:
    """Whether the code running now is being traced into an XLA compilation
    (``tf.function(jit_compile=True)``, which `Model.compile(jit_compile=True)` uses), at any depth."""
    api = "tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext"
    import tensorflow as tf

    util = _module("tensorflow.python.ops.control_flow_util", "tensorflow", api)
    return bool(_get(util, "GraphOrParentsInXlaContext", "tensorflow", api)(tf.compat.v1.get_default_graph()))


def set_calibrate_only(converter) -> None:
    """Makes a TFLiteConverter record min/max ranges on convert() without quantising anything."""
    api = "TFLiteConverter._experimental_calibrate_only"
    _get(converter, "_experimental_calibrate_only", "tensorflow", api)
    converter._experimental_calibrate_only = True


def mlir_quantize(calibrated: bytes, denylisted_nodes) -> bytes:
    """Full-integer quantises a calibrated TFLite model (per-channel weights), leaving
    the ops whose output tensors are named in denylisted_nodes float."""
    api = "tensorflow.lite.python.convert.mlir_quantize"
    convert = _module("tensorflow.lite.python.convert", "tensorflow", api)
    return _get(convert, "mlir_quantize", "tensorflow", api)(calibrated, denylisted_nodes=list(denylisted_nodes))


def tflite_schema():
    """The flatbuffer schema module of TFLite files (ModelT, BuiltinOperator, ...)."""
    api = "tensorflow.lite.python.schema_py_generated"
    return _module("tensorflow.lite.python.schema_py_generated", "tensorflow", api)


def ops_details(interpreter) -> list:
    """The ops of a LiteRT interpreter: dicts with "op_name", "inputs", "outputs" (tensor indices)."""
    return _get(interpreter, "_get_ops_details", "ai_edge_litert", "Interpreter._get_ops_details")()


# --- Keras --------------------------------------------------------------------

def flatten_layers(model) -> list:
    """Every layer nested anywhere inside model (not model itself)."""
    flatten = _get(model, "_flatten_layers", "keras", "keras.Layer._flatten_layers")
    return list(flatten(include_self=False, recursive=True))


def archive_trackable(archive):
    """The tf.Module an ExportArchive writes; attributes set on it are saved (assets, ...)."""
    return _get(archive, "_tf_trackable", "keras", "keras.export.ExportArchive._tf_trackable")


def accept_raw_inputs(layer) -> None:
    """Lets layer.__call__ take strings, ragged tensors and Python values as they are
    (Keras would convert its positional inputs to dense tensors)."""
    for name in ("_convert_input_args", "_allow_non_tensor_positional_args"):
        _get(layer, name, "keras", f"keras.Layer.{name}")
    layer._convert_input_args = False
    layer._allow_non_tensor_positional_args = True


def has_compiled_loss(model) -> bool:
    """Whether model.compile() was given a loss (Keras then computes the loss itself)."""
    return _get(model, "_compile_loss", "keras", "keras.Model._compile_loss") is not None


def stored_value(variable):
    """A Keras variable's backend value in the variable's own dtype (on TensorFlow the
    tf.Variable itself).  Inside the call of a mixed-precision layer, reading a float32 variable
    gives it cast to the compute dtype (autocast), and a layer built with ``autocast=False`` is
    still autocast where no outer layer set a scope."""
    api = "keras.src.backend.common.variables.AutocastScope"
    variables = _module("keras.src.backend.common.variables", "keras", api)
    with _get(variables, "AutocastScope", "keras", api)(None):
        return variable.value
