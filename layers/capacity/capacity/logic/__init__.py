"""The workflow steps, one module per step, each takes a validated input and :class:`capacity.ports.Ports`."""
