"""How tests/data/tokenizer_corpus.txt was assembled (kept for provenance; run once).

    python tests/data/tokenizer_corpus_make.py UDHR_LINES.txt > tests/data/tokenizer_corpus.txt

Sections, each introduced by a '#' comment line in the output:
1. Article 1 of the Universal Declaration of Human Rights in 30+ languages and
   scripts (UN, public domain; typed in, so small deviations from the official
   translations are possible) plus a few natural sentences exercising German,
   French, Spanish, Vietnamese and Turkish orthography.
2. Real strings harvested from files of installed open-source packages
   (file path given in the comment): multilingual keyword tables of the
   Gherkin lexer in pygments (BSD-2), CJK/kana/Hangul/Devanagari/Arabic lines
   in tests and docstrings of pandas, rich, keras-hub, charset-normalizer,
   hypothesis, transformers (BSD/MIT/Apache-2.0), and English technical text
   and code from tf-models-official and keras (Apache-2.0).
3. Edge cases written for this test: control characters, zero-width and
   format characters, U+FFFD, NUL, full-width forms, combining sequences,
   emoji with ZWJ and skin tones, final sigma, dotted/dotless i, long words.
   Invalid UTF-8 is produced by the tests themselves (this file stays UTF-8).
"""

import os
import re
import sys

import tensorflow  # noqa: F401  (only to locate site-packages reliably)

SITE = os.path.dirname(os.path.dirname(tensorflow.__file__))
NONASCII = re.compile(r"[^\x00-\x7f]")


def harvest(rel, pattern=NONASCII, limit=12, min_len=8):
    path = os.path.join(SITE, rel)
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if len(line) >= min_len and pattern.search(line) and line not in out:
                out.append(line[:400])
            if len(out) >= limit:
                break
    return rel, out


def gherkin_words():
    rel = "pygments/lexers/testing.py"
    with open(os.path.join(SITE, rel), encoding="utf-8") as f:
        text = f.read()
    words = []
    for alt in re.findall(r"\(([^()]{200,})\)", text):
        words.extend(w.strip() for w in alt.split("|") if w.strip())
    lines = [" ".join(words[i : i + 9]).replace("\\'", "'") for i in range(0, len(words), 9)]
    return rel, lines[:90]


SOURCES = [
    ("rich/__main__.py", NONASCII, 8),
    ("pandas/tests/io/formats/test_format.py", re.compile(r"[\u3040-\u30ff]"), 14),
    ("pandas/tests/io/xml/test_xml.py", re.compile(r"[\u4e00-\u9fff]"), 10),
    ("charset_normalizer/constant.py", re.compile(r"[\u4e00-\u9fff\u0400-\u04ff]"), 6),
    ("keras_hub/src/tokenizers/unicode_codepoint_tokenizer.py", NONASCII, 8),
    ("hypothesis/internal/conjecture/providers.py", NONASCII, 8),
    ("sklearn/feature_extraction/tests/test_text.py", NONASCII, 10),
    ("numpy/_core/strings.py", NONASCII, 6),
    ("pandas/tests/strings/test_strings.py", NONASCII, 8),
    ("tensorflow_text/python/ops/normalize_ops.py", NONASCII, 8),
    ("transformers/pipelines/__init__.py", NONASCII, 6),
    ("official/nlp/tools/tokenization.py", re.compile(r"\w"), 50),
    ("keras/src/layers/preprocessing/text_vectorization.py", re.compile(r"https?://|\w"), 25),
]

