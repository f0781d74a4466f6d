"""Google's WordPiece (greedy longest-match-first) in core TensorFlow ops.

`WordPiece` turns the words of `bert_keras.text.basic.BasicTokenizer.split`
into WordPiece ids exactly like `tokenization.WordpieceTokenizer` of
google-research/bert (tf-models-official `official/nlp/tools/tokenization.py`):

    start = 0
    while start < len(word):
        longest end such that word[start:end] (prefixed "##" when start > 0)
        is in the vocabulary -> one piece; start = end
        none -> the whole word is [UNK]
    a word of more than max_chars_per_word characters is [UNK]

without tensorflow-text: a SavedModel that tokenises with it loads in any
TensorFlow process and any TF Serving binary of the same TensorFlow line.

How it is vectorised (no loop over words, no `tf.while_loop`): most words
are a single vocabulary entry, so every whole word is looked up first.  For
the other words, every candidate piece of every word of the batch (each
start position, each length up to the longest vocabulary token) is cut with
`tf.strings.substr` and looked up at once, giving the longest piece at each
position (Google's inner loop).  Google's outer loop then jumps from position
0 by that length; the positions it visits are found by pointer doubling
(log2(max_chars_per_word) rounds of gathers), and a word whose jumps do not
reach its end is `[UNK]`.

The lookup is exact and needs no resource (no lookup table to initialise):
vocabulary entries are keyed by a 62-bit fingerprint of their text (plus one
bit: word-initial or `##` continuation), the keys are sorted, a candidate's
key is found by binary search (`tf.searchsorted`), and a hit counts only if
the entry's text equals the candidate's, so a fingerprint collision with
text outside the vocabulary cannot produce a wrong id.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

_HASH_BUCKETS = 1 << 62
_CONTINUATION = 1 << 62  # key bit of "##" entries, above every fingerprint


def _keys(bodies, continuation):
    """int64 keys of entry texts (tf.string [N]) and their continuation flags (bool [N])."""
    fingerprint = tf.strings.to_hash_bucket_fast(bodies, _HASH_BUCKETS)
    return fingerprint + tf.where(continuation, tf.constant(_CONTINUATION, tf.int64), tf.constant(0, tf.int64))


class WordPiece(tf.Module):
    """Greedy longest-match-first WordPiece over basic-tokenizer words, core ops only.

    Args:
      token_ids: dict token -> id (Google's rule for duplicated vocabulary
        lines already applied: the last line's id).
      unk_id: id of the unknown token.
      max_chars_per_word: words with more characters become `[UNK]`.
      usable: predicate telling which tokens a word can ever match (others
        keep their ids but nothing maps to them).
      suffix_indicator: prefix of continuation pieces ("##").

    Example:
      >>> wp = WordPiece({"[UNK]": 0, "un": 1, "##aff": 2, "##able": 3}, unk_id=0)
      >>> words = tf.ragged.constant([[ord(c) for c in "unaffable"], [ord("x")]])
      >>> wp.tokenize(words).to_list()
      [[1, 2, 3], [0]]
    """

    def __init__(self, token_ids: dict, unk_id: int, max_chars_per_word: int = 200, usable=None,
                 suffix_indicator: str = "##", name: str | None = None):
        super().__init__(name=name)
        usable = usable or bool
        bodies, flags, ids = [], [], []
        for token, token_id in token_ids.items():
            if not usable(token):
                continue
            bodies.append(token)
            flags.append(False)
            ids.append(token_id)
            if token.startswith(suffix_indicator) and len(token) > len(suffix_indicator):
                bodies.append(token[len(suffix_indicator):])
                flags.append(True)
                ids.append(token_id)
        if not bodies:
            bodies, flags, ids = [""], [False], [unk_id]  # matches nothing: words are never empty
        keys = _keys(tf.constant(bodies, tf.string), tf.constant(flags)).numpy()
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        if np.any(keys[1:] == keys[:-1]):  # two entries with one 62-bit fingerprint: never seen
            i = int(np.flatnonzero(keys[1:] == keys[:-1])[0])
            raise ValueError(f"vocabulary entries {bodies[order[i]]!r} and {bodies[order[i + 1]]!r} share a "
                             "fingerprint; the core-op WordPiece cannot tell them apart")
        # Constants (not a lookup table): captured by traced functions and
        # stored inside SavedModels, nothing to initialise on load.
        self._keys = tf.constant(keys, tf.int64)
        self._bodies = tf.constant([bodies[i] for i in order], tf.string)
        self._ids = tf.constant(np.asarray(ids, np.int32)[order], tf.int32)
        self._num_entries = len(keys)
        self.max_token_chars = max(len(b) for b in bodies)
        self.unk_id = int(unk_id)
        self.max_chars_per_word = int(max_chars_per_word)

    def lookup(self, pieces, continuation):
        """Ids of piece texts (tf.string [N], bool [N] `##` flags); -1 where not in the vocabulary."""
        key = _keys(pieces, continuation)
        pos = tf.minimum(tf.searchsorted(self._keys, key, side="left", out_type=tf.int64), self._num_entries - 1)
        hit = tf.equal(tf.gather(self._keys, pos), key) & tf.equal(tf.gather(self._bodies, pos), pieces)
        return tf.where(hit, tf.gather(self._ids, pos), -1)

    def tokenize(self, codepoints, strings=None):
        """WordPiece ids of words.

        Args:
          codepoints: tf.RaggedTensor int32 [W, (chars)], the words' Unicode
            codepoints (e.g. `BasicTokenizer.split(texts).codepoints`).
          strings: optional tf.string [W], the same words in UTF-8 (computed
            when absent).

        Returns:
          tf.RaggedTensor int32 [W, (pieces)]: Google's pieces of every word,
          `[UNK]` alone for words that cannot be covered or are too long.
        """
        if strings is None:
            strings = tf.strings.unicode_encode(codepoints, "UTF-8")
        num_words = codepoints.nrows()
        lengths = codepoints.row_lengths()
        starts = codepoints.row_splits[:-1]
        cps = codepoints.flat_values
        # byte offset of every character boundary (UTF-8 widths 1-4), for BYTE substr
        width = 1 + tf.cast(cps >= 0x80, tf.int64) + tf.cast(cps >= 0x800, tf.int64) + tf.cast(cps >= 0x10000, tf.int64)
        cum = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(width)], axis=0)
        too_long = lengths > self.max_chars_per_word
        max_token = tf.constant(self.max_token_chars, tf.int64)

        # whole words first: one lookup each settles most of them
        whole = self.lookup(strings, tf.zeros_like(too_long))
        whole = tf.where(~too_long & (lengths <= max_token), whole, -1)
        rest = tf.where((whole < 0) & ~too_long & (lengths > 0))[:, 0]
        rest_len = tf.gather(lengths, rest)

        # The other words: for every character position p of every word, the
        # longest vocabulary piece starting there (Google's inner loop), all
        # at once.  Positions 0..n of a word are nodes; n is the word's end.
        node_pos = tf.ragged.range(rest_len + 1)
        node_word = tf.gather(rest, node_pos.value_rowids())
        pos = node_pos.flat_values
        num_nodes = tf.shape(pos, out_type=tf.int64)[0]
        word_len = tf.gather(lengths, node_word)
        cand = tf.ragged.range(1, tf.minimum(word_len - pos, max_token) + 1)
        c_node = cand.value_rowids()
        c_len = cand.flat_values
        c_word = tf.gather(node_word, c_node)
        c_pos = tf.gather(pos, c_node)
        base = tf.gather(starts, c_word)
        word_byte0 = tf.gather(cum, base)
        b0 = tf.gather(cum, base + c_pos)
        b1 = tf.gather(cum, base + c_pos + c_len)
        sub = tf.strings.substr(tf.gather(strings, c_word), b0 - word_byte0, b1 - b0, unit="BYTE")
        ids = self.lookup(sub, c_pos > 0)
        longest = tf.maximum(tf.math.unsorted_segment_max(tf.where(ids >= 0, c_len, 0), c_node, num_nodes), 0)
        # (index len(ids), a padding -1, for positions without a piece, such as word ends)
        chosen = tf.where(longest > 0, cand.row_splits[:-1] + longest - 1, tf.shape(ids, out_type=tf.int64)[0])
        piece = tf.gather(tf.concat([ids, [-1]], 0), chosen)

        # Google's outer loop follows next(p) = p + longest(p) from 0; the word
        # is covered iff that reaches n (a position without a piece leads to a
        # shared FAIL node).  The visited nodes are marked by pointer doubling:
        # after k rounds every node within 2^k jumps of a start is marked.
        node = tf.range(num_nodes, dtype=tf.int64)
        fail = num_nodes
        at_end = tf.equal(pos, word_len)
        jump = tf.where(at_end, node, tf.where(longest > 0, node + longest, fail))
        jump = tf.concat([jump, tf.reshape(fail, [1])], 0)
        first = node_pos.row_splits[:-1]
        marked = tf.scatter_nd(first[:, None], tf.ones_like(first, tf.int32), tf.reshape(num_nodes + 1, [1]))
        for _ in range(max(1, int(np.ceil(np.log2(self.max_chars_per_word + 1))))):
            marked = tf.maximum(marked, tf.math.unsorted_segment_max(marked, jump, num_nodes + 1))
            jump = tf.gather(jump, jump)
        marked = marked[:-1] > 0
        covered = tf.gather(marked, node_pos.row_splits[1:] - 1)  # the end node of each word
        is_piece = marked & ~at_end & tf.repeat(covered, rest_len + 1)
        rank = tf.cumsum(tf.cast(is_piece, tf.int64), exclusive=True)
        piece_at = tf.where(is_piece)[:, 0]
        piece_slot = tf.gather(rank - tf.repeat(tf.gather(rank, first), rest_len + 1), piece_at)

        unk_words = tf.concat([tf.where(too_long)[:, 0], tf.gather(rest, tf.where(~covered)[:, 0])], 0)
        whole_words = tf.where(whole >= 0)[:, 0]
        word = tf.concat([whole_words, unk_words, tf.gather(node_word, piece_at)], 0)
        slot = tf.concat([tf.zeros_like(whole_words), tf.zeros_like(unk_words), piece_slot], 0)
        value = tf.concat([tf.gather(whole, whole_words), tf.fill(tf.shape(unk_words), self.unk_id),
                           tf.gather(piece, piece_at)], 0)
        counts = tf.math.bincount(word, minlength=num_words, maxlength=num_words, dtype=tf.int64)
        splits = tf.concat([tf.zeros([1], tf.int64), tf.cumsum(counts)], 0)
        values = tf.scatter_nd((tf.gather(splits, word) + slot)[:, None], value, splits[-1:])
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)
