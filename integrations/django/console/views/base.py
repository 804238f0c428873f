"""Access control and error handling shared by the views.

Every page needs a logged-in user with ``rocketmq_console.view_console``; every change needs
``rocketmq_console.operate_console``, a POST (so Django's CSRF check applies) and is written to
the audit log (:func:`..service.audit`) with its outcome.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from rocketmq_sdk.exceptions import MQError

from .. import service
from ..forms import NAME_RE
from ..security import audit_value

log = logging.getLogger("rocketmq_sdk.integrations.django.console")

VIEW_PERM = "rocketmq_console.view_console"
OPERATE_PERM = "rocketmq_console.operate_console"
LOGIN_URL = reverse_lazy("rocketmq_console:login")


#: request attribute a change sets when its outcome is not plainly ``ok`` (audited as such)
AUDIT_OUTCOME = "rocketmq_console_audit_outcome"


def viewer(fn: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A read-only page: logged in with ``view_console`` (else login page / 403)."""
    return login_required(permission_required(VIEW_PERM, raise_exception=True)(fn), login_url=LOGIN_URL)


def operator(action: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A change: POST only, ``operate_console`` (403 otherwise, audited); an ``MQError`` or
    ``ValueError`` raised by the view becomes an error message and a redirect back; the outcome
    is audited under ``action``."""

    def wrap(fn: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(fn)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            params = {k: audit_value(k, v) for k, v in request.POST.items() if k != "csrfmiddlewaretoken"}
            params.update(kwargs)
            if not request.user.has_perm(OPERATE_PERM):  # audited, then 403
                service.audit(request, action, "refused: no operate_console permission (403)", **params)
                raise PermissionDenied
            try:
                response = fn(request, *args, **kwargs)
            except (MQError, ValueError) as exc:
                service.audit(request, action, f"error: {exc}", **params)
                messages.error(request, f"{action} failed: {exc}")
                back = request.META.get("HTTP_REFERER", "")
                if not url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure()):
                    back = "rocketmq_console:cluster"  # only ever back to this site
                return redirect(back)
            service.audit(request, action, getattr(request, AUDIT_OUTCOME, "ok"), **params)
            return response

        return login_required(require_POST(inner), login_url=LOGIN_URL)

    return wrap


def can_operate(request: HttpRequest) -> bool:
    return request.user.has_perm(OPERATE_PERM)


def try_call(request: HttpRequest, what: str, fn: Callable[..., Any], *args: Any, default: Any = None,
             **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``; an ``MQError`` becomes an error message and ``default``."""
    try:
        return fn(*args, **kwargs)
    except MQError as exc:
        messages.error(request, f"{what}: {exc}")
        return default


def report_cluster_change(request: HttpRequest, cluster: str, done: str, written: list[str]) -> None:
    """Tell the outcome of a change made on every master of ``cluster`` (as mqadmin's ``-c``,
    which skips a broker whose master is down): ``done`` when some broker got it (``written``,
    their addresses), and a warning naming the brokers it skipped."""
    down = [b.broker_name for b in try_call(request, "brokers whose master is down", service.admin().masterless_brokers,
                                            default=[]) if b.cluster == cluster]
    if written:
        messages.success(request, done)
    if down:
        whose = "its master is" if len(down) == 1 else "their masters are"
        messages.warning(request, f"not written on {', '.join(down)}: {whose} down (write it again when it is back)")
        setattr(request, AUDIT_OUTCOME, f"partial: not written on {', '.join(down)} (master down)")
    elif not written:
        messages.warning(request, f"no broker of cluster {cluster} was written")
        setattr(request, AUDIT_OUTCOME, f"nothing written: no broker in cluster {cluster}")


def cleaned(form: Any) -> dict[str, Any]:
    """The form's cleaned data; ``ValueError`` listing the errors when it is not valid (the
    :func:`operator` wrapper shows it and audits the refusal)."""
    if not form.is_valid():
        raise ValueError("; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items()))
    return form.cleaned_data


def posted_cluster(request: HttpRequest, what: str) -> str:
    """The ``cluster`` field of a POST; ``ValueError`` when missing or not a legal name."""
    cluster = request.POST.get("cluster", "")
    if not NAME_RE.match(cluster):
        raise ValueError(f"choose the cluster to delete the {what} from")
    return cluster


def name_or_404(value: str) -> str:
    """A topic or group name from the URL; 404 when it is not a legal RocketMQ name."""
    if not NAME_RE.match(value) or len(value) > 255:
        raise Http404("no such topic or group")
    return value


def cluster_names(request: HttpRequest) -> list[str]:
    """The names of the clusters the name server knows, sorted (empty, with an error message,
    when it cannot be asked)."""
    brokers = try_call(request, "cluster list", service.admin().cluster_list, default=[], runtime=False)
    return sorted({b.cluster for b in brokers})
