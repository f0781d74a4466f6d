"""Constant arrays for the builtin-ops TFLite tokenizer: the vocabulary as a trie, and its alphabet.

TFLite has no strings, no hash tables and no string ops among its builtins, so
the WordPiece vocabulary travels as a character trie stored in flat int32
arrays that a graph walks with `GATHER` (one step per character):

* every character of every matchable token gets an *alphabet id* (1..A; 0 =
  the character occurs in no token), looked up per codepoint through a
  two-stage table like `bert_keras.text.unicode_tables`;
* two roots: word-initial tokens hang below `root_word`, `##` continuations
  (without their `##`) below `root_cont`; each root's children are one dense
  row indexed by alphabet id, so the first step is a single gather;
* every other node lists its children as a range of edges sorted by alphabet
  id, found with a fixed number of binary-search steps (`search_steps`:
  enough for the largest range);
* `node_token[n]` is the vocabulary id of the token ending at node n, or -1.

Node 0 is a dead end (no children, no token): a failed step goes there and
stays there.  Lookups are exact (no hashing, so no collisions to rule out);
ids follow Google's `load_vocab` rule for duplicated lines (the last wins).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from bert_keras.errors import BertKerasError
from bert_keras.text import unicode_tables as ut

DEAD = 0


@dataclasses.dataclass
class VocabTrie:
    """Flat int32 arrays of a WordPiece vocabulary trie (see module docstring).

    Fields:
      alpha_stage1 [0x110000 >> 7], alpha_stage2 [blocks * 128]: codepoint ->
        alphabet id (0 = in no token).
      root_word, root_cont [A + 1]: child node of each root per alphabet id
        (DEAD when none).
      edge_start, edge_count [nodes]: each node's range of edges.
      edge_char, edge_child [edges + 1]: alphabet id and child node of each
        edge, sorted by (node, alphabet id); one padding entry.
      node_token [nodes]: vocabulary id of the token ending here, else -1.
      max_len: longest token in characters (`##` not counted): the walk's steps.
      search_steps: binary-search steps that find any child of a non-root node.
      unk_id, cls_id, sep_id, pad_id: special token ids.
    """

    alpha_stage1: np.ndarray
    alpha_stage2: np.ndarray
    root_word: np.ndarray
    root_cont: np.ndarray
    edge_start: np.ndarray
    edge_count: np.ndarray
    edge_char: np.ndarray
    edge_child: np.ndarray
    node_token: np.ndarray
    max_len: int
    search_steps: int
    unk_id: int
    cls_id: int
    sep_id: int
    pad_id: int


def build_trie(vocab_path) -> VocabTrie:
    """The trie of a vocab.txt, with the matchable tokens Google's WordPiece can look up."""
    from bert_keras.text.tokenizer import _usable
    from bert_keras.text.vocab import load_vocab, token_ids

    ids = token_ids(load_vocab(vocab_path))
    for name in ("[UNK]", "[CLS]", "[SEP]", "[PAD]"):
        if name not in ids:
            raise BertKerasError(f"{vocab_path}: no {name!r} token in the vocabulary")
    words, conts = {}, {}
    for token, i in ids.items():
        if not _usable(token):
            continue
        if token.startswith("##"):
            conts[token[2:]] = i
        else:
            words[token] = i
    alphabet = sorted({ch for t in list(words) + list(conts) for ch in t})
    alpha = {ch: k + 1 for k, ch in enumerate(alphabet)}

    # nodes: 0 dead, 1 root_word, 2 root_cont, then every prefix of a token
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
    n_nodes = len(children)
    if n_nodes >= 2**31 - 1:
        raise BertKerasError(f"{vocab_path}: vocabulary too large for an int32 trie")
    roots = []
    for root in (1, 2):
        row = np.zeros(len(alphabet) + 1, np.int32)
        for a, child in children[root].items():
            row[a] = child
        roots.append(row)
    edge_start = np.zeros(n_nodes, np.int32)
    edge_count = np.zeros(n_nodes, np.int32)
    edge_char, edge_child = [], []
    for node in range(3, n_nodes):  # the roots use their dense rows
        kids = sorted(children[node].items())
        edge_start[node] = len(edge_char)
        edge_count[node] = len(kids)
        edge_char += [a for a, _ in kids]
        edge_child += [c for _, c in kids]
    edge_start[:3] = len(edge_char)
    # padding entry: a binary search may read one past a node's range
    edge_char.append(len(alphabet) + 1)
    edge_child.append(DEAD)
    max_degree = int(edge_count.max()) if n_nodes > 3 else 0
    search_steps = int(max_degree).bit_length()  # lower_bound over n items: floor(log2 n) + 1 halvings

    full = np.zeros(ut.MAX_CODEPOINT + 1, np.int32)
    for ch, a in alpha.items():
        full[ord(ch)] = a
    blocks = full.reshape(-1, ut.BLOCK)
    unique, stage1 = np.unique(blocks, axis=0, return_inverse=True)
    return VocabTrie(
        alpha_stage1=stage1.reshape(-1).astype(np.int32), alpha_stage2=unique.reshape(-1).astype(np.int32),
        root_word=roots[0], root_cont=roots[1], edge_start=edge_start, edge_count=edge_count,
        edge_char=np.asarray(edge_char, np.int32), edge_child=np.asarray(edge_child, np.int32),
        node_token=np.asarray(token_of, np.int32), max_len=max(len(t) for t in list(words) + list(conts) + ["x"]),
        search_steps=search_steps, unk_id=ids["[UNK]"], cls_id=ids["[CLS]"], sep_id=ids["[SEP]"],
        pad_id=ids["[PAD]"])


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
