"""The vocabulary trie (``structgen.engine.trie``): a pre-order layout in which every token's bytes
are the path to its node, over the real SmolLM2 vocabulary."""
from __future__ import annotations

import numpy as np

from structgen.engine.trie import TokenTrie


def _paths(trie: TokenTrie) -> dict[int, bytes]:
    """Token id -> the bytes of the path to the node holding it (rebuilt from the arrays)."""
    out, path = {}, []
    for j in range(trie.n_nodes):
        d = int(trie.node_depth[j])
        del path[max(d - 1, 0):]
        if d:
            path.append(int(trie.node_byte[j]))
        for k in range(trie.tok_ptr[j], trie.tok_ptr[j + 1]):
            out[int(trie.tok_ids[k])] = bytes(path)
    return out


def test_every_token_sits_at_the_path_of_its_bytes(smol_info):
    trie = TokenTrie.build(smol_info.token_bytes, smol_info.special_ids, smol_info.vocab_size)
    paths = _paths(trie)
    wanted = {i for i, b in enumerate(smol_info.token_bytes) if b and i not in smol_info.special_ids}
    assert set(paths) == wanted
    assert all(paths[i] == smol_info.token_bytes[i] for i in wanted)
    assert trie.max_depth == max(len(smol_info.token_bytes[i]) for i in wanted)


def test_subtree_ends_bound_each_subtree():
    toks = [b"a", b"ab", b"abc", b"b", b"ba", b"", b"ab"]  # a duplicate: two ids at one node
    trie = TokenTrie.build(toks, frozenset({5}), len(toks))
    paths = _paths(trie)
    assert paths[1] == paths[6] == b"ab" and 5 not in paths
    for j in range(trie.n_nodes):
        end = int(trie.node_end[j])
        inside = trie.node_depth[j + 1:end]
        assert (inside > trie.node_depth[j]).all()  # everything before node_end is a descendant
        if end < trie.n_nodes:
            assert trie.node_depth[end] <= trie.node_depth[j]
    assert np.array_equal(np.sort(trie.tok_ids), np.array([0, 1, 2, 3, 4, 6]))
