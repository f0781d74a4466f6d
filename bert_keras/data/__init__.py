"""Pre-training input: Google-format text -> MLM + NSP batches with dynamic masking.

    ds = bert_keras.data.pretraining_dataset("corpus/*.txt", "vocab.txt", seq_len=128)

The same call reads Google-format TFRecord shards (as `create_pretraining_data.py` writes
them: `input_ids`, `input_mask`, `segment_ids`, `masked_lm_*`, `next_sentence_labels`)
exactly as written, static masks included, in the same batch structure:

    ds = bert_keras.data.pretraining_dataset("shards/*.tfrecord", "vocab.txt", seq_len=128,
                                             max_predictions=20)

Modules: `corpus` (read and tokenize files), `pairs` (Google's NSP pair
construction and packing), `masking` (in-graph 80/10/10 masking),
`pretraining` (the `tf.data` pipeline that joins them), `tfrecords` (Google's
TFRecord shards: read, and written by `bert-keras pretraining-data`).
"""

from bert_keras.data.corpus import PretrainingStats
from bert_keras.data.masking import mask_tokens
from bert_keras.data.pretraining import pretraining_dataset

__all__ = ["PretrainingStats", "mask_tokens", "pretraining_dataset"]
