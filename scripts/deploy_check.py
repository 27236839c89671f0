"""The first step of ``make deploy``, ``make smoke`` and ``make remove``: whose credentials, which account and
Region, before anything is installed or built (seconds, not the 11 minutes of the SAM CLI and the build).

Runs with any Python 3 that has botocore (the AWS CLI's, the system's), else with the AWS CLI itself;
calls ``sts:GetCallerIdentity`` only (no permission needed). Prints who deploys where on standard error.
Exit status 0 when the credentials work (and name ``--account`` if given), 2 with what to set otherwise.

Usage: python3 scripts/deploy_check.py --region us-east-1 [--account 123456789012] [--profile NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Any

WHAT_TO_SET = (
    "Set credentials for the account to deploy to: export AWS_PROFILE=NAME (after aws configure, or aws sso "
    "login --profile NAME), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN); "
    "the Region with REGION=... (or AWS_DEFAULT_REGION); ACCOUNT=... to refuse any other account. "
    "The deployer needs deploy/deployer-policy.json (docs/deploy.md, step 1)."
)


def identity(region: str, profile: str | None) -> dict[str, Any]:
    """``GetCallerIdentity`` through botocore, else the AWS CLI.

    Raises:
        RuntimeError: no credentials, refused credentials, or neither botocore nor the AWS CLI (the reason).
    """
    try:
        import botocore.config  # noqa: PLC0415 - optional: the AWS CLI is the fallback
        import botocore.exceptions  # noqa: PLC0415
        import botocore.session  # noqa: PLC0415
    except ImportError:
        return _identity_by_cli(region, profile)
    session = botocore.session.Session(profile=profile) if profile else botocore.session.Session()
    config = botocore.config.Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 2})
    try:
        client = session.create_client("sts", region_name=region, config=config)
        answer: dict[str, Any] = client.get_caller_identity()  # type: ignore[attr-defined]
    except (botocore.exceptions.NoCredentialsError, botocore.exceptions.ProfileNotFound) as exc:
        raise RuntimeError(f"no AWS credentials ({exc})") from exc
    except botocore.exceptions.ClientError as exc:
        raise RuntimeError(f"the credentials were refused ({exc})") from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise RuntimeError(f"STS could not be reached in {region} ({exc})") from exc
    return answer


def _identity_by_cli(region: str, profile: str | None) -> dict[str, Any]:
    aws = shutil.which("aws")
    if aws is None:
        raise RuntimeError("neither botocore (pip install botocore) nor the AWS CLI is installed")
    command = [aws, "sts", "get-caller-identity", "--output", "json", "--region", region]
    if profile:
        command += ["--profile", profile]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)  # noqa: S603
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip() or "aws sts get-caller-identity failed")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    )
    parser.add_argument("--account", default=None, help="refuse credentials of any other account")
    parser.add_argument("--profile", default=os.environ.get("AWS_PROFILE"))
    args = parser.parse_args(argv)
    if not args.region:
        print(f"make deploy: no Region. {WHAT_TO_SET}", file=sys.stderr)
        return 2
    try:
        who = identity(args.region, args.profile or None)
    except RuntimeError as exc:
        print(f"make deploy: {exc}. {WHAT_TO_SET}", file=sys.stderr)
        return 2
    account = str(who.get("Account"))
    if args.account and account != args.account:
        print(
            f"make deploy: these credentials are of account {account} ({who.get('Arn')}), not ACCOUNT="
            f"{args.account}. {WHAT_TO_SET}",
            file=sys.stderr,
        )
        return 2
    print(f">> deploying as {who.get('Arn')} to account {account}, Region {args.region}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
