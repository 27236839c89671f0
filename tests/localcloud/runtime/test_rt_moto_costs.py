"""Work moto repeats on every call, done once (:mod:`localcloud.moto_costs`): the same answers, less CPU."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.loaders
import pytest
import xmltodict
from botocore import useragent as botocore_useragent
from botocore.exceptions import ClientError
from botocore.hooks import EventAliaser, HierarchicalEmitter
from moto import mock_aws
from moto.core import responses as moto_responses
from moto.core.utils import method_names_from_class
from moto.dynamodb.responses import DynamoHandler
from moto.kms import models as kms_models
from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser, ASLParserException

from localcloud import moto_costs

DEFINITION = json.dumps(
    {
        "StartAt": "Wait",
        "States": {
            "Wait": {"Type": "Wait", "Seconds": 60, "Next": "Done"},
            "Done": {"Type": "Pass", "Result": {"ok": True}, "End": True},
        },
    }
)


@pytest.fixture
def installed() -> Iterator[None]:
    moto_costs.install()
    try:
        yield
    finally:
        moto_costs.uninstall()


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per ANTLR parse of a definition (``ASLParser.state_machine``)."""
    counted: list[int] = []
    original = ASLParser.state_machine

    def counting(self: ASLParser) -> object:
        counted.append(1)
        return original(self)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(ASLParser, "state_machine", counting)
    return counted


def test_a_handler_class_lists_the_same_methods_and_each_caller_gets_its_own_list(installed: None) -> None:
    cached = moto_responses.__dict__["method_names_from_class"]
    first = cached(DynamoHandler)
    assert first == method_names_from_class(DynamoHandler)  # moto's own answer
    assert "query" in first
    first.append("not_a_method")
    assert "not_a_method" not in cached(DynamoHandler)


def test_a_definition_is_parsed_once_and_each_execution_gets_fresh_components(
    installed: None, parses: list[int]
) -> None:
    unique = DEFINITION.replace("60", "61")  # not parsed by another test of this process
    program_1, tree_1 = AmazonStateLanguageParser.parse(unique)
    program_2, tree_2 = AmazonStateLanguageParser.parse(unique)

    assert len(parses) == 1
    assert tree_1 is tree_2
    assert program_1 is not program_2  # executions never share evaluation components
    assert type(program_1) is type(program_2)


def test_a_bad_definition_fails_with_motos_own_error_every_time(installed: None) -> None:
    bad = DEFINITION.replace('"Type": "Wait"', '"Type": "Nope"')
    for _ in range(2):
        with pytest.raises(ASLParserException):
            AmazonStateLanguageParser.parse(bad)


def test_uninstall_puts_motos_functions_back() -> None:
    before = (moto_responses.__dict__["method_names_from_class"], AmazonStateLanguageParser.__dict__["parse"])
    moto_costs.install()
    moto_costs.install()  # idempotent
    assert moto_responses.__dict__["method_names_from_class"] is not before[0]
    moto_costs.uninstall()
    assert (
        moto_responses.__dict__["method_names_from_class"],
        AmazonStateLanguageParser.__dict__["parse"],
    ) == before


def test_create_state_machine_validates_a_text_once_and_refuses_a_bad_one_every_time(
    installed: None, parses: list[int]
) -> None:
    unique = DEFINITION.replace("60", "62")
    bad = unique.replace('"Type": "Pass"', '"Type": "Nope"')
    role = "arn:aws:iam::123456789012:role/sfn"
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        for name in ("one", "two"):
            sfn.create_state_machine(name=name, definition=unique, roleArn=role)
        for name in ("bad-one", "bad-two"):
            with pytest.raises(ClientError, match="ASLParserException"):  # moto's own refusal
                sfn.create_state_machine(name=name, definition=bad, roleArn=role)

    assert len(parses) == 3  # the good text once, the bad one each time


