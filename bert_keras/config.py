"""`BertConfig`: the hyper-parameters of a BERT encoder.

Reads and writes this project's JSON, Google's ``bert_config.json`` and
Hugging Face's ``config.json`` (the same keys as Google's plus a few).
"""

from __future__ import annotations

import dataclasses
import os

from bert_keras.errors import BertKerasError
from bert_keras.utils import read_json
from bert_keras.writing import write_json


# name: (num_layers, hidden_size, num_heads); intermediate size is always 4H.
# tiny..medium are Google's compact models (Turc et al., 2019), base/large the paper's.
PRESETS = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

# Ceilings on the sizes a config may ask for, checked before anything is allocated.  Each is
# far above any published BERT (BERT-LARGE: 24 layers, H=1024, A=16, FFN 4096, 512 positions,
# 2 segment types; multilingual vocabularies up to 250k tokens) and low enough that a typo such as
# ``hidden_size: 1000000000`` is refused in one line instead of failing deep inside TensorFlow.
MAX_VOCAB_SIZE = 4_194_304  # 2**22: the largest vocabulary tensorflow-text's FastWordpieceTokenizer takes
LIMITS = {
    "vocab_size": MAX_VOCAB_SIZE,
    "hidden_size": 65_536,
    "num_layers": 1_024,
    "num_heads": 1_024,
    "intermediate_size": 262_144,
    "max_position_embeddings": 65_536,
    "type_vocab_size": 1_024,
}

# Google / Hugging Face key -> our field
_FOREIGN_KEYS = {
    "num_hidden_layers": "num_layers",
    "num_attention_heads": "num_heads",
    "hidden_dropout_prob": "dropout",
    "attention_probs_dropout_prob": "attention_dropout",
}


def config_keys(values: dict) -> dict:
    """Our field name -> the key that holds it in ``values`` (our JSON, Google's or Hugging Face's)."""
    fields = {f.name for f in dataclasses.fields(BertConfig)}
    keys = {}
    for key in values:
        field = _FOREIGN_KEYS.get(key, key)
        if field in fields:
            keys[field] = key
    if "layer_norm_epsilon" in values and "layer_norm_eps" not in keys:
        keys["layer_norm_eps"] = "layer_norm_epsilon"
    return keys


