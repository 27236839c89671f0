"""Work moto 5.2 and botocore repeat on every call, done once: the same answers at a fraction of the CPU
(issue 14).

Over 400 lines: one place for every patch of moto's and botocore's internals, each small, so an upgrade of
either is checked against one module.

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
- DynamoDB's ``TransactWriteItems`` deep-copies every table a transaction names, once per action, to
  roll back if the transaction is cancelled: a cost that grows with the table (the ledger puts each state
  change in a transaction). The backup is taken of the items the actions name instead, and those items are
  put back when moto raises; moto's own rollback then puts back the same table object. The outcome is
  moto's: the same writes, the same ``CancellationReasons``. A cancelled transaction also takes back the
  stream records its undone writes added (moto keeps them; DynamoDB's stream holds committed changes only,
  and the ledger's stream carries its decisions: :mod:`localcloud.streams`).
- botocore gives each new session its own data loader, which reads and parses the service models' JSON
  again (every local cloud opens sessions: its deploy, its doors, the deployer's scripts). The models are
  files of the installed botocore and a loader's answers are already shared by all clients of a session,
  so one loader per data path serves every session of the process (boto3 adds its own data path to each
  session's loader: added once).
- botocore builds each request's ``User-Agent`` anew, checking every character of every component
  (``sanitize_user_agent_string_component``): a pure function of its two arguments, whose answers are kept.
- moto's XML answers (IAM, CloudWatch, SNS...) go through ``xmltodict.unparse``, which checks every element
  name character by character on every answer: a name that passed once passes again (a bad one is
  checked, and refused, each time).
- moto's Step Functions makes a new boto3 client for every task it runs (``boto_client_for``: a Lambda
  invocation, an EventBridge ``PutEvents``...), about ten milliseconds each. Its clients differ only by
  region, service and whether moto intercepts calls, and carry no state between calls: one per kind is kept.
- moto's Step Functions parses every JSONPath of a state (``InputPath``, ``ResultPath``, ``Parameters``'
  ``.$`` keys...) with a new jsonpath-ng parser each time it evaluates it, building the parser's tables
  anew (about a millisecond each, several per state). A path's parsed expression depends on the text alone
  and evaluating it only reads it, so one per text is kept.
- botocore checks that every handler registered on an event system takes ``**kwargs``
  (``botocore.hooks``' ``accepts_kwargs``: ``inspect.getfullargspec``) and every new session registers
  about two hundred built-in handlers (every Lambda environment, every deployer script opens sessions). For a
  plain function or method the answer depends on its code object alone: kept per code object.
- Each of those registrations, and every event a client emits, first renames the event by botocore's alias
  table (``EventAliaser._alias_event_name``: splitting and scanning the name against every alias), and each
  session keeps its answers in a dictionary of its own, so every new session (every Lambda environment's)
  works them all out again. With botocore's own alias table the answer depends on the name alone: one
  dictionary for every session (an emitter given other aliases keeps its own).
- A KMS key moto creates (every DynamoDB table with server-side encryption gets one) generates an RSA
  key pair: a fifteenth of a cloud's start-up. Keys of one key spec share one key pair, made once; nothing
  here signs or encrypts with them.
"""

from __future__ import annotations

import copy
import functools
import importlib
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import CodeType, FunctionType, ModuleType
from typing import Any

import xmltodict
from botocore import hooks as botocore_hooks
from botocore import loaders as botocore_loaders
from botocore import session as botocore_session
from botocore import useragent as botocore_useragent
from botocore import utils as botocore_utils
from moto.core import responses as moto_responses
from moto.core.models import botocore_stubber as moto_botocore_stubber
from moto.dynamodb import models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.kms import models as kms_models
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor
from moto.stepfunctions.parser.models import StepFunctionsParserBackend

_MAX_DEFINITIONS = 256

