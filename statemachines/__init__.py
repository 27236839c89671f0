"""The workflows written as specs (issue 32): each ``<name>.py`` here writes ``<name>.asl.json`` beside it.

``spec.py`` holds the words (states, policies' shape, the generator), ``policies.py`` every fault policy
once, ``generate.py`` the list of workflows and ``python -m statemachines`` (``make asl``). The JSON stays
committed: it is what SAM deploys and the local cloud runs. Build time only: nothing deployed imports
this package.
"""
