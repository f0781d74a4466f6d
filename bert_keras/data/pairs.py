"""Next-sentence-prediction pairs from documents, as Google builds them.

This follows `create_instances_from_document` of Google's
`create_pretraining_data.py` (google-research/bert; the same code lives in
tensorflow/models `official/nlp/data/create_pretraining_data.py`), per
document:

- the target length is `seq_len - 3` (room for `[CLS]`, `[SEP]`, `[SEP]`), or
  with probability `short_seq_prob` (0.1) a random length in
  `[2, seq_len - 3]`, so the model also sees short inputs like fine-tuning's;
- whole sentences are gathered into a chunk until it reaches the target;
- the chunk is split into A and B at a random sentence boundary;
- with probability 0.5 (always, if the chunk has one sentence) B is replaced
  by a run of sentences of another random document (NotNext), filled up to the
  remaining target length, and the chunk's sentences B did not use are put
  back to start the next chunk;
- the pair is truncated longest-first, each removed token from the front or
  the back with probability 1/2.

Two deliberate differences, both to lose less text and keep NSP balanced:

- a chunk is closed only once it has at least two sentences (or the document
  ends).  Google closes a chunk as soon as it reaches the target, so a
  sentence at least as long as the (possibly short) target makes a
  one-sentence chunk that is forced to NotNext.  Measured on the 106-article
  Wikipedia sample (3 passes): Google's code gives 52.2% NotNext at seq_len
  128 and 58.3% at 512; this one 50.4% and 50.9%, with the same mean length
  at 128 (121.5 vs 121.8 tokens);
- sentences longer than `seq_len - 3` are split into pieces beforehand
  (`Corpus.split_long_sentences`), so a paragraph on one line or a 1 MB line
  still yields all of its text instead of one truncated example.

Why Python rather than TF ops: a pair is five integers into the corpus's flat
id array (A start/length, B start/length, label), because A and B are runs of
consecutive sentences.  Choosing them is a short sequential loop per document
(with "put back", the next chunk depends on the previous random draw), which
is clumsy and no faster as graph code, and packing them into `[CLS] A [SEP] B [SEP]` rows is one
vectorised numpy gather (`pack`).  Tokenization and masking, the heavy parts,
stay TensorFlow ops.
"""

from __future__ import annotations

import bisect
import dataclasses

import numpy as np

from bert_keras.text.packing import kept_lengths, pack_flat


@dataclasses.dataclass
class PairPlan:
    """Pairs as slices of `Corpus.ids` (all arrays int64 [N] except the label).

    Attributes:
      a_start, a_length: segment A is ids[a_start : a_start + a_length].
      b_start, b_length: segment B likewise.
      not_next: int32 [N], 1 when B comes from another document.
      truncated: tokens removed by truncation, in total.
    """

    a_start: np.ndarray
    a_length: np.ndarray
    b_start: np.ndarray
    b_length: np.ndarray
    not_next: np.ndarray
    truncated: int = 0

    def __len__(self):
        return len(self.not_next)

    def take(self, index):
        """The pairs at `index` (an int array or slice), in that order."""
        return PairPlan(a_start=self.a_start[index], a_length=self.a_length[index],
                        b_start=self.b_start[index], b_length=self.b_length[index],
                        not_next=self.not_next[index], truncated=self.truncated)


def truncation(a_length, b_length, max_tokens):
    """How many tokens Google's longest-first truncation removes from A and B.

    Google removes one token at a time from the longer segment (from B when
    they are equal) until the pair fits; the rule is `text.packing.kept_lengths`.

    Returns:
      (removed from A, removed from B).
    """
    kept_a, kept_b = kept_lengths(a_length, b_length, max_tokens)
    return a_length - kept_a, b_length - kept_b


