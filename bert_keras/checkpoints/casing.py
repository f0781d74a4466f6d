"""Whether a checkpoint's tokenizer lower-cases: read where recorded, else inferred, and said.

Tokenizing a cased checkpoint's input in lower case (or the reverse) runs
without error and silently maps most words to the wrong pieces, so the
casing is never assumed.  `resolve_casing` looks, in order, at:

1. an explicit choice (``--cased`` / ``--uncased``, ``lower_case=`` in the API);
2. what the checkpoint records: ``lower_case`` in ``bert_keras.json``,
   ``do_lower_case`` in a config file, ``do_lower_case`` in Hugging Face's
   ``tokenizer_config.json``, ``normalizer.lowercase`` in ``tokenizer.json``;
3. Google's folder names (``cased_L-12_H-768_A-12``, ``uncased_L-24_H-1024_A-16``,
   ``multi_cased_L-12_H-768_A-12``, ``bert-base-cased``);
4. the vocabulary: a vocabulary built from lower-cased text has no upper-case
   token, so any upper-case token (special tokens such as ``[CLS]`` aside)
   means cased;
5. uncased, when there is no vocabulary to look at.

    from bert_keras.checkpoints.casing import resolve_casing
    casing = resolve_casing("cased_L-12_H-768_A-12/")
    casing.lower_case      # False
    casing.describe()      # "casing: cased (folder name 'cased_L-12_H-768_A-12')"
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

_FOLDER = re.compile(r"(?:^|[_\-.])(un)?cased(?:$|[_\-.])", re.IGNORECASE)
_SPECIAL = re.compile(r"^\[[^\]]*\]$")  # [CLS], [unused12], [MASK], ...


@dataclasses.dataclass(frozen=True)
class Casing:
    """lower_case: the tokenizer lower-cases (uncased); reason: where that came from."""

    lower_case: bool
    reason: str

    def describe(self) -> str:
        return f"casing: {'uncased' if self.lower_case else 'cased'} ({self.reason})"


def recorded_lower_case(meta):
    """The casing a config/metadata dict records (``lower_case`` or ``do_lower_case``), else None."""
    if not isinstance(meta, dict):
        return None
    value = meta.get("lower_case", meta.get("do_lower_case"))
    return None if value is None else bool(value)


def _tokenizer_files(folder):
    path = os.path.join(folder, "tokenizer_config.json")
    value = recorded_lower_case(_json(path))
    if value is not None:
        return value, f"tokenizer_config.json do_lower_case={str(value).lower()}"
    normalizer = (_json(os.path.join(folder, "tokenizer.json")) or {}).get("normalizer")
    if isinstance(normalizer, dict) and isinstance(normalizer.get("lowercase"), bool):
        value = normalizer["lowercase"]
        return value, f"tokenizer.json normalizer lowercase={str(value).lower()}"
    return None, None


def _json(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None  # an unreadable side file says nothing about casing
    return data if isinstance(data, dict) else None


def folder_name_casing(folder):
    """False for Google's ``cased_...`` names, True for ``uncased_...``, None otherwise."""
    name = os.path.basename(os.path.normpath(os.fspath(folder)))
    match = _FOLDER.search(name)
    if not match:
        return None
    return bool(match.group(1))


def vocab_is_cased(vocab_path):
    """(cased, number of upper-case tokens, example token) of a vocab.txt."""
    from bert_keras.text.vocab import load_vocab

    count, example = 0, None
    for token in load_vocab(vocab_path):
        if not token or _SPECIAL.match(token):
            continue
        if token != token.lower():
            count += 1
            example = example or token
    return count > 0, count, example


def resolve_casing(folder=None, meta=None, vocab_path=None, override=None, meta_file=None) -> Casing:
    """The checkpoint's casing and why (see the module docstring for the order).

    Args:
      folder: the checkpoint folder (for tokenizer_config.json, tokenizer.json
        and Google's folder names), or None.
      meta: the checkpoint's config/metadata dict, or None.
      vocab_path: its vocab.txt (default: ``folder/vocab.txt`` when present).
      override: True (uncased) / False (cased) chosen by the user, or None.
      meta_file: the file `meta` was read from, for the reason.

    Returns:
      Casing(lower_case, reason).
    """
    if override is not None:
        return Casing(bool(override), "--uncased given" if override else "--cased given")
    value = recorded_lower_case(meta)
    if value is not None:
        return Casing(value, f"recorded in {meta_file or 'the checkpoint config'}")
    if folder is not None:
        value, reason = _tokenizer_files(folder)
        if value is not None:
            return Casing(value, reason)
        value = folder_name_casing(folder)
        if value is not None:
            name = os.path.basename(os.path.normpath(os.fspath(folder)))
            return Casing(value, f"folder name {name!r}")
        if vocab_path is None and os.path.exists(os.path.join(folder, "vocab.txt")):
            vocab_path = os.path.join(folder, "vocab.txt")
    if vocab_path is not None and os.path.exists(vocab_path):
        cased, count, example = vocab_is_cased(vocab_path)
        if cased:
            return Casing(False, f"inferred: the vocabulary has {count} upper-case tokens such as {example!r}")
        return Casing(True, "inferred: the vocabulary has no upper-case tokens")
    return Casing(True, "nothing recorded and no vocabulary to infer from: assumed uncased")


def checkpoint_casing(raw, override=None) -> Casing:
    """`resolve_casing` for a `RawCheckpoint` (from `open_checkpoint`)."""
    meta_file = {"bert_keras": "bert_keras.json", "hf": "config.json", "google": "bert_config.json"}.get(raw.flavor)
    return resolve_casing(raw.folder, raw.meta, raw.vocab_path, override, meta_file)
