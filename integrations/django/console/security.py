"""Hardening of the console's web side: login throttling with audited attempts, the session
lifetime, and the headers of pages that show message bodies.

* Login: at most ``LOGIN_FAILURE_LIMIT`` (5) failed logins per user name and client address in
  ``LOGIN_FAILURE_WINDOW_S`` (600 s); further attempts from there are refused (HTTP 429, the
  password is not even checked) until the window has passed. Every failure, refusal and success
  is audited. Counts live in Django's default cache (per process with the default local-memory
  cache: a project running several processes should configure a shared cache).
* A login session lasts ``SESSION_AGE_S`` (8 h), not Django's 14 days.
* :func:`private_page`: ``Cache-Control: no-store`` and a ``Content-Security-Policy`` that lets
  nothing run or load (no script, no frame, forms only to this site) on pages showing bodies.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable
from typing import Any

from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse

from . import service

__all__ = ["CSP", "ThrottledLoginView", "audit_value", "private_page"]

#: nothing runs, nothing loads from elsewhere; inline styles only (the pages carry their CSS)
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")


def private_page(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Mark a view's responses not to be stored (``Cache-Control: no-store``: message bodies
    must not stay in a browser's or proxy's cache) and give them :data:`CSP`."""

    @functools.wraps(view)
    def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        response["Content-Security-Policy"] = CSP
        return response

    return inner


#: posted fields never written to the audit log (an ACL account's secret key, passwords)
SECRET_FIELDS = frozenset({"secret_key", "password"})


def audit_value(name: str, value: str) -> str:
    """How a posted value is written to the audit log: secrets as ``<hidden>``, a message body
    as its length and the first 16 hex digits of its SHA-256 (never the body), other values cut
    at 200 characters."""
    if name in SECRET_FIELDS:
        return "<hidden>"
    if name == "body":
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return f"<{len(value.encode('utf-8', 'surrogatepass'))} bytes sha256:{digest}>"
    return value if len(value) <= 200 else f"{value[:200]}... ({len(value)} characters)"


def _client(request: HttpRequest) -> str:
    return request.META.get("REMOTE_ADDR", "?")


def _key(username: str, addr: str) -> str:
    digest = hashlib.sha256(f"{username}\0{addr}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"rocketmq_console:login_failures:{digest}"


class ThrottledLoginView(auth_views.LoginView):
    """Django's ``LoginView`` with throttling per user name + client address, an audited
    outcome for every attempt, and the console's session lifetime."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        username = request.POST.get("username", "")[:150]
        limit = int(service.console_setting("LOGIN_FAILURE_LIMIT"))
        window = float(service.console_setting("LOGIN_FAILURE_WINDOW_S"))
        key = _key(username, _client(request))
        failures = [t for t in cache.get(key, []) if t > time.time() - window]
        if len(failures) >= limit:
            wait_s = int(failures[0] + window - time.time()) + 1
            service.audit(request, "login", f"refused: {len(failures)} failures, locked for {wait_s} s",
                          username=username)
            form = self.get_form()
            form.errors.clear()
            response = self.render_to_response(self.get_context_data(
                form=form, throttled=f"Too many failed logins for {username} from this address; "
                                     f"try again in {(wait_s + 59) // 60} minute(s)."))
            response.status_code = 429
            response["Retry-After"] = str(wait_s)
            return response
        response = super().post(request, *args, **kwargs)
        if request.user.is_authenticated:
            cache.delete(key)
            request.session.set_expiry(int(service.console_setting("SESSION_AGE_S")))
            service.audit(request, "login", "ok", username=username)
        else:
            failures.append(time.time())
            cache.set(key, failures, timeout=int(window) + 1)
            service.audit(request, "login", f"failed ({len(failures)} of {limit})", username=username)
        return response