def _transactions_story() -> tuple[list[dict[str, Any]], list[list[str]]]:
    """A table with items, then three transactions: one that commits, and two that are cancelled after
    an earlier action of theirs wrote (a new item, and an overwrite); returns the table and each
    cancellation's reasons."""
    client: Any = boto3.client("dynamodb", region_name="us-east-1")
    client.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for n in range(50):
        client.put_item(TableName="t", Item={"pk": {"S": "p"}, "sk": {"S": f"s{n:03d}"}, "v": {"N": str(n)}})

    def put(sk: str, value: int, condition: str | None = None) -> dict[str, Any]:
        action: dict[str, Any] = {
            "TableName": "t",
            "Item": {"pk": {"S": "p"}, "sk": {"S": sk}, "v": {"N": str(value)}},
        }
        if condition:
            action["ConditionExpression"] = condition
        return {"Put": action}

    exists = {
        "ConditionCheck": {
            "TableName": "t",
            "Key": {"pk": {"S": "p"}, "sk": {"S": "s000"}},
            "ConditionExpression": "attribute_not_exists(sk)",
        }
    }
    reasons: list[list[str]] = []
    client.transact_write_items(TransactItems=[put("new-1", 1), put("s001", 100)])
    for actions in (
        [put("new-2", 2), exists],
        [put("s002", 200), put("s003", 300, "attribute_not_exists(sk)")],
    ):
        with pytest.raises(ClientError) as raised:
            client.transact_write_items(TransactItems=actions)
        reasons.append([r["Code"] for r in raised.value.response["CancellationReasons"]])
    items = client.scan(TableName="t")["Items"]
    return sorted(items, key=lambda item: item["sk"]["S"]), reasons


def test_a_cancelled_transaction_is_rolled_back_as_moto_does_without_copying_the_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with mock_aws():
        expected = _transactions_story()
    copied: list[str] = []
    real = copy.deepcopy

    def spying(value: Any, memo: Any = None) -> Any:
        copied.append(type(value).__name__)
        return real(value, memo)

    moto_costs.install()
    try:
        monkeypatch.setattr(copy, "deepcopy", spying)
        with mock_aws():
            assert _transactions_story() == expected
    finally:
        moto_costs.uninstall()
    assert expected[1] == [["None", "ConditionalCheckFailed"], ["None", "ConditionalCheckFailed"]]
    assert {"new-1"} <= {item["sk"]["S"] for item in expected[0]}
    assert "Table" not in copied  # items were copied, not the 50-item table
    assert "Item" in copied


def test_every_session_shares_one_loader_of_the_service_models(installed: None) -> None:
    # Given two sessions opened while the local cloud runs (its deploy and a deployer's script, say)
    first, second = (
        boto3.session.Session(region_name="us-east-1"),
        boto3.session.Session(region_name="us-east-1"),
    )
    loader = first._session.get_component("data_loader")
    # Then they read the models through one loader, whose search paths list boto3's data path once
    assert second._session.get_component("data_loader") is loader
    assert len(loader.search_paths) == len(set(loader.search_paths))
    # and a model comes out the same as from a loader of botocore's own (made by botocore's own factory:
    # the suite shares one loader in every session, tests/conftest.py)
    own = botocore.loaders.create_loader()
    assert own is not loader
    assert loader.load_service_model("dynamodb", "service-2") == own.load_service_model(
        "dynamodb", "service-2"
    )
    with mock_aws():
        assert second.client("dynamodb").list_tables()["TableNames"] == []


def test_an_xml_element_name_is_checked_once_and_a_bad_one_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked: list[str] = []
    original = xmltodict._validate_name

    def counting(value: object, kind: str) -> None:
        checked.append(str(value))
        original(value, kind)

    monkeypatch.setattr(xmltodict, "_validate_name", counting)
    # The names checked so far in this process (another test's cloud may have answered a ListRoles).
    monkeypatch.setattr(moto_costs, "_valid_names", set())
    moto_costs.install()  # wraps the check in place (the counting one, here)
    try:
        answers = {
            xmltodict.unparse({"ListRolesResponse": {"Roles": {"member": ["a", "b"]}}}) for _ in range(3)
        }
        for _ in range(2):
            with pytest.raises(ValueError, match="whitespace"):
                xmltodict.unparse({"bad name": "x"})
    finally:
        moto_costs.uninstall()
    assert checked.count("ListRolesResponse") == 1
    assert checked.count("bad name") == 2
    assert answers == {xmltodict.unparse({"ListRolesResponse": {"Roles": {"member": ["a", "b"]}}})}


