"""The request id's fields are an explicit, versioned decision (capacity.identity, issue 15)."""

from __future__ import annotations

import typing

import pytest
from capacity.identity import IDENTITY, IDENTITY_VERSION
from capacity.request import ReservationRequest
from pydantic import BaseModel

from tests.unit.unit_fakes import request_body


def _request_models() -> dict[str, type[BaseModel]]:
    """Every model a request is made of, by class name (the request and its nested models)."""
    found: dict[str, type[BaseModel]] = {}

    def walk(model: type[BaseModel]) -> None:
        if model.__name__ in found:
            return
        found[model.__name__] = model
        for field in model.model_fields.values():
            for arg in _types(field.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    walk(arg)

    walk(ReservationRequest)
    return found


def _types(annotation: object) -> list[object]:
    args = typing.get_args(annotation)
    return [annotation] if not args else [t for a in args for t in _types(a)]


def test_every_field_of_a_request_has_a_decided_identity_role() -> None:
    models = _request_models()
    assert set(models) == set(IDENTITY), "a request model without an identity table (capacity.identity)"
    for name, model in models.items():
        undecided = set(model.model_fields) - set(IDENTITY[name])
        stale = set(IDENTITY[name]) - set(model.model_fields)
        assert not undecided, f"{name}: decide the identity role of {sorted(undecided)} in capacity.identity"
        assert not stale, f"{name}: {sorted(stale)} are no longer fields; remove them from capacity.identity"


def test_later_fields_are_versioned_and_reached_by_the_derivation() -> None:
    for name, roles in IDENTITY.items():
        for field, role in roles.items():
            assert 1 <= role.since <= IDENTITY_VERSION, (name, field)
            assert role.omit_when_default == (role.since > 1), (name, field)
            if role.omit_when_default:  # derive_request_id applies the roles of these two only
                assert name in ("ReservationRequest", "ModelSpec"), (name, field)


@pytest.mark.parametrize(
    ("overrides", "request_id"),
    [
        ({}, "req-16afb7bd4c7140ea"),
        ({"team": "ml-eval"}, "req-a6a6ebfa8813d24a"),
        ({"strategy": "reserved"}, "req-d43a6dac32fae557"),
        ({"idle_policy": {"action": "release", "idle_hours": 2}}, "req-47db83879ab81e9a"),
        (
            {"training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/p1"},
            "req-e071a27b2918b2af",
        ),
        (
            {
                "platform": "ec2",
                "instance_type": "p5.48xlarge",
                "models": [],
                "launch_template": {"name": "my-template"},
            },
            "req-e25ca071ffc4228f",
        ),
        # keep looking (identity version 6): the default interval sent explicitly is left out like unset
        # (15 minutes since issue 31: a request that sent 60, the default before, now has its own id)
        ({"search_every_minutes": 15}, "req-16afb7bd4c7140ea"),
        ({"search_until": "2026-12-05T00:00:00Z"}, "req-dca47bd380d8b410"),
        ({"search_until": "2026-12-05T00:00:00Z", "search_every_minutes": 120}, "req-a8557469e663bb40"),
    ],
)
def test_derived_ids_do_not_change(overrides: dict[str, object], request_id: str) -> None:
    body = request_body(**overrides)
    del body["request_id"]
    assert ReservationRequest.model_validate(body).id == request_id


def test_a_scaling_spec_changes_the_id_only_when_given() -> None:
    body = request_body()
    del body["request_id"]
    plain = ReservationRequest.model_validate(body).id
    body["models"] = [{**body["models"][0], "scaling": {"target_invocations_per_copy": 5}}]
    assert ReservationRequest.model_validate(body).id == "req-6446ff7d0cdedc23" != plain
