"""Inputs and outputs of the step handlers: the contract with the state machines, one module per step (or
group of steps) so a handler imports only its own (cold start: issue 31).

Field names are fixed (the ASL files select them with JSONPath); change them only together with
``statemachines/*.asl.json``. Inputs ignore unknown fields (a state may carry more than a step needs);
outputs are dumped with ``model_dump(mode="json")``: timestamps ``YYYY-MM-DDTHH:MM:SSZ``, money decimal
strings, never a ``datetime`` or ``Decimal`` object, never ``ResponseMetadata``.

- :mod:`~capacity.contracts.common`: the bases, ``StepError`` (a ``Catch``'s error), ``backoff_seconds``;
- :mod:`~capacity.contracts.intake`: ``record_request``; :mod:`~capacity.contracts.finding`:
  ``search_offerings``, ``choose_offering``; :mod:`~capacity.contracts.notify`: ``notify``;
- :mod:`~capacity.contracts.purchase`: ``purchase_capacity``; :mod:`~capacity.contracts.activation`:
  ``wait_for_activation``; :mod:`~capacity.contracts.serving`: ``create_endpoint``,
  ``create_inference_components``, ``launch_instances``; :mod:`~capacity.contracts.on_demand`: ``on_demand``;
- :mod:`~capacity.contracts.release`: ``release_capacity``; :mod:`~capacity.contracts.scaling`:
  ``scale_components``.

The REST API's bodies are :mod:`capacity.rest_bodies`. This package's ``__init__`` imports nothing: importing
one step's module loads only that module and what it names.
"""