def test_kms_keys_of_one_spec_share_a_key_pair_made_once(installed: None) -> None:
    with mock_aws():
        kms = boto3.client("kms", region_name="us-east-1")
        first = kms.create_key()["KeyMetadata"]["KeyId"]
        second = kms.create_key()["KeyMetadata"]["KeyId"]
        signing = kms.create_key(KeySpec="ECC_NIST_P256", KeyUsage="SIGN_VERIFY")["KeyMetadata"]["KeyId"]
        backend = kms_models.kms_backends["123456789012"]["us-east-1"]
        keys = backend.keys
        assert first != second
        assert keys[first].private_key is keys[second].private_key
        assert keys[signing].private_key is not keys[first].private_key
        assert kms.describe_key(KeyId=second)["KeyMetadata"]["KeySpec"] == "SYMMETRIC_DEFAULT"


def test_a_user_agent_component_is_sanitized_once_with_botocores_answer(installed: None) -> None:
    sanitize = botocore_useragent.sanitize_user_agent_string_component
    original = sanitize.__wrapped__  # type: ignore[attr-defined]
    before = sanitize.cache_info().hits  # type: ignore[attr-defined]
    for _ in range(3):
        assert sanitize("Boto3/1.x (linux; #1)", False) == original("Boto3/1.x (linux; #1)", False)
    assert sanitize("md/#x", True) == "md-#x"
    assert sanitize.cache_info().hits - before >= 2  # type: ignore[attr-defined]


def test_step_functions_tasks_share_one_client_per_region_and_service(installed: None) -> None:
    import threading

    from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_events,
    )

    lambda_client_for: Any = lambda_eval_utils.__dict__["boto_client_for"]
    events_client_for: Any = state_task_service_events.__dict__["boto_client_for"]
    made: list[Any] = []

    def make() -> None:  # a region no session of this process has opened a loader for yet
        made.append(lambda_client_for("ap-southeast-4", "lambda", object()))

    # Making one opens a session, whose loader takes the shared loaders' lock: no deadlock on it
    worker = threading.Thread(target=make, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive()

    again = lambda_client_for("ap-southeast-4", "lambda", None)
    other_region = lambda_client_for("eu-west-1", "lambda", None)
    events = events_client_for("ap-southeast-4", "events", None)
    assert made == [again]
    assert other_region is not again
    assert other_region.meta.region_name == "eu-west-1"
    assert events.meta.service_model.service_name == "events"
    assert again.meta.config.retries["total_max_attempts"] == 1  # moto's own client settings


def _emitter(aliases: dict[str, str] | None = None) -> Any:
    """A session's emitter (botocore's stubs do not show its private aliasing method)."""
    return EventAliaser(HierarchicalEmitter(), event_aliases=aliases)


def test_every_session_shares_botocores_event_aliases_and_other_aliases_stay_apart(installed: None) -> None:
    # Given botocore's own aliasing (a new emitter each, as every session has) and an emitter of other aliases
    names = ["before-call.apigateway.GetRestApi", "needs-retry.s3", "creating-client-class.sagemaker", "x"]
    expected = [_emitter()._alias_event_name(name) for name in names]  # kept now
    fresh, other = _emitter(), _emitter({"s3": "storage"})
    # Then a new session's emitter answers botocore's names from the shared answers, without working them out
    assert [fresh._alias_event_name(name) for name in names] == expected
    assert expected[0] == "before-call.api-gateway.GetRestApi"
    assert fresh._alias_name_cache == {}
    # and the other aliases are its own
    assert other._alias_event_name("needs-retry.s3") == "needs-retry.storage"
    assert fresh._alias_event_name("needs-retry.s3") == "needs-retry.s3"
    moto_costs.uninstall()
    assert _emitter()._alias_event_name(names[0]) == expected[0]
