"""Extractive question answering: SQuAD v1.1 / v2.0 reading and windowing.

Follows Google's `run_squad.py` step by step, so that scores are comparable
with the paper's:

1. `read_squad`: the context is split on whitespace into "doc tokens", with
   `char_to_word_offset` mapping every character to its doc token; for
   training the answer's character offset becomes a (start, end) doc-token
   span, and an answer whose text cannot be found there is skipped and
   counted (`examples.skipped`).
2. `featurize_squad`: every doc token is WordPiece-tokenized on its own; the
   question is cut to `max_query_length` (64) pieces; the context is cut into
   windows of `max_seq_len - len(query) - 3` pieces starting every
   `doc_stride` (128) pieces: `[CLS] question [SEP] window [SEP]`.  A training
   answer outside a window points at [CLS] (position 0), as do unanswerable
   (v2.0) questions.  Each window records which doc token every piece comes
   from and whether the window is the piece's "max context" one (the window
   where it has the most context on both sides).
3. `postprocess_squad` (module `squad_answers`): window logits back to answer
   texts.

    examples = read_squad("dev-v1.1.json")
    feats = featurize_squad(examples, tokenizer, max_seq_len=384)
    out = model.predict(feats.inputs)           # {"start_logits": [N, L], "end_logits": [N, L]}
    preds = postprocess_squad(examples, feats, out["start_logits"], out["end_logits"],
                              vocab=tokenizer.vocab)
    bert_keras.metrics.squad_evaluate(json.load(open("dev-v1.1.json")), preds.answers)

For v2.0, choose the threshold on the evaluation set:

    scores = metrics.squad_evaluate(data, preds.best_non_null, "2.0", na_probs=preds.null_score_diff)
    answers = apply_null_threshold(preds, scores["best_f1_thresh"])
"""

from __future__ import annotations

import dataclasses
import json
import pathlib

import numpy as np

from bert_keras.errors import DataError
from bert_keras.tasks.common import ExampleList, pack_rows, special_ids, token_ids


@dataclasses.dataclass
class SquadExample:
    """One question on one context.

    Attributes:
      qas_id: the question id.
      question_text: the question.
      context: the paragraph text.
      doc_tokens: the context split on whitespace.
      answers: the gold answers [{"text", "answer_start"}] (all of them).
      is_impossible: v2.0 unanswerable question.
      orig_answer_text, start_position, end_position: training target (first
        answer) as text and inclusive doc-token span; None when not training,
        -1/-1 for impossible questions.
      source: "file: question id" for messages.
    """

    qas_id: str
    question_text: str
    context: str
    doc_tokens: list
    answers: list
    is_impossible: bool = False
    orig_answer_text: str | None = None
    start_position: int | None = None
    end_position: int | None = None
    source: str = ""


def _is_squad_whitespace(c):
    return c in (" ", "\t", "\r", "\n") or ord(c) == 0x202F


def split_context(text):
    """Whitespace doc tokens and the character -> doc token index map (run_squad.py)."""
    doc_tokens = []
    char_to_word_offset = []
    prev_is_whitespace = True
    for c in text:
        if _is_squad_whitespace(c):
            prev_is_whitespace = True
        else:
            if prev_is_whitespace:
                doc_tokens.append(c)
            else:
                doc_tokens[-1] += c
            prev_is_whitespace = False
        char_to_word_offset.append(len(doc_tokens) - 1)
    return doc_tokens, char_to_word_offset


def _load_json(data):
    """(name for messages, the parsed dict) of a path or an already parsed dict."""
    if isinstance(data, dict):
        return "<dict>", data
    path = pathlib.Path(data)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        with open(path, encoding="utf-8") as f:
            return str(path), json.load(f)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: malformed JSON ({e.msg} at column {e.colno})") from None


def _set_training_span(example, char_to_word):
    """Sets the example's training target from its first answer (-1/-1 if impossible), as
    run_squad.py does; returns why the question is skipped, or None."""
    if example.is_impossible:
        example.orig_answer_text = ""
        example.start_position = example.end_position = -1
        return None
    text, offset = example.answers[0]["text"], example.answers[0]["answer_start"]
    end_char = offset + len(text) - 1
    if not text or offset < 0 or end_char >= len(char_to_word):
        return f"answer offset {offset} outside the context"
    start, end = char_to_word[offset], char_to_word[end_char]
    actual = " ".join(example.doc_tokens[start:end + 1])
    if start < 0 or actual.find(" ".join(text.split())) == -1:
        return f"answer {text!r} not found at offset {offset}"
    example.orig_answer_text = text
    example.start_position, example.end_position = start, end
    return None


