"""`PretrainConfig`: the options of a pre-training run, its learning-rate schedule and its files.

A recipe file (JSON or YAML) holds a subset of the fields; flags override it.
A run records its options in ``model_dir/pretrain_config.json``; resuming with
different options is refused unless every changed key is in `SAFE_ON_RESUME`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Any

import keras
import tensorflow as tf

from bert_keras.choices import MIXED_PRECISION
from bert_keras.errors import BertKerasError
from bert_keras.writing import write_text
from bert_keras.training import distribute
from bert_keras.training.optimization import ADAM_RULES, WarmupPolynomialDecay

SCHEDULES = ("single", "per_phase")

# Options that may change when a run resumes: they change how often it logs, saves and
# evaluates, or where its steps run, not what an optimiser step computes.  (strategy, tpu
# and jit_compile change the devices: the same global batches, up to float rounding;
# init is ignored by a resumed run, whose checkpoint takes precedence.)
SAFE_ON_RESUME = ("log_every", "checkpoint_every", "keep_checkpoints", "progress", "steps_per_call",
                  "eval_files", "eval_batches", "eval_batch_size", "strategy", "tpu", "jit_compile", "init",
                  "model_dir")


# =========================================================================== configuration
@dataclasses.dataclass
class PretrainConfig:
    """Everything a pre-training run needs; a recipe file holds a subset of these keys.

    Batch sizes are global (all replicas) per optimiser step; with
    ``gradient_accumulation_steps`` k each micro-batch is ``batch_size / k``.
    ``phase2_*`` values of None take the phase-1 value.  Paths may be
    ``sample:wiki`` (the Wikipedia sample) and ``sample:minilm`` (the
    uncased BERT vocabulary), fetched by `bert_keras.samples`.

    ``init`` continues pre-training from a checkpoint folder (anything
    `bert_keras.load_checkpoint` reads; ``sample:minilm`` and
    ``sample:rxnfp_pretrained`` work too): the model's sizes, its vocabulary and
    its casing then come from the checkpoint unless ``vocab``/``lower_case`` are
    given, and ``preset``/``bert_config`` may only repeat the checkpoint's sizes.
    With ``init``, 0 steps is allowed (``final/`` is then the checkpoint itself).
    ``preset`` None means "mini" without ``init``; ``lower_case`` None means
    True without ``init``.
    """

    # model
    init: str | None = None                  # checkpoint folder to continue from
    preset: str | None = None
    bert_config: str | None = None           # a BertConfig JSON instead of the preset
    model: dict = dataclasses.field(default_factory=dict)  # BertConfig overrides, e.g. {"dropout": 0.1}
    # data
    vocab: str | None = None
    train_files: Any = None                  # path, glob, comma list or list; local or gs://
    eval_files: Any = None
    heldout_every: int = 0                   # >0: every n-th document of train_files held out for eval
    lower_case: bool | None = None
    whole_word_masking: bool = False
    model_dir: str | None = None
    # phases
    phase1_steps: int = 900
    phase2_steps: int = 100
    phase1_seq_len: int = 128
    phase1_max_predictions: int = 20
    phase2_seq_len: int = 512
    phase2_max_predictions: int = 80
    batch_size: int = 256
    phase2_batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    phase2_gradient_accumulation_steps: int | None = None
    # optimisation
    optimizer: str = "adamw"
    adam_rule: str = "torch"                 # "google", "torch" or "keras" (see optimization.ADAM_RULES)
    learning_rate: float = 1e-4
    warmup_steps: int | None = None          # default 10% of the schedule
    schedule: str = "single"                 # one schedule over both phases, or "per_phase"
    phase2_learning_rate: float | None = None
    phase2_warmup_steps: int | None = None
    end_learning_rate: float = 0.0
    weight_decay: float = 0.01
    clipnorm: float | None = 1.0
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    # execution
    strategy: str = "auto"
    tpu: str | None = None
    mixed_precision: str = "none"
    jit_compile: bool = False
    steps_per_call: int = 1
    log_every: int = 10
    checkpoint_every: int = 100
    keep_checkpoints: int = 3
    eval_batches: int = 0                    # held-out batches evaluated after each phase
    eval_batch_size: int | None = None
    seed: int = 0
    progress: bool = True

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_dict(cls, values: dict, source: str = "config") -> "PretrainConfig":
        if not isinstance(values, dict):
            raise BertKerasError(f"{source}: expected a mapping of options, got {type(values).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise BertKerasError(f"{source}: unknown option(s) {', '.join(unknown)}")
        cfg = cls(**values)
        cfg.validate(source)
        return cfg

    @classmethod
    def from_file(cls, path: str, overrides: dict | None = None) -> "PretrainConfig":
        """Reads a JSON or YAML recipe; ``overrides`` (non-None values) win."""
        if not tf.io.gfile.exists(path):
            raise BertKerasError(f"config file not found: {path}")
        text = read_text(path)
        try:
            if path.endswith((".yaml", ".yml")):
                import yaml

                values = yaml.safe_load(text) or {}
            else:
                values = json.loads(text)
        except Exception as e:  # noqa: BLE001 - any parse error becomes one line
            raise BertKerasError(f"{path}: cannot parse: {str(e).splitlines()[0]}") from None
        if not isinstance(values, dict):
            raise BertKerasError(f"{path}: expected a mapping of options at the top level")
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls.from_dict(values, source=path)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self, source: str = "config") -> None:
        def bad(name, why):
            raise BertKerasError(f"{source}: {name} {why}, got {getattr(self, name)!r}")

        for name in ("phase1_steps", "phase2_steps"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                bad(name, "must be a non-negative integer")
        if self.phase1_steps + self.phase2_steps == 0 and not self.init:
            raise BertKerasError(f"{source}: phase1_steps + phase2_steps must be positive "
                                 "(0 steps only with init: final/ is then the checkpoint)")
        for name in ("phase1_seq_len", "phase1_max_predictions", "phase2_seq_len", "phase2_max_predictions",
                     "batch_size", "gradient_accumulation_steps", "steps_per_call", "log_every",
                     "checkpoint_every", "keep_checkpoints"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                bad(name, "must be a positive integer")
        for name in ("phase2_batch_size", "phase2_gradient_accumulation_steps", "eval_batch_size"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                bad(name, "must be a positive integer or null")
        if self.optimizer not in ("adamw", "lamb"):
            bad("optimizer", "must be adamw or lamb")
        if self.adam_rule not in ADAM_RULES:
            bad("adam_rule", f"must be one of {', '.join(ADAM_RULES)}")
        if self.schedule not in SCHEDULES:
            bad("schedule", f"must be one of {', '.join(SCHEDULES)}")
        if self.mixed_precision not in MIXED_PRECISION:
            bad("mixed_precision", f"must be one of {', '.join(MIXED_PRECISION)}")
        if self.strategy not in distribute.STRATEGIES:
            bad("strategy", f"must be one of {', '.join(distribute.STRATEGIES)}")
        def finite(name, allow_none=False):
            v = getattr(self, name)
            if v is None and allow_none:
                return None
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                bad(name, "must be a finite number")
            return v

        for name in ("learning_rate", "phase2_learning_rate"):
            v = finite(name, allow_none=name == "phase2_learning_rate")
            if v is not None and not v > 0:  # a negative rate trains backwards
                bad(name, "must be positive")
        if finite("end_learning_rate") < 0:
            bad("end_learning_rate", "must be >= 0")
        if finite("weight_decay") < 0:
            bad("weight_decay", "must be >= 0")
        if finite("clipnorm", allow_none=True) is not None and not self.clipnorm > 0:
            bad("clipnorm", "must be positive or null")
        for name in ("warmup_steps", "phase2_warmup_steps"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                bad(name, "must be a non-negative integer or null")
        if not isinstance(self.model, dict):
            bad("model", "must be a mapping of BertConfig fields")
        for phase in (1, 2):
            batch, accum = self.phase_batch_size(phase), self.phase_accumulation(phase)
            if batch % accum:
                raise BertKerasError(f"{source}: phase {phase} batch size {batch} is not divisible by "
                                     f"gradient_accumulation_steps {accum}")
            if self.phase_max_predictions(phase) > self.phase_seq_len(phase):
                raise BertKerasError(f"{source}: phase{phase}_max_predictions exceeds phase{phase}_seq_len")

    # ------------------------------------------------------------------ per phase
    def phase_seq_len(self, phase: int) -> int:
        return self.phase1_seq_len if phase == 1 else self.phase2_seq_len

    def phase_max_predictions(self, phase: int) -> int:
        return self.phase1_max_predictions if phase == 1 else self.phase2_max_predictions

    def phase_batch_size(self, phase: int) -> int:
        return self.batch_size if phase == 1 or self.phase2_batch_size is None else self.phase2_batch_size

    def phase_accumulation(self, phase: int) -> int:
        if phase == 2 and self.phase2_gradient_accumulation_steps is not None:
            return self.phase2_gradient_accumulation_steps
        return self.gradient_accumulation_steps

    @property
    def total_steps(self) -> int:
        return self.phase1_steps + self.phase2_steps


def check_corpus_files(cfg: PretrainConfig) -> None:
    """Before anything trains: every training file, and the evaluation files a phase will read,
    exist and are UTF-8 text (one line naming the first that is not); Google-format TFRecord
    shards instead hold examples of every trained phase's length (`phase_files`)."""
    from bert_keras.data.corpus import resolve_files
    from bert_keras.data.tfrecords import split_kinds
    from bert_keras.data.utf8 import check_utf8_text

    groups = [("train_files", cfg.train_files)] if cfg.train_files and cfg.total_steps else []
    if cfg.eval_files and cfg.eval_batches:
        groups.append(("eval_files", cfg.eval_files))
    for name, files in groups:
        try:
            paths = resolve_files(file_list(files))  # sample:NAME fetched first
            if not split_kinds(paths):
                for path in paths:
                    check_utf8_text(path)
                continue
            if name == "train_files" and cfg.heldout_every:
                raise BertKerasError(f"heldout_every {cfg.heldout_every}: holds out documents of text, and "
                                     "train_files are TFRecord shards; give held-out shards as eval_files")
            for phase in (1, 2):
                if cfg.phase1_steps if phase == 1 else cfg.phase2_steps:
                    phase_files(paths, cfg, phase)
        except BertKerasError as e:
            raise type(e)(f"{name}: {e}") from None


