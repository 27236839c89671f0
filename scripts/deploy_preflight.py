"""Before ``sam deploy`` (``make deploy``): whose credentials, which account and region, a first deployment?

Prints ``new`` (the stack does not exist: ``make deploy`` runs ``sam deploy --guided``) or ``existing`` on
standard output, and who deploys where on standard error. Exit status 2 with what to do when there are no
credentials, 3 when the stack is in a state ``sam deploy`` cannot update (``ROLLBACK_COMPLETE``: delete it
first). Calls ``sts:GetCallerIdentity`` and ``cloudformation:DescribeStacks`` only.
"""

from __future__ import annotations

import argparse
import sys

import boto3
import botocore.exceptions

BROKEN = frozenset({"ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "DELETE_FAILED", "UPDATE_ROLLBACK_FAILED"})


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0911 - one exit per outcome
    """Entry point; returns the exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--region", default=None)
    parser.add_argument("--profile", default=None)
    args = parser.parse_args(argv)
    try:
        session = boto3.session.Session(profile_name=args.profile or None, region_name=args.region or None)
        region = session.region_name or "us-east-1"
        who = session.client("sts", region_name=region).get_caller_identity()
    except (botocore.exceptions.NoCredentialsError, botocore.exceptions.ProfileNotFound) as exc:
        print(
            f"make deploy: no AWS credentials ({exc}). Configure them first: aws configure, or "
            "aws sso login --profile NAME and export AWS_PROFILE=NAME; the deployer needs the permissions "
            "in deploy/deployer-policy.json (docs/deploy.md).",
            file=sys.stderr,
        )
        return 2
    except botocore.exceptions.ClientError as exc:
        print(f"make deploy: the credentials were refused: {exc}", file=sys.stderr)
        return 2
    except botocore.exceptions.BotoCoreError as exc:
        print(f"make deploy: cannot reach AWS STS: {exc}", file=sys.stderr)
        return 2
    print(
        f"make deploy: stack {args.stack} in account {who['Account']}, region {region}, as {who['Arn']}",
        file=sys.stderr,
    )
    try:
        stacks = session.client("cloudformation", region_name=region).describe_stacks(StackName=args.stack)
    except botocore.exceptions.ClientError as exc:
        if "does not exist" in str(exc):
            print("make deploy: first deployment of this stack: sam deploy --guided", file=sys.stderr)
            print("new")
            return 0
        print(f"make deploy: cannot read the stack: {exc}", file=sys.stderr)
        return 2
    status = stacks["Stacks"][0]["StackStatus"]
    if status in BROKEN:
        print(
            f"make deploy: stack {args.stack} is {status}: CloudFormation cannot update it. Read its events "
            f"(aws cloudformation describe-stack-events --stack-name {args.stack}), then make remove "
            f"STACK={args.stack} and deploy again.",
            file=sys.stderr,
        )
        return 3
    print(f"make deploy: updating stack {args.stack} ({status})", file=sys.stderr)
    print("existing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