_saved: list[tuple[Any, str, Any]] = []
_method_names: dict[type, list[str]] = {}
_trees: dict[str, Any] = {}
_valid: set[str] = set()
_lock = threading.Lock()
_STATE_TASK = "moto.stepfunctions.parser.asl.component.state.exec.state_task"
_TASK_CLIENT_USERS: tuple[ModuleType, ...] = tuple(
    importlib.import_module(name)
    for name in (
        f"{_STATE_TASK}.lambda_eval_utils",
        *(
            f"{_STATE_TASK}.service.state_task_service_{service}"
            for service in ("aws_sdk", "batch", "dynamodb", "ecs", "events", "glue", "sfn", "sns", "sqs")
        ),
    )
)
"""The modules of moto's Step Functions that make a boto3 client per task (each imported its own name)."""
_in_transaction = threading.local()
_loaders: dict[str | None, botocore_loaders.Loader] = {}
_valid_names: set[tuple[Any, str]] = set()
_key_pairs: dict[str, Any] = {}
_kwargs_names: dict[CodeType, Any] = {}
_event_names: dict[str, str] = {}
_JSON_PATH_USERS = (
    ("moto.stepfunctions.parser.asl.utils.json_path", "parse"),  # jsonpath_ng.ext.parse
    ("moto.stepfunctions.parser.asl.component.common.path.result_path", "parse"),  # jsonpath_ng.parse
)


