"""Token classification (NER) data: CoNLL/BIO files, sub-token labels, and back to words.

    from bert_keras.tasks import read_conll, featurize_token_classification, words_from_predictions
    sents = read_conll("ner.txt")                       # [TaggedSentence(words, tags), ...]
    label_map = LabelMap.from_examples(sents, attr="tags")  # or LabelMap(["O", "B-PER", ...])
    feats = featurize_token_classification(sents, tokenizer, label_map, max_seq_len=128)
    # feats.labels: int32 [N, L]: the word's tag id at its first sub-token, IGNORE_LABEL (-100)
    # at the other sub-tokens, [CLS], [SEP] and padding.
    tags = words_from_predictions(logits.argmax(-1), feats, label_map)   # one tag per word

File format: one token per line, the tag in the last column (TAB or space
separated: `token TAG`, CoNLL-2003's `token POS CHUNK TAG`), sentences separated
by a blank line or a line holding only whitespace/tabs, `-DOCSTART-` lines
skipped.

Sentences longer than `max_seq_len - 2` sub-tokens are split into several
windows at word boundaries (never dropping words), so every word gets a
prediction; `words_from_predictions` stitches them back together.
"""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from bert_keras.errors import DataError
from bert_keras.tasks.common import (IGNORE_LABEL, ExampleList, LabelMap, pack_rows, pad_rows, special_ids,
                                     text_lines, token_ids)


@dataclasses.dataclass
class TaggedSentence:
    """words: list of str; tags: list of str (same length) or None; source: "file:line"."""

    words: list
    tags: list | None
    source: str = ""


