"""Read a SAM template and stand its resources up in moto, the way ``sam deploy`` + CloudFormation would.

The package's pieces are described in :mod:`localcloud.template.stack`; the names other modules use are
re-exported here, so ``from localcloud.template import Stack`` keeps working.
"""

from localcloud.template.deploy import CREATED_TYPES, client_error_text, conform
from localcloud.template.loading import LOCAL_VALUES_FILE, load_local_values
from localcloud.template.model import ApiRoute, Resource, TemplateError
from localcloud.template.naming import STREAM_LABEL
from localcloud.template.stack import Stack

__all__ = [
    "CREATED_TYPES",
    "LOCAL_VALUES_FILE",
    "STREAM_LABEL",
    "ApiRoute",
    "Resource",
    "Stack",
    "TemplateError",
    "client_error_text",
    "conform",
    "load_local_values",
]
