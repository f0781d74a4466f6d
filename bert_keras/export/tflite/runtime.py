"""Running exported TFLite files: `TFLiteModel`, file sizes and latency."""

from __future__ import annotations

import os
import re
import time

import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.export.spec import read_spec

_TFTEXT_OPS = (b"FastWordpieceTokenize", b"FastBertNormalize")


class TFLiteModel:
    """A LiteRT interpreter for an exported file, called like the SavedModel signatures.

    Every file this project writes runs on the stock
    `ai_edge_litert.interpreter.Interpreter`.  A text file takes int32
    codepoints (see `text`); call it with ``text=[...]`` (and
    ``text_b=``) and the strings are turned into codepoints here, cut to the
    file's budget, or pass ``codepoints=`` directly.  Text files written by
    earlier versions (string input, tensorflow-text kernels) still run, with
    tensorflow-text's registrar.

    Ids inputs may be shorter than the file's length (they are padded with
    0).  A file exported with ``length_buckets`` runs each call at the
    smallest bucket that holds the batch's longest row (the last column
    where ``padding_mask`` is 1); the columns cut are padding, so the
    outputs are those of the full length.

    Example:
      >>> m = TFLiteModel("tflite/model_text.tflite")
      >>> m(text=["a gorgeous, witty film."])["probabilities"]
      array([[0.03, 0.97]], dtype=float32)
    """

    def __init__(self, path, num_threads=None):
        from ai_edge_litert.interpreter import Interpreter

        if not os.path.exists(path):
            raise BertKerasError(f"{path}: no such TFLite file")
        self.path = path
        with open(path, "rb") as f:
            content = f.read()
        self.legacy_text = any(op in content for op in _TFTEXT_OPS)
        if self.legacy_text:
            from ai_edge_litert.interpreter import InterpreterWithCustomOps
            from tensorflow_text import tflite_registrar

            self.interpreter = InterpreterWithCustomOps(
                custom_op_registerers=tflite_registrar.SELECT_TFTEXT_OPS, model_content=content,
                num_threads=num_threads)
        else:
            try:
                self.interpreter = Interpreter(model_content=content, num_threads=num_threads)
            except (ValueError, RuntimeError) as e:
                raise BertKerasError(f"{path}: not a TFLite file LiteRT can load ({str(e).splitlines()[0]})") from None
        signatures = self.interpreter.get_signature_list()
        key = "serving_default" if "serving_default" in signatures or len(signatures) != 1 else None
        self._runner = self.interpreter.get_signature_runner(key)
        self._buckets = {int(k.split("_")[1]): k for k in signatures if re.fullmatch(r"length_\d+", k)}
        self._bucket_runners = {}
        self.inputs = self._runner.get_input_details()
        self.is_text = self.legacy_text or "codepoints" in self.inputs
        self.max_codepoints = int(self.inputs["codepoints"]["shape"][-1]) if "codepoints" in self.inputs else None
        self.spec = read_spec(path)

    def _codepoints(self, texts):
        from bert_keras.export.tflite.text import codepoints

        texts = np.asarray(texts, dtype=object)
        return codepoints(list(texts.reshape(-1)), self.max_codepoints).reshape(texts.shape + (-1,))

    def __call__(self, **inputs):
        """Named numpy inputs -> dict of named numpy outputs (batch resized as needed)."""
        if self.max_codepoints is not None:
            for text, cps in (("text", "codepoints"), ("text_b", "codepoints_b")):
                if text in inputs and cps in self.inputs:
                    inputs[cps] = self._codepoints(inputs.pop(text))
        feed = {}
        for name, detail in self.inputs.items():
            if name not in inputs:
                raise BertKerasError(f"{self.path}: missing input {name!r}")
            value = inputs[name]
            if detail["dtype"] in (np.bytes_, np.object_):
                value = np.array([v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in np.ravel(value)],
                                 dtype=object).reshape(np.shape(value))
            else:
                value = np.asarray(value)
                if value.dtype.kind not in "iub":
                    raise BertKerasError(f"{self.path}: input {name!r} must be integers, got {value.dtype}")
                want = list(detail["shape_signature"])
                short = (not self.is_text and value.ndim == len(want) and want[-1] > 0
                         and value.shape[-1] < want[-1])  # ids shorter than the file's length: pad with 0
                if short and all(w <= 0 or w == s for w, s in zip(want[1:-1], value.shape[1:-1])):
                    value = np.pad(value, [(0, 0)] * (value.ndim - 1) + [(0, want[-1] - value.shape[-1])])
                if value.ndim != len(want) or any(w > 0 and w != s for w, s in zip(want[1:], value.shape[1:])):
                    raise BertKerasError(f"{self.path}: input {name!r} must have shape {want} (-1: any), "
                                         f"got {list(value.shape)}")
                value = np.clip(value, -2**31, 2**31 - 1).astype(detail["dtype"])
            feed[name] = value
        return self._bucket(feed)

    def _bucket(self, feed):
        """Runs feed at the smallest length bucket holding every real token (the full length without one)."""
        mask = feed.get("padding_mask")
        if not self._buckets or mask is None:
            return self._runner(**feed)
        full = mask.shape[-1]
        columns = np.flatnonzero(mask.reshape(-1, full).any(axis=0))
        used = int(columns[-1]) + 1 if columns.size else 1
        length = min((b for b in self._buckets if used <= b < full), default=None)
        if length is None:
            return self._runner(**feed)
        if length not in self._bucket_runners:
            self._bucket_runners[length] = self.interpreter.get_signature_runner(self._buckets[length])
        return self._bucket_runners[length](**{n: v[..., :length] for n, v in feed.items()})

    @property
    def length_buckets(self) -> list:
        """The file's length-bucket signatures' lengths (empty without buckets)."""
        return sorted(self._buckets)


def file_size_mb(path) -> float:
    return os.path.getsize(path) / 1e6


def latency_ms(fn, repeats=20, warmup=3) -> float:
    """Median wall time of fn() in milliseconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * float(np.median(times))
