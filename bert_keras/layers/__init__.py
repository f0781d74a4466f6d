"""Reusable Keras layers that BERT is built from."""

from bert_keras.layers.activations import gelu, gelu_approximate, get_activation
from bert_keras.layers.attention import BertSelfAttention, attention_bias_from_padding_mask
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.embeddings import BertEmbeddings
from bert_keras.layers.heads import BertPooler, MaskedLMHead, gather_positions
from bert_keras.layers.normalization import LayerNorm
from bert_keras.layers.transformer import TransformerBlock

__all__ = [
    "BertEmbeddings", "BertPooler", "Dropout", "LayerNorm", "BertSelfAttention", "MaskedLMHead", "TransformerBlock",
    "attention_bias_from_padding_mask", "gather_positions", "gelu", "gelu_approximate", "get_activation",
]
