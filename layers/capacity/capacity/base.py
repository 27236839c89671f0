"""The base of every pydantic model of the layer.

Its models' validators and serializers are built on first use (pydantic's ``defer_build``), not when their
module is imported: a cold start builds only the models its first invocation validates, not the request
schema, every step contract and every event model the handler's imports name (``python -X importtime``:
about 35 ms of a step function's init). A model's own ``model_config`` is merged with this one.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """:class:`pydantic.BaseModel` with its schema built on first use (see the module docstring)."""

    model_config = ConfigDict(defer_build=True)
