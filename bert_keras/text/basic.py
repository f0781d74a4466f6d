"""Google's BERT "basic tokenization", as TensorFlow ops.

`BasicTokenizer` reproduces `tokenization.BasicTokenizer.tokenize` of
google-research/bert (tf-models-official `official/nlp/tools/tokenization.py`)
character for character, in graph:

1. decode UTF-8 (invalid bytes become U+FFFD, which step 2 deletes: the same
   result as Google's `bytes.decode("utf-8", "ignore")`);
2. `_clean_text`: delete U+0000, U+FFFD and control/format characters;
   whitespace separates tokens;
3. `_tokenize_chinese_chars`: every CJK ideograph is a token of its own;
4. uncased only: `token.lower()` (with the context-sensitive final sigma),
   NFD, delete combining marks (category Mn);
5. `_run_split_on_punc`: every punctuation character is a token of its own.

Steps 2-5 read per-codepoint facts from `unicode_tables.build_tables`, computed
from the very `unicodedata` module Google's Python code uses; see that module
for why tensorflow-text's normalisers are not used.
"""

from __future__ import annotations

import tensorflow as tf

from bert_keras.text import unicode_tables as ut


class Words(tuple):
    """Result of `BasicTokenizer.split`: flat words of a batch of texts.

    Fields (all tensors; `W` = number of words in the whole batch):
      codepoints: tf.RaggedTensor int32 [W, (chars)], each word's codepoints
        after normalisation (what Google's WordPiece step receives).
      row: int64 [W], index of the text each word comes from.
      group: int64 [W], index (over the batch) of the whitespace-delimited
        token the word belongs to, i.e. the token before punctuation
        splitting; CJK ideographs are tokens of their own, as in Google's code.
      num_texts: int64 scalar, the batch size B.
    """

    __slots__ = ()

    def __new__(cls, codepoints, row, group, num_texts):
        return super().__new__(cls, (codepoints, row, group, num_texts))

    codepoints = property(lambda self: self[0])
    row = property(lambda self: self[1])
    group = property(lambda self: self[2])
    num_texts = property(lambda self: self[3])


def _compress(mask, *tensors):
    """`tf.boolean_mask` of several tensors by one mask (the indices computed once)."""
    idx = tf.where(mask)[:, 0]
    return tuple(tf.gather(t, idx) for t in tensors)


def _row_ids(row_splits, n):
    """`RaggedTensor.value_rowids()`, cheaper: count the row starts at each position."""
    inner = row_splits[1:-1]  # may equal n for empty trailing rows: one spare slot
    starts = tf.scatter_nd(inner[:, None], tf.ones_like(inner), tf.stack([n + 1]))
    return tf.cumsum(starts[:n])


def _shift_right(x, fill):
    """x[i-1] for every i, `fill` at i = 0 (x: 1-D tensor)."""
    return tf.concat([tf.fill([1], tf.cast(fill, x.dtype)), x[:-1]], axis=0)