def phase_files(files, cfg: PretrainConfig, phase: int):
    """What a phase reads of ``files``: text files as given; of Google-format shards, those whose
    examples have the phase's length and masked-LM slots (one folder may hold both phases')."""
    from bert_keras.data import tfrecords
    from bert_keras.data.corpus import resolve_files

    paths = resolve_files(file_list(files))
    if not tfrecords.split_kinds(paths):
        return files
    return tfrecords.phase_shards(paths, cfg.phase_seq_len(phase), cfg.phase_max_predictions(phase),
                                  what=f"phase {phase}")


# =========================================================================== schedule
@keras.saving.register_keras_serializable(package="bert_keras")
class PhasedSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """NVIDIA's variant: a fresh warm-up + decay in phase 2.

    lr(step) = first(step)                  for step < boundary
             = second(step - boundary)      after
    """

    def __init__(self, first, second, boundary):
        self.first = first if not isinstance(first, dict) else keras.saving.deserialize_keras_object(first)
        self.second = second if not isinstance(second, dict) else keras.saving.deserialize_keras_object(second)
        self.boundary = int(boundary)

    def __call__(self, step):
        step = keras.ops.cast(step, "float32")
        return keras.ops.where(step < self.boundary, self.first(step), self.second(step - self.boundary))

    def get_config(self):
        return {"first": keras.saving.serialize_keras_object(self.first),
                "second": keras.saving.serialize_keras_object(self.second), "boundary": self.boundary}


