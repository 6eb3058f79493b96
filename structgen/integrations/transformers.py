"""structgen constraints inside ``transformers``' own ``generate()``.

::

    from transformers import LogitsProcessorList
    from structgen import load_model
    from structgen.integrations.transformers import json_logits_processor

    model = load_model()
    proc = json_logits_processor(model, {"type": "object", "properties": {"n": {"type": "integer"}},
                                         "required": ["n"]})
    ids = model.hf_tokenizer(model.chat_prompt("Pick a number."), return_tensors="pt",
                             add_special_tokens=False)
    out = model.hf_model.generate(**ids, logits_processor=LogitsProcessorList([proc]),
                                  do_sample=False, max_new_tokens=64)

``StructgenLogitsProcessor`` keeps one ``Matcher`` per batch row.  Each call
it reads the tokens each row gained since the previous call (everything past
the row's prompt), feeds them to that row's matcher, fills one int32 bitmask
``[batch, ceil(V/32)]`` and applies it to the scores in one
``apply_token_bitmask_inplace`` call.  A row whose matcher has terminated (EOS
accepted, or nothing but EOS can follow) allows only EOS, so ``generate`` ends
or pads that row while the others go on.

Rows are re-synchronised from ``input_ids`` on every call (the matcher rolls
back to the longest common prefix and replays the rest), so beam search's row
reordering and assisted decoding's rejected drafts are handled; plain greedy or
sampled decoding costs one ``accept_token`` per row per step.

What a logits processor cannot do: finish within ``max_new_tokens``.
``generate`` stops when the budget runs out, whatever the grammar says; check
``processor.is_complete(row)`` (or parse the output) afterwards, or use
``structgen.generate_json`` which refuses tokens that could not be completed in
the remaining budget.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from ..engine.compiled import CompiledGrammar
from ..engine.matcher import Matcher
from ..errors import GenerationError
from ..runtime.masks import allocate_token_bitmask, apply_token_bitmask_inplace

try:
    from transformers import LogitsProcessor
except ImportError as e:  # pragma: no cover - transformers is a core dependency
    raise ImportError("structgen.integrations.transformers needs the `transformers` package") from e

__all__ = [
    "StructgenLogitsProcessor",
    "json_logits_processor",
    "regex_logits_processor",
    "grammar_logits_processor",
]


def _tokenizer_info(obj: Any):
    info = getattr(obj, "info", None)
    if info is not None and hasattr(info, "token_bytes"):
        return info  # a structgen Model
    if hasattr(obj, "token_bytes") and hasattr(obj, "eos_ids"):
        return obj  # a TokenizerInfo
    raise TypeError(f"expected a structgen Model or TokenizerInfo, got {type(obj).__name__}")


class StructgenLogitsProcessor(LogitsProcessor):
    """A ``transformers`` ``LogitsProcessor`` that enforces compiled structgen grammars.

    ``grammar_or_grammars``: one ``CompiledGrammar`` (every row follows it) or a
    list with one grammar per batch row (different constraints per row).
    ``tokenizer_info_or_model``: the ``TokenizerInfo`` the grammars were compiled
    for, or the structgen ``Model`` (its ``.info``); it gives the vocabulary
    size and the EOS ids.  ``prompt_lengths``: where generated tokens start in
    ``input_ids``, an int or one per row; by default the width of ``input_ids``
    at the first call (right for ``generate``, which left-pads batches).

    A processor holds per-generation state: use a fresh one (or call
    ``reset()``) for each ``generate`` call.  Raises ``GenerationError`` if a
    row receives a token its grammar rejects (e.g. another processor or a
    custom sampler bypassed the mask) or if a grammar allows no token at all.
    """

    supports_continuous_batching = False

    def __init__(self, grammar_or_grammars: CompiledGrammar | Sequence[CompiledGrammar], tokenizer_info_or_model: Any,
                 *, prompt_lengths: int | Sequence[int] | None = None):
        self.info = _tokenizer_info(tokenizer_info_or_model)
        if isinstance(grammar_or_grammars, CompiledGrammar):
            self._single: CompiledGrammar | None = grammar_or_grammars
            self.grammars: list[CompiledGrammar] | None = None
        else:
            gs = list(grammar_or_grammars)
            if not gs:
                raise ValueError("grammar_or_grammars is an empty list")
            for g in gs:
                if not isinstance(g, CompiledGrammar):
                    raise TypeError(f"expected CompiledGrammar objects, got {type(g).__name__}")
            self._single = None
            self.grammars = gs
        for g in self._all_grammars():
            if g.vocab_size != self.info.vocab_size:
                raise ValueError(f"a grammar was compiled for a {g.vocab_size}-token vocabulary, "
                                 f"but the tokenizer has {self.info.vocab_size}")
        eos = [t for t in self.info.eos_ids if t < self.info.vocab_size]
        if not eos:
            raise ValueError("the tokenizer declares no EOS id: finished rows would have no token to emit")
        self.eos_id = int(eos[0])
        word = 1 << (self.eos_id & 31)
        self._eos_word = word - (1 << 32) if word >= 1 << 31 else word  # as an int32
        self._prompt_lengths_arg = prompt_lengths
        self.reset()

    def _all_grammars(self) -> list[CompiledGrammar]:
        return [self._single] if self._single is not None else list(self.grammars or [])

    # -- state -----------------------------------------------------------------------
    def reset(self) -> None:
        """Forget every row (call between two ``generate`` calls that reuse the processor)."""
        self.matchers: list[Matcher] = []
        self._seen: list[list[int]] = []  # every token seen per row, in order
        self._fed: list[int] = []  # how many of them went to the matcher (tokens after termination do not)
        self._prompt_lengths: list[int] | None = None
        self._bitmask: torch.Tensor | None = None

    def _setup(self, input_ids: torch.Tensor) -> None:
        batch, width = input_ids.shape
        if self.grammars is not None:
            if len(self.grammars) != batch:
                raise ValueError(f"{len(self.grammars)} grammars for a batch of {batch} rows "
                                 "(beam search and num_return_sequences multiply the rows: give one per row)")
            grammars = self.grammars
        else:
            grammars = [self._single] * batch
        pl = self._prompt_lengths_arg
        if pl is None:
            lengths = [width] * batch
        elif isinstance(pl, int):
            lengths = [pl] * batch
        else:
            lengths = [int(x) for x in pl]
            if len(lengths) != batch:
                raise ValueError(f"{len(lengths)} prompt lengths for a batch of {batch} rows")
        self._prompt_lengths = lengths
        self.matchers = [Matcher(g) for g in grammars]
        self._seen = [[] for _ in range(batch)]
        self._fed = [0] * batch
        self._bitmask = allocate_token_bitmask(batch, self.info.vocab_size)

    def _sync_row(self, row: int, generated: list[int]) -> None:
        seen, m = self._seen[row], self.matchers[row]
        n = len(seen)
        if len(generated) == n + 1 and generated[:n] == seen:
            k = n  # the common case: one new token
        else:
            k = 0
            for a, b in zip(seen, generated):
                if a != b:
                    break
                k += 1
            if k < self._fed[row]:
                m.rollback(self._fed[row] - k)
                self._fed[row] = k
            del seen[k:]
        for t in generated[k:]:
            seen.append(t)
            if self._fed[row] < len(seen) - 1 or m.is_terminated():
                continue  # the row is finished: padding / EOS repeats are not the grammar's business
            if not m.accept_token(t):
                text = self.info.decode_bytes(seen[:-1]).decode("utf-8", errors="replace")
                raise GenerationError(f"row {row}: token {t} is not allowed by the grammar (was the mask bypassed?)",
                                      partial=text)
            self._fed[row] += 1

    # -- the processor ----------------------------------------------------------------
    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if self._bitmask is None:
            self._setup(input_ids)
        batch = input_ids.shape[0]
        if batch != len(self.matchers):
            raise ValueError(f"the batch has {batch} rows but the processor tracks {len(self.matchers)}: "
                             "use a fresh processor (or reset()) for each generate call")
        bitmask = self._bitmask
        assert bitmask is not None and self._prompt_lengths is not None
        start = min(self._prompt_lengths)
        rows = input_ids[:, start:].tolist()
        for r in range(batch):
            self._sync_row(r, rows[r][self._prompt_lengths[r] - start:])
            m = self.matchers[r]
            if m.is_terminated():
                bitmask[r].zero_()
                bitmask[r, self.eos_id >> 5] = self._eos_word
            else:
                m.fill_next_token_bitmask(bitmask, r)
                if not bool(bitmask[r].any()):
                    text = m.output_bytes().decode("utf-8", errors="replace")
                    raise GenerationError(f"row {r}: the grammar allows no token here", partial=text)
        # columns past the vocabulary (padded logits) are closed by the apply itself
        apply_token_bitmask_inplace(scores, bitmask.to(scores.device), vocab_size=self.info.vocab_size)
        return scores

    # -- inspection ------------------------------------------------------------------
    def is_complete(self, row: int = 0) -> bool:
        """True when row ``row``'s output so far is a complete sentence of its grammar."""
        if not self.matchers:
            return False
        return self.matchers[row].is_accepting()

    def output_text(self, row: int = 0) -> str:
        """The text row ``row``'s matcher has accepted (no EOS, no padding)."""
        if not self.matchers:
            return ""
        return self.matchers[row].output_bytes().decode("utf-8", errors="replace")