@dataclasses.dataclass
class BertConfig:
    """Hyper-parameters of a BERT encoder (defaults: BERT-BASE, uncased vocabulary).

    Example:
        >>> cfg = BertConfig.preset("tiny", vocab_size=1000)
        >>> cfg.num_layers, cfg.hidden_size, cfg.intermediate_size
        (2, 128, 512)

    Ceilings (`LIMITS`, checked by `validate` before any weight is allocated):
    vocab_size <= 4,194,304 (2**22, the largest vocabulary tensorflow-text's
    FastWordpieceTokenizer accepts), hidden_size <= 65,536, num_layers <= 1,024,
    num_heads <= 1,024, intermediate_size <= 262,144, max_position_embeddings
    <= 65,536, type_vocab_size <= 1,024.  A value above its ceiling raises
    `BertKerasError` naming the field, the value and the ceiling.  When a config
    comes with weights, `load_checkpoint` also checks its sizes against the
    tensor shapes the weights file records (see
    `bert_keras.checkpoints.formats.check_sizes`).
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    dropout: float = 0.1
    attention_dropout: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Raise `BertKerasError` (a ValueError) naming the first invalid field."""
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise BertKerasError(f"BertConfig.{name} must be a positive integer, got {value!r}")
            if value > LIMITS[name]:
                raise BertKerasError(f"BertConfig.{name} {value} is over the ceiling of {LIMITS[name]:,} "
                                     "(bert_keras.config.LIMITS)")
        if self.hidden_size % self.num_heads:
            raise BertKerasError(
                f"BertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_heads ({self.num_heads})")
        from bert_keras.layers.activations import activation_names

        if self.hidden_act not in activation_names():
            raise BertKerasError(
                f"BertConfig.hidden_act {self.hidden_act!r} is not one of {', '.join(activation_names())}")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise BertKerasError(f"BertConfig.{name} must be in [0, 1), got {value!r}")
        for name in ("layer_norm_eps", "initializer_range"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or value <= 0:
                raise BertKerasError(f"BertConfig.{name} must be a positive number, got {value!r}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    @classmethod
    def preset(cls, name: str, **overrides) -> "BertConfig":
        """One of "tiny", "mini", "small", "medium", "base", "large" (FFN = 4H)."""
        if name not in PRESETS:
            raise BertKerasError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        values = dict(num_layers=layers, hidden_size=hidden, num_heads=heads, intermediate_size=4 * hidden)
        values.update(overrides)
        return cls(**values)

    # ----------------------------------------------------------------- JSON
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> "BertConfig":
        """Accepts our keys, Google's ``bert_config.json`` keys or Hugging Face's."""
        if not isinstance(values, dict):
            raise BertKerasError(f"{source}: expected a JSON object, got {type(values).__name__}")
        model_type = values.get("model_type")
        if model_type not in (None, "bert"):
            raise BertKerasError(f"{source}: model_type {model_type!r} is not a BERT model")
        keys = config_keys(values)
        kwargs = {field: values[key] for field, key in keys.items()}
        for required in ("vocab_size", "hidden_size", "num_layers", "num_heads"):
            if required not in kwargs:
                raise BertKerasError(f"{source}: missing field {required!r}")
        for field, limit in LIMITS.items():  # named as the file names them, before anything is built
            value = kwargs.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value > limit:
                raise BertKerasError(f"{source}: {keys[field]} {value} is over the ceiling of {limit:,} "
                                     "(bert_keras.config.LIMITS)")
        kwargs.setdefault("intermediate_size", 4 * kwargs["hidden_size"])
        try:
            return cls(**kwargs)
        except BertKerasError as e:
            raise BertKerasError(f"{source}: {e}") from None

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "BertConfig":
        """Reads this project's JSON, Google's bert_config.json or Hugging Face's config.json."""
        path = os.fspath(path)
        if os.path.isdir(path):
            for name in ("bert_config.json", "config.json"):
                if os.path.exists(os.path.join(path, name)):
                    path = os.path.join(path, name)
                    break
        values = read_json(path)
        return cls.from_dict(values, source=path)

    def to_json(self, path: str | os.PathLike, flavor: str = "bert_keras") -> None:
        """Writes JSON atomically; ``flavor`` "bert_keras" (ours), "google" or "huggingface"."""
        write_json(path, self.to_flavor(flavor))

    def to_flavor(self, flavor: str = "bert_keras") -> dict:
        if flavor == "bert_keras":
            return self.to_dict()
        google = {
            "attention_probs_dropout_prob": self.attention_dropout,
            "hidden_act": self.hidden_act,
            "hidden_dropout_prob": self.dropout,
            "hidden_size": self.hidden_size,
            "initializer_range": self.initializer_range,
            "intermediate_size": self.intermediate_size,
            "max_position_embeddings": self.max_position_embeddings,
            "num_attention_heads": self.num_heads,
            "num_hidden_layers": self.num_layers,
            "type_vocab_size": self.type_vocab_size,
            "vocab_size": self.vocab_size,
        }
        if flavor == "google":
            return google
        if flavor == "huggingface":
            # transformers has no "gelu_approximate": its name for the tanh form is "gelu_new"
            act = {"gelu_approximate": "gelu_new"}.get(self.hidden_act, self.hidden_act)
            return {"architectures": ["BertModel"], "model_type": "bert", **google, "hidden_act": act,
                    "layer_norm_eps": self.layer_norm_eps, "pad_token_id": 0,
                    "position_embedding_type": "absolute"}
        raise BertKerasError(f"unknown config flavor {flavor!r}; choose bert_keras, google or huggingface")


def __getattr__(name):
    # The activation names a config accepts are those of the activation table (written once there).
    if name == "ACTIVATIONS":
        from bert_keras.layers.activations import activation_names

        return activation_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