def learning_rate_schedule(cfg: PretrainConfig):
    """The learning rate as a function of the optimiser step over both phases."""
    def warm(steps, value):
        return int(round(0.1 * steps)) if value is None else min(int(value), steps)

    if cfg.schedule == "single" or cfg.phase2_steps == 0 or cfg.phase1_steps == 0:
        total = cfg.total_steps
        return WarmupPolynomialDecay(peak_learning_rate=cfg.learning_rate, total_steps=total,
                                     warmup_steps=warm(total, cfg.warmup_steps),
                                     end_learning_rate=cfg.end_learning_rate)
    first = WarmupPolynomialDecay(peak_learning_rate=cfg.learning_rate, total_steps=cfg.phase1_steps,
                                  warmup_steps=warm(cfg.phase1_steps, cfg.warmup_steps),
                                  end_learning_rate=cfg.end_learning_rate)
    lr2 = cfg.phase2_learning_rate if cfg.phase2_learning_rate is not None else cfg.learning_rate
    second = WarmupPolynomialDecay(peak_learning_rate=lr2, total_steps=cfg.phase2_steps,
                                   warmup_steps=warm(cfg.phase2_steps, cfg.phase2_warmup_steps),
                                   end_learning_rate=cfg.end_learning_rate)
    return PhasedSchedule(first, second, cfg.phase1_steps)


