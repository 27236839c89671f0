"""Work moto 5.2 repeats on every call, done once: the same answers at a fraction of the CPU (issue 14).

- ``BaseResponse.call_action`` lists the response class's methods with ``inspect.getmembers`` on every
  request (``moto.core.utils.method_names_from_class``: about a millisecond for the large handler classes).
  A class's functions do not change while the process runs, so the list is kept per class.
- Step Functions parses a state machine's definition with ANTLR at ``CreateStateMachine`` (validation) and
  again at every execution start (``AmazonStateLanguageParser.parse``): three quarters of a second for the
  application's reserve workflow, so most of a local cloud's start-up. The syntax tree depends on the text
  alone and the visitor only reads it, so the tree is kept per definition text; the evaluation components
  are still built anew for each call by moto's ``Preprocessor`` (executions share no state). A definition
  that fails to parse is parsed again each time, so the error is moto's own. ``CreateStateMachine`` and
  ``UpdateStateMachine`` only validate (``_validate_definition``): a text that passed once passes again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from moto.core import responses as moto_responses
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

_MAX_DEFINITIONS = 256

_saved: list[tuple[Any, str, Any]] = []
_method_names: dict[type, list[str]] = {}
_trees: dict[str, Any] = {}
_valid: set[str] = set()
_lock = threading.Lock()


def _cached_method_names(original: Callable[[object], list[str]]) -> Callable[[object], list[str]]:
    def method_names_from_class(clazz: object) -> list[str]:
        if not isinstance(clazz, type):
            return original(clazz)
        names = _method_names.get(clazz)
        if names is None:
            names = original(clazz)
            _method_names[clazz] = names
        return list(names)  # callers get their own list, as from moto

    return method_names_from_class


def _cached_parse(original: Callable[[str], tuple[Any, Any]]) -> Callable[[str], tuple[Any, Any]]:
    def parse(definition: str) -> tuple[Any, Any]:
        tree = _trees.get(definition)
        if tree is None:
            program, tree = original(definition)  # raises moto's ASLParserException on a bad definition
            with _lock:
                if len(_trees) >= _MAX_DEFINITIONS:
                    _trees.clear()
                _trees[definition] = tree
            return program, tree
        return Preprocessor().visit(tree), tree

    return parse


def _cached_validation(original: Callable[[str], None]) -> Callable[..., None]:
    def validate_definition(definition: str) -> None:
        if definition in _valid:
            return
        original(definition)  # raises moto's InvalidDefinition
        with _lock:
            if len(_valid) >= _MAX_DEFINITIONS:
                _valid.clear()
            _valid.add(definition)

    return validate_definition


def install() -> None:
    """Put both caches in place (idempotent); :func:`uninstall` puts moto's functions back."""
    if _saved:
        return
    names = moto_responses.__dict__["method_names_from_class"]  # imported there from moto.core.utils
    _saved.append((moto_responses, "method_names_from_class", names))
    setattr(moto_responses, "method_names_from_class", _cached_method_names(names))  # noqa: B010
    parse = AmazonStateLanguageParser.__dict__["parse"]
    _saved.append((AmazonStateLanguageParser, "parse", parse))
    validate = StepFunctionsParserBackend.__dict__["_validate_definition"]
    _saved.append((StepFunctionsParserBackend, "_validate_definition", validate))
    setattr(  # noqa: B010 - a private staticmethod of moto's
        StepFunctionsParserBackend,
        "_validate_definition",
        staticmethod(_cached_validation(validate.__func__)),
    )
    AmazonStateLanguageParser.parse = staticmethod(_cached_parse(parse.__func__))  # type: ignore[method-assign,assignment]


def uninstall() -> None:
    """Put moto's own functions back (the caches stay: they hold nothing of one cloud)."""
    while _saved:
        owner, attribute, original = _saved.pop()
        setattr(owner, attribute, original)
