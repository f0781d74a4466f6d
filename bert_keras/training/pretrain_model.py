"""The `BertPretrainer` of a run: from a preset / BertConfig, or continued from a checkpoint (``init``).

Continued ("domain-adaptive") pre-training starts both phases from any folder
`bert_keras.load_checkpoint` reads: a Google TF1 checkpoint (``cls/predictions/*``,
``cls/seq_relationship/*``), a Hugging Face ``BertForPreTraining``,
``BertForMaskedLM`` or bare ``BertModel`` folder, or one of ours.  Heads the
checkpoint lacks start fresh (the MLM projection is tied to the loaded token
embeddings either way).
"""

from __future__ import annotations

import dataclasses
import os

from bert_keras.errors import BertKerasError
from bert_keras.training.pretrain_config import MIXED_PRECISION, PretrainConfig, resolve_path

# BertConfig fields that fix the weights' shapes and meaning: an init checkpoint decides them.
SIZE_FIELDS = ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size", "hidden_act",
               "max_position_embeddings", "type_vocab_size")
# The pre-training heads as groups of `mapping.head_entries("pretraining")` names.
# The pooler is optional too: BertForMaskedLM has none.
HEADS = {"pooler": "pooler/", "MLM head": "masked_lm_head/", "NSP head": "nsp_head/"}


@dataclasses.dataclass
class ModelSpec:
    """What a run's model is, once the options and the init checkpoint are reconciled.

    ``bert_config`` (`BertConfig`), ``vocab_path``, ``lower_case``, ``init`` (the
    checkpoint folder or None) and ``notes`` (one-line statements for the log:
    which casing was chosen and why).
    """

    bert_config: object
    vocab_path: str
    lower_case: bool
    init: str | None = None
    notes: list = dataclasses.field(default_factory=list)


def _sizes(config):
    return {k: getattr(config, k) for k in SIZE_FIELDS}


def _describe(config):
    return (f"{config.num_layers} layers, hidden {config.hidden_size}, {config.num_heads} heads, "
            f"FFN {config.intermediate_size}")


