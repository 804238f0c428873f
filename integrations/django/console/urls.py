"""URLs of the console: ``path("rocketmq/", include("rocketmq_sdk.integrations.django.console.urls"))``."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from .security import ThrottledLoginView
from .views import acl, charts, cluster, groups, messages, monitor, topics, traces

app_name = "rocketmq_console"

urlpatterns = [
    path("", cluster.cluster, name="cluster"),
    # without a "next", a login lands on the cluster page (not Django's LOGIN_REDIRECT_URL,
    # /accounts/profile/ by default, which the console does not have)
    path("login/", ThrottledLoginView.as_view(template_name="rocketmq_console/login.html",
                                              next_page="rocketmq_console:cluster"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="rocketmq_console:login"), name="logout"),
    path("brokers/<str:addr>/", cluster.broker, name="broker"),
    path("topics/", topics.topics, name="topics"),
    path("topics/create/", topics.topic_create, name="topic_create"),
    path("topics/<str:topic>/", topics.topic_detail, name="topic"),
    path("topics/<str:topic>/perm/", topics.topic_perm, name="topic_perm"),
    path("topics/<str:topic>/delete/", topics.topic_delete, name="topic_delete"),
    path("topics/<str:topic>/send/", topics.topic_send, name="topic_send"),
    path("groups/", groups.groups, name="groups"),
    path("groups/config/", groups.group_config, name="group_config"),
    path("groups/<str:group>/", groups.group_detail, name="group"),
    path("groups/<str:group>/reset/", groups.group_reset, name="group_reset"),
    path("groups/<str:group>/clients/<str:client_id>/", groups.group_client, name="group_client"),
    path("groups/<str:group>/delete/", groups.group_delete, name="group_delete"),
    path("producers/", groups.producers, name="producers"),
    path("messages/", messages.message_search, name="messages"),
    path("messages/<str:topic>/<str:msg_id>/", messages.message_detail, name="message"),
    path("messages/<str:topic>/<str:msg_id>/resend/", messages.message_resend, name="message_resend"),
    path("dlq/", messages.dlq, name="dlq"),
    path("dlq/export/", messages.dlq_export, name="dlq_export"),
    path("dlq/resend/", messages.dlq_resend, name="dlq_resend"),
    path("dlq/send-copy/", messages.dlq_send_copy, name="dlq_send_copy"),
    path("dlq/send-copy/confirm/", messages.dlq_copy_confirm, name="dlq_copy_confirm"),
    path("traces/", traces.trace, name="trace"),
    path("charts/", charts.charts, name="charts"),
    path("monitor/", monitor.monitor, name="monitor"),
    path("acl/", acl.acl, name="acl"),
    path("acl/account/", acl.acl_account, name="acl_account"),
    path("acl/delete/", acl.acl_delete, name="acl_delete"),
    path("acl/white-list/", acl.acl_white_list, name="acl_white_list"),
    path("monitor/thresholds/", monitor.threshold_set, name="threshold_set"),
    path("monitor/thresholds/<str:group>/delete/", monitor.threshold_delete, name="threshold_delete"),
]
