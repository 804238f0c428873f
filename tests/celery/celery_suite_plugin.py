"""pytest plugin (``-p celery_suite_plugin``) of the run of Celery's own ``t/integration``
(celery_suite.py): registers the ``rocketmq://`` kombu alias in the process that runs the
suite and its in-process test worker."""

import rocketmq_sdk.integrations.celery  # noqa: F401  - registers rocketmq://
