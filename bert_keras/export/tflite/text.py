"""Google-exact BERT tokenization from Unicode codepoints, in TFLite builtin ops only.

Input contract of `model_text.tflite` (and of `export_tokenizer_tflite`):

* ``codepoints``: int32 [B, N], the text's Unicode scalar values (Kotlin
  `text.codePoints()`, Swift `text.unicodeScalars`, Python `map(ord, text)`),
  padded with 0 after the text.  N (`max_codepoints`, recorded as
  ``max_codepoints`` in `bert_keras_export.json`) is the budget: the caller
  keeps the first N codepoints of a longer text, and the ids are then exactly
  Google's `FullTokenizer` ids of that prefix (``text[:N]`` in Python).
  Pair models take ``codepoints_b`` the same way ([B, K, N] for multiple
  choice).
* Values that are not Unicode scalar values (negative, above 0x10FFFF, UTF-16
  surrogates) are deleted like invalid UTF-8 is by Google's
  `decode("utf-8", "ignore")`; 0 (U+0000) is deleted by Google's cleaning
  anyway, so padding never changes the ids.  Every codepoint up to U+10FFFF
  is covered by the tables (no fallback range).

The graph, on fixed-width rows (dense int32 ops: GATHER, CUMSUM, SCATTER_ND,
SELECT_V2, comparisons, integer arithmetic; no WHILE):

1. Google's `_clean_text`: delete U+0000, U+FFFD and Cc/Cf (tables of
   `bert_keras.text.unicode_tables`), rows compacted with cumsum + scatter;
2. uncased: `token.lower()` with CPython's final-sigma rule, NFD, strip Mn,
   through a table of up to 4 codepoints per codepoint (`MAX_EXPANSION`), then
   NFD's canonical reordering of the rare non-Mn combining characters by
   odd-even transposition (`REORDER_PASSES` passes: exact for runs of up to
   that many such characters in a row; no real text has more than 2);
3. splitting on whitespace, around CJK ideographs and punctuation;
4. WordPiece, greedy longest-match-first: from every position a walk of the
   vocabulary trie (`tables.VocabTrie`) finds the longest token (a
   word-initial one at word starts, a `##` one elsewhere); the pieces of a
   word are the chain start -> start + length -> ..., marked by pointer
   doubling; a word with a position the trie cannot cover, or with more than
   `max_chars_per_word` characters, becomes one [UNK];
5. Google's packing: [CLS] A [SEP] (B [SEP]), longest-first truncation to
   `seq_len`, [PAD].

Uncased rows are 3N wide after step 2 (one codepoint becomes at most 3 that
survive accent stripping), so no text within the budget is cut inside the graph.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from bert_keras.export.tflite import tables as tflite_tables
from bert_keras.text import unicode_tables as ut

REORDER_PASSES = 4
SPACE = 0x20


def codepoints(texts, max_codepoints) -> np.ndarray:
    """Python strings (or UTF-8 bytes) -> int32 [len(texts), max_codepoints], the input contract.

    Keeps the first `max_codepoints` codepoints of each text, pads with 0.
    Bytes are decoded like Google's `convert_to_unicode` (invalid bytes
    ignored).
    """
    out = np.zeros((len(texts), int(max_codepoints)), np.int32)
    for i, t in enumerate(texts):
        if isinstance(t, (bytes, bytearray, np.bytes_)):
            t = bytes(t).decode("utf-8", "ignore")
        cps = [ord(c) for c in str(t)[: int(max_codepoints)]]
        out[i, : len(cps)] = cps
    return out


def _flag(v, flag):
    """Bit `flag` (a power of two) of non-negative packed facts (no BITWISE_AND in TFLite)."""
    return tf.math.floormod(v, 2 * flag) >= flag


def _prev(x, fill):
    """x[:, i - 1], `fill` at i = 0."""
    return tf.concat([tf.fill(tf.shape(x[:, :1]), tf.cast(fill, x.dtype)), x[:, :-1]], axis=1)


def _next(x, fill):
    """x[:, i + 1], `fill` at the end."""
    return tf.concat([x[:, 1:], tf.fill(tf.shape(x[:, :1]), tf.cast(fill, x.dtype))], axis=1)


def _compact(keep, values, width, fills):
    """Moves the kept entries of every row to its front, in order (cumsum + scatter).

    Args:
      keep: bool [B, X]; at most `width` True per row.
      values: int32 tensors [B, X].
      width: python int, the output width.
      fills: one python int per value, for the slots after the kept entries.

    Returns:
      (list of int32 [B, width], count int32 [B], live bool [B, width]).
    """
    keep_i = tf.cast(keep, tf.int32)
    pos = tf.cumsum(keep_i, axis=1) - 1
    count = tf.reduce_sum(keep_i, axis=1)
    b = tf.shape(keep)[0]
    size = b * width
    # dropped entries all go to one spare slot past the end, cut off below
    target = tf.reshape(tf.where(keep, tf.range(b)[:, None] * width + pos, size), [-1, 1])
    live = tf.range(width)[None, :] < count[:, None]
    outs = []
    for v, fill in zip(values, fills):
        flat = tf.scatter_nd(target, tf.reshape(v, [-1]), tf.reshape(size + 1, [1]))
        outs.append(tf.where(live, tf.reshape(flat[:size], [b, width]), fill))
    return outs, count, live


def _take(rows, index):
    """rows[b, index[b, j]] for int32 rows [B, W] and index [B, J] (clipped into range)."""
    width = rows.shape[1]
    return tf.gather(rows, tf.clip_by_value(index, 0, width - 1), batch_dims=1)


class CodepointTokenizer(tf.Module):
    """Codepoints -> Google-exact BERT inputs, builtin TFLite ops only (see module docstring).

    Args:
      vocab_path: vocab.txt.
      lower_case: uncased (lower-case, NFD, strip accents).
      seq_len: packed length.
      max_codepoints: N, the input width.
      max_chars_per_word: longer words become [UNK] (Google: 200, counted in
        characters after normalisation).

    Example:
      >>> tok = CodepointTokenizer("vocab.txt", True, seq_len=16, max_codepoints=64)
      >>> tok(tf.constant(codepoints(["Hello, world!"], 64)))["token_ids"][0, :6].numpy()
      array([ 101, 7592, 1010, 2088,  999,  102], dtype=int32)
    """

    def __init__(self, vocab_path, lower_case=True, seq_len=128, max_codepoints=512, max_chars_per_word=200):
        super().__init__()
        self.lower_case = bool(lower_case)
        self.seq_len = int(seq_len)
        self.max_codepoints = int(max_codepoints)
        self.max_chars_per_word = int(max_chars_per_word)
        if self.max_codepoints < 1 or self.max_chars_per_word < 1:
            raise ValueError("max_codepoints and max_chars_per_word must be >= 1")
        self.width = tflite_tables.kept_per_codepoint(self.lower_case) * self.max_codepoints
        stage1, stage2, expansions, _ = ut.build_tables(self.lower_case)
        expansions = expansions.copy()
        expansions[0] = [-2] + [-1] * (expansions.shape[1] - 1)  # row 0: "maps to itself" (-2 = the input)
        trie = tflite_tables.build_trie(vocab_path)
        self.trie = trie
        const = lambda a: tf.constant(np.asarray(a, np.int32))  # noqa: E731
        self._stage1, self._stage2, self._expansions = const(stage1), const(stage2), const(expansions)
        self._alpha1, self._alpha2 = const(trie.alpha_stage1), const(trie.alpha_stage2)
        self._base, self._check, self._token = const(trie.base), const(trie.check), const(trie.token)

    # ------------------------------------------------------------------ per-codepoint tables
    @staticmethod
    def _two_stage(stage1, stage2, cps):
        block = tf.gather(stage1, tf.math.floordiv(cps, ut.BLOCK))
        return tf.gather(stage2, block * ut.BLOCK + tf.math.floormod(cps, ut.BLOCK))

    def _props(self, cps):
        return self._two_stage(self._stage1, self._stage2, cps)

    # ------------------------------------------------------------------ basic tokenizer
    def _final_sigma(self, c, props):
        """CPython's final-sigma rule on cleaned rows (see `basic.BasicTokenizer._final_sigma`)."""
        n = c.shape[1]
        solid = ~_flag(props, ut.IGNORABLE)
        cased = tf.cast(_flag(props, ut.CASED), tf.int32)
        (solid_cased,), n_solid, _ = _compact(solid, [cased], n, [0])
        incl = tf.cumsum(tf.cast(solid, tf.int32), axis=1)
        excl = incl - tf.cast(solid, tf.int32)
        prev_cased = (excl > 0) & tf.equal(_take(solid_cased, excl - 1), 1)
        next_cased = (incl < n_solid[:, None]) & tf.equal(_take(solid_cased, incl), 1)
        return tf.equal(c, ut.CAPITAL_SIGMA) & prev_cased & ~next_cased

    def _lower_nfd_strip(self, c, props):
        """Uncased normalisation of cleaned rows [B, N] -> (codepoints, source index) [B, width]."""
        n, width, k = c.shape[1], self.width, self._expansions.shape[1]
        final = self._final_sigma(c, props)
        exp = tf.gather(self._expansions, tf.math.floordiv(props, 1 << ut.MAP_SHIFT))  # [B, N, k]
        exp = tf.where(tf.equal(exp, -2), c[:, :, None], exp)
        exp = tf.where(final[:, :, None] & tf.equal(exp, ut.SMALL_SIGMA), ut.FINAL_SIGMA, exp)
        flat = tf.reshape(exp, [-1, n * k])
        src = tf.zeros_like(flat) + tf.constant(np.repeat(np.arange(n, dtype=np.int32), k)[None])
        out_props = self._props(tf.maximum(flat, 0))
        ccc = tf.math.floormod(tf.math.floordiv(out_props, 1 << ut.CCC_SHIFT), 256)
        # Mn marks with a combining class go now; they cannot change the relative
        # order of the characters that stay.  Class-0 Mn marks end reordering
        # runs, so they stay until the reordering is done.
        keep = (flat >= 0) & ~(_flag(out_props, ut.MN) & (ccc > 0))
        (cps, src, ccc), _, _ = _compact(keep, [flat, src, ccc], width, [SPACE, -1, 0])
        parity = tf.math.floormod(tf.range(width), 2)[None, :]
        for p in range(REORDER_PASSES):
            right = _next(ccc, 0)
            here = tf.equal(parity, p % 2) & (ccc > right) & (right > 0)  # swap (j, j + 1)
            there = _prev(here, False)  # swap (j - 1, j)
            cps, src, ccc = (tf.where(here, _next(v, 0), tf.where(there, _prev(v, 0), v)) for v in (cps, src, ccc))
        (cps, src), _, _ = _compact(~_flag(self._props(cps), ut.MN), [cps, src], width, [SPACE, -1])
        return cps, src

    def words(self, cps):
        """Basic tokenization of codepoint rows.

        Args:
          cps: int32 [B, N].

        Returns:
          (chars int32 [B, W], start bool [B, W], valid bool [B, W]): the
          characters of the words, in order and without separators; `start`
          marks each word's first character (and every slot past the last
          word); `valid` marks real characters.  W = `self.width`.
        """
        cps = tf.convert_to_tensor(cps, tf.int32)
        n = self.max_codepoints
        if cps.shape.rank != 2 or cps.shape[1] != n:
            # the row widths below are static: a wider row would spill into the next one
            raise ValueError(f"codepoints must be int32 [B, {n}], got shape {cps.shape}")
        scalar = (cps >= 0) & (cps <= ut.MAX_CODEPOINT) & ((cps < 0xD800) | (cps > 0xDFFF))
        cps = tf.where(scalar, cps, 0)  # 0 is deleted by the cleaning below
        (c,), _, _ = _compact(~_flag(self._props(cps), ut.DROP), [cps], n, [SPACE])
        props = self._props(c)
        cjk_clean = tf.cast(_flag(props, ut.CJK), tf.int32)
        if self.lower_case:
            ch, src = self._lower_nfd_strip(c, props)
            is_cjk = tf.equal(_take(cjk_clean, src), 1) & (src >= 0)
        else:
            ch, src = c, tf.zeros_like(c) + tf.range(n)[None, :]
            is_cjk = tf.equal(cjk_clean, 1)
        props = self._props(ch)
        is_space = _flag(props, ut.SPACE)
        is_punct = _flag(props, ut.PUNCT)
        first = tf.equal(tf.range(self.width), 0)[None, :]
        # a CJK ideograph is cut from both neighbours (not from the rest of its own decomposition)
        cjk_cut = (is_cjk | _prev(is_cjk, False)) & tf.not_equal(src, _prev(src, -1))
        new_word = first | _prev(is_space, True) | cjk_cut | is_punct | _prev(is_punct, False)
        (chars, start), _, valid = _compact(~is_space, [ch, tf.cast(new_word, tf.int32)], self.width, [0, 1])
        return chars, tf.equal(start, 1), valid

    # ------------------------------------------------------------------ WordPiece
    def _child(self, state, a):
        """Child of trie slots `state` by alphabet ids `a` (DEAD when none): one double-array step."""
        t = tf.gather(self._base, state) + a
        return tf.where(tf.equal(tf.gather(self._check, t), state), t, tflite_tables.DEAD)

    def ids(self, cps):
        """WordPiece ids of codepoint rows, without special tokens.

        Args:
          cps: int32 [B, N].

        Returns:
          (ids int32 [B, W] front-packed, then [PAD]; count int32 [B]).
        """
        chars, start, valid = self.words(cps)
        width, trie = self.width, self.trie
        j = tf.range(width)[None, :]
        word = tf.cumsum(tf.cast(start, tf.int32), axis=1) - 1
        (starts,), _, _ = _compact(start, [tf.zeros_like(chars) + j], width, [width])
        starts = tf.concat([starts, tf.fill(tf.shape(starts[:, :1]), width)], axis=1)  # [B, W + 1]
        word_start = tf.gather(starts, word, batch_dims=1)
        word_end = tf.gather(starts, word + 1, batch_dims=1)
        a = tf.where(valid, self._two_stage(self._alpha1, self._alpha2, chars), 0)
        a_pad = tf.concat([a, tf.zeros_like(a[:, :1]) + tf.zeros([1, trie.max_len], tf.int32)], axis=1)

        # the longest token from every position (word-initial at word starts, "##" elsewhere)
        root = tf.where(start, tflite_tables.ROOT_WORD, tflite_tables.ROOT_CONT)
        best_id = tf.zeros_like(a) - 1
        best_len = tf.zeros_like(a)
        state = root
        for step in range(trie.max_len):
            # a = 0 (no character, or one in no token) never passes the check
            a_step = tf.where(j + step < word_end, a_pad[:, step:step + width], 0)
            state = self._child(state, a_step)
            token = tf.gather(self._token, state)
            best_len = tf.where(token >= 0, step + 1, best_len)
            best_id = tf.where(token >= 0, token, best_id)

        # pieces: the chain word start -> start + length -> ..., by pointer doubling
        b = tf.shape(chars)[0]
        size = b * width
        flat_pos = tf.range(b)[:, None] * width + j
        matched = best_len > 0
        nxt = tf.where(matched & (j + best_len < word_end), flat_pos + best_len, size)
        jump = tf.concat([tf.reshape(nxt, [-1]), tf.reshape(size, [1])], axis=0)
        marked = tf.concat([tf.reshape(tf.cast(start & valid, tf.int32), [-1]), tf.zeros([1], tf.int32)], axis=0)
        rounds = max(1, (min(self.max_chars_per_word, width) - 1).bit_length())
        for r in range(rounds):  # after round r: chain steps < 2 ** (r + 1)
            target = tf.where(marked > 0, jump, size)
            marked = tf.minimum(marked + tf.scatter_nd(target[:, None], tf.ones_like(target),
                                                      tf.reshape(size + 1, [1])), 1)
            if r + 1 < rounds:
                jump = tf.gather(jump, jump)
        marked = tf.equal(tf.reshape(marked[:size], [b, width]), 1)
        stuck = tf.cast(marked & ~matched, tf.int32)
        stuck_incl = tf.cumsum(stuck, axis=1)
        stuck_in_word = _take(stuck_incl, word_end - 1) - _take(stuck_incl - stuck, word_start) > 0
        unk = stuck_in_word | (word_end - word_start > self.max_chars_per_word)
        emit = valid & ((marked & ~unk) | (start & unk))
        (ids,), count, _ = _compact(emit, [tf.where(unk, trie.unk_id, best_id)], width, [trie.pad_id])
        return ids, count

    # ------------------------------------------------------------------ packing
    def __call__(self, codepoints, codepoints_b=None):
        """codepoints (and codepoints_b): int32 [B, N] -> dict of int32 [B, seq_len].

        Keys "token_ids", "segment_ids", "padding_mask", as Google packs them.
        """
        from bert_keras.text.packing import pack_dense

        trie = self.trie
        ids_a, len_a = self.ids(codepoints)
        take_b = len_b = None
        if codepoints_b is not None:
            ids_b, len_b = self.ids(codepoints_b)
            take_b = lambda offsets, valid: _take(ids_b, offsets)  # noqa: E731
        return pack_dense(lambda offsets, valid: _take(ids_a, offsets), len_a, take_b, len_b,
                          seq_len=self.seq_len, cls_id=trie.cls_id, sep_id=trie.sep_id, pad_id=trie.pad_id)
