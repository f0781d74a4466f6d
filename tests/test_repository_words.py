"""The tracked files speak about the product, not about how it was made.

Docs, comments, notebooks and result files must not mention work tickets, work sessions,
who ran what, "this machine", or absolute paths of the machine a file was written on: a reader
of the repository has none of those.  The test greps every tracked text file (``git ls-files``)
except the test corpora under ``tests/data`` and lists each hit as ``file:line: text``.
"""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THIS = os.path.relpath(os.path.abspath(__file__), ROOT)

# Words about the making of the project, anywhere (code, comments, docs, notebooks, results).
EVERYWHERE = [
    (r"\bsessions?\b", "work session"),
    (r"\bissues?[- ]?#?[0-9]", "ticket number"),
    (r"\b(?:the|this|that) issue(?:'s)?\b", "ticket"),
    (r"\bhelpers'", "who ran it"),
    (r"\b(?:other|four|three|two) helpers\b", "who ran it"),
    (r"\b(?:this|previous|next|last|first|second|third|fourth|earlier) round\b", "work round"),
    (r"\bbefore this round\b", "work round"),
    (r"\bthe lead\b", "who merges"),
    (r"/work/", "absolute machine path"),
    (r"YOUR_GITHUB", "placeholder"),
    (r"URL placeholder", "placeholder"),
]
# In prose, result files and code comments only: code may name /tmp in a default, and an error
# message may speak of the machine it runs on.
IN_DOCS = [
    (r"\bthis machine\b", "the machine it ran on"),
    (r"(?<![\w.~])/tmp/", "absolute scratch path"),
    (r"(?<![\w.~])/root/", "absolute home path"),
    (r"(?<![\w.~])/home/\w", "absolute home path"),
]
DOC_SUFFIXES = (".md", ".ipynb", ".json", ".jsonl", ".txt", ".yaml", ".yml", ".config", ".rst")

# Uses of the word that are about the code, not about how it was made.
ALLOWED = [
    r"""scope=["']session["']""",        # pytest fixture scope
    r"\.Session\b",                     # tf.compat.v1.Session, requests.Session
    r"\bSession\(",
    r"\bdef pytest_\w+\(.*\bsession\b",  # pytest hooks take their Session as `session`
    r"\bsession\.(items|config)\b",
]


def _tracked_text_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.fail(f"git ls-files failed in {ROOT}: {e}")
    for path in out.decode("utf-8").split("\0"):
        if not path or path.startswith("tests/data/") or path == THIS:
            continue
        if os.path.basename(path).startswith("vocab") and path.endswith(".txt"):  # tokens, not prose
            continue
        full = os.path.join(ROOT, path)
        if not os.path.isfile(full):  # deleted in the work tree, not yet committed
            continue
        with open(full, "rb") as f:
            data = f.read()
        if b"\0" in data[:8192]:  # binary (images, weights)
            continue
        try:
            yield path, data.decode("utf-8")
        except UnicodeDecodeError:
            continue


def find_process_words(files):
    """[(path, line number, pattern label, line)] for every line that speaks of the making."""
    everywhere = [(re.compile(p, re.IGNORECASE), why) for p, why in EVERYWHERE]
    in_docs = [(re.compile(p), why) for p, why in IN_DOCS]
    allowed = re.compile("|".join(ALLOWED))
    hits = []
    for path, text in files:
        prose = path.endswith(DOC_SUFFIXES) or os.path.basename(path).startswith("README")
        for number, line in enumerate(text.splitlines(), 1):
            checked = allowed.sub("", line)
            comment = checked.split("#", 1)[1] if path.endswith(".py") and "#" in checked else ""
            for pattern, why in everywhere + in_docs:
                where = checked if (prose or (pattern, why) in everywhere) else comment
                if pattern.search(where):
                    hits.append((path, number, why, line.strip()[:160]))
                    break
    return hits


def test_the_patterns_catch_process_words_and_spare_code_words():
    bad = [("a.md", "Measured in the previous session on this machine."),
           ("b.py", "# see issue 5 for the protocol"),
           ("c.md", "(issue-5 split)"),
           ("d.md", "while four helpers' jobs shared the CPU"),
           ("e.md", "Before this round the step took 2 s."),
           ("f.ipynb", '"model_dir": "/tmp/pre"'),
           ("g.json", '{"checkpoint": "/work/runs/t1/final"}'),
           ("h.md", "https://github.com/YOUR_GITHUB/bert-keras"),
           ("i.md", "Third round: the softmax"),
           ("j.py", "x = f()  # 2x faster on this machine")]
    good = [("a.py", '@pytest.fixture(scope="session")'),
            ("b.py", "with tf.compat.v1.Session() as sess:"),
            ("b2.py", "def pytest_collection_finish(session):"),
            ("c.md", "round trips ours -> Hugging Face -> ours"),
            ("d.py", "tmp = os.path.join(tempfile.gettempdir(), 'x')"),
            ("e.md", "2 interleaved rounds x 8 timed steps"),
            ("f.md", "tensorflow/tensorflow#60799 is the known converter bug"),
            ("g.py", "out = '/tmp/x'  # code may default to a scratch folder"),
            ("h.py", 'raise BertKerasError("TensorFlow sees no GPU on this machine")')]
    hits = find_process_words([(p, t) for p, t in bad])
    assert [h[0] for h in hits] == [p for p, _ in bad]
    assert find_process_words(good) == []


def test_tracked_files_carry_no_process_words():
    hits = find_process_words(_tracked_text_files())
    listing = "\n".join(f"{path}:{number}: [{why}] {line}" for path, number, why, line in hits)
    assert not hits, f"{len(hits)} line(s) speak of how the project was made:\n{listing}"


# --------------------------------------------------------------------------- the docs hold together
DOCS = ["README.md", "docs/results.md", "docs/design.md", "docs/tokenizer.md", "benchmarks/README.md",
        "training/README.md", "colab/README.md", "export/README.md"]


def _github_anchor(heading):
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_doc_links_point_at_existing_files_and_headings():
    broken = []
    for doc in DOCS:
        path = os.path.join(ROOT, doc)
        if not os.path.exists(path):
            broken.append(f"{doc}: missing")
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for number, line in enumerate(text.splitlines(), 1):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"[a-z]+:", target):  # https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not os.path.exists(full):
                    broken.append(f"{doc}:{number}: {target}: no such file")
                elif anchor:
                    with open(full, encoding="utf-8") as f:
                        anchors = {_github_anchor(h) for h in re.findall(r"^#+ (.*)$", f.read(), re.M)}
                    if anchor not in anchors:
                        broken.append(f"{doc}:{number}: {target}: no such heading")
    assert not broken, "\n".join(broken)


def test_readme_is_a_product_readme_whose_results_link_to_their_tables():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert len(lines) <= 220, f"README.md has {len(lines)} lines"
    # CI runs the README's test command (.ci/run -> make test)
    assert any(line.startswith("make test") and "python -m pytest -q tests" in line for line in lines)
    start = lines.index("## Results")
    rows = [line for line in lines[start:] if line.startswith("| ") and not line.startswith("| ---")][1:]
    rows = rows[:next((i for i, r in enumerate(rows) if r.startswith("| sample ")), len(rows))]
    assert len(rows) >= 8
    assert [r for r in rows if "](docs/results.md#" not in r] == []
