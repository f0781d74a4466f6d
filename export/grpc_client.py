"""gRPC client for a bert-keras SavedModel on TF Serving: both signatures.

Needs `pip install tensorflow-serving-api grpcio` (the client side only; not a
bert-keras dependency) and a model server started with models.config:

  tensorflow_model_server --port=8500 --rest_api_port=8501 --model_config_file=/path/models.config

usage:
  python export/grpc_client.py --host localhost:8500 --model sentiment "a gorgeous film." "dull and flat."
  python export/grpc_client.py --host localhost:8500 --model sentiment --ids 101,1037,9882,102
"""

import argparse

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc


def predict_text(stub, model, texts, texts_b=None, timeout=10.0):
    """serving_default: raw strings in; named outputs (numpy) back."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "serving_default"
    # bytes go through untouched: invalid UTF-8 is accepted (dropped like Google's decode(errors="ignore"))
    request.inputs["text"].CopyFrom(tf.make_tensor_proto([t.encode() if isinstance(t, str) else t for t in texts],
                                                         dtype=tf.string))
    if texts_b is not None:
        request.inputs["text_b"].CopyFrom(tf.make_tensor_proto([t.encode() for t in texts_b], dtype=tf.string))
    response = stub.Predict(request, timeout)
    return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


def predict_ids(stub, model, token_ids, segment_ids, padding_mask, timeout=10.0):
    """serve_ids: int32 [B, L] inputs (any L up to the model's position table)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "serve_ids"
    for name, value in (("token_ids", token_ids), ("segment_ids", segment_ids), ("padding_mask", padding_mask)):
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value, dtype=tf.int32))
    response = stub.Predict(request, timeout)
    return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("texts", nargs="*")
    p.add_argument("--host", default="localhost:8500")
    p.add_argument("--model", default="sentiment")
    p.add_argument("--text-b", action="append", help="second texts, for pair models")
    p.add_argument("--ids", help="comma-separated token ids of one packed example ([CLS] ... [SEP])")
    args = p.parse_args()
    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(args.host))
    if args.ids:
        ids = [[int(x) for x in args.ids.split(",")]]
        out = predict_ids(stub, args.model, ids, [[0] * len(ids[0])], [[1] * len(ids[0])])
    else:
        out = predict_text(stub, args.model, args.texts, args.text_b)
    for name, value in sorted(out.items()):
        print(name, value.tolist())


if __name__ == "__main__":
    main()
