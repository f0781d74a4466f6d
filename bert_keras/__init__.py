"""bert-keras: BERT (Devlin et al., 2019) in TensorFlow 2 / Keras 3.

    import bert_keras as bk
    cfg = bk.BertConfig.preset("base")
    enc = bk.BertEncoder(cfg)

Public names are imported lazily so that `bert-keras --help` and light
utilities do not pay for importing TensorFlow.
"""

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "BertConfig": "bert_keras.config",
    "BertEncoder": "bert_keras.models.encoder",
    "BertPretrainer": "bert_keras.models.pretrainer",
    "BertClassifier": "bert_keras.models.tasks",
    "BertTokenClassifier": "bert_keras.models.tasks",
    "BertSpanLabeler": "bert_keras.models.tasks",
    "BertMultipleChoice": "bert_keras.models.tasks",
    "load_checkpoint": "bert_keras.checkpoints",
    "save_checkpoint": "bert_keras.checkpoints",
    "BertTokenizer": "bert_keras.text.tokenizer",
    "export_saved_model": "bert_keras.export",
    "export_tflite": "bert_keras.export",
    "load_predictor": "bert_keras.export",
    "pretraining_dataset": "bert_keras.data",
}
_SUBMODULES = {"data", "layers", "models", "checkpoints", "text", "tasks", "metrics", "samples", "finetuning",
               "export", "training", "utils"}

__all__ = sorted(_EXPORTS) + sorted(_SUBMODULES)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"bert_keras.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'bert_keras' has no attribute {name!r}")


def __dir__():
    return __all__
