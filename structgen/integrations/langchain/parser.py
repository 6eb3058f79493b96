"""The output parser of ``with_structured_output``: JSON, then the Pydantic class or the schema;
partial values while streaming."""
from __future__ import annotations

import json
from typing import Any, Optional

from langchain_core.exceptions import OutputParserException
from langchain_core.output_parsers import JsonOutputParser
from langchain_core.outputs import Generation
from pydantic import ValidationError

from .messages import _is_pydantic_v1_class


# -- output parser ---------------------------------------------------------------------------------
class StructgenOutputParser(JsonOutputParser):
    """Parses a structured answer: JSON, then the Pydantic class or the JSON Schema.

    Failures raise ``OutputParserException`` (with ``llm_output``).  Streaming
    yields partial dicts for dict schemas and, for a Pydantic class, partial
    instances (``model_construct`` of the fields written so far, unvalidated:
    a string field holds its text so far) and then the validated instance.
    """

    pydantic_object: Optional[Any] = None  # type: ignore[assignment]
    json_schema: Optional[dict] = None

    def _partial_instance(self, text: str) -> Any:
        """The Pydantic class built from the fields written so far (None before the first)."""
        from ...partial_json import parse_partial

        try:
            value = parse_partial(text)
        except ValueError:
            return None
        if not isinstance(value, dict) or not value:
            return None
        return self.pydantic_object.model_construct(**value)

    def parse_result(self, result: list[Generation], *, partial: bool = False) -> Any:
        text = result[0].text
        if partial:
            if self.pydantic_object is not None:
                try:
                    return self._validate(json.loads(text))
                except (OutputParserException, ValueError):
                    return self._partial_instance(text)
            try:
                return super().parse_result(result, partial=True)
            except OutputParserException:
                return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise OutputParserException(f"the answer is not JSON: {e}", llm_output=text) from e
        if self.pydantic_object is not None:
            try:
                return self._validate(value)
            except OutputParserException as e:
                raise OutputParserException(str(e), llm_output=text) from e.__cause__
        if self.json_schema is not None:
            import jsonschema

            cls = jsonschema.validators.validator_for(self.json_schema, default=jsonschema.Draft202012Validator)
            err = jsonschema.exceptions.best_match(cls(self.json_schema).iter_errors(value))
            if err is not None:
                ptr = "/" + "/".join(str(p) for p in err.absolute_path)
                raise OutputParserException(f"the answer does not validate at {ptr}: {err.message}",
                                            llm_output=text)
        return value

    def _validate(self, value: Any) -> Any:
        cls = self.pydantic_object
        if _is_pydantic_v1_class(cls):
            from pydantic.v1 import ValidationError as ValidationErrorV1

            try:
                return cls.parse_obj(value)
            except ValidationErrorV1 as e:
                raise OutputParserException(f"the answer does not validate as {cls.__name__}: {e}") from e
        try:
            return cls.model_validate(value)
        except ValidationError as e:
            raise OutputParserException(f"the answer does not validate as {cls.__name__}: {e}") from e

    def parse(self, text: str) -> Any:
        return self.parse_result([Generation(text=text)])

    @property
    def _type(self) -> str:
        return "structgen_output_parser"


