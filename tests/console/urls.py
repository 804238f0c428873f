"""The console mounted as a project would: one ``path("rocketmq/", include(...))``."""

from django.urls import include, path

urlpatterns = [path("rocketmq/", include("rocketmq_sdk.integrations.django.console.urls"))]
