"""Dynamic masked-LM masking as TensorFlow ops (BERT's 80/10/10 rule).

`mask_tokens` runs on a whole batch of packed sequences inside a `tf.data` map
(or inside any `tf.function`), so every time an example is produced it gets a
fresh mask: the "dynamic masking" that RoBERTa showed matters, as opposed to
Google's `create_pretraining_data.py`, which fixes the masks once when it
writes its TFRecords (`dupe_factor` copies with different masks).

The rule is Google's (`create_masked_lm_predictions`), per sequence:

- candidates are the real tokens that are not special: `[CLS]`, `[SEP]`,
  `[PAD]` (and anything else in `special_ids`) and padding are never chosen;
- `num_to_predict = min(max_predictions, max(1, round(masked_lm_prob * n)))`
  with `n` the number of candidates (Google counts `[CLS]`/`[SEP]` in `n`
  too; we count only the tokens that can be chosen, so the rate is exactly
  15% of the text), and never more than `n`;
- that many candidates are chosen uniformly at random without replacement;
  each chosen position becomes `[MASK]` with probability 0.8, a random id
  with probability 0.1 and stays unchanged with probability 0.1;
- the random id is uniform over the *whole* vocabulary, special tokens and
  `[unused*]` included, exactly as Google does (`rng.choice(vocab_words)`);
- with whole-word masking a word (a piece and its following `##` pieces) is
  chosen or not as a unit: words are visited in random order and taken while
  they fit in the `num_to_predict` budget, a word that does not fit is
  skipped and the next one tried (Google's `_masking_ngrams` with n=1); all
  pieces of a word get the same 80/10/10 action, a random replacement is
  drawn per piece.

Randomness comes from stateless ops keyed by an explicit `seed`, so the same
seed gives the same masks on every run and machine, and the pipeline decides
how seeds change from batch to batch and epoch to epoch.
"""

import numpy as np
import tensorflow as tf

MASK_PROB = 0.8
RANDOM_PROB = 0.1


def continuation_table(vocab):
    """Which ids are WordPiece continuations (`##...`).

    Args:
      vocab: list of the vocabulary's tokens, index = id.

    Returns:
      A numpy bool array [vocab_size]; True where the token starts with "##".
    """
    return np.array([t.startswith("##") for t in vocab], dtype=bool)


def mask_tokens(token_ids, padding_mask, seed, *, vocab_size, mask_id, special_ids,
                max_predictions, masked_lm_prob=0.15, continuation=None):
    """Chooses and corrupts masked-LM targets in a batch of packed sequences.

    Args:
      token_ids: int32 [B, L], packed `[CLS] A [SEP] B [SEP] [PAD]...` ids.
      padding_mask: int32 or bool [B, L], 1 for real tokens.
      seed: int32/int64 [2], the stateless-random seed for this batch.
      vocab_size: size of the vocabulary (random replacements are drawn from
        `[0, vocab_size)`).
      mask_id: id of `[MASK]`.
      special_ids: ids that are never chosen (at least `[CLS]`, `[SEP]`, `[PAD]`).
      max_predictions: P, the number of target slots per sequence (<= L).
      masked_lm_prob: fraction of candidate tokens to choose (0.15).
      continuation: None for token-level masking, or a bool [vocab_size]
        array/tensor (see `continuation_table`) for whole-word masking.

    Returns:
      A dict of tensors:
        token_ids: int32 [B, L], the input with the chosen positions corrupted;
        masked_positions: int32 [B, P], chosen positions in ascending order,
          0 in unused slots;
        masked_ids: int32 [B, P], the original ids at those positions, 0 in
          unused slots;
        masked_weights: float32 [B, P], 1.0 for real targets, 0.0 for unused
          slots.
    """
    token_ids = tf.convert_to_tensor(token_ids, tf.int32)
    padding_mask = tf.cast(padding_mask, tf.bool)
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    shape = tf.shape(token_ids)
    length = shape[1]
    # One independent stream per random decision, all derived from `seed`.
    seeds = tf.random.experimental.stateless_split(seed, num=4)

    special = tf.constant(sorted(set(int(i) for i in special_ids)), tf.int32)
    is_special = tf.reduce_any(token_ids[:, :, None] == special[None, None, :], axis=-1)
    candidate = padding_mask & ~is_special
    num_candidates = tf.reduce_sum(tf.cast(candidate, tf.int32), axis=1)
    # Python's round and tf.round both round half to even, as Google's code does.
    num_to_predict = tf.cast(tf.round(tf.cast(num_candidates, tf.float32) * masked_lm_prob),
                             tf.int32)
    num_to_predict = tf.clip_by_value(num_to_predict, 1, max_predictions)
    num_to_predict = tf.minimum(num_to_predict, num_candidates)

    if continuation is None:
        selected = _select_tokens(candidate, num_to_predict, seeds[0])
        action_draw = tf.random.stateless_uniform(shape, seeds[1])
    else:
        word_index, word_length = _words(token_ids, candidate, continuation)
        selected_word = _select_words(word_length, num_to_predict, seeds[0])
        selected = candidate & tf.gather(selected_word, word_index, batch_dims=1)
        # One 80/10/10 draw per word, shared by all of its pieces.
        action_draw = tf.gather(tf.random.stateless_uniform(shape, seeds[1]), word_index,
                                batch_dims=1)

    random_ids = tf.random.stateless_uniform(shape, seeds[2], minval=0, maxval=vocab_size,
                                             dtype=tf.int32)
    use_mask = selected & (action_draw < MASK_PROB)
    use_random = selected & (action_draw >= MASK_PROB) & (action_draw < MASK_PROB + RANDOM_PROB)
    corrupted = tf.where(use_mask, tf.cast(mask_id, tf.int32),
                         tf.where(use_random, random_ids, token_ids))

    # The chosen positions in ascending order (as Google sorts them): key
    # L - position for chosen positions and 0 elsewhere, top_k picks the
    # largest keys, i.e. the smallest positions first.
    positions = tf.range(length, dtype=tf.int32)[None, :]
    key = tf.where(selected, length - positions, tf.zeros_like(token_ids))
    top_key, _ = tf.math.top_k(key, k=max_predictions, sorted=True)
    valid = top_key > 0
    masked_positions = tf.where(valid, length - top_key, 0)
    masked_ids = tf.where(valid, tf.gather(token_ids, masked_positions, batch_dims=1), 0)
    return {
        "token_ids": corrupted,
        "masked_positions": masked_positions,
        "masked_ids": masked_ids,
        "masked_weights": tf.cast(valid, tf.float32),
    }


