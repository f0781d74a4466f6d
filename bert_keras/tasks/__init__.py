"""Fine-tuning data: readers for the official formats and featurizers.

Readers return plain Python examples (dataclasses) in `ExampleList`s (a list
with a `skipped` count for records dropped where the official scripts drop
them) and raise `bert_keras.errors.DataError` naming the file, line and field
of malformed input.  Featurizers take a tokenizer with
`tokenize(list_of_str) -> RaggedTensor` (e.g. `bk.BertTokenizer`) and return
numpy int32 arrays; `to_dataset` batches them, padding each batch only to its
longest member.

| task family | reader | featurizer | model |
| --- | --- | --- | --- |
| GLUE single/pair classification, STS-B regression | `read_glue` | `featurize_classification` | BertClassifier |
| generic CSV/TSV/JSONL (`text`, `text_b`, `label` or GLUE's names) | `read_examples` | `featurize_classification` | BertClassifier |
| NER (CoNLL/BIO) | `read_conll` | `featurize_token_classification`, `words_from_predictions` | BertTokenClassifier |
| SQuAD v1.1/v2.0 | `read_squad` | `featurize_squad`, `postprocess_squad` | BertSpanLabeler |
| SWAG multiple choice | `read_swag` | `featurize_multiple_choice` | BertMultipleChoice |

Example (the project's Rotten Tomatoes polarity split):

    import bert_keras as bk
    from bert_keras import samples, tasks, metrics
    (tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split()
    tok = bk.BertTokenizer.from_vocab(samples.fetch("minilm") / "vocab.txt")
    labels = tasks.LabelMap(["0", "1"])
    train = tasks.featurize_classification(
        [tasks.InputExample(t, label=str(y)) for t, y in zip(tr_x, tr_y)], tok, 128, labels)
    dev = tasks.featurize_classification(
        [tasks.InputExample(t, label=str(y)) for t, y in zip(dev_x, dev_y)], tok, 128, labels)
    train_ds = tasks.to_dataset(train.inputs, train.labels, 32, shuffle=True, seed=0)
    # model.fit(train_ds, ...); logits = model.predict(tasks.to_dataset(dev.inputs, batch_size=64))
    # metrics.classification_metrics(dev.labels, logits.argmax(-1))["accuracy"]
"""

from bert_keras.tasks.classification import (GLUE_TASKS, Features, InputExample,
                                             featurize_classification, glue_label_map,
                                             glue_task, read_glue)
from bert_keras.tasks.files import GLUE_COLUMNS, describe_columns, normalise_label, read_examples
from bert_keras.tasks.common import (IGNORE_LABEL, ExampleList, LabelMap, to_dataset,
                                     truncate_pair)
from bert_keras.tasks.multiple_choice import (MultipleChoiceExample, featurize_multiple_choice,
                                              read_swag)
from bert_keras.tasks.ner import (TaggedSentence, TokenFeatures, featurize_token_classification,
                                  read_conll, words_from_predictions)
from bert_keras.tasks.squad import SquadExample, SquadFeatures, featurize_squad, read_squad
from bert_keras.tasks.squad_answers import (SquadPredictions, apply_null_threshold, basic_tokenize,
                                            get_final_text, postprocess_squad)

__all__ = [
    "GLUE_COLUMNS", "GLUE_TASKS", "IGNORE_LABEL", "ExampleList", "Features", "InputExample", "LabelMap",
    "MultipleChoiceExample", "SquadExample", "SquadFeatures", "SquadPredictions",
    "TaggedSentence", "TokenFeatures", "apply_null_threshold", "basic_tokenize", "describe_columns",
    "featurize_classification", "featurize_multiple_choice", "featurize_squad",
    "featurize_token_classification", "get_final_text", "glue_label_map", "glue_task", "normalise_label",
    "postprocess_squad", "read_conll", "read_examples", "read_glue", "read_squad", "read_swag",
    "to_dataset", "truncate_pair", "words_from_predictions",
]