def _read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def _init_casing(raw, vocab_path):
    """(lower_case, why) from what the checkpoint records, its folder name, or its vocabulary."""
    import json

    for name in ("tokenizer_config.json",):
        path = os.path.join(raw.folder, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                value = json.load(f).get("do_lower_case")
            if value is not None:
                return bool(value), f"{name} says do_lower_case={bool(value)}"
    meta = raw.meta if isinstance(raw.meta, dict) else {}
    for key in ("lower_case", "do_lower_case"):
        if meta.get(key) is not None:
            return bool(meta[key]), f"the checkpoint records {key}={bool(meta[key])}"
    base = os.path.basename(os.path.normpath(raw.folder)).lower()
    if "uncased" in base:
        return True, f"the folder name {base!r} says uncased"
    if "cased" in base:
        return False, f"the folder name {base!r} says cased"
    upper = [t for t in _read_lines(vocab_path)
             if not (t.startswith("[") and t.endswith("]")) and t != t.lower()]
    if upper:
        return False, f"the vocabulary has {len(upper)} upper-case tokens (e.g. {upper[0]!r})"
    return True, "the vocabulary has no upper-case tokens"


def _option_config(cfg: PretrainConfig, vocab_size: int):
    from bert_keras.config import BertConfig

    overrides = dict(cfg.model)
    overrides.setdefault("vocab_size", vocab_size)
    if cfg.bert_config:
        base = BertConfig.from_json(cfg.bert_config).to_dict()
        base.update(overrides)
        return BertConfig(**base)
    return BertConfig.preset(cfg.preset or "mini", **overrides)


def init_folder(value: str) -> str:
    """``sample:NAME`` (a checkpoint sample such as ``minilm``) -> its folder; paths unchanged."""
    if isinstance(value, str) and value.startswith("sample:"):
        from bert_keras import samples

        return str(samples.fetch(value[len("sample:"):]))
    return value


def resolve_model(cfg: PretrainConfig) -> ModelSpec:
    """Reconciles the run's options with its ``init`` checkpoint (if any) into a `ModelSpec`.

    Raises:
      BertKerasError: a missing vocabulary, or a ``preset``/``bert_config``/``model``
        size or a ``vocab`` that conflicts with the init checkpoint (one line naming both).
    """
    from bert_keras.checkpoints import open_checkpoint
    from bert_keras.config import BertConfig

    if not cfg.init:
        if not cfg.vocab:
            raise BertKerasError("vocab is required (a vocab.txt, or sample:minilm)")
        vocab_path = resolve_path(cfg.vocab)
        if not os.path.exists(vocab_path) and not vocab_path.startswith("gs://"):
            raise BertKerasError(f"vocabulary not found: {vocab_path}")
        from bert_keras.text.vocab import load_vocab

        vocab_size = len(load_vocab(vocab_path))
        bert_cfg = _option_config(cfg, vocab_size)
        if bert_cfg.vocab_size != vocab_size:
            raise BertKerasError(f"model vocab_size {bert_cfg.vocab_size} != {vocab_size} entries in {cfg.vocab}")
        return ModelSpec(bert_cfg, vocab_path, True if cfg.lower_case is None else cfg.lower_case)

    folder = init_folder(cfg.init)
    raw = open_checkpoint(folder)
    found = raw.config
    for option, given in (("preset", cfg.preset), ("bert_config", cfg.bert_config)):
        if given:
            wanted = (BertConfig.preset(given, vocab_size=found.vocab_size) if option == "preset"
                      else BertConfig.from_json(given))
            if _sizes(wanted) != _sizes(found):
                raise BertKerasError(f"{option} {given!r} ({_describe(wanted)}) conflicts with init {cfg.init!r} "
                                     f"({_describe(found)}); leave {option} out to take the checkpoint's sizes")
    clash = {k: v for k, v in cfg.model.items() if k in SIZE_FIELDS and v != getattr(found, k)}
    if clash:
        key = sorted(clash)[0]
        raise BertKerasError(f"model.{key} {clash[key]!r} conflicts with init {cfg.init!r} "
                             f"({key} {getattr(found, key)!r})")
    bert_cfg = BertConfig(**{**found.to_dict(), **cfg.model})

    vocab_path = raw.vocab_path
    if cfg.vocab:
        given = resolve_path(cfg.vocab)
        if not os.path.exists(given):
            raise BertKerasError(f"vocabulary not found: {given}")
        if vocab_path and _read_lines(given) != _read_lines(vocab_path):
            raise BertKerasError(f"vocab {cfg.vocab!r} ({len(_read_lines(given))} tokens) conflicts with init "
                                 f"{cfg.init!r}'s {vocab_path} ({len(_read_lines(vocab_path))} tokens); "
                                 "leave vocab out to take the checkpoint's")
        vocab_path = given
    if vocab_path is None:
        raise BertKerasError(f"init {cfg.init!r} has no vocab.txt: pass vocab")
    n = len(_read_lines(vocab_path))
    if n > bert_cfg.vocab_size:
        raise BertKerasError(f"{vocab_path}: {n} tokens but init {cfg.init!r} has {bert_cfg.vocab_size} "
                             "token embeddings")
    if cfg.lower_case is None:
        lower_case, why = _init_casing(raw, vocab_path)
        notes = [f"casing: {'uncased' if lower_case else 'cased'}, because {why}"]
    else:
        lower_case = cfg.lower_case
        notes = [f"casing: {'uncased' if lower_case else 'cased'}, as given"]
    return ModelSpec(bert_cfg, vocab_path, lower_case, init=folder, notes=notes)


def build_pretrainer(cfg: PretrainConfig, vocab_size: int | None = None, spec: ModelSpec | None = None,
                     load_init: bool = True):
    """The `BertPretrainer` of a run (call under ``strategy.scope()``).

    With ``spec.init`` and ``load_init``, the encoder and whatever pre-training heads
    the checkpoint holds are loaded; the model's ``init_report`` attribute says, in
    one line, what was loaded and what starts fresh.
    """
    from bert_keras.models import BertEncoder, BertPretrainer

    if spec is None and not cfg.init and vocab_size is not None:  # sized by the caller, no files read
        spec = ModelSpec(_option_config(cfg, vocab_size), cfg.vocab, cfg.lower_case is not False)
    spec = spec or resolve_model(cfg)
    bert_cfg = spec.bert_config
    if vocab_size is not None and not spec.init and bert_cfg.vocab_size != vocab_size:
        raise BertKerasError(f"model vocab_size {bert_cfg.vocab_size} != {vocab_size} entries in {cfg.vocab}")
    used = [p for p in (1, 2) if (cfg.phase1_steps if p == 1 else cfg.phase2_steps)]
    longest = max((cfg.phase_seq_len(p) for p in used), default=0)
    if longest > bert_cfg.max_position_embeddings:
        raise BertKerasError(f"sequence length {longest} exceeds max_position_embeddings "
                             f"{bert_cfg.max_position_embeddings}")
    model = BertPretrainer(BertEncoder(bert_cfg, dtype=MIXED_PRECISION[cfg.mixed_precision]))
    model.init_report = None
    if spec.init and load_init:
        model.init_report = load_init_weights(model, spec.init)
    return model


def load_init_weights(model, folder: str) -> str:
    """Loads the encoder and the heads present in checkpoint ``folder`` into ``model``.

    Returns the one-line report: which heads were loaded and which start fresh.
    """
    from bert_keras.checkpoints import assign_variables, names_in_checkpoint, model_variables, open_checkpoint
    from bert_keras.checkpoints.mapping import encoder_entries, head_entries

    raw = open_checkpoint(folder)
    everything = encoder_entries(model.encoder.config.num_layers) + head_entries("pretraining")
    entries = [e for e in everything if not e.ours.startswith(tuple(HEADS.values()))]
    loaded, fresh = [], []
    for head, prefix in HEADS.items():
        group = [e for e in everything if e.ours.startswith(prefix)]
        if all(all(n in raw for n in names_in_checkpoint(raw, e)) for e in group):
            entries += group
            loaded.append(head)
        else:
            fresh.append(head)
    assign_variables(raw, entries, model_variables(model))
    kind = {"hf": "Hugging Face", "google": "Google TF1", "bert_keras": "bert-keras"}[raw.flavor]
    report = f"init: encoder{''.join(', ' + h for h in loaded if h != 'pooler')} loaded from {folder} ({kind})"
    if fresh:
        report += f"; {' and '.join(fresh)} not in the checkpoint: {'they start' if len(fresh) > 1 else 'it starts'} fresh"
    return report
