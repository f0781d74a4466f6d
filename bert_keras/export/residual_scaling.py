"""Per-channel rescaling of the residual stream, for full-integer TFLite.

A few channels of BERT's residual stream carry values tens of times larger
than the rest (Bondarenko et al. 2021; Kovaleva et al. 2021, "BERT Busters").
Full-integer TFLite gives each activation tensor one int8 scale, so in every
tensor of the stream (LayerNorm inputs and outputs, the attention and
feed-forward outputs that join it) those few channels set the step and the
other channels are left with a handful of levels.

`residual_scaling` stores the stream divided by a per-channel factor ``s``
(``s = 1`` except on the outlier channels) and keeps the function exactly the
same:

* every dense that reads the stream has ``s`` folded into its kernel rows
  (``x W = (x / s)(diag(s) W)``), every dense that writes it divides its
  kernel columns and bias by ``s``; residual adds need nothing;
* each LayerNorm reads ``z' = z / s_in`` and writes ``LN(z) / s_out`` without
  ever forming ``z``: ``mean(z)`` is ``sum(z') + sum_o (s_o - 1) z'_o`` over
  the outlier channels ``o`` only, the centred ``d' = z' - mean / s_in`` and
  ``var(z) = (sum(d'^2) + sum_o (s_o^2 - 1) d'^2_o) / H``, and the output is
  ``gamma s_in / s_out * d' * rsqrt(var + eps) + beta / s_out``
  (`bert_keras.layers.ops.layer_norm.scaled_layer_norm`, which `LayerNorm`
  runs when built with ``stream_scales``).

`rescaled_copy` builds the rescaled model as a copy (the encoder's ``stream_scales`` option,
`bert_keras.models.copies.with_options`) with the factors folded into the copy's weights; the
model it is given is never changed.

Every intermediate then stays within the range of the ordinary channels.  In
float32 the rescaled model equals the original within rounding
(`tests/test_export.py`).  The factors come from the stream's per-channel
maxima on the calibration sentences (`stream_maxima`).  The last block's
output is left unscaled (``s = 1``): the heads read it directly.
"""

from __future__ import annotations

import numpy as np

from bert_keras import _private_api
from bert_keras.errors import BertKerasError

# The default ``outlier_factor``: channels whose maximum exceeds it times the median channel
# maximum of their segment are scaled down to that bound.  On the fine-tuned MiniLM
# sentiment model (Rotten Tomatoes dev, float32 80.84%), full int8 gave 80.05% at 2, 79.74%
# at 4 and 78.10% without rescaling (docs/results.md).
DEFAULT_OUTLIER_FACTOR = 2.0


def _encoder(model):
    from bert_keras.models.encoder import BertEncoder

    if isinstance(model, BertEncoder):
        return model
    found = [layer for layer in _private_api.flatten_layers(model) if isinstance(layer, BertEncoder)]
    if len(found) != 1:
        raise BertKerasError(f"residual scaling needs exactly one BertEncoder in the model, found {len(found)}")
    return found[0]


def stream_maxima(model, batches) -> list:
    """Per-channel max |value| of each residual-stream segment over batches of encoder inputs.

    Segment 0 is the embeddings' LayerNorm output and the first block's
    attention output and residual sum; segment 2i+1 is block i's first
    LayerNorm output, its feed-forward output and residual sum; segment 2i+2
    is block i's output.  Returns a list of 2N+1 float64 arrays [H].
    """
    from bert_keras.layers.attention import attention_bias_from_padding_mask

    enc = _encoder(model)
    maxima = None
    for feats in batches:
        feats = {k: np.asarray(v).reshape(-1, np.shape(v)[-1]) for k, v in feats.items()}
        x = enc.embeddings(feats["token_ids"], feats["segment_ids"], training=False)
        bias = attention_bias_from_padding_mask(feats["padding_mask"])
        seen = [[x]]
        for block in enc.transformer_layers:
            attended = block.attention(x, bias, training=False)
            z1 = x + attended
            a1 = block.attention_layer_norm(z1)
            hidden = block.feed_forward(a1)
            z2 = a1 + hidden
            x = block.output_layer_norm(z2)
            seen[-1] += [attended, z1]
            seen += [[a1, hidden, z2], [x]]
        now = [np.max([np.abs(np.asarray(t, np.float64)).reshape(-1, t.shape[-1]).max(0) for t in ts], axis=0)
               for ts in seen]
        maxima = now if maxima is None else [np.maximum(m, n) for m, n in zip(maxima, now)]
    if maxima is None:
        raise BertKerasError("residual scaling needs at least one calibration batch")
    return maxima


def scales_from_maxima(maxima, outlier_factor=DEFAULT_OUTLIER_FACTOR) -> list:
    """s per segment: max / (outlier_factor * median max) on the outlier channels, 1 elsewhere.

    Args:
        maxima: `stream_maxima`'s per-segment channel maxima.
        outlier_factor: the bound, in median channel maxima (``float("inf")`` gives s = 1
            everywhere, i.e. no rescaling).

    Returns:
        One float32 array [H] per segment; the last segment's is 1.
    """
    factor = float(outlier_factor)
    scales = []
    for m in maxima[:-1]:
        bound = factor * float(np.median(m))
        scales.append(np.maximum(1.0, np.asarray(m, np.float64) / max(bound, 1e-12)).astype(np.float32))
    scales.append(np.ones_like(maxima[-1], dtype=np.float32))
    return scales


def rescaled_copy(model, scales):
    """A copy of ``model`` whose residual stream is stored divided by ``scales`` (`scales_from_maxima`).

    The copy's LayerNorms take the scales (the encoder's ``stream_scales`` option) and its
    dense layers have them folded into their weights; in float32 it computes the same function.
    ``model`` (a `BertEncoder` or a task model around one) is not changed.

    Raises:
        BertKerasError: the number of scales does not fit the encoder (2N + 1 for N blocks).
    """
    from bert_keras.models.copies import with_options

    blocks = _encoder(model).transformer_layers
    if len(scales) != 2 * len(blocks) + 1:
        raise BertKerasError(f"residual scaling: {len(scales)} scales for {len(blocks)} blocks "
                             f"(needs {2 * len(blocks) + 1})")
    copy = with_options(model, stream_scales=[np.asarray(s, np.float32).tolist() for s in scales])
    for i, block in enumerate(_encoder(copy).transformer_layers):
        s_x, s_a = scales[2 * i], scales[2 * i + 1]
        for layer, s in ((block.attention.qkv, s_x), (block.intermediate, s_a)):  # read the stream
            layer.kernel.assign(layer.kernel.numpy() * s[:, None])
        for layer, s in ((block.attention.output_dense, s_x), (block.output_dense, s_a)):  # write it
            layer.kernel.assign(layer.kernel.numpy() / s[None, :])
            layer.bias.assign(layer.bias.numpy() / s)
    return copy
