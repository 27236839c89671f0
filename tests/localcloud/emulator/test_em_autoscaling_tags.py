"""Tags of scalable targets (issue 4: scaling is tagged per reservation so a release can find it)."""

from __future__ import annotations

import pytest
import time_machine

from localcloud.emulator import Emulator
from tests.localcloud.emulator.support import Call, Deployment, deploy_on_plan, raises_aws

IC = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "inference-component/model-a",
    "ScalableDimension": "sagemaker:inference-component:DesiredCopyCount",
}
TAG = "capacity-orchestrator:request-id"


@pytest.fixture
def deployed(emulator: Emulator, clock: time_machine.Traveller) -> Deployment:
    return deploy_on_plan(emulator, clock, min_instances=0)


def test_tags_given_at_registration_are_listed_and_kept_by_a_later_registration(
    call: Call, deployed: Deployment
) -> None:
    arn = call(
        "application-autoscaling",
        "RegisterScalableTarget",
        **IC,
        MinCapacity=0,
        MaxCapacity=4,
        Tags={TAG: "r-1"},
    )["ScalableTargetARN"]
    call(
        "application-autoscaling",
        "RegisterScalableTarget",
        **IC,
        MinCapacity=1,
        MaxCapacity=2,
        Tags={TAG: "other"},
    )
    assert call("application-autoscaling", "ListTagsForResource", ResourceARN=arn)["Tags"] == {TAG: "r-1"}
    target = call("application-autoscaling", "DescribeScalableTargets", ServiceNamespace="sagemaker")[
        "ScalableTargets"
    ][0]
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 2)


def test_tag_and_untag_change_the_tags(call: Call, deployed: Deployment) -> None:
    arn = call("application-autoscaling", "RegisterScalableTarget", **IC, MinCapacity=0, MaxCapacity=4)[
        "ScalableTargetARN"
    ]
    call("application-autoscaling", "TagResource", ResourceARN=arn, Tags={TAG: "r-1", "team": "ml"})
    call("application-autoscaling", "UntagResource", ResourceARN=arn, TagKeys=["team"])
    assert call("application-autoscaling", "ListTagsForResource", ResourceARN=arn)["Tags"] == {TAG: "r-1"}


def test_tags_of_a_deregistered_target_are_not_found(call: Call, deployed: Deployment) -> None:
    arn = call(
        "application-autoscaling",
        "RegisterScalableTarget",
        **IC,
        MinCapacity=0,
        MaxCapacity=4,
        Tags={TAG: "r"},
    )["ScalableTargetARN"]
    call("application-autoscaling", "DeregisterScalableTarget", **IC)
    with raises_aws("ResourceNotFoundException", "not found"):
        call("application-autoscaling", "ListTagsForResource", ResourceARN=arn)
