"""The EC2 path (``platform`` ``ec2``, issue 6): buy a Capacity Block for ML exactly once, follow it to
``active``, launch the instances into it, and terminate them before AWS reclaims the capacity.

The wing of the EC2 platform; each step module of :mod:`capacity.logic` routes an ``ec2`` request here (the
state machines are shared):

* :func:`purchase_block` from ``purchase_capacity``: ``PurchaseCapacityBlock`` exactly once. The intent is
  recorded first (``PURCHASE_INTENT``, conditional put); the block's reservation is tagged with the
  request id (``TagSpecifications``); before any retry (intent already recorded, or a timeout that may
  have committed) the reservation is looked up by that tag (``DescribeCapacityReservations``) and
  adopted. ``PurchaseCapacityBlock`` takes no client token, so it is never retried blindly.
* :func:`block_activation` from ``wait_for_activation``: the reservation's state
  ``payment-pending -> scheduled -> active`` (AWS_FACTS.md), reported in the training plan vocabulary the
  state machine branches on (``Pending``, ``Scheduled``, ``Active``). Before the start the available
  count reads 0: that is not a failure. ``payment-failed``, ``failed``, ``cancelled``, ``expired`` and
  ``unavailable`` end the lifecycle with :class:`~capacity.errors.PlanFailed`.
* :func:`launch_instances` (Lambda ``launch_instances``): ``RunInstances`` from the request's launch
  template into the block (``InstanceMarketOptions.MarketType = capacity-block`` and
  ``CapacityReservationSpecification.CapacityReservationTarget``), with a client token derived from the
  request id, then ``READY`` with the reservation id, zone and instance ids. Without a launch template
  nothing is launched and the requester gets the reservation to launch into.
* :func:`release_block` from ``release_capacity``: terminate the instances tagged with the request id,
  wait until they are gone, record ``RELEASED`` with the cost summary.
* :func:`expiry_warning` (Lambda ``capacity_block_events``): the block's expiration warning event (40
  minutes before the end) becomes ``ReleaseRequested`` for the request that owns the block.
"""
