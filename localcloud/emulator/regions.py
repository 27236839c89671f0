"""Which region names are real.

A region that AWS has (per botocore's endpoint data) but where the emulated market sells nothing gives
empty searches, as AWS does where a type is not offered. A name that is not an AWS region cannot be
reached at all on AWS (botocore fails to connect); the closest service answer, and the one an account gets
from a region it has not enabled, is ``UnrecognizedClientException`` (HTTP 403), which the emulator sends.
"""

from __future__ import annotations

from functools import cache

import botocore.session

from localcloud.contracts import AwsError


@cache
def known_regions() -> frozenset[str]:
    """Every region of the ``aws`` partition that has SageMaker or EC2, from botocore's local data."""
    session = botocore.session.get_session()
    return frozenset(session.get_available_regions("sagemaker")) | frozenset(
        session.get_available_regions("ec2")
    )


def require_known_region(region: str) -> None:
    """Raise what AWS answers for a region name that does not exist.

    Raises:
        AwsError: ``UnrecognizedClientException`` (403).
    """
    if region not in known_regions():
        raise AwsError(
            "UnrecognizedClientException",
            f"The security token included in the request is invalid (region {region!r} is not an AWS region "
            "enabled for this account).",
            403,
        )
