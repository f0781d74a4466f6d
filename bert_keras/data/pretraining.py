"""`pretraining_dataset`: MLM + NSP examples from raw text, masks drawn afresh.

(Google-format TFRecord shards are read as written instead: `tfrecords.py`.)

    import bert_keras as bk
    ds = bk.data.pretraining_dataset("corpus/*.txt", "vocab.txt", seq_len=128,
                                     max_predictions=20, batch_size=32, seed=0)
    features, labels = next(iter(ds))
    features["token_ids"].shape        # (32, 128) int32, with [MASK]s
    labels["next_sentence_label"]      # (32,) int32, 0 = IsNext, 1 = NotNext

The stages, and where each runs:

1. Read + tokenize (`corpus.py`): `TextLineDataset` and the project's
   in-graph WordPiece tokenizer (identical to Google's `FullTokenizer`), in
   parallel `tf.data` maps.  Done once when the dataset is built (the ids of a
   whole shard stay in host memory, 4 bytes a token), or block by block every
   epoch with `files_per_block` for corpora too big to hold.
2. Pairs (`pairs.py`): Google's document-aware NSP pair construction, rebuilt
   with new random choices every epoch, in Python/numpy on the input host (a
   pair is five integers; see that module for why this is not graph code),
   shuffled exactly (a permutation of the whole block, no shuffle buffer) and
   packed into fixed-length batches with numpy.
3. Mask (`masking.py`): dynamic 80/10/10 masking as TF ops on each batch in a
   parallel `tf.data` map, so masks differ every time an example is produced.

Reproducibility: with `seed` set, the file order, pairs, batch order and masks
are a function of (seed, input pipeline, pass number), so two datasets built
with the same arguments yield the same batches, while successive passes
(epochs) over one dataset differ.  Each new iterator over the dataset (e.g.
each Keras epoch over a finite dataset) is the next pass.  With `seed=None` a
fresh random seed is drawn once per dataset.

Resuming: the stream is deterministic given the seed, so a run restarted
after k steps continues exactly with `pretraining_dataset(..., seed=s).skip(k)`
(skipped batches are produced and dropped: ~10^4 sequences/s on 2 cores).
The dataset comes from `Dataset.from_generator`, so it cannot be saved in a
`tf.train.Checkpoint` or sent to the tf.data service; it runs on the host that
iterates it (any CPU/GPU machine, Cloud TPU VMs; not the legacy remote TPU
Node setup).

Multi-worker input (`input_context` from
`strategy.distribute_datasets_from_function`): files are sorted and pipeline i
of n reads files i, i+n, i+2n, ...  With fewer files than pipelines, every
pipeline reads all files, builds the same pairs (this needs `seed`) and keeps
every n-th; either way the pipelines see disjoint examples.  `batch_size` is
the batch this dataset yields, i.e. the per-replica batch
(`input_context.get_per_replica_batch_size(global_batch)`).
"""

from __future__ import annotations

import logging
import random

import numpy as np
import tensorflow as tf

from bert_keras.data import corpus as corpus_lib
from bert_keras.data import masking, pairs
from bert_keras.data.corpus import PretrainingStats
from bert_keras.errors import DataError

logger = logging.getLogger("bert_keras.data")


