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
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse_lazy
from django.views.decorators.http import require_POST
from rocketmq_sdk.exceptions import MQError

from .. import service

log = logging.getLogger("rocketmq_sdk.integrations.django.console")

VIEW_PERM = "rocketmq_console.view_console"
OPERATE_PERM = "rocketmq_console.operate_console"
LOGIN_URL = reverse_lazy("rocketmq_console:login")


def viewer(fn: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A read-only page: logged in with ``view_console`` (else login page / 403)."""
    return login_required(permission_required(VIEW_PERM, raise_exception=True)(fn), login_url=LOGIN_URL)


def operator(action: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """A change: POST only, ``operate_console`` (403 otherwise); an ``MQError`` or
    ``ValueError`` raised by the view becomes an error message and a redirect back; the outcome
    is audited under ``action``."""

    def wrap(fn: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(fn)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            params = {k: v for k, v in request.POST.items() if k != "csrfmiddlewaretoken"}
            params.update(kwargs)
            try:
                response = fn(request, *args, **kwargs)
            except (MQError, ValueError) as exc:
                service.audit(request, action, f"error: {exc}", **params)
                messages.error(request, f"{action} failed: {exc}")
                return redirect(request.META.get("HTTP_REFERER") or "rocketmq_console:cluster")
            service.audit(request, action, "ok", **params)
            return response

        guarded = permission_required(OPERATE_PERM, raise_exception=True)(require_POST(inner))
        return login_required(guarded, login_url=LOGIN_URL)

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
