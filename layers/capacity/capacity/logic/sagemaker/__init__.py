"""The SageMaker AI wing (``platform`` ``sagemaker``): a training plan bought exactly once
(:mod:`.training_plan`), followed to ``Active`` (:mod:`.activation`), an endpoint with inference components on
it (:mod:`.deploy`), their copy counts scaled on alarms (:mod:`.scaling`), on demand first
(:mod:`.on_demand`), and the teardown of all of it (:mod:`.teardown`).

Each step module of :mod:`capacity.logic` routes a ``sagemaker`` request here; the rules both platforms share
(buy once, the ending, the costs, the activation deadlines) live beside the steps, never in a wing.
"""
