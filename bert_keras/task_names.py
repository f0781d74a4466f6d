"""The task table: every task name this project knows, and what each one maps to.

Two kinds of names:

- model tasks (`MODEL_TASKS`): the heads a checkpoint can carry, the `task=`
  of `load_checkpoint`; `None` is the bare encoder.
- fine-tuning tasks (`FINETUNE_TASKS`): `bert-keras finetune --task`, each
  trained with one model task's head (regression is a one-output classifier).

The CLI, fine-tuning, the checkpoint readers and writers and the exporters all
read these tables; a new task is added here first.
"""

from __future__ import annotations

MODEL_TASKS = ("pretraining", "classification", "token_classification", "span", "multiple_choice")

# model task -> the Hugging Face `architectures` entry of its config.json
HF_ARCHITECTURES = {
    None: "BertModel",
    "pretraining": "BertForPreTraining",
    "classification": "BertForSequenceClassification",
    "token_classification": "BertForTokenClassification",
    "span": "BertForQuestionAnswering",
    "multiple_choice": "BertForMultipleChoice",
}

# fine-tuning task -> the model task whose head it trains
FINETUNE_TASKS = {
    "classification": "classification",
    "regression": "classification",
    "ner": "token_classification",
    "squad": "span",
    "squad2": "span",
    "multiple-choice": "multiple_choice",
}

# model tasks with a head that answers requests (exported as SavedModel / TFLite)
SERVABLE = tuple(task for task in MODEL_TASKS if task != "pretraining")

# model tasks whose head is sized by num_classes
CLASS_HEADS = ("classification", "token_classification")


def model_classes() -> dict:
    """model task (None: encoder) -> its Keras model class (imported on first use)."""
    from bert_keras import models

    return {
        None: models.BertEncoder,
        "pretraining": models.BertPretrainer,
        "classification": models.BertClassifier,
        "token_classification": models.BertTokenClassifier,
        "span": models.BertSpanLabeler,
        "multiple_choice": models.BertMultipleChoice,
    }
