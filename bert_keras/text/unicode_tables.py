"""Per-codepoint tables that make the in-graph tokenizer match Google's exactly.

Google's `BasicTokenizer` (google-research/bert `tokenization.py`, forked into
tf-models-official `official/nlp/tools/tokenization.py`) is written with
Python's `unicodedata` and `str` methods.  TensorFlow Text's normalisers
(`normalize_utf8`, `case_fold_utf8`) implement different rules (NFKC folding,
ICU case folding: `ß` -> `ss`, `…` -> `...`, full-width -> ASCII), so instead of
using them we ask *this* interpreter's `unicodedata`, once, what Google's code
would do with each codepoint, and store the answers in a compact two-stage
lookup table that TensorFlow can index with `tf.gather` (a core op, also
available in TFLite).

Facts stored per codepoint `c` (one int32):

* ``DROP``       Google's `_clean_text` deletes it (U+0000, U+FFFD, categories
                 Cc/Cf except tab/newline/carriage return).
* ``SPACE``      it separates tokens: Google's `_is_whitespace` (turned into " ")
                 or Python's `str.split()` whitespace (U+2028, U+2029, ...).
* ``PUNCT``      Google's `_is_punctuation` (ASCII symbols + Unicode P*).
* ``CJK``        Google's `_is_chinese_char` (spaces are put around it).
* ``CASED`` / ``IGNORABLE``  Unicode Cased / Case_Ignorable, as CPython uses
                 them for the context-sensitive lower-casing of capital sigma
                 (`Σ` -> `ς` at the end of a word, `σ` elsewhere).  They are
                 measured by probing `str.lower()` itself, so they are exactly
                 what `str.lower()` does on this interpreter.
* ``MN``         category Mn: removed by Google's `_run_strip_accents`.
* ``CCC``        canonical combining class (8 bits), needed to reproduce the
                 canonical reordering step of NFD across characters.
* ``REORDER``    (uncased) `NFD(c.lower())` holds a character that has a
                 non-zero combining class but is not Mn (25 rare characters such
                 as U+1D165): only then can NFD's reordering across characters
                 change what survives accent stripping.
* ``MAP``        (uncased tables only) row of `expansions` holding
                 `NFD(c.lower())` (at most 4 codepoints, padded with -1) and of
                 `stripped` holding the same without Mn characters (at most 3,
                 possibly none); 0 means "maps to itself".

The tables depend on the Unicode version of the Python that builds them
(`unicodedata.unidata_version`), exactly like Google's tokenizer does.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np

DROP = 1
SPACE = 2
PUNCT = 4
CJK = 8
CASED = 16
IGNORABLE = 32
MN = 64
REORDER = 128
CCC_SHIFT = 8  # bits 8..15
MAP_SHIFT = 16  # bits 16..30

MAX_CODEPOINT = 0x10FFFF
BLOCK_BITS = 7  # 128 codepoints per block of the two-stage table
BLOCK = 1 << BLOCK_BITS
MAX_EXPANSION = 4  # longest NFD(c.lower()) in Unicode 14/15
MAX_STRIPPED = 3  # longest NFD(c.lower()) without Mn (Hangul syllables)

CAPITAL_SIGMA = 0x03A3
SMALL_SIGMA = 0x03C3
FINAL_SIGMA = 0x03C2

# Google's `_is_chinese_char` ranges (inclusive).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


# Google's character classes, one character at a time (`BasicTokenizer`'s
# `_is_punctuation`, `_is_control`, `_is_whitespace`, `_is_chinese_char`).  The
# tables below are built from them; pure-Python code that must split text as
# Google does (SQuAD's `get_final_text`) calls them directly.

def is_punctuation(ch: str) -> bool:
    """ASCII symbols (Unicode calls some of them S*) and every Unicode P* character."""
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_control(ch: str) -> bool:
    """Categories Cc and Cf, except tab, newline and carriage return (which are whitespace)."""
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_whitespace(ch: str) -> bool:
    """Space, tab, newline, carriage return and category Zs."""
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_cjk(cp: int) -> bool:
    """Whether codepoint cp is in one of the CJK Unified Ideographs blocks (`CJK_RANGES`)."""
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


def _case_class(ch: str) -> int:
    """CASED / IGNORABLE as seen by CPython's final-sigma rule.

    CPython lower-cases U+03A3 to U+03C2 when it is preceded (skipping
    case-ignorable characters) by a cased character and not followed (skipping
    case-ignorable characters) by one.  Probing that very rule gives the two
    properties without depending on a separate copy of the Unicode data.
    """
    if (ch + "\u03a3").lower()[-1] == "\u03c2":
        return CASED  # cased and not case-ignorable: stops the scan, counts as cased
    if ("A" + ch + "\u03a3").lower()[-1] == "\u03c2":
        return IGNORABLE  # skipped by the scan
    return 0


@functools.lru_cache(maxsize=2)
def build_tables(lower_case: bool):
    """Builds the lookup tables for one casing mode.

    Returns:
      (stage1, stage2, expansions, stripped): numpy int32 arrays.
        `stage1` [0x110000 >> 7] block index per block of 128 codepoints;
        `stage2` [n_blocks * 128] the packed facts (see module docstring);
        `expansions` [n_rows, 4] codepoints of `NFD(c.lower())`, -1 padded;
        `stripped` [n_rows, 3] the same without Mn characters
        (row 0 is unused: MAP == 0 means identity).
    """
    n = MAX_CODEPOINT + 1
    values = np.zeros(n, dtype=np.int64)
    expansions = [[-1] * MAX_EXPANSION]
    stripped = [[-1] * MAX_STRIPPED]
    for lo, hi in CJK_RANGES:
        values[lo : hi + 1] |= CJK
    for cp in range(n):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # surrogates never come out of a UTF-8 decoder
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat == "Cn" or cat == "Co":
            # unassigned / private use: no properties, map to themselves
            # (their case, decomposition and class are all trivial).
            continue
        v = 0
        if cp == 0 or cp == 0xFFFD or is_control(ch):
            v |= DROP
        elif is_whitespace(ch) or ch.isspace():
            v |= SPACE
        if is_punctuation(ch):
            v |= PUNCT
        if cat == "Mn":
            v |= MN
        v |= _case_class(ch)
        v |= unicodedata.combining(ch) << CCC_SHIFT
        if lower_case and not v & (DROP | SPACE):
            mapped = unicodedata.normalize("NFD", ch.lower())
            bare = "".join(m for m in mapped if unicodedata.category(m) != "Mn")
            if any(unicodedata.combining(m) and unicodedata.category(m) != "Mn" for m in mapped):
                v |= REORDER
            if mapped != ch or bare != ch:
                if len(mapped) > MAX_EXPANSION or len(bare) > MAX_STRIPPED:
                    raise AssertionError(f"NFD(lower(U+{cp:04X})) longer than the tables allow")
                v |= len(expansions) << MAP_SHIFT
                expansions.append([ord(m) for m in mapped] + [-1] * (MAX_EXPANSION - len(mapped)))
                stripped.append([ord(m) for m in bare] + [-1] * (MAX_STRIPPED - len(bare)))
        values[cp] |= v
    if len(expansions) >= 1 << (31 - MAP_SHIFT):
        raise AssertionError("too many case/decomposition mappings for the packed table")
    # The in-graph word splitter relies on these; check them instead of assuming.
    for lo, hi in CJK_RANGES:
        assert not (values[lo : hi + 1] & (CASED | IGNORABLE | SPACE | PUNCT)).any()
    spaces = np.nonzero(values & SPACE)[0]
    assert not (values[spaces] & (CASED | IGNORABLE | (255 << CCC_SHIFT))).any()
    exp = np.asarray(expansions, dtype=np.int64)
    produced = exp[exp >= 0]
    assert not (values[produced] & (DROP | SPACE)).any(), "a mapping produced a space/control"

    # Two-stage table: identical blocks of 128 entries are stored once.
    blocks = values.reshape(-1, BLOCK)
    unique, stage1 = np.unique(blocks, axis=0, return_inverse=True)
    stage2 = unique.reshape(-1)
    return (
        stage1.reshape(-1).astype(np.int32),
        stage2.astype(np.int32),
        exp.astype(np.int32),
        np.asarray(stripped, dtype=np.int32),
    )
