"""A stand-in for `tensorflow_model_server` (Predict only), for checking the serving recipes offline.

No TF Serving binary can be installed here (no `tensorflow-model-server` Debian
package, no internet), so this serves the same `models.config` with the real
TF Serving protos (`tensorflow-serving-api`): gRPC
`tensorflow.serving.PredictionService/Predict` and REST
`POST /v1/models/<name>[/versions/<v>]:predict` (row `instances` and columnar
`inputs` formats, `{"b64": ...}` strings), each model's latest numeric version
folder loaded with `tf.saved_model.load` and run through the requested
signature.  It is what `tests/test_serving_grpc.py` runs `grpc_client.py` and
the `requests/*.json` bodies against.  It is not TF Serving: no batching, no
version policy beyond "latest", no Classify/Regress/MultiInference, no model
reloading; use the real binary in production.

usage:
  python export/serving_stand_in.py --model_config_file=models.config --port=8500 --rest_api_port=8501
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
from tensorflow_serving.config import model_server_config_pb2

DEFAULT_SIGNATURE = "serving_default"


class ServingError(Exception):
    """An error with the gRPC status TF Serving answers for it (REST maps it to an HTTP code)."""

    HTTP = {grpc.StatusCode.NOT_FOUND: 404, grpc.StatusCode.INVALID_ARGUMENT: 400,
            grpc.StatusCode.FAILED_PRECONDITION: 400}

    def __init__(self, code, message):
        super().__init__(message)
        self.code, self.message = code, message


def read_model_config(path) -> model_server_config_pb2.ModelServerConfig:
    """Parses a TF Serving `--model_config_file` (text proto) into its real proto."""
    with open(path, encoding="utf-8") as f:
        return text_format.Parse(f.read(), model_server_config_pb2.ModelServerConfig())


class Servables:
    """The latest version of every model in a ModelServerConfig, loaded with tf.saved_model.load."""

    def __init__(self, config: model_server_config_pb2.ModelServerConfig):
        self.models = {}
        for entry in config.model_config_list.config:
            if entry.model_platform not in ("", "tensorflow"):
                raise ValueError(f"model {entry.name!r}: platform {entry.model_platform!r} is not 'tensorflow'")
            versions = [int(d) for d in os.listdir(entry.base_path)
                        if d.isdigit() and os.path.isdir(os.path.join(entry.base_path, d))]
            if not versions:
                raise ValueError(f"model {entry.name!r}: no numeric version folder under {entry.base_path}")
            version = max(versions)
            loaded = tf.saved_model.load(os.path.join(entry.base_path, str(version)))
            self.models[entry.name] = (version, loaded)

    def signature(self, name, signature_name, version=None):
        if name not in self.models:
            raise ServingError(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: Latest({name})")
        have, loaded = self.models[name]
        if version and int(version) != have:
            raise ServingError(grpc.StatusCode.NOT_FOUND,
                               f"Servable not found for request: Specific({name}, {version})")
        signature_name = signature_name or DEFAULT_SIGNATURE
        if signature_name not in loaded.signatures:
            raise ServingError(grpc.StatusCode.FAILED_PRECONDITION,
                               f'Serving signature name: "{signature_name}" not found in signature def')
        return have, signature_name, loaded.signatures[signature_name]

    def predict(self, name, signature_name, inputs: dict, version=None):
        """inputs: name -> numpy array.  Returns (version, signature name, {output: numpy})."""
        version, signature_name, fn = self.signature(name, signature_name, version)
        expected = fn.structured_input_signature[1]
        if set(inputs) != set(expected):
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"input names {sorted(inputs)} do not match the signature's {sorted(expected)}")
        feed = {}
        for key, spec in expected.items():
            value = np.asarray(inputs[key])
            if spec.dtype == tf.string:
                if value.dtype.kind not in "OSU":
                    raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"input {key!r}: expects strings")
            elif value.dtype.kind not in "iu" and value.size:
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"input {key!r}: expects {spec.dtype.name}, got {value.dtype}")
            tensor = tf.constant(value, dtype=spec.dtype)
            if not spec.shape.is_compatible_with(tensor.shape):
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"input {key!r}: shape {tensor.shape} does not match {spec.shape}")
            feed[key] = tensor
        try:
            out = fn(**feed)
        except (tf.errors.InvalidArgumentError, ValueError) as e:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, str(e).strip().splitlines()[0]) from e
        return version, signature_name, {k: v.numpy() for k, v in out.items()}


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, servables: Servables):
        self.servables = servables

    def Predict(self, request, context):  # noqa: N802 - the proto's method name
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        spec = request.model_spec
        try:
            version, signature_name, outputs = self.servables.predict(
                spec.name, spec.signature_name, inputs, spec.version.value if spec.HasField("version") else None)
        except ServingError as e:
            context.abort(e.code, e.message)
        response = predict_pb2.PredictResponse()
        response.model_spec.name = spec.name
        response.model_spec.version.value = version
        response.model_spec.signature_name = signature_name
        wanted = set(request.output_filter)
        for key, value in outputs.items():
            if not wanted or key in wanted:
                response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response


# --------------------------------------------------------------------------- REST (JSON) API
def _decode_json_value(value):
    """JSON leaves -> python values; {"b64": s} -> bytes; strings -> UTF-8 bytes."""
    if isinstance(value, dict):
        if set(value) != {"b64"}:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"unexpected JSON object {sorted(value)}")
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_decode_json_value(v) for v in value]
    if isinstance(value, str):
        return value.encode("utf-8")
    return value


def _array(value):
    value = _decode_json_value(value)
    flat = value
    while isinstance(flat, list) and flat:
        flat = flat[0]
    return np.array(value, dtype=object) if isinstance(flat, bytes) else np.asarray(value)


def json_request_inputs(body: dict, input_names) -> tuple[dict, bool]:
    """A REST :predict body -> ({input: numpy}, row_format), following TF Serving's JSON rules."""
    if ("instances" in body) == ("inputs" in body):
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, 'the body needs exactly one of "instances" or "inputs"')
    names = sorted(input_names)
    if "instances" in body:
        instances = body["instances"]
        if not isinstance(instances, list) or not instances:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, '"instances" must be a non-empty list')
        if all(isinstance(i, dict) and "b64" not in i for i in instances):
            missing = [n for n in names if any(n not in i for i in instances)]
            if missing or any(set(i) - set(names) for i in instances):
                raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"every instance needs exactly the inputs {names}")
            return {n: _array([i[n] for i in instances]) for n in names}, True
        if len(names) != 1:
            raise ServingError(grpc.StatusCode.INVALID_ARGUMENT,
                               f"unnamed instances for a signature with inputs {names}")
        return {names[0]: _array(instances)}, True
    inputs = body["inputs"]
    if isinstance(inputs, dict) and "b64" not in inputs:
        return {k: _array(v) for k, v in inputs.items()}, False
    if len(names) != 1:
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, f"unnamed inputs for a signature with inputs {names}")
    return {names[0]: _array(inputs)}, False


