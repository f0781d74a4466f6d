"""SQuAD answer decoding: window logits -> answer texts, as Google's `run_squad.py` does.

`postprocess_squad` takes the features of `tasks.squad.featurize_squad` and the
model's start/end logits: the `n_best_size` (20) best start and end logits of
every window give candidate spans (start <= end, length <= `max_answer_length`
(30), inside the context, start at a max-context position); the best
`start_logit + end_logit` wins, mapped back to the original text by
`get_final_text`.  For v2.0 the null score is the smallest
`start_logit[0] + end_logit[0]` over the windows and the answer is "" when
`null_score - best_non_null_score > null_score_diff_threshold`.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import unicodedata

import numpy as np

from bert_keras.errors import DataError
from bert_keras.tasks.common import vocab_list
from bert_keras.text.unicode_tables import is_cjk, is_control, is_punctuation, is_whitespace


@dataclasses.dataclass
class SquadPredictions:
    """Decoded answers.

    Attributes:
      answers: {question id: answer text} ("" = no answer, v2.0).
      nbest: {question id: [{"text", "probability", "start_logit", "end_logit"}]}.
      null_score_diff: v2.0: {question id: null score - best non-null score}.
      best_non_null: {question id: best non-empty answer} (for threshold search).
    """

    answers: dict
    nbest: dict
    null_score_diff: dict
    best_non_null: dict


def postprocess_squad(examples, features, start_logits, end_logits, n_best_size=20,
                      max_answer_length=30, lower_case=True, version_2=False,
                      null_score_diff_threshold=0.0, vocab=None, tokenizer=None):
    """Turns start/end logits of all windows into answer texts.

    Args:
      examples: the SquadExamples given to `featurize_squad`.
      features: its SquadFeatures.
      start_logits, end_logits: float [N, L'] (one row per feature; L' may be
        shorter than max_seq_len when batches were trimmed, or a list of rows).
      n_best_size, max_answer_length: as in run_squad.py (20, 30).
      lower_case: whether the tokenizer lower-cases (for `get_final_text`).
      version_2: allow the null answer at [CLS].
      null_score_diff_threshold: v2.0: answer "" when null - best > threshold.
      vocab, tokenizer: where to find the vocabulary (ids -> WordPiece strings).

    Returns:
      SquadPredictions.
    """
    examples = list(examples)
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise DataError(f"got {len(start_logits)} start and {len(end_logits)} end logit rows for "
                        f"{len(features)} features")
    tokens_of = vocab_list(tokenizer, vocab)
    by_example = collections.defaultdict(list)
    for fi, ei in enumerate(features.example_index):
        by_example[int(ei)].append(fi)

    answers, nbest_out, diffs, best_non_null_out = {}, {}, {}, {}
    for ei, example in enumerate(examples):
        prelim, null = _candidate_spans(features, by_example.get(ei, []), start_logits, end_logits,
                                        n_best_size, max_answer_length, version_2)
        nbest = _nbest_answers(example, features, prelim, null if version_2 else None, tokens_of,
                               n_best_size, lower_case)
        probs = _softmax([sl + el for _, sl, el in nbest])
        nbest_out[example.qas_id] = [
            {"text": t, "probability": p, "start_logit": sl, "end_logit": el}
            for (t, sl, el), p in zip(nbest, probs)]
        best_non_null = next((entry for entry in nbest if entry[0]), None)
        best_non_null_out[example.qas_id] = best_non_null[0] if best_non_null else ""
        if not version_2:
            answers[example.qas_id] = nbest[0][0]
        elif best_non_null is None:
            diffs[example.qas_id] = null.score
            answers[example.qas_id] = ""
        else:
            diff = null.score - best_non_null[1] - best_non_null[2]
            diffs[example.qas_id] = diff
            answers[example.qas_id] = "" if diff > null_score_diff_threshold else best_non_null[0]
    return SquadPredictions(answers=answers, nbest=nbest_out, null_score_diff=diffs,
                            best_non_null=best_non_null_out)


@dataclasses.dataclass
class _NullSpan:
    """v2.0: the [CLS] span of the window where it scores lowest."""

    score: float = 1000000.0
    feature: int = 0
    start_logit: float = 0.0
    end_logit: float = 0.0


def _candidate_spans(features, feature_indexes, start_logits, end_logits, n_best_size,
                     max_answer_length, version_2):
    """The valid (feature, start, end, start_logit, end_logit) spans of one example, best first,
    and its null span (the null span is a candidate too for v2.0)."""
    prelim, null = [], _NullSpan()
    for fi in feature_indexes:
        starts = np.asarray(start_logits[fi], dtype=np.float64)
        ends = np.asarray(end_logits[fi], dtype=np.float64)
        num_tokens = len(features.tokens[fi])
        t2o = features.token_to_orig_map[fi]
        is_max = features.token_is_max_context[fi]
        if version_2 and float(starts[0] + ends[0]) < null.score:
            null = _NullSpan(float(starts[0] + ends[0]), fi, float(starts[0]), float(ends[0]))
        for s in _best_indexes(starts, n_best_size):
            for e in _best_indexes(ends, n_best_size):
                if s >= num_tokens or e >= num_tokens:
                    continue
                if s not in t2o or e not in t2o or not is_max.get(s, False):
                    continue
                if e < s or e - s + 1 > max_answer_length:
                    continue
                prelim.append((fi, s, e, float(starts[s]), float(ends[e])))
    if version_2:
        prelim.append((null.feature, 0, 0, null.start_logit, null.end_logit))
    # stable sort: equal scores keep their discovery order, as sorted() does in run_squad
    prelim.sort(key=lambda p: p[3] + p[4], reverse=True)
    return prelim, null


def _nbest_answers(example, features, prelim, null, tokens_of, n_best_size, lower_case):
    """Up to n_best_size distinct (text, start_logit, end_logit), best first ("" = null).

    null: the example's null span (v2.0, always among the answers), or None (v1.1).
    """
    seen = set()
    nbest = []
    for fi, s, e, sl, el in prelim:
        if len(nbest) >= n_best_size:
            break
        if s > 0:
            pieces = [tokens_of[t] for t in features.tokens[fi][s:e + 1]]
            tok_text = " ".join(pieces).replace(" ##", "").replace("##", "")
            tok_text = " ".join(tok_text.strip().split())
            t2o = features.token_to_orig_map[fi]
            orig_text = " ".join(example.doc_tokens[t2o[s]:t2o[e] + 1])
            text = get_final_text(tok_text, orig_text, lower_case)
            if text in seen:
                continue
        else:
            text = ""
        seen.add(text)
        nbest.append((text, sl, el))
    if null is not None and "" not in seen:
        nbest.append(("", null.start_logit, null.end_logit))
    if not nbest:
        nbest.append(("empty", 0.0, 0.0))
    return nbest


def apply_null_threshold(predictions, threshold):
    """v2.0 answers for a new null threshold: "" where null_score_diff > threshold."""
    return {q: "" if predictions.null_score_diff.get(q, -math.inf) > threshold else text
            for q, text in predictions.best_non_null.items()}


def _best_indexes(logits, n_best_size):
    # Descending by value, ties in index order (Python's stable sorted(..., reverse=True)).
    order = np.argsort(-logits, kind="stable")
    return [int(i) for i in order[:n_best_size]]


def _softmax(scores):
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [x / total for x in exps]


def get_final_text(pred_text, orig_text, lower_case=True):
    """Projects a normalised WordPiece answer back onto the original text.

    E.g. pred_text "steve smith", orig_text "Steve Smith's" -> "Steve Smith".
    Runs the basic tokenizer over orig_text, aligns the two texts character by
    character once spaces are removed, and returns the original characters of
    the predicted span; falls back to orig_text when the alignment fails.
    """

    def strip_spaces(text):
        chars, ns_to_s = [], {}
        for i, c in enumerate(text):
            if c == " ":
                continue
            ns_to_s[len(chars)] = i
            chars.append(c)
        return "".join(chars), ns_to_s

    tok_text = " ".join(basic_tokenize(orig_text, lower_case))
    start = tok_text.find(pred_text)
    if start == -1:
        return orig_text
    end = start + len(pred_text) - 1
    orig_ns, orig_ns_to_s = strip_spaces(orig_text)
    tok_ns, tok_ns_to_s = strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        return orig_text
    tok_s_to_ns = {s: ns for ns, s in tok_ns_to_s.items()}
    if start not in tok_s_to_ns or end not in tok_s_to_ns:
        return orig_text
    orig_start = orig_ns_to_s.get(tok_s_to_ns[start])
    orig_end = orig_ns_to_s.get(tok_s_to_ns[end])
    if orig_start is None or orig_end is None:
        return orig_text
    return orig_text[orig_start:orig_end + 1]


def basic_tokenize(text, lower_case=True):
    """Google's BasicTokenizer in plain Python (used by `get_final_text`): clean,
    split CJK, whitespace, (lower + strip accents), punctuation, with the text
    package's character classes (`text.unicode_tables`).

    Returns a list of str.
    """
    chars = []
    for c in text:
        cp = ord(c)
        if cp == 0 or cp == 0xFFFD or is_control(c):
            continue
        if is_whitespace(c):
            chars.append(" ")
        elif is_cjk(cp):
            chars.extend((" ", c, " "))
        else:
            chars.append(c)
    out = []
    for token in "".join(chars).split():
        if lower_case:
            token = "".join(c for c in unicodedata.normalize("NFD", token.lower())
                            if unicodedata.category(c) != "Mn")
        current = []
        for c in token:
            if is_punctuation(c):
                if current:
                    out.append("".join(current))
                    current = []
                out.append(c)
            else:
                current.append(c)
        if current:
            out.append("".join(current))
    return [t for t in " ".join(out).split()]
