"""Pre-training input: Google-format text -> MLM + NSP batches with dynamic masking.

    ds = bert_keras.data.pretraining_dataset("corpus/*.txt", "vocab.txt", seq_len=128)

Modules: `corpus` (read and tokenize files), `pairs` (Google's NSP pair
construction and packing), `masking` (in-graph 80/10/10 masking),
`pretraining` (the `tf.data` pipeline that joins them).
"""

from bert_keras.data.corpus import PretrainingStats
from bert_keras.data.masking import mask_tokens
from bert_keras.data.pretraining import pretraining_dataset

__all__ = ["PretrainingStats", "mask_tokens", "pretraining_dataset"]
