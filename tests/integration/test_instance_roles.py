"""Issue 13, defect 13 (part): ``launch_instances`` and ``on_demand`` pass only the roles an administrator
allows (``InstanceRoleArns``); a request whose launch template's instance profile runs as another role is
refused with a 400 naming ``launch_template`` before anything is bought."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from tests.integration.support import START, TEMPLATE, post_reservation, states
from tests.integration.test_ec2_capacity_blocks import EC2_REGIONS, blocks, ec2_request, instances

pytestmark = pytest.mark.integration

ROLE_ARN = "arn:aws:iam::123456789012:role/gpu-workers"


def _cloud(**parameters: str) -> LocalCloud:
    return LocalCloud(
        TEMPLATE, start=START, seed=7, parameter_overrides={"SlackChannelId": "C0TESTS", **parameters}
    )


def _template_with_profile(cloud: LocalCloud) -> None:
    iam = cloud.client("iam")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    iam.create_role(RoleName="gpu-workers", AssumeRolePolicyDocument=json.dumps(trust))
    iam.create_instance_profile(InstanceProfileName="gpu-workers-profile")
    iam.add_role_to_instance_profile(InstanceProfileName="gpu-workers-profile", RoleName="gpu-workers")
    for region in EC2_REGIONS:
        cloud.client("ec2", region).create_launch_template(
            LaunchTemplateName="gpu-workers",
            LaunchTemplateData={
                "ImageId": "ami-0abcdef1234567890",
                "InstanceType": "p5.48xlarge",
                "IamInstanceProfile": {"Name": "gpu-workers-profile"},
            },
        )


def test_a_launch_template_whose_role_is_not_allowed_is_refused_at_the_door() -> None:
    with _cloud() as cloud:  # the template's default: no role may be passed to EC2
        _template_with_profile(cloud)
        response = post_reservation(cloud, ec2_request())
        assert response["statusCode"] == 400, response
        (error,) = response["json"]["errors"]
        assert error["field"] == "launch_template"
        assert "gpu-workers-profile" in error["message"]
        assert ROLE_ARN in error["message"]
        cloud.run_until_idle()
        assert cloud.executions() == []
        assert blocks(cloud) == []


def test_an_allowed_role_is_launched_with() -> None:
    with _cloud(InstanceRoleArns=ROLE_ARN) as cloud:
        _template_with_profile(cloud)
        body: dict[str, Any] = ec2_request()
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run(stop_when=lambda: "READY" in states(cloud, body["request_id"]))
        assert len(blocks(cloud)) == 1
        assert len(instances(cloud)) == body["instance_count"]
