"""Byte automata: the bottom layer both the front ends (``structgen.grammar``) and the engine
(``structgen.engine``) build on.

``fsa`` (NFAs, dense DFAs over byte classes, their constructions), ``charclass`` (Unicode
character classes as UTF-8 or JSON-escaped byte paths), ``lazy_dfa`` (a DFA made as walks reach
its states), and the numba kernels, one module per family of algorithms: ``search_kernels``
(trimming, distances, renumbering), ``subset_kernels`` (determinisation, the lazy DFA's
successor tables), ``minimize_kernels``, ``product_kernels`` and ``table_kernels`` (growable
arrays, hashed slots, CSR).  Nothing here imports the front ends or the engine.
"""