EDGE = [
    "tab\tseparated\tvalues\tand\u000bvertical\u000ctab",
    "NUL\x00inside\x00words and U+FFFD \ufffd replacement\ufffdchar",
    "bell\x07 escape\x1b[31mred\x1b[0m delete\x7f and C1 \x85next\x9fline",
    "zero\u200bwidth space, zero\u200cwidth non-joiner, zero\u200dwidth joiner, word\u2060joiner",
    "soft\u00adhyphen, bidi \u202aembedding\u202c, BOM \ufeffhere, LRM\u200eRLM\u200f",
    "line\u2028separator and paragraph\u2029separator and NEL\u0085too",
    "ideographic\u3000space, no-break\u00a0space, thin\u2009space, em\u2003space, narrow\u202fnbsp",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ＡＳＣＩＩ：ＡＢＣ １２３！？（テスト）",
    "ﬁne ﬂour ﬀ ﬃ ligatures, ℌ ℍ ℕ, ① ② ③, ¼ ½ ¾, x² y³, ㎏ ㎞ ㍿",
    "e\u0301 vs \u00e9, a\u0308 vs \u00e4, n\u0303 vs \u00f1, combining\u0301\u0302\u0303 stack",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333!",
    "👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇩🇪🇯🇵 ❤️ ☺︎ 🤖🚀✨ 1️⃣ #️⃣",
    "ΣΊΣΥΦΟΣ ΟΔΥΣΣΕΥΣ. ΣΑΣ, ΑΣ'. ΌΣ... Σ Σ. ΣΣ ΑΣ.Β (ΑΣ) ΑΣ\u0301 Α\u0301Σ ΑΣ\u00ad ΑΣ\u200d",
    "İi Iı İstanbul ıiİI DİYARBAKIR Iğdır KIZILCAHAMAM",
    "ǅemal ǈubljana ǋegoš ǲ digraph titlecase; ﬀ ß ẞ ŉ ǰ ΐ ᾈ ᾼ",
    "Ⅻ Ⅷ ⅷ Ⓐ ⓐ 🄰 𝐀𝐁𝐂 𝒳𝓎𝓏 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 mathematical alphanumerics",
    "Ӑӑ Ѐѐ Йй Ёё Ўў Ґґ Її Ђђ Ћћ Џџ",
    "Hangul jamo: 한글 한글 㐀 𠀀 𪜀 𫝀 𫠠 丽 豈 爫 CJK extension and compatibility",
    "日本語の文章と English words が混在する 文。カタカナ ｶﾀｶﾅ ひらがな",
    "中文（简体）和「繁體」，標點：；！？、《書名》……——",
    "https://example.com/path?query=value&x=1#frag user@example.org C:\\Windows\\System32",
    "def f(x: int) -> dict[str, list[int]]: return {'a': [x**2, x // 3, x % 7]}  # comment",
    "if (a != b && c <= d || !e) { x += y ^ z; printf(\"%d\\n\", *p); } $var @attr ~tilde `tick`",
    "SELECT id, name FROM users WHERE email LIKE '%@gmail.com' ORDER BY created_at DESC;",
    "IPv6 [2001:db8::1]:8080, version 3.11.7rc1, 1,234,567.89, 1.5e-10, 0xDEADBEEF, v2.0-beta+build.5",
    "supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis " + "x" * 210,
    "antidisestablishmentarianism " + "longword" * 25 + " " + "ä" * 201 + " " + "中" * 5,
    "Arabic with diacritics: بِسْمِ ٱللَّٰهِ ٱلرَّحْمَٰنِ ٱلرَّحِيمِ and tatweel كـــتـــاب",
    "Hebrew points: בְּרֵאשִׁית בָּרָא אֱלֹהִים and Devanagari nukta: क़ ख़ ग़ ज़ ड़ ढ़ फ़",
    "Thai tone marks: ภาษาไทย สวัสดีครับ กรุงเทพมหานคร ๑๒๓",
    "Musical symbols: \U0001d15e \U0001d15f \U0001d160 \U0001d165\U0001d16d \U0001d16d\U0001d165 \U0001d1bb",
    "Variation selectors: 葛\U000e0100 葛 ︀ and tags 🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",
    "Private use \ue000\uf8ff and unassigned \U0003ffff \U000e0fff noncharacters \ufdd0\uffff",
    "   leading and trailing spaces   ",
    "",
    "   ",
    "...!!!???---,,,;;;:::'''\"\"\"(((]]]{{{}}}<<<>>>///\\\\\\|||@@@###$$$%%%^^^&&&***___+++===~~~```",
    "¡¿«»‹›“”‘’„‚–—…·•†‡‰′″§¶©®™°±×÷",
]


def main(udhr_path):
    out = ["# tokenizer corpus: see tests/data/tokenizer_corpus_make.py for provenance; '#' lines are comments"]
    out.append("# section 1: UDHR article 1 (UN, public domain) and orthography sentences")
    with open(udhr_path, encoding="utf-8") as f:
        out.extend(line.rstrip("\n") for line in f if line.strip())
    rel, lines = gherkin_words()
    out.append(f"# section 2: real strings from site-packages/{rel} (pygments, BSD-2-Clause)")
    out.extend(lines)
    for rel, pattern, limit in SOURCES:
        try:
            rel, lines = harvest(rel, pattern, limit)
        except OSError:
            continue
        out.append(f"# section 2: real strings from site-packages/{rel}")
        out.extend(lines)
    out.append("# section 3: edge cases written for the tests")
    for line in EDGE:
        # keep one text per line: only the line feed must not appear inside a text
        out.append(line.replace("\n", " "))
    sys.stdout.buffer.write(("\n".join(out) + "\n").encode("utf-8"))


if __name__ == "__main__":
    main(sys.argv[1])
