"""The knowledge-graph layer's error type, below every module of ``structgen.kg``."""
from __future__ import annotations

from ..errors import StructgenError

__all__ = ["KnowledgeGraphError"]


class KnowledgeGraphError(StructgenError):
    """A graph that cannot be loaded, a query the store refuses, or a term the graph lacks."""