# =========================================================================== data
def resolve_path(value):
    """``sample:NAME`` -> the fetched sample's file; anything else unchanged."""
    if isinstance(value, str) and value.startswith("sample:"):
        from bert_keras import samples

        name = value[len("sample:"):]
        if name == "rotten_tomatoes_train_text":
            return str(samples.rotten_tomatoes_train_text())
        path = samples.fetch(name)
        if name == "minilm":
            return str(path / "vocab.txt")
        return str(path)
    return value


def file_list(value):
    """A files option (one path or a list; None) as a list of resolved paths (None stays None)."""
    if value is None:
        return None
    values = value if isinstance(value, (list, tuple)) else [value]
    return [resolve_path(v) for v in values]


def split_heldout(files, out_dir, every):
    """Writes ``train.txt`` / ``heldout.txt``: document i goes to held-out when i % every == every - 1.

    Documents are Google-format blocks separated by blank lines.  Returns the two paths.
    """
    from bert_keras.data import corpus as corpus_lib

    paths = corpus_lib.resolve_files(files)
    tf.io.gfile.makedirs(out_dir)
    train_path, held_path = os.path.join(out_dir, "train.txt"), os.path.join(out_dir, "heldout.txt")
    if tf.io.gfile.exists(train_path) and tf.io.gfile.exists(held_path):
        return train_path, held_path
    docs = corpus_lib.read_documents(paths)
    train = [d for i, d in enumerate(docs) if i % every != every - 1]
    held = [d for i, d in enumerate(docs) if i % every == every - 1]
    if not train or not held:
        raise BertKerasError(f"heldout_every={every}: {len(docs)} document(s) in {files} give an empty split")
    for path, part in ((train_path, train), (held_path, held)):
        write_text(path, "\n\n".join("\n".join(d) for d in part) + "\n")
    return train_path, held_path



# File I/O through tf.io.gfile: model_dir may be gs:// (TPU hosts write to Cloud Storage).
def read_text(path):
    """A text file's contents, local or remote (TensorFlow's file system)."""
    with tf.io.gfile.GFile(path, "r") as f:
        return f.read()


def changed_options(recorded: dict, cfg: PretrainConfig) -> list[str]:
    """The options of ``cfg`` that differ from a run's ``pretrain_config.json`` (``recorded``),
    leaving out `SAFE_ON_RESUME`.  Keys missing from ``recorded`` (an older version) count as
    their default."""
    # A record without a key was written before the key existed: it ran with that era's value.
    before = {**PretrainConfig().to_dict(), "adam_rule": "keras"}
    old, new = _effective({**before, **recorded}), _effective(cfg.to_dict())
    return [key for key in new if key not in SAFE_ON_RESUME and old.get(key) != new[key]]


def _effective(values: dict) -> dict:
    """None options replaced by what they mean (preset "mini", lower_case True without init)."""
    values = dict(values)
    if not values.get("init"):
        values["preset"] = values.get("preset") or ("mini" if not values.get("bert_config") else None)
        values["lower_case"] = True if values.get("lower_case") is None else values["lower_case"]
    return values


def check_resume_options(path: str, cfg: PretrainConfig) -> None:
    """Refuses (one line) to resume the run recorded in ``path`` with changed options."""
    if not tf.io.gfile.exists(path):
        return
    try:
        recorded = json.loads(read_text(path))
    except ValueError as e:
        raise BertKerasError(f"{path}: not valid JSON ({e}); cannot check the resumed run's options") from None
    changed = changed_options(recorded, cfg)
    if changed:
        detail = ", ".join(f"{k} {recorded.get(k)!r} -> {getattr(cfg, k)!r}" for k in changed)
        raise BertKerasError(f"{path}: the run in this model_dir was started with other options; resuming "
                             f"would mix two runs (changed: {detail}); use a new model_dir, or the recorded "
                             f"options (only {', '.join(SAFE_ON_RESUME[:-1])} may change on resume)")
