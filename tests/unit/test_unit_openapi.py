"""docs/openapi.json is what functions/api generates (Powertools), and it documents every route."""

from __future__ import annotations

import json

from scripts.export_openapi import DOCUMENT, generate


def test_committed_openapi_document_matches_the_code() -> None:
    assert DOCUMENT.read_text() == generate(), "docs/openapi.json is out of date: run `make openapi`"


def test_every_route_documents_its_errors() -> None:
    document = json.loads(generate())
    operations = {
        (method.upper(), path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }
    assert set(operations) == {
        ("POST", "/plans"),
        ("POST", "/reservations"),
        ("GET", "/reservations"),
        ("GET", "/reservations/{request_id}"),
        ("POST", "/reservations/{request_id}/approval"),
        ("POST", "/reservations/{request_id}/extensions"),
        ("POST", "/reservations/{request_id}/extensions/{extension_id}/approval"),
        ("DELETE", "/reservations/{request_id}"),
        ("PATCH", "/reservations/{request_id}"),
        ("POST", "/schedules"),
        ("GET", "/schedules"),
        ("GET", "/schedules/{name}"),
        ("DELETE", "/schedules/{name}"),
        ("GET", "/costs"),
        ("GET", "/admin/teams"),
        ("PUT", "/admin/teams/{team}"),
        ("GET", "/admin/teams/{team}"),
        ("DELETE", "/admin/teams/{team}"),
        ("PUT", "/admin/account"),
        ("GET", "/admin/admins"),
        ("PUT", "/admin/admins"),
        ("GET", "/admin/people"),
        ("PUT", "/admin/people"),
    }
    for (method, path), operation in operations.items():
        codes = set(operation["responses"])
        assert "400" in codes, (method, path)
        if method == "POST":
            assert {"413", "422"} <= codes, (method, path)
        if "{" in path and method != "PUT":  # a PUT creates what it names
            assert "404" in codes, (method, path)
        if path.startswith("/admin/") or path == "/reservations/{request_id}/approval":
            assert "403" in codes, (method, path)  # a caller without the permission or the role is refused
    assert "text/csv" in operations[("GET", "/costs")]["responses"]["200"]["content"]
    assert "409" in operations[("DELETE", "/reservations/{request_id}")]["responses"]  # paid, not confirmed
    accepted = operations[("POST", "/reservations")]["responses"]["202"]
    assert accepted["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ReservationAccepted"
    }