class BasicTokenizer(tf.Module):
    """Google's BERT basic tokenizer (cleaning, CJK, casing, punctuation), in graph.

    Args:
      lower_case: lower-case, NFD-decompose and strip accents (uncased models).

    Example:
      >>> basic = BasicTokenizer(lower_case=True)
      >>> basic.words(tf.constant(["Héllo, Wörld!"])).to_list()
      [[b'hello', b',', b'world', b'!']]
    """

    def __init__(self, lower_case: bool = True, name: str | None = None):
        super().__init__(name=name)
        self.lower_case = bool(lower_case)
        stage1, stage2, expansions, stripped = ut.build_tables(self.lower_case)
        # Constants (not variables): captured into every traced graph and
        # stored in SavedModels, so exported functions are self-contained.
        self._stage1 = tf.constant(stage1, tf.int32)
        self._stage2 = tf.constant(stage2, tf.int32)
        self._expansions = tf.constant(expansions, tf.int32)
        self._stripped = tf.constant(stripped, tf.int32)

    def _props(self, cps):
        """Packed per-codepoint facts for int32 codepoints of any shape."""
        block = tf.gather(self._stage1, tf.bitwise.right_shift(cps, ut.BLOCK_BITS))
        return tf.gather(self._stage2, block * ut.BLOCK + tf.bitwise.bitwise_and(cps, ut.BLOCK - 1))

    def _final_sigma(self, cps, props, rows, num_texts):
        """Which capital sigmas CPython's `str.lower()` turns into final sigma.

        CPython: U+03A3 becomes U+03C2 when the nearest non-case-ignorable
        character before it (inside the token) is cased, and the nearest one
        after it is absent or not cased.  Token boundaries need no special
        care: whitespace and CJK characters (what separates tokens) are
        neither cased nor case-ignorable, so a scan crossing a boundary stops
        on them with the same answer as a scan ending at the boundary.  Only
        text (row) boundaries must be enforced.
        """
        n = tf.shape(cps, out_type=tf.int64)[0]
        # where each character's text starts and ends in the flat array
        row_lengths = tf.math.bincount(rows, minlength=num_texts, maxlength=num_texts, dtype=tf.int64)
        row_limits = tf.cumsum(row_lengths)
        row_starts = tf.gather(row_limits - row_lengths, rows)
        row_limits = tf.gather(row_limits, rows)
        solid = tf.equal(tf.bitwise.bitwise_and(props, ut.IGNORABLE), 0)
        solid_pos = tf.where(solid)[:, 0]  # positions of non-ignorable chars
        num_solid = tf.shape(solid_pos, out_type=tf.int64)[0]
        cased = tf.not_equal(tf.bitwise.bitwise_and(props, ut.CASED), 0)
        count_incl = tf.cumsum(tf.cast(solid, tf.int64))
        count_excl = count_incl - tf.cast(solid, tf.int64)
        safe = lambda i: tf.clip_by_value(i, 0, tf.maximum(num_solid - 1, 0))  # noqa: E731
        # previous non-ignorable char (index into cps), if any in this text
        prev_idx = tf.gather(solid_pos, safe(count_excl - 1))
        has_prev = (count_excl > 0) & (prev_idx >= row_starts)
        prev_cased = has_prev & tf.gather(cased, tf.clip_by_value(prev_idx, 0, tf.maximum(n - 1, 0)))
        # next non-ignorable char after position i (i itself is non-ignorable for sigma)
        next_idx = tf.gather(solid_pos, safe(count_incl))
        has_next = (count_incl < num_solid) & (next_idx < row_limits)
        next_cased = has_next & tf.gather(cased, tf.clip_by_value(next_idx, 0, tf.maximum(n - 1, 0)))
        return tf.equal(cps, ut.CAPITAL_SIGMA) & prev_cased & ~next_cased

    def split(self, texts) -> Words:
        """Basic-tokenizes a batch of texts into flat words (see `Words`).

        Args:
          texts: tf.string [B] (UTF-8; invalid bytes are ignored like Google's
            `decode("utf-8", "ignore")`).
        """
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank != 1:
            raise ValueError(f"texts must be a string vector [B], got shape {texts.shape}")
        decoded = tf.strings.unicode_decode(
            texts, "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        num_texts = tf.shape(texts, out_type=tf.int64)[0]
        cps = decoded.flat_values
        rows = _row_ids(decoded.row_splits, tf.shape(cps, out_type=tf.int64)[0])
        props = self._props(cps)

        # _clean_text: deleted characters vanish without separating anything.
        keep = tf.equal(tf.bitwise.bitwise_and(props, ut.DROP), 0)
        cps, rows, props = _compress(keep, cps, rows, props)
        n = tf.shape(cps, out_type=tf.int64)[0]
        src = tf.range(n, dtype=tf.int64)

        if self.lower_case:
            # Capital sigma is rare: skip the context scan when a batch has none.
            final = tf.cond(
                tf.reduce_any(tf.equal(cps, ut.CAPITAL_SIGMA)),
                lambda: self._final_sigma(cps, props, rows, num_texts),
                lambda: tf.zeros_like(cps, dtype=tf.bool),
            )
            # lower() + NFD + strip Mn.  Mn marks are deleted wherever NFD's
            # canonical reordering puts them, so per-character mappings with
            # the marks already removed are exact -- unless a batch holds one
            # of the rare non-Mn characters with a combining class, whose order
            # can change: then decompose fully, reorder, and strip afterwards.
            needs_reorder = tf.reduce_any(tf.not_equal(tf.bitwise.bitwise_and(props, ut.REORDER), 0))
            out, out_src, out_props, out_rows = tf.cond(
                needs_reorder,
                lambda: self._lower_nfd_strip(cps, props, rows, final, reorder=True),
                lambda: self._lower_nfd_strip(cps, props, rows, final, reorder=False),
            )
        else:
            out, out_src, out_props, out_rows = cps, src, props, rows

        return self._segment(out, out_src, out_props, out_rows, props, num_texts)

    def _lower_nfd_strip(self, cps, props, rows, final, reorder: bool):
        """`strip_accents(token.lower())` as a stream of (codepoint, source index, props, row)."""
        n = tf.shape(cps, out_type=tf.int64)[0]
        table = self._expansions if reorder else self._stripped
        width = ut.MAX_EXPANSION if reorder else ut.MAX_STRIPPED
        map_idx = tf.bitwise.right_shift(props, ut.MAP_SHIFT)
        expanded = tf.gather(table, map_idx)  # [n, width], -1 padded
        identity = tf.concat([cps[:, None], tf.fill([n, width - 1], -1)], axis=1)
        expanded = tf.where((map_idx > 0)[:, None], expanded, identity)
        expanded = tf.where(final[:, None] & tf.equal(expanded, ut.SMALL_SIGMA), ut.FINAL_SIGMA, expanded)
        present = tf.where(expanded >= 0)  # [m, 2]: (char, slot), in text order
        out = tf.gather_nd(expanded, present)
        out_src = present[:, 0]
        out_props = self._props(out)
        out_rows = tf.gather(rows, out_src)
        if reorder:
            out, out_src, out_props, out_rows = self._canonical_order(out, out_src, out_props, out_rows)
            keep = tf.equal(tf.bitwise.bitwise_and(out_props, ut.MN), 0)
            out, out_src, out_props, out_rows = _compress(keep, out, out_src, out_props, out_rows)
        return out, out_src, out_props, out_rows

    def _canonical_order(self, out, out_src, out_props, out_rows):
        """NFD's canonical reordering across the characters of a token.

        Per-character decompositions are already in canonical order; marks of
        consecutive characters may not be (e.g. U+1D16D then U+1D165).  A run
        of non-zero combining classes starts after every class-0 character and
        at every text start (spaces and CJK are class 0, so runs never cross
        tokens).  A stable sort by (run, class) is the reordering; it is only
        run when some adjacent pair is out of order, which real text almost
        never has.
        """
        ccc = tf.cast(
            tf.bitwise.bitwise_and(tf.bitwise.right_shift(out_props, ut.CCC_SHIFT), 255), tf.int64
        )
        starts = tf.equal(ccc, 0) | tf.not_equal(out_rows, _shift_right(out_rows, -1))
        run = tf.cumsum(tf.cast(starts, tf.int64))
        key = run * 256 + ccc

        def reorder():
            # Only characters of non-zero class move, and only inside their run,
            # whose slots stay the same: sort those few by (run, class), stably,
            # and put them back into the slots they came from.
            slots = tf.where(ccc > 0)[:, 0]
            order = tf.argsort(tf.gather(key, slots), stable=True)
            perm = tf.tensor_scatter_nd_update(
                tf.range(tf.shape(key, out_type=tf.int64)[0]), slots[:, None], tf.gather(slots, order)
            )
            return tuple(tf.gather(t, perm) for t in (out, out_src, out_props, out_rows))

        needed = tf.reduce_any(key[1:] < key[:-1])
        return tf.cond(needed, reorder, lambda: (out, out_src, out_props, out_rows))

    def _segment(self, out, out_src, out_props, out_rows, src_props, num_texts) -> Words:
        """Cuts the normalised character stream into words."""
        is_space = tf.not_equal(tf.bitwise.bitwise_and(out_props, ut.SPACE), 0)
        is_punct = tf.not_equal(tf.bitwise.bitwise_and(out_props, ut.PUNCT), 0)
        is_cjk = tf.not_equal(tf.bitwise.bitwise_and(tf.gather(src_props, out_src), ut.CJK), 0)
        new_text = tf.not_equal(out_rows, _shift_right(out_rows, -1))
        after_space = _shift_right(is_space, False)
        # A CJK ideograph is cut from both neighbours (but not from the other
        # codepoints of its own decomposition).
        cjk_cut = (is_cjk | _shift_right(is_cjk, False)) & tf.not_equal(out_src, _shift_right(out_src, -1))
        new_group = new_text | after_space | cjk_cut
        new_word = new_group | is_punct | _shift_right(is_punct, False)

        chars, rows, new_word, new_group = _compress(~is_space, out, out_rows, new_word, new_group)
        word_starts = tf.where(new_word)[:, 0]
        group_id = tf.cumsum(tf.cast(new_group, tf.int64)) - 1
        codepoints = tf.RaggedTensor.from_row_starts(chars, word_starts, validate=False)
        word_row = tf.gather(rows, word_starts)
        word_group = tf.gather(group_id, word_starts)
        return Words(codepoints, word_row, word_group, num_texts)

    def words(self, texts) -> tf.RaggedTensor:
        """Google's `BasicTokenizer.tokenize` for a batch: tf.string [B, (words)]."""
        w = self.split(texts)
        strings = tf.strings.unicode_encode(w.codepoints, "UTF-8")
        return tf.RaggedTensor.from_value_rowids(strings, w.row, nrows=w.num_texts, validate=False)
