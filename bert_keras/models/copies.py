"""`with_options`: a copy of a model with other execution options and the same weights."""

# Options of the encoder (`BertEncoder`) and of the per-sequence task models.
ENCODER_OPTIONS = ("kernels", "masking", "real_tokens_only", "stream_scales")


def with_options(model, **options):
    """A new model of ``model``'s class and weights whose options are ``options``.

    The exporters trace such a copy (int8 TFLite with "select" masking, say) instead of
    changing the caller's model, so a model in use elsewhere, in another thread too, never
    sees a switch flip.  ``options``: ``kernels``, ``masking``, ``real_tokens_only`` and
    ``stream_scales`` of the encoder; ``real_tokens_only`` also sets the task model's own (`BertClassifier`,
    `BertMultipleChoice`).  Attributes the checkpoint loader records (``vocab_path``,
    ``lower_case``, ...) are carried over.

    Example:
        >>> select = with_options(classifier, masking="select", real_tokens_only=False)
    """
    from bert_keras.models.encoder import BertEncoder

    unknown = set(options) - set(ENCODER_OPTIONS)
    if unknown:
        raise ValueError(f"unknown model options {sorted(unknown)}; choose from {', '.join(ENCODER_OPTIONS)}")
    config = model.get_config()
    if isinstance(model, BertEncoder):
        config.update(options)
    else:
        encoder = dict(config["encoder"])
        encoder["config"] = {**encoder["config"], **options}
        config["encoder"] = encoder
        if "real_tokens_only" in options and "real_tokens_only" in config:
            config["real_tokens_only"] = options["real_tokens_only"]
    copy = type(model).from_config(config)
    copy.set_weights(model.get_weights())
    for name in ("vocab_path", "lower_case"):
        if getattr(model, name, None) is not None:
            setattr(copy, name, getattr(model, name))
    return copy


__all__ = ["with_options", "ENCODER_OPTIONS"]
