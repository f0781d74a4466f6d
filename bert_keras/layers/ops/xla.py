"""The XLA-compiled functions of `bert_keras.layers.ops`, one ``tf.function`` per name."""

_CACHE = {}


def compiled(name, fn):
    """``tf.function(fn, jit_compile=True)``, created on the first call for ``name`` and kept.

    Args:
        name: the kernel's name (one compiled function per name and process).
        fn: the function of tensors to compile.

    Returns:
        The compiled function.
    """
    if name not in _CACHE:
        import tensorflow as tf

        _CACHE[name] = tf.function(fn, jit_compile=True, reduce_retracing=True)
    return _CACHE[name]
