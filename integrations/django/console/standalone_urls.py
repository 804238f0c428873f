"""URLs of the stand-alone console: the console at the root."""

from django.urls import include, path

urlpatterns = [path("", include("rocketmq_sdk.integrations.django.console.urls"))]
