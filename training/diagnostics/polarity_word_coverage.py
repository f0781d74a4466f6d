"""Does a pre-training corpus hold the words that decide Rotten Tomatoes polarity?

    python training/diagnostics/polarity_word_coverage.py [--corpus sample:wiki ...] [--top 20]
        [--bag-of-words]

The polarity words are read off the project's training split alone
(`samples.rotten_tomatoes_split(seed=0)`, 10,246 snippets; dev is never looked at):
lower-cased words in at least 10 training snippets whose add-one smoothed log-odds of
"fresh" vs "rotten" (snippet counts) is above 0.8 in absolute value.  For each corpus
(Google-format text files, or `sample:NAME` as in a pre-training recipe) it prints, as one
JSON line: its word count, the share of the dev snippets' word tokens it holds at least
1 / 5 / 20 times, the share of the polarity words it holds at least 5 times, and how often
it holds the most frequent polarity words.  A masked LM can only learn about a word from
the contexts its corpus gives it.  ``--bag-of-words`` also prints the dev accuracy of TF-IDF
logistic regressions (scikit-learn; unigrams C=3, unigrams+bigrams C=10) on the same split: the
level a classifier reaches from the labelled words alone.
"""
import argparse
import collections
import json
import math
import re

WORD = re.compile(r"[a-z']+")


def words(text):
    return WORD.findall(text.lower())


def polarity_words(texts, labels, min_snippets=10, min_log_odds=0.8):
    """Words of the training snippets with |log((fresh+1)/(rotten+1))| > min_log_odds,
    most frequent first."""
    fresh, rotten, total = collections.Counter(), collections.Counter(), collections.Counter()
    for text, label in zip(texts, labels):
        seen = set(words(text))
        (fresh if label else rotten).update(seen)
        total.update(seen)
    chosen = [w for w, n in total.items()
              if n >= min_snippets and abs(math.log((fresh[w] + 1) / (rotten[w] + 1))) > min_log_odds]
    return sorted(chosen, key=lambda w: (-total[w], w))


def coverage(counts, dev_tokens, polar, top):
    report = {"words": sum(counts.values())}
    for k in (1, 5, 20):
        report[f"dev_tokens_seen_{k}x"] = round(sum(counts[w] >= k for w in dev_tokens) / len(dev_tokens), 4)
    report["polarity_words_seen_5x"] = round(sum(counts[w] >= 5 for w in polar) / len(polar), 4)
    report["top_polarity_words"] = {w: counts[w] for w in polar[:top]}
    return report


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", nargs="+", default=["sample:wiki"],
                   help="pre-training text files (or sample:wiki, sample:rotten_tomatoes_train_text)")
    p.add_argument("--top", type=int, default=20, help="polarity words listed with their corpus counts")
    p.add_argument("--bag-of-words", action="store_true", help="also the TF-IDF logistic-regression baselines")
    args = p.parse_args(argv)

    from bert_keras import samples
    from bert_keras.training.pretrain import resolve_path

    (tr_x, tr_y), (dev_x, dev_y) = samples.rotten_tomatoes_split(seed=0)
    polar = polarity_words(tr_x, tr_y)
    dev_tokens = [w for t in dev_x for w in words(t)]
    print(json.dumps({"polarity_words": len(polar), "dev_word_tokens": len(dev_tokens)}))
    for corpus in args.corpus:
        with open(resolve_path(corpus), encoding="utf-8") as f:
            counts = collections.Counter(w for line in f for w in words(line))
        print(json.dumps({"corpus": corpus, **coverage(counts, dev_tokens, polar, args.top)}))
    if args.bag_of_words:
        print(json.dumps(bag_of_words_baselines(tr_x, tr_y, dev_x, dev_y)))


def bag_of_words_baselines(tr_x, tr_y, dev_x, dev_y):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    scores = {}
    for name, ngrams, c in (("unigrams_C3", (1, 1), 3.0), ("uni_bigrams_C10", (1, 2), 10.0)):
        vectorizer = TfidfVectorizer(ngram_range=ngrams, sublinear_tf=True)
        model = LogisticRegression(C=c, max_iter=2000).fit(vectorizer.fit_transform(tr_x), tr_y)
        scores[name] = round(100 * model.score(vectorizer.transform(dev_x), dev_y), 2)
    return {"bag_of_words_logistic_regression_dev_accuracy": scores}


if __name__ == "__main__":
    main()