def _json_value(value):
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value] if value.ndim else _json_value(value.item())
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, np.generic):
        return value.item()
    return value


def json_response(outputs: dict, row_format: bool) -> dict:
    if not row_format:
        return {"outputs": {k: _json_value(v) for k, v in outputs.items()}}
    batch = {len(v) for v in outputs.values()}
    if len(batch) != 1:
        raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "outputs of different batch sizes; use \"inputs\"")
    n = batch.pop()
    if len(outputs) == 1:
        (value,) = outputs.values()
        return {"predictions": [_json_value(value[i]) for i in range(n)]}
    return {"predictions": [{k: _json_value(v[i]) for k, v in outputs.items()} for i in range(n)]}


_PREDICT_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")


def _rest_handler(servables):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _reply(self, code, payload):
            data = json.dumps(payload).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # noqa: N802
            match = _PREDICT_PATH.match(self.path)
            if not match:
                return self._reply(404, {"error": f"no such endpoint {self.path}"})
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if not isinstance(body, dict):
                    raise ServingError(grpc.StatusCode.INVALID_ARGUMENT, "the body must be a JSON object")
                _, _, fn = servables.signature(match.group(1), body.get("signature_name"), match.group(2))
                inputs, row_format = json_request_inputs(body, fn.structured_input_signature[1])
                _, _, outputs = servables.predict(match.group(1), body.get("signature_name"), inputs, match.group(2))
                self._reply(200, json_response(outputs, row_format))
            except ServingError as e:
                self._reply(ServingError.HTTP.get(e.code, 500), {"error": e.message})
            except json.JSONDecodeError as e:
                self._reply(400, {"error": f"JSON parse error: {e}"})

    return Handler


class StandInServer:
    """gRPC (and optionally REST) on localhost; port 0 picks free ports (see .port / .rest_port)."""

    def __init__(self, config, port=0, rest_api_port=None, host="localhost"):
        if isinstance(config, (str, os.PathLike)):
            config = read_model_config(config)
        self.servables = Servables(config)
        self.grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            PredictionService(self.servables), self.grpc_server)
        self.port = self.grpc_server.add_insecure_port(f"{host}:{port}")
        self.http = None
        if rest_api_port is not None:
            self.http = ThreadingHTTPServer((host, rest_api_port), _rest_handler(self.servables))
            self.rest_port = self.http.server_address[1]

    def start(self):
        self.grpc_server.start()
        if self.http:
            threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.grpc_server.stop(None)
        if self.http:
            self.http.shutdown()
            self.http.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model_config_file", required=True)
    p.add_argument("--port", type=int, default=8500)
    p.add_argument("--rest_api_port", type=int, default=8501)
    args = p.parse_args()
    server = StandInServer(args.model_config_file, args.port, args.rest_api_port).start()
    print(f"gRPC on localhost:{server.port}, REST on localhost:{server.rest_port}", flush=True)
    server.grpc_server.wait_for_termination()


if __name__ == "__main__":
    main()
