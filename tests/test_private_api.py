"""The private TensorFlow / Keras / LiteRT APIs of `bert_keras._private_api`, each called for real.

A failure here after an upgrade names the API that moved; the rest of the
suite would only show a conversion or a training step failing somewhere deep.
"""

import os
import platform

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras import _private_api as private
from bert_keras.errors import BertKerasError


@pytest.fixture(scope="module")
def calibrated_converter(tmp_path_factory):
    """A converter for y = relu(x @ w + b) (two dense ops), set up for int8 calibration."""
    rng = np.random.default_rng(0)
    module = tf.Module()
    module.w1 = tf.Variable(rng.normal(size=(8, 16)).astype("float32"))
    module.w2 = tf.Variable(rng.normal(size=(16, 4)).astype("float32"))

    @tf.function(input_signature=[tf.TensorSpec([1, 8], tf.float32, name="x")])
    def serve(x):
        hidden = tf.nn.relu(tf.matmul(x, module.w1, name="first"))
        return {"y": tf.matmul(hidden, module.w2, name="second")}

    path = str(tmp_path_factory.mktemp("sm"))
    tf.saved_model.save(module, path, signatures={"serving_default": serve})
    conv = tf.lite.TFLiteConverter.from_saved_model(path)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([rng.normal(size=(1, 8)).astype("float32")] for _ in range(8))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8, tf.lite.OpsSet.TFLITE_BUILTINS]
    return conv


def _interpreter(content):
    from ai_edge_litert.interpreter import Interpreter

    return Interpreter(model_content=content)


def _dtypes_by_op(content):
    interpreter = _interpreter(content)
    tensors = {t["index"]: t for t in interpreter.get_tensor_details()}
    return [(op["op_name"], tensors[op["outputs"][0]]["name"], tensors[op["outputs"][0]]["dtype"])
            for op in private.ops_details(interpreter)]


def test_installed_tensorflow_and_keras_are_in_the_known_ranges():
    private.check_version("tensorflow", "any")
    private.check_version("keras", "any")


def test_a_version_outside_the_known_range_names_the_api_and_the_installed_version(monkeypatch):
    monkeypatch.setitem(private.KNOWN_VERSIONS, "tensorflow", ((1, 0), (2, 0)))
    with pytest.raises(private.PrivateAPIError) as e:
        private.onednn_enabled()
    message = str(e.value)
    assert "_pywrap_util_port.IsMklEnabled" in message and f"tensorflow {tf.__version__}" in message
    assert "tensorflow>=1.0,<2.0" in message
    assert isinstance(e.value, BertKerasError)  # the CLI prints it as one line


def test_a_missing_attribute_names_the_api_and_the_installed_version():
    with pytest.raises(private.PrivateAPIError) as e:
        private.flatten_layers(object())
    assert "keras.Layer._flatten_layers is missing" in str(e.value)
    assert f"keras {keras.__version__}" in str(e.value)


def test_onednn_enabled_reports_the_x86_build():
    # TensorFlow's Linux x86-64 wheels are built with oneDNN and turn it on by default on CPUs
    # with neural-network instructions (AVX512-VNNI, AVX512-BF16, AVX-VNNI, AMX); other builds
    # and CPUs are off, and TF_ENABLE_ONEDNN_OPTS=0/1 overrides the default.
    x86_linux = platform.system() == "Linux" and platform.machine() == "x86_64"
    flags = set()
    if x86_linux:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = set(next((ln.split(":", 1)[1].split() for ln in f if ln.startswith("flags")), []))
    default = bool(flags & {"avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8", "amx_tile"})
    env = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    expected = x86_linux and (env == "1" or (env not in ("0", "1") and default))
    assert private.onednn_enabled() is expected


def test_in_xla_compile_is_true_only_while_tracing_into_an_xla_function():
    import tensorflow as tf

    seen = {}

    def record(name):
        seen[name] = private.in_xla_compile()
        return tf.constant(0.0)

    tf.function(lambda: record("xla"), jit_compile=True)()
    tf.function(lambda: record("graph"))()
    # a plain function called from an XLA one is compiled with it
    inner = tf.function(lambda: record("nested"))
    tf.function(lambda: inner(), jit_compile=True)()
    record("eager")
    assert seen == {"xla": True, "graph": False, "nested": True, "eager": False}


