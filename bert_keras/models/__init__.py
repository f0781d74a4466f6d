"""BERT models: the encoder, the pre-training model and the fine-tuning models."""

from bert_keras.models.copies import with_options
from bert_keras.models.encoder import BertEncoder
from bert_keras.models.inference import inference_function
from bert_keras.models.pretrainer import BertPretrainer
from bert_keras.models.tasks import BertClassifier, BertMultipleChoice, BertSpanLabeler, BertTokenClassifier

__all__ = ["BertClassifier", "BertEncoder", "BertMultipleChoice", "BertPretrainer", "BertSpanLabeler",
           "BertTokenClassifier", "inference_function", "with_options"]
