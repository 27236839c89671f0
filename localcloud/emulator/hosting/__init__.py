"""SageMaker hosting: models, endpoint configs, endpoints, inference components and ``InvokeEndpoint``.

The rules are in :mod:`localcloud.emulator.hosting.service`; :class:`Hosting` is re-exported here.
"""

from localcloud.emulator.hosting.service import Hosting

__all__ = ["Hosting"]
