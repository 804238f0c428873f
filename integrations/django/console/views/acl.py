"""ACL page (brokers with ``aclEnable=true``, 4.9.x plain ACL): each master's ACL config version;
create/update or delete an account, replace the global white list, on every master of a cluster
(the admin API's UPDATE_AND_CREATE_ACL_CONFIG 50, DELETE_ACL_CONFIG 51,
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG 53). 4.9.8 has no request listing the accounts, so none are
listed. Hidden (nav link and page) while every broker has ACL off."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from rocketmq_sdk.exceptions import MQError

from .. import service
from ..forms import AclAccountForm, AclDeleteForm, WhiteListForm
from .base import can_operate, cleaned, cluster_names, operator, viewer


@viewer
def acl(request: HttpRequest) -> HttpResponse:
    on = service.acl_brokers()
    if not on:
        raise Http404("ACL is off on every broker (aclEnable=false)")
    adm = service.admin()
    versions = []
    for addr in sorted(on):
        try:
            versions.append((addr, adm.acl_config_version(broker_addr=addr)[addr]))
        except MQError as exc:
            messages.error(request, f"ACL version of {addr}: {exc}")
    clusters = cluster_names(request)
    return render(request, "rocketmq_console/acl.html", {
        "versions": versions, "clusters": clusters, "account_form": AclAccountForm(), "delete_form": AclDeleteForm(),
        "white_form": WhiteListForm(), "can_operate": can_operate(request), "page": "acl"})


@operator("update ACL account")
def acl_account(request: HttpRequest) -> HttpResponse:
    d = cleaned(AclAccountForm(request.POST))
    addrs = service.admin().update_acl_config(
        d["access_key"], d["secret_key"], cluster=d["cluster"], white_remote_address=d["white_remote_address"] or None,
        admin=d["admin"], default_topic_perm=d["default_topic_perm"], default_group_perm=d["default_group_perm"],
        topic_perms=d["topic_perms"], group_perms=d["group_perms"])
    return _done(request, f"ACL account {d['access_key']} created/updated", addrs)


def _done(request: HttpRequest, text: str, addrs: list[str]) -> HttpResponse:
    messages.success(request, f"{text} on {', '.join(addrs)}")
    return redirect("rocketmq_console:acl")


@operator("delete ACL account")
def acl_delete(request: HttpRequest) -> HttpResponse:
    d = cleaned(AclDeleteForm(request.POST))
    return _done(request, f"ACL account {d['access_key']} deleted",
                 service.admin().delete_acl_config(d["access_key"], cluster=d["cluster"]))


@operator("update global white list")
def acl_white_list(request: HttpRequest) -> HttpResponse:
    d = cleaned(WhiteListForm(request.POST))
    return _done(request, f"global white list set to {', '.join(d['addresses']) or '(empty)'}",
                 service.admin().update_global_white_addrs(d["addresses"], cluster=d["cluster"]))
