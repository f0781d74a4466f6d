"""Evaluation metrics for fine-tuning, equal to the reference implementations.

Pure Python/numpy, no scipy or sklearn at runtime; the tests compare every
function with the reference it mirrors:

| function | reference |
| --- | --- |
| `accuracy`, `f1_score`, `matthews_corrcoef` | sklearn.metrics (same names) |
| `pearson`, `spearman` | scipy.stats.pearsonr / spearmanr |
| `get_entities`, `entity_scores` | seqeval.metrics (default mode, conlleval-style chunking) |
| `squad_evaluate` | the official SQuAD v1.1 / v2.0 evaluation scripts (as in tf-models-official) |

Modules: `labels` (classification, regression), `entities` (NER), `squad`.
The scalar functions return fractions in [0, 1] like sklearn; the `*_metrics`
functions and `squad_evaluate` return dicts of percentages, the form written
to `eval_results.json`.

    from bert_keras import metrics
    metrics.classification_metrics([1, 0, 1], [1, 1, 1])
    # {'accuracy': 66.66..., 'f1': 80.0, 'macro_f1': 40.0, 'mcc': 0.0}
    metrics.entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])["f1"]  # 1.0
"""

from bert_keras.metrics.entities import entity_scores, get_entities, ner_metrics
from bert_keras.metrics.labels import (accuracy, classification_metrics, f1_score, matthews_corrcoef, pearson,
                                       rankdata, regression_metrics, spearman)
from bert_keras.metrics.squad import normalize_answer, squad_evaluate

__all__ = ["accuracy", "classification_metrics", "entity_scores", "f1_score", "get_entities",
           "matthews_corrcoef", "ner_metrics", "normalize_answer", "pearson", "rankdata",
           "regression_metrics", "spearman", "squad_evaluate"]
