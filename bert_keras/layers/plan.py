"""The kernel plan: which implementation of each operation a layer runs, decided in one place.

The model's math is written once, in the layers' ``call`` methods; for a few of its steps a
faster implementation exists (`bert_keras.layers.ops`).  Which one runs depends on the Keras
backend, the machine (a GPU, TensorFlow's oneDNN kernels with AVX-512), the compute dtype,
training or inference, whether the call is being traced into a whole-step XLA compile, and the
layers' ``kernels`` option.  `kernel_plan` turns those inputs into a `KernelPlan`, a frozen
record naming the implementation of each operation; `current_plan` fills in the inputs that
come from the process and the trace.  The layers read the plan and nothing else: no layer
looks at the hardware, the graph context or the backend to choose a kernel.

The hardware facts are probed once per process (`hardware`, cached).  docs/design.md, "Kernel
plan", has the table of implementations and the measurements behind each.
"""

import dataclasses
import functools

import keras

# The values of the layers' ``kernels`` option.
#   "auto"   the fast kernels where they were measured to help: TensorFlow on a CPU;
#   "fused"  the fast kernels on any TensorFlow device;
#   "plain"  keras.ops only (each layer's reference math; the path on JAX and torch).
# Whatever the option, none of them runs inside a function being compiled whole by XLA
# (`Model.compile(jit_compile=True)`): XLA then sees the plain graph and fuses it itself.
# Nested XLA functions there made each step recompile, 10x slower, memory growing per call.
KERNELS = ("auto", "fused", "plain")

_SIXTEEN_BIT = ("bfloat16", "float16")


def check_kernels(kernels):
    """Returns ``kernels`` if it is one of `KERNELS`.

    Raises:
        ValueError: one line naming the choices, for any other value.
    """
    if kernels not in KERNELS:
        raise ValueError(f"kernels={kernels!r}; choose one of {', '.join(KERNELS)}")
    return kernels


@dataclasses.dataclass(frozen=True)
class Hardware:
    """What the process runs on, as far as the kernel choice is concerned.

    Attributes:
        gpu: TensorFlow sees a GPU.
        onednn_bf16: TensorFlow runs its oneDNN kernels (x86 builds, unless
            TF_ENABLE_ONEDNN_OPTS=0) and the CPU has oneDNN's avx512_core set, so bf16 matmuls,
            softmax, LayerNorm and GELU run in oneDNN's float32-accumulating kernels.  On an
            AVX2-only CPU TensorFlow's own bf16 kernels run instead: emulated matmuls at a third
            of the float32 rate, a softmax 4% off float32 on small probabilities.
    """

    gpu: bool = False
    onednn_bf16: bool = False


