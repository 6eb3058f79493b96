"""Integrations with other libraries.

- ``structgen.integrations.transformers``: ``StructgenLogitsProcessor`` (and
  ``json_logits_processor`` / ``regex_logits_processor`` / ``grammar_logits_processor``)
  for ``model.generate(logits_processor=[...])``, batch-aware, one grammar per row.
- ``structgen.integrations.langchain``: ``ChatStructgen``, a LangChain chat model over a
  local transformers model with grammar-enforced ``with_structured_output`` and
  ``bind_tools`` (needs ``pip install 'structgen[langchain]'``).
- ``structgen.integrations.tools``: tool calling as one JSON Schema (``tool_call_schema``),
  shared by the above and usable with ``generate_json``.

Submodules are imported explicitly, so importing ``structgen`` never pulls in LangChain.
"""
