"""Loaders for the labelled samples: Rotten Tomatoes polarity, VADER's movie snippets, WNUT-16."""

from __future__ import annotations

import bz2
import csv
import pathlib

from bert_keras.errors import DataError
from bert_keras.samples.fetcher import fetch
from bert_keras.writing import write_text

ROTTEN_TOMATOES_SIZE = 12808
ROTTEN_TOMATOES_DEV_SIZE = 2562


def _rotten_tomatoes_rows(path=None):
    """(category, movie_name, text) of every row of the Rotten Tomatoes CSV, in file order;
    category is checked to be fresh, rotten or plot."""
    path = pathlib.Path(path) if path else fetch("rotten_tomatoes")
    opener = bz2.open if path.name.endswith(".bz2") else open
    rows = []
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        for field in ("category", "text", "movie_name"):
            if field not in (reader.fieldnames or []):
                raise DataError(f"{path}: missing column {field!r}")
        for row in reader:
            if row["category"] not in ("fresh", "rotten", "plot"):
                raise DataError(f"{path}:{reader.line_num}: field 'category': "
                                f"unknown value {row['category']!r}")
            rows.append((row["category"], row["movie_name"], row["text"]))
    return rows


def load_rotten_tomatoes(path=None):
    """Loads the Rotten Tomatoes polarity snippets.

    Reads `rotten_tomatoes_corpus_full.csv.bz2` (columns category, text, movie_name, ...),
    keeps the rows whose category is not "plot", in file order.

    Args:
      path: the .csv.bz2 (or plain .csv) file; default `fetch("rotten_tomatoes")`.

    Returns:
      (texts, labels): a list of 12,808 str and a list of int, 1 = fresh, 0 = rotten.
    """
    reviews = [(category, text) for category, _, text in _rotten_tomatoes_rows(path) if category != "plot"]
    return [text for _, text in reviews], [int(category == "fresh") for category, _ in reviews]


def rotten_tomatoes_split(seed=0, path=None):
    """The fixed train/dev split of `load_rotten_tomatoes` used by the project's results.

    `perm = numpy.random.default_rng(seed).permutation(12808)`; dev is
    `perm[:2562]` and train is `perm[2562:]`, both in that permuted order.

    Returns:
      ((train_texts, train_labels), (dev_texts, dev_labels)): lists of str and int
      (10,246 train and 2,562 dev examples).
    """
    texts, labels = load_rotten_tomatoes(path)
    train, dev = _rotten_tomatoes_split_indices(len(texts), seed)
    return (([texts[i] for i in train], [labels[i] for i in train]),
            ([texts[i] for i in dev], [labels[i] for i in dev]))


def _rotten_tomatoes_split_indices(n, seed):
    """(train, dev) indices of `rotten_tomatoes_split`: one permutation, dev its first 2,562."""
    import numpy as np

    perm = np.random.default_rng(seed).permutation(n)
    return perm[ROTTEN_TOMATOES_DEV_SIZE:], perm[:ROTTEN_TOMATOES_DEV_SIZE]


def rotten_tomatoes_documents(seed=0, path=None, include_plots=True):
    """Unlabelled in-domain text for pre-training: the training split's snippets, by film.

    The snippets of `rotten_tomatoes_split(seed)`'s **training** half only (no labels, no
    dev snippet), grouped into one document per film (column ``movie_name``), each film's
    document led by its ``plot`` synopsis split into sentences when ``include_plots``
    (the synopses are not among the 12,808 polarity examples).  Films appear in file
    order, snippets in file order within a film.

    Returns:
      list of documents, each a list of sentences (str): Google's pre-training format
      once joined with newlines and blank lines (`write_rotten_tomatoes_text`).
    """
    rows = _rotten_tomatoes_rows(path)
    reviews = [(movie, text) for category, movie, text in rows if category != "plot"]
    if len(reviews) != ROTTEN_TOMATOES_SIZE:
        raise DataError(f"{path or 'rotten_tomatoes'}: {len(reviews)} review snippets, "
                        f"expected {ROTTEN_TOMATOES_SIZE}")
    train = set(_rotten_tomatoes_split_indices(len(reviews), seed)[0].tolist())  # dev left out
    films = {}
    if include_plots:
        from bert_keras.data.wiki import split_sentences  # imports TensorFlow (bert_keras.data): only here

        for category, movie, text in rows:
            if category == "plot":
                films.setdefault(movie, []).extend(split_sentences(" ".join(text.split())))
    for i, (movie, text) in enumerate(reviews):
        if i in train:
            films.setdefault(movie, []).append(" ".join(text.split()))
    return [doc for doc in films.values() if doc]


def write_rotten_tomatoes_text(out_path, seed=0, path=None, include_plots=True):
    """Writes `rotten_tomatoes_documents` to ``out_path`` (a sentence a line, a blank line
    between films) atomically and returns the path; an existing file is kept."""
    out_path = pathlib.Path(out_path)
    if out_path.exists():
        return out_path
    docs = rotten_tomatoes_documents(seed, path, include_plots)
    write_text(out_path, "\n\n".join("\n".join(d) for d in docs) + "\n")
    return out_path


def rotten_tomatoes_train_text(cache_dir=None):
    """Path of the cached `write_rotten_tomatoes_text` file (seed 0, synopses included):
    ``sample:rotten_tomatoes_train_text`` in a pre-training recipe."""
    source = fetch("rotten_tomatoes", cache_dir)
    return write_rotten_tomatoes_text(source.parent / "train_text_seed0.r1.txt", seed=0, path=source)


def load_movie_snippets(path=None):
    """Loads VADER's movie review snippets with their mean human sentiment score.

    Args:
      path: `movieReviewSnippets_GroundTruth.txt` (id TAB score TAB text);
        default `fetch("movie_snippets")`.

    Returns:
      (texts, scores): lists of str and float (scores in [-4, 4]), file order.
    """
    path = pathlib.Path(path) if path else fetch("movie_snippets")
    texts, scores = [], []
    # The file is not pure UTF-8 (a few cp1252 bytes): decode leniently.
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            parts = line.split("\t", 2)
            if len(parts) != 3:
                raise DataError(f"{path}:{n}: expected 3 tab-separated fields (id, score, text), "
                                f"got {len(parts)}")
            try:
                score = float(parts[1])
            except ValueError:
                raise DataError(f"{path}:{n}: field 'score': not a number {parts[1]!r}") from None
            texts.append(parts[2])
            scores.append(score)
    return texts, scores


WNUT16_SIZE = 2394
WNUT16_DEV_SIZE = 479


def load_wnut16(path=None):
    """The WNUT-16 NER sentences: a list of `bert_keras.tasks.TaggedSentence` (2,394, file order)."""
    from bert_keras.tasks import read_conll

    return list(read_conll(pathlib.Path(path) if path else fetch("wnut16")))


def wnut16_split(seed=0, path=None):
    """A fixed train/dev split of `load_wnut16`: 1,915 train and 479 dev sentences (20%).

    `perm = numpy.random.default_rng(seed).permutation(2394)`; dev is
    `perm[:479]`, train is `perm[479:]`, both in that permuted order.

    Returns:
      (train_sentences, dev_sentences): lists of TaggedSentence.
    """
    import numpy as np

    sentences = load_wnut16(path)
    perm = np.random.default_rng(seed).permutation(len(sentences))
    return ([sentences[i] for i in perm[WNUT16_DEV_SIZE:]],
            [sentences[i] for i in perm[:WNUT16_DEV_SIZE]])