def plan_pairs(corpus, max_tokens, short_seq_prob, rng, document_order=None):
    """Builds one epoch's pairs.

    Args:
      corpus: a `Corpus` whose sentences are at most `max_tokens` long.
      max_tokens: room for A and B together (`seq_len - 3`), >= 2.
      short_seq_prob: probability of a random shorter target length.
      rng: a `random.Random`.
      document_order: the order to visit documents in (default 0..D-1).

    Returns:
      A `PairPlan` in document order (the caller shuffles it).
    """
    offsets = corpus.sentence_offsets.tolist()
    doc_offsets = corpus.document_offsets.tolist()
    num_docs = len(doc_offsets) - 1
    a_start, a_length, b_start, b_length, not_next = [], [], [], [], []
    truncated = 0
    random_ = rng.random
    randint = rng.randint
    getrandbits = rng.getrandbits
    if document_order is None:
        document_order = range(num_docs)

    for doc in document_order:
        first, end = doc_offsets[doc], doc_offsets[doc + 1]  # sentence range
        target = max_tokens
        if random_() < short_seq_prob:
            target = randint(2, max_tokens)
        chunk = first  # first sentence of the current chunk
        i = first
        while i < end:
            size = i - chunk + 1  # sentences in the chunk
            length = offsets[i + 1] - offsets[chunk]
            if i == end - 1 or (length >= target and size >= 2):
                a_end = randint(1, size - 1) if size >= 2 else 1
                a0 = offsets[chunk]
                a1 = offsets[chunk + a_end]
                if size == 1 or random_() < 0.5:
                    is_random = 1
                    other = doc
                    for _ in range(10):  # as Google: avoid the same document
                        other = randint(0, num_docs - 1)
                        if other != doc:
                            break
                    o_first, o_end = doc_offsets[other], doc_offsets[other + 1]
                    s = randint(o_first, o_end - 1)
                    b0 = offsets[s]
                    # Sentences from s on until B reaches target - |A| (at least one).
                    stop = bisect.bisect_left(offsets, b0 + target - (a1 - a0), s + 1, o_end)
                    b1 = offsets[stop]
                    i -= size - a_end  # put back the chunk's unused sentences
                else:
                    is_random = 0
                    b0, b1 = a1, offsets[i + 1]
                la, lb = a1 - a0, b1 - b0
                cut_a, cut_b = truncation(la, lb, max_tokens)
                if cut_a or cut_b:
                    truncated += cut_a + cut_b
                    # Each removed token comes off the front with probability
                    # 1/2: the front count is a Binomial(cut, 1/2) = popcount.
                    front_a = getrandbits(cut_a).bit_count() if cut_a else 0
                    front_b = getrandbits(cut_b).bit_count() if cut_b else 0
                    a0, la = a0 + front_a, la - cut_a
                    b0, lb = b0 + front_b, lb - cut_b
                a_start.append(a0)
                a_length.append(la)
                b_start.append(b0)
                b_length.append(lb)
                not_next.append(is_random)
                chunk = i + 1
            i += 1

    return PairPlan(a_start=np.array(a_start, np.int64), a_length=np.array(a_length, np.int64),
                    b_start=np.array(b_start, np.int64), b_length=np.array(b_length, np.int64),
                    not_next=np.array(not_next, np.int32), truncated=truncated)


def pack(ids, plan, seq_len, cls_id, sep_id, pad_id):
    """`[CLS] A [SEP] B [SEP]` rows, padded (numpy, vectorised: `text.packing.pack_flat`).

    Args:
      ids: int32 [T], the corpus ids.
      plan: a `PairPlan` of N pairs with a_length + b_length <= seq_len - 3.
      seq_len: L.

    Returns:
      token_ids int32 [N, L], segment_ids int32 [N, L], padding_mask int32 [N, L].
    """
    packed = pack_flat(ids, plan.a_start, plan.a_length, plan.b_start, plan.b_length, seq_len=seq_len,
                       cls_id=cls_id, sep_id=sep_id, pad_id=pad_id)
    return packed["token_ids"], packed["segment_ids"], packed["padding_mask"]
