"""Constant arrays for the builtin-ops TFLite tokenizer: the vocabulary as a trie, and its alphabet.

TFLite has no strings, no hash tables and no string ops among its builtins, so
the WordPiece vocabulary travels as a character trie in a *double array*
(Aoe 1989, "An efficient digital search algorithm by using a double-array
structure"), walked with `GATHER`, one step per character:

* every character of every matchable token gets an *alphabet id* (1..A; 0 =
  the character occurs in no token), looked up per codepoint through a
  two-stage table like `bert_keras.text.unicode_tables`;
* a trie node is a slot; its child by alphabet id `a` is slot
  `t = base[s] + a`, which belongs to it exactly when `check[t] == s`
  (two gathers and a comparison per character, no search);
* two roots: word-initial tokens hang below `ROOT_WORD`, `##` continuations
  (without their `##`) below `ROOT_CONT`;
* `token[s]` is the vocabulary id of the token ending at slot s, or -1.

Slot 0 (`DEAD`) is nobody's child and has no token: a failed step goes there
and stays there.  Lookups are exact (no hashing, so no collisions to rule out);
ids follow Google's `load_vocab` rule for duplicated lines (the last wins).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.text import unicode_tables as ut

DEAD, ROOT_WORD, ROOT_CONT = 0, 1, 2


@dataclasses.dataclass
class VocabTrie:
    """Flat int32 arrays of a WordPiece vocabulary trie (see module docstring).

    Fields:
      alpha_stage1 [0x110000 >> 7], alpha_stage2 [blocks * 128]: codepoint ->
        alphabet id (0 = in no token).
      base, check, token [slots]: the double array (`base[s] + a` stays
        inside it for every slot s and alphabet id a).
      max_len: longest token in characters (`##` not counted): the walk's steps.
      unk_id, cls_id, sep_id, pad_id: special token ids.
    """

    alpha_stage1: np.ndarray
    alpha_stage2: np.ndarray
    base: np.ndarray
    check: np.ndarray
    token: np.ndarray
    max_len: int
    unk_id: int
    cls_id: int
    sep_id: int
    pad_id: int


def _double_array(children, token_of, alphabet_size):
    """Places trie nodes (children: list of {alpha id: node}; nodes 1, 2 the roots) in slots."""
    n = len(children)
    size = 2 * n + alphabet_size + 8
    used = np.zeros(size, bool)
    used[: ROOT_CONT + 1] = True
    base = np.zeros(size, np.int64)
    check = np.full(size, -1, np.int64)
    token = np.full(size, -1, np.int64)
    queue = [(ROOT_WORD, 1), (ROOT_CONT, 2)]
    free = ROOT_CONT + 1
    top = ROOT_CONT
    for slot, node in queue:  # breadth first; the queue grows while it is read
        token[slot] = token_of[node]
        kids = sorted(children[node].items())
        if not kids:
            continue
        chars = np.array([a for a, _ in kids])
        while used[free]:
            free += 1
        pos = max(free, int(chars[0]))  # base >= 0: base[s] + a is never a negative slot
        while used[pos]:
            pos += 1
        while True:  # first free slot for the smallest child where all children fit
            b = pos - chars[0]
            if not used[b + chars].any():
                break
            pos += 1
            while used[pos]:
                pos += 1
        base[slot] = b
        used[b + chars] = True
        check[b + chars] = slot
        top = max(top, int(b + chars[-1]))
        queue.extend((int(b + a), child) for a, child in kids)
    end = top + alphabet_size + 2  # room for base[s] + a of every slot
    if end >= 2**31 - 1:
        raise BertKerasError("vocabulary too large for an int32 trie")
    return base[:end].astype(np.int32), check[:end].astype(np.int32), token[:end].astype(np.int32)


def build_trie(vocab_path) -> VocabTrie:
    """The trie of a vocab.txt, with the matchable tokens Google's WordPiece can look up."""
    from bert_keras.text.tokenizer import matchable_token
    from bert_keras.text.vocab import load_vocab, token_ids

    ids = token_ids(load_vocab(vocab_path))
    for name in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"):
        if name not in ids:
            raise BertKerasError(f"{vocab_path}: no {name!r} token in the vocabulary")
    words, conts = {}, {}
    for token, i in ids.items():
        if not matchable_token(token):
            continue
        if token.startswith("##"):
            conts[token[2:]] = i
        else:
            words[token] = i
    alphabet = sorted({ch for t in list(words) + list(conts) for ch in t})
    alpha = {ch: k + 1 for k, ch in enumerate(alphabet)}

    # nodes: 0 unused, 1 root of word-initial tokens, 2 root of "##" tokens
    children = [dict(), dict(), dict()]
    token_of = [-1, -1, -1]
    for root, table in ((1, words), (2, conts)):
        for token, i in table.items():
            node = root
            for ch in token:
                a = alpha[ch]
                nxt = children[node].get(a)
                if nxt is None:
                    nxt = len(children)
                    children[node][a] = nxt
                    children.append(dict())
                    token_of.append(-1)
                node = nxt
            token_of[node] = i
    base, check, token = _double_array(children, token_of, len(alphabet))

    full = np.zeros(ut.MAX_CODEPOINT + 1, np.int32)
    for ch, a in alpha.items():
        full[ord(ch)] = a
    blocks = full.reshape(-1, ut.BLOCK)
    unique, stage1 = np.unique(blocks, axis=0, return_inverse=True)
    return VocabTrie(
        alpha_stage1=stage1.reshape(-1).astype(np.int32), alpha_stage2=unique.reshape(-1).astype(np.int32),
        base=base, check=check, token=token, max_len=max(len(t) for t in list(words) + list(conts) + ["x"]),
        unk_id=ids["[UNK]"], cls_id=ids["[CLS]"], sep_id=ids["[SEP]"], pad_id=ids["[PAD]"])


def kept_per_codepoint(lower_case: bool) -> int:
    """Most codepoints one input codepoint becomes after casing and NFD, Mn marks with a
    combining class removed (the widest row the front-end must hold): 3 uncased, 1 cased."""
    if not lower_case:
        return 1
    import unicodedata

    _, _, expansions, _ = ut.build_tables(True)
    widest = 1
    for row in expansions:
        kept = [c for c in row if c >= 0 and not (unicodedata.category(chr(c)) == "Mn" and unicodedata.combining(chr(c)))]
        widest = max(widest, len(kept))
    return widest