def read_squad(data, is_training=False, version="1.1", first_answer_only=False):
    """Reads SQuAD JSON into SquadExamples.

    Args:
      data: a path to the JSON file, or the parsed dict.
      is_training: compute the training span of each question's answer; v1.1
        questions must have exactly one answer, v2.0 ones may be impossible.
        Answers not found at their offset are skipped and counted, like Google.
      version: "1.1" or "2.0" (2.0 reads `is_impossible`).
      first_answer_only: for training on a file with several answers per
        question (a dev file): train on the first one instead of raising.

    Returns:
      ExampleList of SquadExample; `.skipped` counts dropped training questions.

    Raises:
      DataError naming the file and the JSON path of a missing/mistyped field.
    """
    name, data = _load_json(data)
    v2 = str(version) in ("2.0", "2", "v2.0")

    def need(obj, key, where, kind):
        if not isinstance(obj, dict) or key not in obj:
            raise DataError(f"{name}: {where}: missing field {key!r}")
        value = obj[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            raise DataError(f"{name}: {where}.{key}: expected "
                            f"{' or '.join(k.__name__ for k in kinds)}, got {type(value).__name__}")
        return value

    examples = ExampleList()
    for ai, article in enumerate(need(data, "data", "top level", list)):
        for pi, paragraph in enumerate(need(article, "paragraphs", f"data[{ai}]", list)):
            where_p = f"data[{ai}].paragraphs[{pi}]"
            context = need(paragraph, "context", where_p, str)
            doc_tokens, char_to_word = split_context(context)
            for qi, qa in enumerate(need(paragraph, "qas", where_p, list)):
                where = f"{where_p}.qas[{qi}]"
                qas_id = str(need(qa, "id", where, (str, int)))
                question = need(qa, "question", where, str)
                if not question.strip():
                    raise DataError(f"{name}: {where}.question (id {qas_id}): empty question")
                answers = qa.get("answers", [])
                if not isinstance(answers, list):
                    raise DataError(f"{name}: {where}.answers: expected list")
                for k, a in enumerate(answers):
                    need(a, "text", f"{where}.answers[{k}]", str)
                    need(a, "answer_start", f"{where}.answers[{k}]", int)
                impossible = bool(qa.get("is_impossible", not answers)) if v2 else False
                example = SquadExample(qas_id=qas_id, question_text=question, context=context,
                                       doc_tokens=doc_tokens, answers=answers, is_impossible=impossible,
                                       source=f"{name}: id {qas_id}")
                if is_training:
                    if len(answers) != 1 and not impossible and not (first_answer_only and answers):
                        raise DataError(f"{name}: {where}.answers (id {qas_id}): a training "
                                        f"question needs exactly 1 answer, got {len(answers)}")
                    skipped = _set_training_span(example, char_to_word)
                    if skipped:
                        examples.skip(f"{name}: id {qas_id}: {skipped}")
                        continue
                examples.append(example)
    return examples


@dataclasses.dataclass
class SquadFeatures:
    """The windows of all examples.

    Attributes:
      inputs: {"token_ids", "segment_ids", "padding_mask"}: int32 [N, L].
      start_positions, end_positions: int32 [N] training targets (0 = [CLS]
        for impossible questions and answers outside the window), or None.
      example_index: int32 [N]: the example each window belongs to.
      doc_span_index: int32 [N]: the window's number within its example.
      tokens: list of N lists of token ids (unpadded window).
      token_to_orig_map: list of N dicts: window position -> doc token index.
      token_is_max_context: list of N dicts: window position -> bool.
    """

    inputs: dict
    start_positions: np.ndarray | None
    end_positions: np.ndarray | None
    example_index: np.ndarray
    doc_span_index: np.ndarray
    tokens: list
    token_to_orig_map: list
    token_is_max_context: list

    def __len__(self):
        return len(self.tokens)

    @property
    def labels(self):
        if self.start_positions is None:
            return None
        return {"start_positions": self.start_positions, "end_positions": self.end_positions}


def _check_is_max_context(doc_spans, cur_span_index, position):
    """Whether window cur_span_index gives `position` the most context (min of left/right)."""
    best_score = None
    best_span_index = None
    for span_index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score = score
            best_span_index = span_index
    return cur_span_index == best_span_index


def featurize_squad(examples, tokenizer, max_seq_len=384, doc_stride=128, max_query_length=64,
                    is_training=False):
    """Cuts examples into `[CLS] question [SEP] context window [SEP]` features.

    Args:
      examples: SquadExamples from `read_squad` (with `is_training=True` for
        training targets).
      tokenizer: object with `tokenize(list_of_str) -> RaggedTensor` of ids.
      max_seq_len, doc_stride, max_query_length: as in run_squad.py.
      is_training: produce start/end positions.

    Returns:
      SquadFeatures with one row per window.
    """
    examples = list(examples)
    if not examples:
        raise DataError("no SQuAD examples to featurize")
    special = special_ids(tokenizer)
    questions = token_ids(tokenizer, [e.question_text for e in examples])
    # Doc tokens are tokenized one by one (as run_squad.py does), so each
    # distinct word needs tokenizing only once.
    words = sorted({w for e in examples for w in e.doc_tokens})
    word_ids = dict(zip(words, token_ids(tokenizer, words)))
    answer_ids = {}
    if is_training:
        texts = sorted({e.orig_answer_text for e in examples
                        if not e.is_impossible and e.orig_answer_text})
        answer_ids = dict(zip(texts, token_ids(tokenizer, texts)))

    queries, windows = [], []
    starts, ends = [], []
    example_index, span_index = [], []
    to_orig, max_context = [], []
    for ei, example in enumerate(examples):
        query = questions[ei][:max_query_length]
        tok_to_orig, orig_to_tok, doc_pieces = _doc_pieces(example, word_ids)
        answer = (_answer_pieces(example, orig_to_tok, doc_pieces, answer_ids) if is_training
                  and not example.is_impossible else None)
        max_tokens_for_doc = max_seq_len - len(query) - 3
        if max_tokens_for_doc <= 0:
            raise DataError(f"max_seq_len {max_seq_len} leaves no room for the context after a "
                            f"{len(query)}-piece question (max_query_length {max_query_length})")
        doc_spans = _doc_spans(len(doc_pieces), max_tokens_for_doc, doc_stride)
        doc_offset = len(query) + 2  # the window's first position, after [CLS] query [SEP]
        for si, (span_start, span_length) in enumerate(doc_spans):
            t2o, is_max = {}, {}
            for i in range(span_length):
                split = span_start + i
                t2o[doc_offset + i] = tok_to_orig[split]
                is_max[doc_offset + i] = _check_is_max_context(doc_spans, si, split)
            start_position = end_position = 0
            if answer is not None and answer[0] >= span_start and answer[1] <= span_start + span_length - 1:
                start_position = answer[0] - span_start + doc_offset
                end_position = answer[1] - span_start + doc_offset
            queries.append(query)
            windows.append(doc_pieces[span_start:span_start + span_length])
            starts.append(start_position)
            ends.append(end_position)
            example_index.append(ei)
            span_index.append(si)
            to_orig.append(t2o)
            max_context.append(is_max)

    # [CLS] question [SEP] window [SEP]: the windows were sized to fit, so nothing is cut
    inputs, lengths, _ = pack_rows(queries, windows, special, max_seq_len)
    rows = [row[:n].tolist() for row, n in zip(inputs["token_ids"], lengths)]
    return SquadFeatures(inputs=inputs, start_positions=np.array(starts, np.int32) if is_training else None,
                         end_positions=np.array(ends, np.int32) if is_training else None,
                         example_index=np.array(example_index, np.int32),
                         doc_span_index=np.array(span_index, np.int32), tokens=rows, token_to_orig_map=to_orig,
                         token_is_max_context=max_context)


def _doc_pieces(example, word_ids):
    """The context's WordPiece ids, each doc token tokenized on its own (run_squad.py):
    (piece -> doc token index, doc token -> its first piece, pieces)."""
    tok_to_orig, orig_to_tok, doc_pieces = [], [], []
    for i, word in enumerate(example.doc_tokens):
        orig_to_tok.append(len(doc_pieces))
        for piece in word_ids[word]:
            tok_to_orig.append(i)
            doc_pieces.append(piece)
    return tok_to_orig, orig_to_tok, doc_pieces


def _answer_pieces(example, orig_to_tok, doc_pieces, answer_ids):
    """The training answer's inclusive (start, end) span of context pieces."""
    if example.start_position is None:
        raise DataError(f"{example.source}: example has no training span; read it with "
                        f"read_squad(..., is_training=True)")
    tok_start = orig_to_tok[example.start_position]
    if example.end_position < len(example.doc_tokens) - 1:
        tok_end = orig_to_tok[example.end_position + 1] - 1
    else:
        tok_end = len(doc_pieces) - 1
    return _improve_answer_span(doc_pieces, tok_start, tok_end, answer_ids[example.orig_answer_text])


def _doc_spans(num_pieces, max_tokens_for_doc, doc_stride):
    """The (start, length) windows over the context pieces: every doc_stride pieces until the end."""
    doc_spans = []
    offset = 0
    while offset < num_pieces:
        length = min(num_pieces - offset, max_tokens_for_doc)
        doc_spans.append((offset, length))
        if offset + length == num_pieces:
            break
        offset += min(length, doc_stride)
    return doc_spans


def _improve_answer_span(doc_pieces, start, end, answer_pieces):
    """The smallest sub-span whose pieces equal the answer's own tokenization.

    E.g. the answer "1895" in the doc token "(1895-1943)." : the word-level span
    covers the whole doc token, the piece-level answer only "1895".
    """
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if doc_pieces[new_start:new_end + 1] == answer_pieces:
                return new_start, new_end
    return start, end