def _calibrated(converter):
    """The converter's calibrate-only output (ranges recorded), with the flag reset afterwards."""
    private.set_calibrate_only(converter)
    try:
        return converter.convert()
    finally:
        converter._experimental_calibrate_only = False


def test_calibrate_only_records_ranges_and_quantises_nothing(calibrated_converter):
    calibrated = _calibrated(calibrated_converter)
    dtypes = {dtype for _, _, dtype in _dtypes_by_op(calibrated)}
    assert dtypes == {np.float32}


def test_mlir_quantize_leaves_the_denylisted_op_float(calibrated_converter):
    calibrated = _calibrated(calibrated_converter)
    dense = [name for op, name, _ in _dtypes_by_op(calibrated) if op == "FULLY_CONNECTED"]
    assert len(dense) == 2
    first, second = sorted(dense, key=lambda n: "second" in n)
    quantised = _dtypes_by_op(private.mlir_quantize(calibrated, denylisted_nodes=[second]))
    by_name = {name: dtype for op, name, dtype in quantised if op == "FULLY_CONNECTED"}
    assert by_name[first] == np.int8 and by_name[second] == np.float32


def test_ops_details_and_the_schema_agree_on_a_files_ops(calibrated_converter):
    content = tf.lite.TFLiteConverter.from_concrete_functions(
        [tf.function(lambda x: tf.nn.relu(x) + 1.0).get_concrete_function(tf.TensorSpec([2], tf.float32))]
    ).convert()
    names = sorted(op["op_name"] for op in private.ops_details(_interpreter(content)))
    assert names == ["ADD", "RELU"]
    schema = private.tflite_schema()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(content, 0))
    codes = sorted(max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes)
    assert codes == sorted([schema.BuiltinOperator.ADD, schema.BuiltinOperator.RELU])


def test_flatten_layers_finds_nested_layers_but_not_the_model():
    inner = keras.Sequential([keras.layers.Dense(3, name="inner_dense")], name="inner")
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="outer_dense")(inner(inputs)), name="outer")
    names = {layer.name for layer in private.flatten_layers(model)}
    assert {"inner", "inner_dense", "outer_dense"} <= names and "outer" not in names


def test_archive_trackable_saves_an_asset_with_the_export(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\nhello\n")
    archive = keras.export.ExportArchive()
    private.archive_trackable(archive).vocab = tf.saved_model.Asset(str(vocab))
    archive.add_endpoint(name="serve", fn=tf.function(lambda x: x * 2.0),
                         input_signature=[tf.TensorSpec([None], tf.float32)])
    out = tmp_path / "export"
    archive.write_out(str(out), verbose=False)
    assert (out / "assets" / "vocab.txt").read_text() == "[PAD]\nhello\n"
    restored = tf.saved_model.load(str(out))
    assert os.path.basename(restored.vocab.asset_path.numpy().decode()) == "vocab.txt"


def test_accept_raw_inputs_lets_a_layer_take_strings_and_ragged_tensors():
    class Lengths(keras.layers.Layer):
        def __init__(self):
            super().__init__(trainable=False)
            private.accept_raw_inputs(self)
            self.built = True

        def call(self, texts):
            return tf.strings.length(tf.strings.split(texts))

    lengths = Lengths()(tf.constant(["ab cde", "f"]))
    assert isinstance(lengths, tf.RaggedTensor)
    assert lengths.to_list() == [[2, 3], [1]]


def test_has_compiled_loss_follows_compile():
    def model():
        return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])

    plain, without_loss, with_loss = model(), model(), model()
    without_loss.compile(optimizer="sgd")
    with_loss.compile(optimizer="sgd", loss="mse")
    assert private.has_compiled_loss(plain) is False
    assert private.has_compiled_loss(without_loss) is False
    assert private.has_compiled_loss(with_loss) is True


def test_stored_value_reads_a_float32_variable_as_stored_inside_a_mixed_call():
    class Probe(keras.layers.Layer):
        def build(self, shape):
            self.w = self.add_weight(shape=(3,), initializer=keras.initializers.Constant(1 / 3))

        def call(self, x):
            return self.w.value, tf.convert_to_tensor(private.stored_value(self.w))

    autocast, stored = Probe(dtype="mixed_bfloat16")(np.zeros((1, 3), "float32"))
    assert autocast.dtype == "bfloat16" and stored.dtype == "float32"
    assert float(stored[0]) == np.float32(1 / 3) != float(autocast[0])  # bf16 rounds 1/3 to 0.33398
