"""The serving recipes in export/ run end to end: grpc_client.py, requests/*.json, models.config.

No TF Serving binary is installable offline, so `export/serving_stand_in.py`
serves the exported SavedModels behind the real TF Serving protos
(`tensorflow-serving-api`: gRPC PredictionService, ModelServerConfig) and
TF Serving's REST JSON formats.  The reference is the in-process Keras model
fed by the project's Google-exact tokenizer.
"""

import importlib.util
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

import bert_keras as bk
from bert_keras.checkpoints import load_checkpoint, save_checkpoint
from bert_keras.export import export_saved_model
from bert_keras.text.tokenizer import BertTokenizer
from tests.conftest import reference

grpc = reference("grpc")
reference("tensorflow_serving.apis.prediction_service_pb2_grpc")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT = os.path.join(ROOT, "export")
SEQ_LEN = 32
TEXTS = ["A gorgeous, witty and deeply moving film.", "the plot is a mess; the jokes fall flat",
         "Café déjà vu, naïve résumé."]


def _module(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXPORT, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _folder(path, vocab_path, seed, pair):
    import keras

    keras.utils.set_random_seed(seed)
    model = bk.BertClassifier(bk.BertEncoder(bk.BertConfig.preset("tiny", vocab_size=30522)), num_classes=2)
    model.classifier.kernel.assign(model.classifier.kernel * 20.0)  # distinct logits
    save_checkpoint(model, path, vocab_path=vocab_path, lower_case=True,
                    metadata={"max_seq_len": SEQ_LEN, "lower_case": True, "task": "classification",
                              "labels": ["negative", "positive"], "pair": pair})
    return str(path)


class Reference:
    """The Keras model and the exact tokenizer: what every served answer must equal."""

    def __init__(self, folder):
        self.model = load_checkpoint(folder, task="classification")
        self.tok = BertTokenizer.from_vocab(os.path.join(folder, "vocab.txt"), lower_case=True)

    def features(self, texts, pairs=None):
        return self.tok(tf.constant(texts), pairs=None if pairs is None else tf.constant(pairs), seq_len=SEQ_LEN)

    def logits(self, texts=None, pairs=None, feats=None):
        feats = self.features(texts, pairs) if feats is None else feats
        return np.asarray(self.model({k: tf.constant(v, tf.int32) for k, v in feats.items()}, training=False))


@pytest.fixture(scope="module")
def served(tmp_path_factory, minilm_dir):
    stand_in = _module("serving_stand_in")
    root = tmp_path_factory.mktemp("serving")
    vocab = os.path.join(minilm_dir, "vocab.txt")
    single, pair = _folder(root / "clf", vocab, 0, False), _folder(root / "pair", vocab, 1, True)
    # the layout models.config documents: /models/sentiment/1, both signatures in one folder
    models = root / "models"
    export_saved_model(single, str(models / "sentiment" / "1"))
    export_saved_model(pair, str(models / "pair" / "1"))
    with open(os.path.join(EXPORT, "models.config"), encoding="utf-8") as f:
        text = f.read().replace('base_path: "/models/', f'base_path: "{models}/')
    config_file = root / "models.config"
    config_file.write_text(text)
    config = stand_in.read_model_config(str(config_file))
    assert [c.name for c in config.model_config_list.config] == ["sentiment"]
    entry = config.model_config_list.config.add()
    entry.name, entry.base_path, entry.model_platform = "pair", str(models / "pair"), "tensorflow"
    with stand_in.StandInServer(config, rest_api_port=0) as server:
        yield {"server": server, "single": Reference(single), "pair": Reference(pair), "config_file": str(config_file)}


@pytest.fixture(scope="module")
def stub(served):
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channel = grpc.insecure_channel(f"localhost:{served['server'].port}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel)
    channel.close()


def test_grpc_client_text_and_ids_signatures_match_keras(served, stub):
    client = _module("grpc_client")
    ref = served["single"]
    want = ref.logits(TEXTS)
    out = client.predict_text(stub, "sentiment", TEXTS)
    np.testing.assert_allclose(out["logits"], want, atol=5e-6, rtol=0)  # measured 4.5e-7
    assert [x.decode() for x in out["label"]] == [["negative", "positive"][i] for i in want.argmax(-1)]
    np.testing.assert_allclose(out["probabilities"].sum(-1), 1.0, atol=1e-6)

    feats = {k: v.numpy() for k, v in ref.features(TEXTS).items()}
    out = client.predict_ids(stub, "sentiment", feats["token_ids"], feats["segment_ids"], feats["padding_mask"])
    np.testing.assert_allclose(out["logits"], want, atol=5e-6, rtol=0)  # measured 4.5e-7

    pair = served["pair"]
    a, b = ["When was BERT published?", "Is it good?"], ["In 2018, by Google.", "It is a dull mess."]
    out = client.predict_text(stub, "pair", a, b)
    np.testing.assert_allclose(out["logits"], pair.logits(a, b), atol=3e-6, rtol=0)  # measured 3.0e-7


def test_grpc_client_command_line(served):
    feats = served["single"].features(TEXTS[:1])
    ids = [int(x) for x, m in zip(feats["token_ids"][0].numpy(), feats["padding_mask"][0].numpy()) if m]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    host = f"localhost:{served['server'].port}"
    script = os.path.join(EXPORT, "grpc_client.py")
    for args in (["--model", "sentiment", TEXTS[0]], ["--model", "sentiment", "--ids", ",".join(map(str, ids))]):
        proc = subprocess.run([sys.executable, script, "--host", host, *args], capture_output=True, text=True,
                              timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
        # measured 1.8e-7
        np.testing.assert_allclose(json.loads(lines["logits"]), served["single"].logits(TEXTS[:1]), atol=2e-6)


STAND_IN_WITHOUT_TENSORFLOW_TEXT = """
import runpy, sys
sys.modules["tensorflow_text"] = None  # a server binary without tensorflow-text's ops
sys.argv = ["serving_stand_in.py", "--model_config_file", sys.argv[1], "--port", "0", "--rest_api_port", "0"]
runpy.run_path({script!r}, run_name="__main__")
"""


def test_models_config_serves_text_in_a_server_without_tensorflow_text(served):
    """The exported folder (both signatures) on a server process that cannot load tensorflow-text."""
    client = _module("grpc_client")
    script = STAND_IN_WITHOUT_TENSORFLOW_TEXT.format(script=os.path.join(EXPORT, "serving_stand_in.py"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="")
    proc = subprocess.Popen([sys.executable, "-c", script, served["config_file"]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd="/")
    try:
        line = proc.stdout.readline()  # "gRPC on localhost:PORT, REST on ..." once the models are loaded
        assert line.startswith("gRPC on localhost:"), proc.stderr.read()[-3000:] if proc.poll() is not None else line
        port = int(line.split(",")[0].rsplit(":", 1)[1])
        with grpc.insecure_channel(f"localhost:{port}") as channel:
            from tensorflow_serving.apis import prediction_service_pb2_grpc

            stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
            out = client.predict_text(stub, "sentiment", TEXTS, timeout=120.0)
            ref = served["single"]
            np.testing.assert_allclose(out["logits"], ref.logits(TEXTS), atol=5e-6, rtol=0)  # measured 4.5e-7
            feats = {k: v.numpy() for k, v in ref.features(TEXTS).items()}
            out = client.predict_ids(stub, "sentiment", feats["token_ids"], feats["segment_ids"],
                                     feats["padding_mask"], timeout=120.0)
            np.testing.assert_allclose(out["logits"], ref.logits(TEXTS), atol=5e-6, rtol=0)  # measured 4.5e-7
    finally:
        proc.kill()
        proc.wait(timeout=60)


def test_grpc_errors_carry_tf_serving_status_codes(stub):
    client = _module("grpc_client")
    with pytest.raises(grpc.RpcError) as e:
        client.predict_text(stub, "no_such_model", TEXTS)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    from tensorflow_serving.apis import predict_pb2

    # text sent to the ids signature: the wrong input names
    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = "sentiment", "serve_ids"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto([b"x"]))
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(request, 10.0)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "token_ids" in e.value.details()

    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = "sentiment", "no_such_signature"
    request.inputs["text"].CopyFrom(tf.make_tensor_proto([b"x"]))
    with pytest.raises(grpc.RpcError) as e:
        stub.Predict(request, 10.0)
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "no_such_signature" in e.value.details()


def _post(served, model, body):
    url = f"http://localhost:{served['server'].rest_port}/v1/models/{model}:predict"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _request(name):
    with open(os.path.join(EXPORT, "requests", name), encoding="utf-8") as f:
        return json.load(f)


def test_rest_request_files_run_against_the_saved_model(served):
    assert sorted(os.listdir(os.path.join(EXPORT, "requests"))) == [
        "predict_ids_inputs.json", "predict_ids_instances.json", "predict_pair_instances.json",
        "predict_text_b64.json", "predict_text_inputs.json", "predict_text_instances.json"]
    ref = served["single"]
    # text: row format and columnar format give the same numbers, equal to Keras
    rows = _request("predict_text_instances.json")
    texts = [i["text"] for i in rows["instances"]]
    want = ref.logits(texts)
    code, got = _post(served, "sentiment", rows)
    assert code == 200, got
    np.testing.assert_allclose([p["logits"] for p in got["predictions"]], want, atol=2e-6, rtol=0)  # measured 1.8e-7
    assert [p["label"] for p in got["predictions"]] == [["negative", "positive"][i] for i in want.argmax(-1)]
    cols = _request("predict_text_inputs.json")
    assert cols["inputs"]["text"] == texts
    code, got = _post(served, "sentiment", cols)
    assert code == 200, got
    np.testing.assert_allclose(got["outputs"]["logits"], want, atol=2e-6, rtol=0)  # measured 1.8e-7

    # ids: both formats, on the same folder's serve_ids
    for name in ("predict_ids_instances.json", "predict_ids_inputs.json"):
        body = _request(name)
        feats = ({k: [i[k] for i in body["instances"]] for k in body["instances"][0]} if "instances" in body
                 else body["inputs"])
        want = ref.logits(feats=feats)
        code, got = _post(served, "sentiment", body)
        assert code == 200, (name, got)
        logits = [p["logits"] for p in got["predictions"]] if "predictions" in got else got["outputs"]["logits"]
        np.testing.assert_allclose(logits, want, atol=4e-6, rtol=0)  # measured 3.3e-7

    # invalid UTF-8 sent as b64 is accepted and tokenised like Google's decode(errors="ignore")
    body = _request("predict_text_b64.json")
    raw = __import__("base64").b64decode(body["instances"][0]["text"]["b64"])
    code, got = _post(served, "sentiment", body)
    assert code == 200, got
    # measured 1.5e-7
    np.testing.assert_allclose(got["predictions"][0]["logits"], ref.logits([raw])[0], atol=2e-6, rtol=0)

    body = _request("predict_pair_instances.json")
    i = body["instances"][0]
    code, got = _post(served, "pair", body)
    assert code == 200, got
    np.testing.assert_allclose(got["predictions"][0]["logits"], served["pair"].logits([i["text"]], [i["text_b"]])[0],
                               atol=2e-6, rtol=0)  # measured 1.2e-7


def test_rest_bad_requests_get_clear_errors(served):
    code, got = _post(served, "sentiment", {"instances": [{"txt": "typo in the input name"}]})
    assert code == 400 and "text" in got["error"]
    code, got = _post(served, "nope", {"instances": [{"text": "x"}]})
    assert code == 404 and "nope" in got["error"]