def _select_tokens(candidate, num_to_predict, seed):
    """Token-level choice: `num_to_predict[b]` candidates of row b, uniformly.

    Ranks from a sort of random keys are distinct, so exactly that many are
    chosen even when two random floats tie.
    """
    scores = tf.random.stateless_uniform(tf.shape(candidate), seed)
    scores = tf.where(candidate, scores, -1.0)
    order = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
    rank = tf.argsort(order, axis=1, stable=True)  # the inverse permutation
    return candidate & (rank < num_to_predict[:, None])


def _words(token_ids, candidate, continuation):
    """Groups candidate pieces into words.

    A word starts at a candidate piece that is not a `##` continuation, or at a
    continuation whose left neighbour is not a candidate (a word cut by
    truncation or following `[CLS]`/`[SEP]`: Google's `_tokens_to_grams` also
    starts a new gram there).

    Returns:
      word_index: int32 [B, L], index of the word each position belongs to
        (meaningful only at candidate positions; 0 elsewhere).
      word_length: int32 [B, L], number of pieces of word w at [b, w]
        (0 for w >= number of words in the row).
    """
    continuation = tf.convert_to_tensor(continuation, tf.bool)
    is_continuation = tf.gather(continuation, token_ids)
    previous_candidate = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
    starts = candidate & ~(is_continuation & previous_candidate)
    word_index = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
    word_index = tf.where(candidate, tf.maximum(word_index, 0), 0)
    batch, length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
    # word_length[b, w] = number of candidate positions with word_index == w.
    segment = word_index + tf.range(batch)[:, None] * length
    word_length = tf.math.unsorted_segment_sum(tf.cast(candidate, tf.int32), segment,
                                               num_segments=batch * length)
    return word_index, tf.reshape(word_length, [batch, length])


def _select_words(word_length, num_to_predict, seed):
    """Whole-word choice: random word order, take each word that still fits.

    Returns a bool [B, L] indexed by word.
    """
    scores = tf.random.stateless_uniform(tf.shape(word_length), seed)
    scores = tf.where(word_length > 0, scores, -1.0)
    order = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
    sorted_length = tf.gather(word_length, order, batch_dims=1)

    # Greedy skip-and-continue is sequential in the word order; a scan over the
    # L word slots (vectorised over the batch) keeps it exact.
    def step(count, length_j):
        fits = (length_j > 0) & (count + length_j <= num_to_predict)
        return count + tf.where(fits, length_j, 0)

    counts = tf.scan(step, tf.transpose(sorted_length),
                     initializer=tf.zeros_like(num_to_predict))
    counts = tf.transpose(counts)  # [B, L]: budget used after each sorted word
    previous = tf.pad(counts[:, :-1], [[0, 0], [1, 0]])
    taken_sorted = counts > previous
    inverse = tf.argsort(order, axis=1, stable=True)
    return tf.gather(taken_sorted, inverse, batch_dims=1)
