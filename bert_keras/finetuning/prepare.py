"""Per-task set-up for the fine-tuning loop: features, head size, loss, metrics, dev scoring."""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from bert_keras import metrics as bk_metrics
from bert_keras.errors import BertKerasError
from bert_keras.finetuning.batches import predict


@dataclasses.dataclass
class PreparedTask:
    """What the generic loop needs from a task."""

    inputs: dict
    labels: object
    num_examples: int
    head_kwargs: dict
    loss: object
    metrics: list
    evaluate: Callable | None   # model -> dict of percentages
    key: str                    # metric that picks the best epoch
    metadata: dict
    loss_weights: object = None


def classification_metrics(labels, logits, regression=False):
    """Percentages from logits: `bert_keras.metrics` classification or regression metrics."""
    if regression:
        return bk_metrics.regression_metrics(labels, np.asarray(logits).reshape(-1))
    return bk_metrics.classification_metrics(labels, np.argmax(logits, axis=-1))


def _prepare_classification(train, dev, tokenizer, max_seq_len, regression, label_map, batch_size):
    import keras

    from bert_keras.tasks import LabelMap, featurize_classification

    if label_map is None and not regression:
        label_map = LabelMap.from_examples(train)
    tr = featurize_classification(train, tokenizer, max_seq_len, label_map, regression) if train else None
    dv = featurize_classification(dev, tokenizer, max_seq_len, label_map, regression) if dev else None

    def evaluate(model, progress=None):
        return classification_metrics(dv.labels, predict(model, dv.inputs, 2 * batch_size, progress), regression)

    if regression:
        loss, metrics, key = keras.losses.MeanSquaredError(), [], "pearson"
    else:
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics, key = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")], "accuracy"
    return PreparedTask(inputs=tr and tr.inputs, labels=tr and tr.labels, num_examples=len(train or ()),
                        head_kwargs={"num_classes": 1 if regression else len(label_map)}, loss=loss,
                        metrics=metrics, evaluate=evaluate if dv else None, key=key,
                        metadata={"labels": None if regression else label_map.to_json()})


def _prepare_ner(train, dev, tokenizer, max_seq_len, label_map, batch_size):
    import keras

    from bert_keras.tasks import IGNORE_LABEL, LabelMap, featurize_token_classification, words_from_predictions

    if label_map is None:
        label_map = LabelMap(sorted({t for s in train for t in s.tags}))
    tr = featurize_token_classification(train, tokenizer, label_map, max_seq_len) if train else None
    dv = featurize_token_classification(dev, tokenizer, label_map, max_seq_len) if dev else None

    def evaluate(model, progress=None):
        logits = predict(model, dv.inputs, 2 * batch_size, progress)
        words = words_from_predictions(np.argmax(logits, -1), dv, label_map)
        return bk_metrics.ner_metrics([s.tags for s in dev], words)

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL)
    return PreparedTask(inputs=tr and tr.inputs, labels=tr and tr.labels, num_examples=len(train or ()),
                        head_kwargs={"num_classes": len(label_map)}, loss=loss, metrics=[],
                        evaluate=evaluate if dv else None, key="f1", metadata={"labels": label_map.to_json()})


def _prepare_squad(train, dev, tokenizer, max_seq_len, version_2, batch_size, dev_dataset=None,
                   doc_stride=128, max_query_length=64):
    import keras

    from bert_keras.tasks import apply_null_threshold, featurize_squad, postprocess_squad

    tr = featurize_squad(train, tokenizer, max_seq_len, doc_stride, max_query_length, is_training=True) \
        if train else None
    dv = featurize_squad(dev, tokenizer, max_seq_len, doc_stride, max_query_length) if dev else None

    def evaluate(model, progress=None):
        out = predict(model, dv.inputs, 2 * batch_size, progress)
        preds = postprocess_squad(dev, dv, out["start_logits"], out["end_logits"],
                                  lower_case=tokenizer.lower_case, version_2=version_2, tokenizer=tokenizer)
        version = "2.0" if version_2 else "1.1"
        if version_2:
            # The paper's tau: the null-score threshold that maximises F1 on the evaluation set,
            # found by the official sweep over the best non-null answers.
            sweep = bk_metrics.squad_evaluate(dev_dataset, preds.best_non_null, version,
                                              na_probs=preds.null_score_diff)
            tau = sweep["best_f1_thresh"]
            return {**bk_metrics.squad_evaluate(dev_dataset, apply_null_threshold(preds, tau), version),
                    "null_threshold": tau}
        return bk_metrics.squad_evaluate(dev_dataset, preds.answers, version)

    sce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    labels = tr and {"start_logits": tr.start_positions, "end_logits": tr.end_positions}
    return PreparedTask(inputs=tr and tr.inputs, labels=labels, num_examples=len(tr) if tr else 0,
                        head_kwargs={}, loss={"start_logits": sce, "end_logits": sce}, metrics=[],
                        evaluate=evaluate if dv else None, key="f1",
                        metadata={"version": "2.0" if version_2 else "1.1"},
                        loss_weights={"start_logits": 0.5, "end_logits": 0.5})


def _prepare_multiple_choice(train, dev, tokenizer, max_seq_len, batch_size):
    import keras

    from bert_keras.tasks import featurize_multiple_choice

    tr = featurize_multiple_choice(train, tokenizer, max_seq_len) if train else None
    dv = featurize_multiple_choice(dev, tokenizer, max_seq_len) if dev else None

    def evaluate(model, progress=None):
        return bk_metrics.classification_metrics(dv.labels, np.argmax(predict(model, dv.inputs, batch_size, progress), -1))

    return PreparedTask(inputs=tr and tr.inputs, labels=tr and tr.labels, num_examples=len(train or ()),
                        head_kwargs={}, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                        evaluate=evaluate if dv else None, key="accuracy", metadata={})


def prepare_task(task, train_examples, dev_examples, tokenizer, max_seq_len=128, label_map=None, batch_size=32,
                 dev_dataset=None, doc_stride=128, max_query_length=64) -> PreparedTask:
    """Featurize a task's train (may be None) and dev examples and pick its loss and metrics."""
    if task in ("classification", "regression"):
        prepared = _prepare_classification(train_examples, dev_examples, tokenizer, max_seq_len,
                                           task == "regression", label_map, batch_size)
    elif task == "ner":
        prepared = _prepare_ner(train_examples, dev_examples, tokenizer, max_seq_len, label_map, batch_size)
    elif task in ("squad", "squad2"):
        if dev_examples and dev_dataset is None:
            raise BertKerasError("SQuAD evaluation needs dev_dataset (the dev JSON)")
        prepared = _prepare_squad(train_examples, dev_examples, tokenizer, max_seq_len, task == "squad2",
                                  batch_size, dev_dataset, doc_stride, max_query_length)
    else:
        prepared = _prepare_multiple_choice(train_examples, dev_examples, tokenizer, max_seq_len, batch_size)

    return prepared
