"""The serving simulation (issue 33): inference component copies packed on an endpoint's instances, with
target tracking, scale to zero and managed instance scaling, minute by minute over a traffic profile.

A standalone package: it imports nothing of the application (``capacity``) or of the local cloud
(``localcloud``); both import it (the planner to right-size a reservation before buying it, the local cloud
to place copies on its emulated endpoints), so the prediction and the emulation share one model of copies
and instances. Deployed in the capacity layer beside ``capacity``.
"""

from servingsim.packing import Hardware, Requirements, pack
from servingsim.simulate import ModelLoad, ModelOutcome, Outcome, Timings, simulate

__all__ = ["Hardware", "ModelLoad", "ModelOutcome", "Outcome", "Requirements", "Timings", "pack", "simulate"]