def read_conll(path, tag_column=-1):
    """Reads a CoNLL/BIO token file into sentences.

    Args:
      path: the file.
      tag_column: which column holds the tag (default the last); a file with
        a single column gives unlabelled sentences (tags None).

    Returns:
      ExampleList of TaggedSentence, in file order.

    Raises:
      DataError naming the file and line for a line whose column count differs
      from the file's first token line, or an empty token/tag.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    sentences = ExampleList()
    words, tags, start = [], [], None
    columns = None

    def flush():
        nonlocal words, tags, start
        if words:
            sentences.append(TaggedSentence(words, tags if columns > 1 else None,
                                            f"{path}:{start}"))
        words, tags, start = [], [], None

    for n, line in text_lines(path):
        line = line.rstrip("\r\n")
        if not line.strip():
            flush()
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        fields = [x.strip() for x in fields]
        if fields[0] == "-DOCSTART-":
            flush()
            continue
        if columns is None:
            columns = len(fields)
        if len(fields) != columns:
            raise DataError(f"{path}:{n}: expected {columns} columns like the first token "
                            f"line, got {len(fields)}: {line!r}")
        if not fields[0]:
            raise DataError(f"{path}:{n}: field 'token' is empty")
        if start is None:
            start = n
        words.append(fields[0])
        if columns > 1:
            tag = fields[tag_column]
            if not tag:
                raise DataError(f"{path}:{n}: field 'tag' is empty")
            tags.append(tag)
    flush()
    return sentences


@dataclasses.dataclass
class TokenFeatures:
    """Arrays for `BertTokenClassifier` plus the alignment back to words.

    Attributes:
      inputs: {"token_ids", "segment_ids", "padding_mask"}: int32 [N, L].
      labels: int32 [N, L] (IGNORE_LABEL where ignored), or None if unlabelled.
      word_index: int32 [N, L]: index of the word (within its sentence) whose
        first sub-token is at that position, -1 elsewhere.
      sentence_index: int32 [N]: the sentence each row comes from (several
        rows when a long sentence is split into windows).
      num_words: list of int: the word count of every input sentence.
    """

    inputs: dict
    labels: np.ndarray | None
    word_index: np.ndarray
    sentence_index: np.ndarray
    num_words: list

    @property
    def lengths(self):
        return self.inputs["padding_mask"].sum(-1).astype(np.int32)


def featurize_token_classification(sentences, tokenizer, label_map=None, max_seq_len=128):
    """Tokenizes each word and labels its first sub-token.

    Args:
      sentences: TaggedSentences (or lists of words).
      tokenizer: object with `tokenize(list_of_str) -> RaggedTensor` of ids; each
        word is tokenized on its own, as Google's run_squad/NER code does.
      label_map: LabelMap of the tags (default: the sorted tags seen); a tag
        outside it is a DataError naming it.
      max_seq_len: L; sentences with more sub-tokens are split into windows.

    Returns:
      TokenFeatures.  A word that tokenizes to nothing (e.g. only control
      characters) is represented by [UNK] so that it still gets a prediction.
    """
    sentences = [s if isinstance(s, TaggedSentence) else TaggedSentence(list(s), None)
                 for s in sentences]
    if not sentences:
        raise DataError("no sentences to featurize")
    if max_seq_len < 3:
        raise DataError(f"max_seq_len must be at least 3, got {max_seq_len}")
    special = special_ids(tokenizer)
    labelled = [s.tags is not None for s in sentences]
    if any(labelled) and not all(labelled):
        raise DataError(f"{sentences[labelled.index(False)].source}: sentence has no tags but "
                        f"others do")
    if all(labelled) and label_map is None:
        label_map = LabelMap(sorted({t for s in sentences for t in s.tags}))
    flat_words = [w for s in sentences for w in s.words]
    flat_ids = token_ids(tokenizer, flat_words)
    budget = max_seq_len - 2
    token_rows, label_rows, word_rows, sentence_rows = [], [], [], []
    cursor = 0
    for si, sentence in enumerate(sentences):
        if all(labelled) and len(sentence.tags) != len(sentence.words):
            raise DataError(f"{sentence.source}: {len(sentence.words)} words but "
                            f"{len(sentence.tags)} tags")
        tag_ids = None
        if all(labelled):
            tag_ids = [label_map.encode(t, where=sentence.source) for t in sentence.tags]
        pieces = []
        for wi in range(len(sentence.words)):
            ids = flat_ids[cursor + wi] or [special.unk]
            pieces.append(ids[:budget])  # a single word longer than a window keeps its start
        cursor += len(sentence.words)
        window = []  # list of word indices
        used = 0

        def emit(word_ids):
            # pieces without [CLS]/[SEP] (packed below); labels and words with them
            tokens, labels, words = [], [IGNORE_LABEL], [-1]
            for wi in word_ids:
                for k, piece in enumerate(pieces[wi]):
                    tokens.append(piece)
                    first = k == 0
                    labels.append(tag_ids[wi] if (first and tag_ids is not None) else
                                  IGNORE_LABEL)
                    words.append(wi if first else -1)
            labels.append(IGNORE_LABEL)
            words.append(-1)
            token_rows.append(tokens)
            label_rows.append(labels)
            word_rows.append(words)
            sentence_rows.append(si)

        for wi in range(len(sentence.words)):
            if window and used + len(pieces[wi]) > budget:
                emit(window)
                window, used = [], 0
            window.append(wi)
            used += len(pieces[wi])
        emit(window)  # an empty sentence still yields one [CLS] [SEP] row
    inputs, _, _ = pack_rows(token_rows, None, special, max_seq_len)  # windows fit: nothing is cut
    labels = pad_rows(label_rows, max_seq_len, IGNORE_LABEL) if all(labelled) else None
    return TokenFeatures(inputs=inputs, labels=labels, word_index=pad_rows(word_rows, max_seq_len, -1),
                         sentence_index=np.array(sentence_rows, np.int32),
                         num_words=[len(s.words) for s in sentences])


def words_from_predictions(predictions, features, label_map=None, default="O"):
    """Maps per-position predictions back to one prediction per word.

    Args:
      predictions: [N, L'] class ids (L' <= L: batches trimmed to their longest
        row are fine once concatenated with padding, or pass a list of rows).
      features: the TokenFeatures the predictions were made for.
      label_map: LabelMap to turn ids into tag strings (None: keep ids).
      default: value for a word without a prediction (cannot happen unless
        predictions are shorter than the rows).

    Returns:
      list (one per sentence) of lists (one per word) of tags (or ids).
    """
    out = [[default] * n for n in features.num_words]
    for row, (sentence, words) in enumerate(zip(features.sentence_index, features.word_index)):
        pred = np.asarray(predictions[row])
        for pos in np.nonzero(words >= 0)[0]:
            if pos >= len(pred):
                continue
            value = int(pred[pos])
            out[sentence][words[pos]] = label_map.decode(value) if label_map else value
    return out