def pretraining_dataset(files, vocab_path, seq_len=128, max_predictions=20, batch_size=32,
                        lower_case=True, whole_word_masking=False, seed=None, *,
                        masked_lm_prob=0.15, short_seq_prob=0.1, repeat=True, shuffle=True,
                        drop_remainder=True, input_context=None, files_per_block=None,
                        stats=None):
    """A `tf.data.Dataset` of BERT pre-training batches (MLM + NSP).

    Args:
      files: text files in Google's format (one sentence a line, a blank line
        between documents), or TFRecord shards written by Google's
        `create_pretraining_data.py` (or `bert-keras pretraining-data`): a
        path, a glob (`"data/*.txt"`, `"gs://b/x-*"`), comma-separated
        paths/globs, or a list of them.  Shards (named `.tfrecord`,
        `.tfrecords`, `.tfrec`, or starting with a valid record) are read as
        written, see `tfrecords.py`: their examples must be `seq_len` long
        with `max_predictions` slots; their masks and pairs are the written
        ones, so `lower_case`, `whole_word_masking`, `masked_lm_prob`,
        `short_seq_prob` and `files_per_block` do not apply, and shuffling is
        of the file order and through a 10,000-example buffer.  Text and
        shards cannot be mixed in one call.
      vocab_path: the WordPiece `vocab.txt` (must hold `[CLS] [SEP] [PAD] [MASK]`).
      seq_len: L, the packed length (128 in phase 1, 512 in phase 2).
      max_predictions: P, masked-LM slots per sequence (20 at 128, 80 at 512).
      batch_size: sequences per batch (per replica under a strategy).
      lower_case: uncased tokenization (must match the vocabulary).
      whole_word_masking: choose whole words (all their pieces together).
      seed: int for a reproducible stream; None for a fresh random one.
      masked_lm_prob: fraction of non-special tokens chosen (0.15).
      short_seq_prob: probability of a shorter random target length (0.1).
      repeat: True for an endless stream of passes (each with new pairs and
        masks; Google's `dupe_factor` is not needed), an int for that many
        passes, False for one pass.
      shuffle: shuffle file, document and example order every pass; False
        keeps the corpus order (pairs and masks are still random).
      drop_remainder: drop a last partial batch (static batch size, as TPUs
        need); only matters when `repeat` is finite.
      input_context: a `tf.distribute.InputContext` for multi-worker sharding.
      files_per_block: None to read all files once and keep their ids in
        memory; an int to stream: each pass reads the (shuffled) files this
        many at a time, and NotNext segments come from the same block (as
        with Google's script run on one shard of files).
      stats: a `PretrainingStats` to fill; by default a new one, available as
        the returned dataset's `stats` attribute.

    Returns:
      A `tf.data.Dataset` of `(features, labels)`:
        features: token_ids int32 [B, L] (masked), segment_ids int32 [B, L],
          padding_mask int32 [B, L], masked_positions int32 [B, P];
        labels: masked_ids int32 [B, P] (the original ids), masked_weights
          float32 [B, P] (1.0 target, 0.0 unused slot),
          next_sentence_label int32 [B] (0 = B follows A, 1 = B is random).

    Raises:
      DataError: a missing file, a pattern matching nothing, a file that is
        not UTF-8 text, a missing vocabulary, or files holding no text; a
        shard whose examples have another length, a damaged shard, or text
        and shards mixed.
      ValueError: inconsistent sizes.
    """
    passes = _check_arguments(seq_len, max_predictions, batch_size, masked_lm_prob, seed, repeat)
    stats = stats if stats is not None else PretrainingStats()
    all_files = corpus_lib.resolve_files(files)
    from bert_keras.data import tfrecords
    from bert_keras.data.utf8 import check_utf8_text

    if tfrecords.split_kinds(all_files):  # Google's shards: read as written, masks and all
        shard_files, shard, num_shards, shard_examples = _shard(all_files, input_context, seed)
        dataset = tfrecords.records_dataset(
            shard_files, vocab_path, seq_len, max_predictions, batch_size, seed, passes=passes,
            shuffle=shuffle, drop_remainder=drop_remainder, shard=shard, num_shards=num_shards,
            shard_examples=shard_examples, stats=stats, all_files=all_files)
        dataset.stats = stats
        return dataset
    for path in all_files:  # a binary, UTF-16 or Latin-1 file is refused, not read as bytes of text
        check_utf8_text(path)
    vocab, index = corpus_lib.read_vocab(vocab_path)
    tokenizer = corpus_lib.make_tokenizer(vocab_path, lower_case)

    all_files, shard, num_shards, shard_examples = _shard(all_files, input_context, seed)

    stream = _ExampleStream(
        files=all_files, tokenizer=tokenizer, index=index, seq_len=seq_len,
        batch_size=batch_size, short_seq_prob=short_seq_prob, passes=passes, shuffle=shuffle,
        drop_remainder=drop_remainder, files_per_block=files_per_block, seed=seed,
        shard=shard, num_shards=num_shards, shard_examples=shard_examples, stats=stats)

    length = seq_len
    signature = (tf.TensorSpec([None, length], tf.int32),) * 3 + (
        tf.TensorSpec([None], tf.int32), tf.TensorSpec([2], tf.int64))
    dataset = tf.data.Dataset.from_generator(stream, output_signature=signature)

    continuation = masking.continuation_table(vocab) if whole_word_masking else None
    static_batch = batch_size if (drop_remainder or passes is None) else None

    def finish(token_ids, segment_ids, padding_mask, not_next, batch_seed):
        masked = masking.mask_tokens(
            token_ids, padding_mask, batch_seed, vocab_size=len(vocab), mask_id=index["[MASK]"],
            special_ids=[index["[CLS]"], index["[SEP]"], index["[PAD]"], index["[MASK]"]],
            max_predictions=max_predictions, masked_lm_prob=masked_lm_prob,
            continuation=continuation)
        features = {
            "token_ids": masked["token_ids"],
            "segment_ids": segment_ids,
            "padding_mask": padding_mask,
            "masked_positions": masked["masked_positions"],
        }
        labels = {
            "masked_ids": masked["masked_ids"],
            "masked_weights": masked["masked_weights"],
            "next_sentence_label": not_next,
        }
        for value in list(features.values()) + list(labels.values()):
            value.set_shape([static_batch] + value.shape[1:].as_list())
        return features, labels

    dataset = dataset.map(finish, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    dataset.stats = stats
    return dataset


def _check_arguments(seq_len, max_predictions, batch_size, masked_lm_prob, seed, repeat):
    """Raises ValueError for inconsistent sizes; returns the number of passes (None: endless)."""
    if seq_len < 5:
        raise ValueError(f"seq_len must be at least 5 ([CLS] A [SEP] B [SEP]), got {seq_len}")
    if not 1 <= max_predictions <= seq_len:
        raise ValueError(f"max_predictions must be in [1, seq_len={seq_len}], got {max_predictions}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if not 0.0 < masked_lm_prob <= 1.0:
        raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or seed < 0):
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    passes = None if repeat is True else (1 if repeat is False else int(repeat))
    if passes is not None and passes < 1:
        raise ValueError(f"repeat must be True, False or a positive int, got {repeat}")

    return passes


def _shard(all_files, input_context, seed):
    """(this pipeline's files, shard index, number of shards, whether examples are sharded).

    Files are split between the input pipelines when there are enough of them;
    otherwise every pipeline reads every file and keeps every num_shards-th
    example, which needs the same seed everywhere.
    """
    num_shards = input_context.num_input_pipelines if input_context is not None else 1
    shard = input_context.input_pipeline_id if input_context is not None else 0
    shard_files = num_shards > 1 and len(all_files) >= num_shards
    shard_examples = num_shards > 1 and not shard_files
    if shard_files:
        all_files = all_files[shard::num_shards]
    if shard_examples and seed is None:
        raise DataError(f"{len(all_files)} pre-training file(s) for {num_shards} input pipelines: "
                        f"pass seed= so all pipelines shard the same examples, or split the "
                        f"corpus into at least {num_shards} files")
    return all_files, shard, num_shards, shard_examples


class _ExampleStream:
    """The Python stage: a generator function for `Dataset.from_generator`.

    Each call is one iteration over the dataset (`passes` passes over the
    corpus) and yields packed batches plus a per-batch masking seed.
    """

    def __init__(self, *, files, tokenizer, index, seq_len, batch_size, short_seq_prob, passes,
                 shuffle, drop_remainder, files_per_block, seed, shard, num_shards,
                 shard_examples, stats):
        self.files = files
        self.tokenizer = tokenizer
        self.cls_id, self.sep_id = index["[CLS]"], index["[SEP]"]
        self.pad_id = index["[PAD]"]
        self.seq_len = seq_len
        self.max_tokens = seq_len - 3
        self.batch_size = batch_size
        self.short_seq_prob = short_seq_prob
        self.passes = passes
        self.shuffle = shuffle
        self.drop_remainder = drop_remainder
        self.shard, self.num_shards, self.shard_examples = shard, num_shards, shard_examples
        self.stats = stats
        self.entropy = int(seed) if seed is not None else np.random.SeedSequence().entropy
        self.iterations = 0
        if files_per_block is None or files_per_block >= len(files):
            self.block_size = len(files)
            self.corpus = None
            self.corpus = self._load(files, count=True)  # read once, kept
            if self.corpus.num_documents == 0:
                raise DataError(f"no text in pre-training files: {_names(files)}")
        else:
            if files_per_block < 1:
                raise ValueError(f"files_per_block must be positive, got {files_per_block}")
            self.block_size = files_per_block
            self.corpus = None

    def _load(self, files, count):
        local = PretrainingStats()
        corpus = corpus_lib.load_corpus(files, self.tokenizer, local)
        corpus, local.long_sentences = corpus.split_long_sentences(self.max_tokens)
        local.single_sentence_documents = int((np.diff(corpus.document_offsets) == 1).sum())
        if count:
            for name in ("files", "lines", "blank_lines", "invalid_utf8_lines",
                         "invalid_utf8_bytes", "lines_without_tokens", "documents",
                         "sentences", "tokens", "long_sentences", "single_sentence_documents"):
                setattr(self.stats, name, getattr(self.stats, name) + getattr(local, name))
            _report(local, files)
        return corpus

    def _rngs(self, *key):
        """(random.Random, numpy Generator) for one pass/block, from the seed."""
        state = np.random.SeedSequence(self.entropy, spawn_key=key).generate_state(4)
        return random.Random(int.from_bytes(state.tobytes(), "little")), np.random.default_rng(state)

    def __call__(self):
        iteration = self.iterations
        self.iterations += 1
        # Pair choices must agree across pipelines when they split one example
        # stream; masks and batch seeds are always per pipeline.
        plan_shard = 0 if self.shard_examples else self.shard
        pending = None  # packed rows carried into the next block
        pass_ = 0
        while self.passes is None or pass_ < self.passes:
            examples_before = self.stats.examples
            _, order_rng = self._rngs(iteration, pass_, plan_shard, 0)
            files = list(self.files)
            if self.shuffle:
                order_rng.shuffle(files)
            blocks = [files[i:i + self.block_size] for i in range(0, len(files), self.block_size)]
            for b, block in enumerate(blocks):
                corpus = self.corpus if self.corpus is not None else self._load(
                    block, count=(iteration == 0 and pass_ == 0))
                if corpus.num_documents == 0:
                    continue
                plan_rng, np_plan_rng = self._rngs(iteration, pass_, plan_shard, 1, b)
                _, mask_rng = self._rngs(iteration, pass_, self.shard, 2, b)
                order = np.arange(corpus.num_documents)
                if self.shuffle:
                    np_plan_rng.shuffle(order)
                plan = pairs.plan_pairs(corpus, self.max_tokens, self.short_seq_prob, plan_rng,
                                        order.tolist())
                keep = np.arange(len(plan))
                if self.shuffle:
                    keep = np_plan_rng.permutation(len(plan))
                if self.shard_examples:
                    keep = keep[self.shard::self.num_shards]
                plan = plan.take(keep)
                self.stats.truncated_tokens += plan.truncated
                start = 0
                if pending is not None:  # complete the previous block's last batch
                    need = self.batch_size - len(pending[0])
                    head = self._pack(corpus, plan.take(slice(0, need)))
                    pending = tuple(np.concatenate([p, h]) for p, h in zip(pending, head))
                    start = need
                    if len(pending[0]) == self.batch_size:
                        yield pending + (self._seed(mask_rng),)
                        pending = None
                while start < len(plan):
                    rows = self._pack(corpus, plan.take(slice(start, start + self.batch_size)))
                    start += self.batch_size
                    if len(rows[0]) < self.batch_size:
                        pending = rows
                        break
                    yield rows + (self._seed(mask_rng),)
            if self.stats.examples == examples_before and pending is None:
                raise DataError(f"no examples from pre-training files (no text, or fewer "
                                f"examples than input pipelines): {_names(self.files)}")
            pass_ += 1
            self.stats.epochs += 1
            logger.debug("pre-training data pass done: %s", self.stats.summary())
        if pending is not None and not self.drop_remainder:
            _, mask_rng = self._rngs(iteration, pass_, self.shard, 3)
            yield pending + (self._seed(mask_rng),)

    def _pack(self, corpus, plan):
        token_ids, segment_ids, padding_mask = pairs.pack(
            corpus.ids, plan, self.seq_len, self.cls_id, self.sep_id, self.pad_id)
        self.stats.examples += len(plan)
        self.stats.not_next_examples += int(plan.not_next.sum())
        return token_ids, segment_ids, padding_mask, plan.not_next

    @staticmethod
    def _seed(rng):
        return rng.integers(0, 2**62, size=2, dtype=np.int64)


def _names(files):
    return ", ".join(files[:3]) + (f" (+{len(files) - 3} more)" if len(files) > 3 else "")


def _report(stats, files):
    """Logs what was read, and warns about everything that was dropped."""
    logger.info("pre-training text: %d file(s), %d documents, %d sentences, %d tokens",
                stats.files, stats.documents, stats.sentences, stats.tokens)
    name = files[0] if len(files) == 1 else f"{files[0]} (+{len(files) - 1} more)"
    if stats.invalid_utf8_lines:
        logger.warning("%s: %d line(s) hold invalid UTF-8; %d byte(s) dropped", name,
                       stats.invalid_utf8_lines, stats.invalid_utf8_bytes)
    if stats.lines_without_tokens:
        logger.warning("%s: %d non-blank line(s) give no tokens and are skipped", name,
                       stats.lines_without_tokens)
    if stats.long_sentences:
        logger.warning("%s: %d sentence(s) longer than seq_len - 3 tokens split into pieces",
                       name, stats.long_sentences)
    if stats.single_sentence_documents:
        logger.warning("%s: %d of %d document(s) have one sentence: too short to pair with "
                       "their own next sentence, they only give NotNext examples", name,
                       stats.single_sentence_documents, stats.documents)