# -- convenience constructors --------------------------------------------------------------------
def _compiler(model: Any):
    from ..compiler import compiler_for

    if not hasattr(model, "info") or not hasattr(model, "hf_model"):
        raise TypeError(f"expected a structgen Model (structgen.load_model()), got {type(model).__name__}")
    return compiler_for(model)


def _per_row(value: Any, kinds: tuple[type, ...]) -> list[Any] | None:
    """A list/tuple of constraints means one per row."""
    if isinstance(value, (list, tuple)) and not isinstance(value, kinds):
        return list(value)
    return None


def json_logits_processor(model: Any, schema: Any, *, whitespace: str = "compact", strict: bool = False,
                          lenient: bool = False, prompt_lengths: int | Sequence[int] | None = None
                          ) -> StructgenLogitsProcessor:
    """A processor for a JSON Schema (dict, JSON text, Pydantic class, TypedDict, dataclass).

    A list of schemas gives one per batch row.  ``whitespace="compact"`` by
    default, as in ``generate_json``: a processor cannot end a generation that
    loops on whitespace, so we do not allow it to start.
    """
    comp = _compiler(model)
    rows = _per_row(schema, ())
    if rows is not None:
        grammars: Any = [comp.compile_json_schema(s, whitespace=whitespace, strict=strict, lenient=lenient)
                         for s in rows]
    else:
        grammars = comp.compile_json_schema(schema, whitespace=whitespace, strict=strict, lenient=lenient)
    return StructgenLogitsProcessor(grammars, model, prompt_lengths=prompt_lengths)


def regex_logits_processor(model: Any, pattern: str | Sequence[str], *,
                           prompt_lengths: int | Sequence[int] | None = None) -> StructgenLogitsProcessor:
    """A processor whose output must fully match ``pattern`` (a list: one pattern per row)."""
    comp = _compiler(model)
    rows = _per_row(pattern, (str,))
    grammars: Any = [comp.compile_regex(p) for p in rows] if rows is not None else comp.compile_regex(pattern)
    return StructgenLogitsProcessor(grammars, model, prompt_lengths=prompt_lengths)


def grammar_logits_processor(model: Any, grammar: Any, *, start: str = "start",
                             prompt_lengths: int | Sequence[int] | None = None) -> StructgenLogitsProcessor:
    """A processor for a Lark grammar (text or ``.lark`` path; a list: one per row)."""
    comp = _compiler(model)
    rows = _per_row(grammar, (str,))
    grammars: Any = ([comp.compile_lark(g, start=start) for g in rows] if rows is not None
                     else comp.compile_lark(grammar, start=start))
    return StructgenLogitsProcessor(grammars, model, prompt_lengths=prompt_lengths)
