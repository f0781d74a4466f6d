"""Wikipedia dumps to plain text: markup stripped, paragraphs split into sentences.

Rule-based and dependency-free (the standard library's XML parser and regular
expressions), for turning a MediaWiki XML dump into Google's pre-training
format (one sentence a line, a blank line between articles).

    from bert_keras.data.wiki import wiki_articles, strip_wiki_markup, split_sentences
    articles = wiki_articles("enwiki-...-shortened.xml.bz2")   # [(title, [sentence, ...]), ...]
    strip_wiki_markup("'''Achilles''' was a [[Hero (myth)|hero]].")  # ["Achilles was a hero."]
    split_sentences("Dr. Smith left. He came back.")   # ["Dr. Smith left.", "He came back."]
"""

from __future__ import annotations

import bz2
import html
import re
import xml.etree.ElementTree as ET

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