def _checked_once(original: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    def validate_name(value: Any, kind: str) -> None:
        if isinstance(value, str) and (value, kind) in _valid_names:
            return
        original(value, kind)  # raises xmltodict's ValueError on a bad name
        if isinstance(value, str):
            _valid_names.add((value, kind))

    return validate_name


def _one_key_pair_per_spec(original: Callable[[str], Any]) -> Callable[[str], Any]:
    def generate_private_key(key_spec: str) -> Any:
        with _lock:
            pair = _key_pairs.get(key_spec)
            if pair is None:
                pair = _key_pairs[key_spec] = original(key_spec)
            return pair

    return generate_private_key


class _SearchPaths(list[str]):
    """A loader's search paths, where adding a path already listed does nothing."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


def _shared_loader(
    original: Callable[[str | None], botocore_loaders.Loader],
) -> Callable[[str | None], botocore_loaders.Loader]:
    def create_loader(search_path_string: str | None = None) -> botocore_loaders.Loader:
        with _lock:
            loader = _loaders.get(search_path_string)
            if loader is None:
                loader = original(search_path_string)
                setattr(loader, "_search_paths", _SearchPaths(loader.search_paths))  # noqa: B010 - botocore's own
                _loaders[search_path_string] = loader
            return loader

    create_loader._localcloud_cache = True  # type: ignore[attr-defined]  # see _once
    return create_loader


def _shared_task_clients(original: Callable[..., Any]) -> Callable[..., Any]:
    clients: dict[tuple[str, str, bool], Any] = {}
    # Its own lock: making a client opens a session, whose data loader takes ``_lock``.
    lock = threading.Lock()

    def boto_client_for(region: str, service: str, state_credentials: Any = None) -> Any:
        # moto's own ignores ``state_credentials`` too: every client it makes signs with the same fixed keys.
        key = (region, service, bool(moto_botocore_stubber.enabled))
        with lock:
            client = clients.get(key)
            if client is None:
                client = clients[key] = original(region, service, state_credentials)
            return client

    return boto_client_for


class _TableBackupShim(ModuleType):
    """``copy`` for moto's DynamoDB models: inside a transaction a table's "backup" is the table itself."""

    def __init__(self) -> None:
        super().__init__("copy")

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        if isinstance(value, Table) and getattr(_in_transaction, "active", False):
            return value
        return copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


_Touched = tuple[Table, DynamoType, DynamoType | None, Any]


def _touched_items(backend: DynamoDBBackend, actions: list[dict[str, Any]]) -> list[_Touched]:
    """(table, hash, range, a copy of the item or None) for each item the actions name."""
    touched: list[_Touched] = []
    for action in actions:
        for op in action.values():
            table = backend.tables.get(op.get("TableName", "")) if isinstance(op, dict) else None
            if table is None:
                continue
            key = op.get("Item") if "Item" in op else op.get("Key")
            if not isinstance(key, dict) or table.hash_key_attr not in key:
                continue
            if table.range_key_attr is not None and table.range_key_attr not in key:
                continue
            hash_value = DynamoType(key[table.hash_key_attr])
            range_value = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
            before = table.get_item(hash_value, range_value)
            touched.append((table, hash_value, range_value, copy.deepcopy(before)))
    return touched


def _restore(touched: list[_Touched]) -> None:
    for table, hash_value, range_value, before in reversed(touched):
        if range_value is None:
            if before is None:
                table.items.pop(hash_value, None)
            else:
                table.items[hash_value] = before
        elif before is None:
            table.items[hash_value].pop(range_value, None)
        else:
            table.items[hash_value][range_value] = before


def _stream_marks(touched: list[_Touched]) -> list[tuple[Any, int, set[str]]]:
    """(a touched table's stream shard, its record count now, the keys the transaction names there)."""
    marks: dict[int, tuple[Any, int, set[str]]] = {}
    for table, hash_value, range_value, _ in touched:
        shard = getattr(table, "stream_shard", None)
        if shard is None:
            continue
        mark = marks.setdefault(id(shard), (shard, len(shard.items), set()))
        mark[2].add(_stream_key(table, hash_value.to_json(), range_value.to_json() if range_value else None))
    return list(marks.values())


def _stream_key(table: Table, hash_json: Any, range_json: Any) -> str:
    return json.dumps([table.name, hash_json, range_json], sort_keys=True)


def _take_back_stream_records(marks: list[tuple[Any, int, set[str]]]) -> None:
    """Drop the stream records a cancelled transaction's writes added (DynamoDB never streams them)."""
    for shard, before, keys in marks:
        table = shard.table
        kept = []
        for record in shard.items[before:]:
            found = record.record["dynamodb"]["Keys"]
            hash_json = found.get(table.hash_key_attr)
            range_json = found.get(table.range_key_attr) if table.range_key_attr else None
            if _stream_key(table, hash_json, range_json) not in keys:
                kept.append(record)
        shard.items[before:] = kept


def _item_level_backup(original: Callable[..., None]) -> Callable[..., None]:
    def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
        touched = _touched_items(self, transact_items)
        marks = _stream_marks(touched)
        _in_transaction.active = True
        try:
            original(self, transact_items)
        except BaseException:
            _restore(touched)
            _take_back_stream_records(marks)
            raise
        finally:
            _in_transaction.active = False

    return transact_write_items


def _kwargs_per_code(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def accepts_kwargs(func: Any) -> Any:
        target = getattr(func, "__func__", func)
        if type(target) is not FunctionType or "__signature__" in vars(target):
            return original(func)  # a partial, a callable object, a declared signature: ask inspect
        code = target.__code__
        if code not in _kwargs_names:
            _kwargs_names[code] = original(func)
        return _kwargs_names[code]

    accepts_kwargs._localcloud_cache = True  # type: ignore[attr-defined]  # see _once
    return accepts_kwargs


def _shared_event_names(original: Callable[[Any, str], str]) -> Callable[[Any, str], str]:
    def _alias_event_name(self: Any, event_name: str) -> str:
        if self._event_aliases is not botocore_utils.EVENT_ALIASES:
            return original(self, event_name)  # an emitter given aliases of its own
        name = _event_names.get(event_name)
        if name is None:
            name = _event_names[event_name] = original(self, event_name)
        return name

    _alias_event_name._localcloud_cache = True  # type: ignore[attr-defined]  # see _once
    return _alias_event_name


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


def _once(wrap: Callable[[Any], Any], function: Any) -> Any:
    """``wrap(function)``, unless ``function`` already is such a cache (:func:`botocore_caches` and then a
    cloud's :func:`install`): a cache around a cache would take the lock it already holds."""
    return function if getattr(function, "_localcloud_cache", False) else wrap(function)


@contextmanager
def botocore_caches() -> Iterator[None]:
    """Only botocore's shared data loader, its ``**kwargs`` check per code object and its event names'
    aliases (see the module docstring), for a process that opens many sessions without a local cloud: the
    unit tests, whose every test makes its own clients (a local cloud's :func:`install` wraps them again,
    harmlessly)."""
    loader = botocore_session.__dict__["create_loader"]
    accepts = botocore_hooks.__dict__["accepts_kwargs"]
    alias = botocore_hooks.EventAliaser.__dict__["_alias_event_name"]
    setattr(botocore_session, "create_loader", _once(_shared_loader, loader))  # noqa: B010
    setattr(botocore_hooks, "accepts_kwargs", _once(_kwargs_per_code, accepts))  # noqa: B010
    setattr(botocore_hooks.EventAliaser, "_alias_event_name", _once(_shared_event_names, alias))  # noqa: B010
    try:
        yield
    finally:
        setattr(botocore_session, "create_loader", loader)  # noqa: B010
        setattr(botocore_hooks, "accepts_kwargs", accepts)  # noqa: B010
        setattr(botocore_hooks.EventAliaser, "_alias_event_name", alias)  # noqa: B010


def install() -> None:
    """Put the caches and the item-level backup in place (idempotent); :func:`uninstall` puts moto's
    functions back."""
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
    loader = botocore_session.__dict__["create_loader"]  # imported there from botocore.loaders
    _saved.append((botocore_session, "create_loader", loader))
    setattr(botocore_session, "create_loader", _once(_shared_loader, loader))  # noqa: B010
    sanitize = botocore_useragent.__dict__["sanitize_user_agent_string_component"]
    _saved.append((botocore_useragent, "sanitize_user_agent_string_component", sanitize))
    setattr(botocore_useragent, "sanitize_user_agent_string_component", functools.lru_cache(4096)(sanitize))  # noqa: B010
    check_name = xmltodict.__dict__["_validate_name"]
    _saved.append((xmltodict, "_validate_name", check_name))
    setattr(xmltodict, "_validate_name", _checked_once(check_name))  # noqa: B010 - xmltodict's private helper
    generate = kms_models.__dict__["generate_private_key"]  # imported there from moto.kms.utils
    _saved.append((kms_models, "generate_private_key", generate))
    setattr(kms_models, "generate_private_key", _one_key_pair_per_spec(generate))  # noqa: B010
    accepts = botocore_hooks.__dict__["accepts_kwargs"]  # imported there from botocore.compat
    _saved.append((botocore_hooks, "accepts_kwargs", accepts))
    setattr(botocore_hooks, "accepts_kwargs", _once(_kwargs_per_code, accepts))  # noqa: B010
    alias = botocore_hooks.EventAliaser.__dict__["_alias_event_name"]
    _saved.append((botocore_hooks.EventAliaser, "_alias_event_name", alias))
    setattr(botocore_hooks.EventAliaser, "_alias_event_name", _once(_shared_event_names, alias))  # noqa: B010
    for module_name, name in _JSON_PATH_USERS:
        module = importlib.import_module(module_name)
        parse_path = module.__dict__[name]
        _saved.append((module, name, parse_path))
        setattr(
            module, name, functools.lru_cache(4096)(parse_path)
        )  # a bad path is parsed (and raises) each time
    for module in _TASK_CLIENT_USERS:
        make = module.__dict__["boto_client_for"]  # each module imported its own name
        _saved.append((module, "boto_client_for", make))
        setattr(module, "boto_client_for", _shared_task_clients(make))  # noqa: B010
    _saved.append((dynamodb_models, "copy", dynamodb_models.__dict__["copy"]))
    setattr(dynamodb_models, "copy", _TableBackupShim())  # noqa: B010
    transact = DynamoDBBackend.__dict__["transact_write_items"]
    _saved.append((DynamoDBBackend, "transact_write_items", transact))
    DynamoDBBackend.transact_write_items = _item_level_backup(transact)  # type: ignore[method-assign]


def uninstall() -> None:
    """Put moto's own functions back (the caches stay: they hold nothing of one cloud)."""
    while _saved:
        owner, attribute, original = _saved.pop()
        setattr(owner, attribute, original)
