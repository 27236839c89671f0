"""The lifecycle's steps, one module per step, each takes a validated input and :class:`capacity.ports.Ports`
(and :mod:`~capacity.logic.steps.common`, what they share). No step imports a door."""
