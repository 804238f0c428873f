"""The RocketMQ console as a Django app (what apache/rocketmq-dashboard shows, on the SDK's
:class:`~rocketmq_sdk.admin.AdminClient`).

Inside a project::

    INSTALLED_APPS += ["django.contrib.auth", "django.contrib.contenttypes",
                       "django.contrib.sessions", "django.contrib.messages",
                       "rocketmq_sdk.integrations.django.console"]
    ROCKETMQ_CONSOLE = {"NAMESRV_ADDR": "127.0.0.1:9876"}
    urlpatterns += [path("rocketmq/", include("rocketmq_sdk.integrations.django.console.urls"))]

Stand-alone: ``python -m rocketmq_sdk.integrations.django.console --namesrv 127.0.0.1:9876``
(serves on 127.0.0.1:8080). See ``docs/console.md``.
"""