def avx512_core() -> bool:
    """Whether the CPU has oneDNN's avx512_core set (AVX-512 F, BW, DQ, VL); False where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= set(flags)


@functools.cache
def hardware() -> Hardware:
    """The `Hardware` of this process, probed on the first call and cached.

    On backends other than TensorFlow no TensorFlow kernel is chosen, so nothing is probed.
    """
    if keras.backend.backend() != "tensorflow":
        return Hardware()
    import tensorflow as tf

    from bert_keras import _private_api

    return Hardware(gpu=bool(tf.config.list_logical_devices("GPU")),
                    onednn_bf16=_private_api.onednn_enabled() and avx512_core())


@dataclasses.dataclass(frozen=True)
class KernelPlan:
    """The implementation of each operation for one call (keys of the tables in `layers.ops`).

    Attributes:
        attention: with additive masking, "xla" (the Q/K/V split and the masked softmax with its
            dropout as XLA kernels), "sdpa" (`keras.ops.dot_product_attention`, where no dropout
            applies) or "plain" (keras.ops); see `attention_for`.
        softmax: the attention softmax outside the "xla" attention: "float32" (keras.ops on
            float32 scores), "onednn" (TensorFlow's softmax on bf16 scores, oneDNN's kernel
            accumulating in float32) or "tensorflow" (TensorFlow's softmax on float32 scores).
        layer_norm: "keras" (the Keras layer), "xla" (float32 statistics, one XLA kernel each
            way) or "onednn" (oneDNN's layer normalisation, bf16 inference).
        add_norm: the dropout-residual-LayerNorm ends of a block, "xla" or "plain".
        embeddings: the embedding sum with its LayerNorm and dropout, "xla" or "plain".
        gelu: "plain" (keras.ops in float32, float32 math with a written-out gradient in 16 bits)
            or "xla" (16 bits: forward and backward one XLA kernel each).
        ffn: "onednn" (W1 x + b and the GELU as one oneDNN matmul) or "plain".
        dense: the other projections, "onednn" (a oneDNN 1x1 convolution over the rows) or "keras".
        dropout: "bits16" (16 random bits per element, one XLA pass each way) or "keras".
        mlm_logits: the tied MLM projection, "float32" (table x rows^T in float32, for CPUs whose
            bf16 matmuls are emulated) or "matmul".
        loss: the MLM cross-entropy, "xla" (TensorFlow row max, XLA passes) or "keras".
        packing: the encoder may run this call on the real tokens only (`layers.unpadded`).
    """

    attention: str = "plain"
    softmax: str = "float32"
    layer_norm: str = "keras"
    add_norm: str = "plain"
    embeddings: str = "plain"
    gelu: str = "plain"
    ffn: str = "plain"
    dense: str = "keras"
    dropout: str = "keras"
    mlm_logits: str = "matmul"
    loss: str = "keras"
    packing: bool = False

    def attention_for(self, masking, dropout_active) -> str:
        """The attention implementation for a layer's ``masking`` and whether its dropout applies."""
        if masking != "additive":
            return "plain"
        if self.attention == "sdpa" and dropout_active:
            return "plain"
        return self.attention

    def softmax_for(self, masking) -> str:
        """The softmax of the non-"xla" attention: "select" for bounded intermediates, else `softmax`."""
        return "select" if masking == "select" else self.softmax


def kernel_plan(kernels="auto", dtype="float32", training=False, *, packed=False, backend="tensorflow",
                hardware=Hardware(), xla_compile=False) -> KernelPlan:  # noqa: B008 - a frozen default
    """The `KernelPlan` for one call, from its inputs alone (no probing: `current_plan` probes).

    Args:
        kernels: the layers' option, one of `KERNELS`.
        dtype: the compute dtype.
        training: a training call.
        packed: the call runs on the real tokens only; their count changes with every batch, so
            no XLA kernel (compiled per shape) is chosen.
        backend: the Keras backend.
        hardware: the machine (`Hardware`).
        xla_compile: the call is being traced into an XLA compile of the whole step.

    Returns:
        The frozen plan.
    """
    check_kernels(kernels)
    dtype = keras.backend.standardize_dtype(dtype)
    tensorflow = backend == "tensorflow"
    # The TensorFlow kernels: never nested in an XLA compile; "auto" measured on CPUs only.
    allowed = tensorflow and kernels != "plain" and not xla_compile and (kernels == "fused" or not hardware.gpu)
    sixteen = allowed and dtype in _SIXTEEN_BIT
    onednn = sixteen and dtype == "bfloat16" and hardware.onednn_bf16
    xla_training = sixteen and training and not packed
    inference_onednn = onednn and not training
    if not tensorflow:
        attention = "sdpa"
    elif xla_training:
        attention = "xla"
    else:
        attention = "plain"
    if sixteen:
        softmax = "onednn" if onednn else "tensorflow"
    else:
        softmax = "float32"
    return KernelPlan(
        attention=attention,
        softmax=softmax,
        layer_norm="xla" if sixteen and training else ("onednn" if inference_onednn else "keras"),
        add_norm="xla" if xla_training else "plain",
        embeddings="xla" if xla_training else "plain",
        gelu="xla" if sixteen and not packed else "plain",
        ffn="onednn" if inference_onednn else "plain",
        dense="onednn" if inference_onednn else "keras",
        # 16-bit random masks in every dtype: the mask is cheaper to draw whatever the values'
        # dtype (one Philox word per two elements, no conversion to float), so float32
        # TensorFlow training takes it too; the keep probability is 1 - rate to within 2^-17.
        dropout="bits16" if allowed and training else "keras",
        mlm_logits="float32" if sixteen and dtype == "bfloat16" and not hardware.onednn_bf16 else "matmul",
        # the float32 logits' cross-entropy, whatever the model's dtype
        loss="xla" if allowed else "keras",
        packing=tensorflow and not training and not xla_compile,
    )


def current_plan(kernels="auto", dtype="float32", training=False, *, packed=False) -> KernelPlan:
    """`kernel_plan` with the backend, the `hardware` and the trace of the call being run now.

    Args:
        kernels: the layers' option, one of `KERNELS`.
        dtype: the compute dtype.
        training: a training call (None counts as inference).
        packed: the call runs on the real tokens only.

    Returns:
        The frozen plan.
    """
    backend = keras.backend.backend()
    xla_compile = False
    if backend == "tensorflow":
        from bert_keras import _private_api

        xla_compile = _private_api.in_xla_compile()
    return kernel_plan(kernels, dtype, bool(training), packed=packed, backend=backend, hardware=hardware(),
                       xla_compile=xla_compile)
