"""The stand-alone console: Django settings for a one-app project and the server loop.

``python -m rocketmq_sdk.integrations.django.console --namesrv 127.0.0.1:9876`` serves the
console on http://127.0.0.1:8080/ with a SQLite user database (a temporary file removed at exit
unless ``--db`` names one; also on SIGTERM, which stops the server as Ctrl-C does) and one operator account (``--user``, password from
``$ROCKETMQ_CONSOLE_PASSWORD`` or generated and shown once). ``--read-only-user NAME`` adds an
account that may only look (password ``$ROCKETMQ_CONSOLE_READONLY_PASSWORD`` or generated).
``--certfile``/``--keyfile`` serve HTTPS (the TLS handshake runs in the request's thread; the
session and CSRF cookies are then marked ``Secure``). ``--webhook-url`` also POSTs each lag alarm
there; ``--access-key`` (secret key from ``$ROCKETMQ_CONSOLE_SECRET_KEY``) signs every request for
clusters with ACL on.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import secrets
import shutil
import signal
import ssl
import sys
import tempfile
import zoneinfo
from typing import Any

__all__ = ["build_settings", "console_settings", "main", "parse_args"]

log = logging.getLogger("rocketmq_sdk.integrations.django.console")


def build_settings(namesrv: str, db_path: str, *, secret_key: str, host: str = "127.0.0.1", tls: bool = False,
                   time_zone: str = "UTC", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The settings of the one-app project (``settings.configure(**...)``)."""
    return {
        "DEBUG": False,
        "SECRET_KEY": secret_key,
        "ALLOWED_HOSTS": [host, "localhost", "127.0.0.1", "[::1]"],
        "ROOT_URLCONF": "rocketmq_sdk.integrations.django.console.standalone_urls",
        "INSTALLED_APPS": ["django.contrib.auth", "django.contrib.contenttypes", "django.contrib.sessions",
                           "django.contrib.messages", "rocketmq_sdk.integrations.django.console"],
        "MIDDLEWARE": ["django.middleware.security.SecurityMiddleware",
                       "django.contrib.sessions.middleware.SessionMiddleware",
                       "django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware",
                       "django.contrib.auth.middleware.AuthenticationMiddleware",
                       "django.contrib.messages.middleware.MessageMiddleware",
                       "django.middleware.clickjacking.XFrameOptionsMiddleware"],
        "TEMPLATES": [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                       "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                          "django.contrib.auth.context_processors.auth",
                                                          "django.contrib.messages.context_processors.messages"]}}],
        "DATABASES": {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": db_path}},
        "DEFAULT_AUTO_FIELD": "django.db.models.AutoField",
        "STATIC_URL": "/static/",
        "USE_TZ": True,
        "TIME_ZONE": time_zone,
        "SESSION_COOKIE_HTTPONLY": True,
        "CSRF_COOKIE_SAMESITE": "Strict",
        "LOGIN_URL": "rocketmq_console:login",
        "SESSION_COOKIE_AGE": 8 * 3600,
        "SESSION_COOKIE_SECURE": tls,
        "CSRF_COOKIE_SECURE": tls,
        "LOGGING": {"version": 1, "disable_existing_loggers": False,
                    "formatters": {"stamped": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
                    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "stamped"}},
                    "loggers": {"rocketmq_sdk.integrations.django.console": {"handlers": ["console"], "level": "INFO"}}},
        "ROCKETMQ_CONSOLE": {"NAMESRV_ADDR": namesrv, **(extra or {})},
    }


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _account(username: str, env: str, operator: bool) -> None:
    from django.contrib.auth.models import Permission, User

    password = os.environ.get(env) or secrets.token_urlsafe(12)
    user, _ = User.objects.get_or_create(username=username)
    user.set_password(password)
    user.is_active = True
    user.save()
    codenames = ["view_console", "operate_console"] if operator else ["view_console"]
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="rocketmq_console",
                                                       codename__in=codenames))
    if not os.environ.get(env):  # a CLI: the generated password is shown once on stderr
        sys.stderr.write(f"console {'operator' if operator else 'read-only'} account: {username} / {password}\n")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked (exits with status 2 and the reason on bad arguments)."""
    p = argparse.ArgumentParser(prog="python -m rocketmq_sdk.integrations.django.console",
                                description="RocketMQ console (Django) on the SDK's AdminClient")
    p.add_argument("--namesrv", "-n", default=os.environ.get("NAMESRV_ADDR"), help="name servers host:port[;host:port]")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port (8080; 0 = a free one)")
    p.add_argument("--allow-remote", action="store_true", help="allow a --host that is not a loopback address")
    p.add_argument("--db", help="SQLite file of the console's users, lag thresholds, alarms and the last day of "
                                "chart points; give one to keep them across restarts (default: temporary, "
                                "removed at exit)")
    p.add_argument("--user", default="admin", help="operator account (password: $ROCKETMQ_CONSOLE_PASSWORD)")
    p.add_argument("--read-only-user", help="also create this read-only account "
                                            "(password: $ROCKETMQ_CONSOLE_READONLY_PASSWORD)")
    p.add_argument("--trace-topic", default="RMQ_SYS_TRACE_TOPIC", help="trace topic (RMQ_SYS_TRACE_TOPIC)")
    p.add_argument("--time-zone", default="UTC", help="time zone of the times shown (UTC), e.g. Asia/Shanghai")
    p.add_argument("--sample-interval", type=float, default=10.0, help="seconds between chart samples (10)")
    p.add_argument("--certfile", help="serve HTTPS with this PEM certificate (chain)")
    p.add_argument("--keyfile", help="the certificate's PEM private key (default: in --certfile)")
    p.add_argument("--webhook-url", help="also POST each lag alarm (firing, resolved) there as JSON (http or https)")
    p.add_argument("--access-key", help="ACL access key the console signs with (an admin account; "
                                        "secret key: $ROCKETMQ_CONSOLE_SECRET_KEY)")
    args = p.parse_args(argv)
    if args.webhook_url and not args.webhook_url.startswith(("http://", "https://")):
        p.error(f"--webhook-url {args.webhook_url!r} is not an http(s) URL")
    if args.access_key and not os.environ.get("ROCKETMQ_CONSOLE_SECRET_KEY"):
        p.error("--access-key needs its secret key in $ROCKETMQ_CONSOLE_SECRET_KEY")
    if not args.namesrv:
        p.error("--namesrv (or $NAMESRV_ADDR) is required")
    if not _is_loopback(args.host) and not args.allow_remote:
        p.error(f"--host {args.host} is not a loopback address; add --allow-remote to listen there")
    if not 0 <= args.port <= 65535:
        p.error("--port must be in 0..65535")
    if args.keyfile and not args.certfile:
        p.error("--keyfile needs --certfile")
    tls = None
    if args.certfile:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            tls.load_cert_chain(args.certfile, args.keyfile)
        except (OSError, ssl.SSLError) as exc:
            p.error(f"cannot load --certfile/--keyfile: {exc}")
    elif not _is_loopback(args.host):
        log.warning("serving plain HTTP on %s: passwords and messages cross the network in clear; "
                    "give --certfile/--keyfile or put a TLS reverse proxy in front", args.host)
    try:
        zoneinfo.ZoneInfo(args.time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        p.error(f"--time-zone {args.time_zone!r} is not a known time zone")
    args.tls = tls
    return args


def console_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ROCKETMQ_CONSOLE`` keys the command line sets (besides ``NAMESRV_ADDR``)."""
    extra: dict[str, Any] = {"TRACE_TOPIC": args.trace_topic, "SAMPLE_INTERVAL_S": args.sample_interval}
    if args.webhook_url:
        extra["WEBHOOK_URL"] = args.webhook_url
    if args.access_key:
        extra.update(ACCESS_KEY=args.access_key, SECRET_KEY=os.environ["ROCKETMQ_CONSOLE_SECRET_KEY"])
    return extra


def main(argv: list[str] | None = None) -> int:
    """Run the stand-alone console until Ctrl-C; returns the exit code (2 on bad arguments)."""
    args = parse_args(argv)
    tls = args.tls
    tmp = None
    db = args.db
    if db is None:
        tmp = tempfile.mkdtemp(prefix="rocketmq-console-")
        db = os.path.join(tmp, "console.sqlite3")
    try:
        return _serve(args, db, tls)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _serve(args: argparse.Namespace, db: str, tls: ssl.SSLContext | None) -> int:
    import django
    from django.conf import settings
    from django.core.management import call_command
    from django.core.servers.basehttp import WSGIServer, get_internal_wsgi_application

    settings.configure(**build_settings(args.namesrv, db, secret_key=secrets.token_urlsafe(40), host=args.host,
                                        time_zone=args.time_zone, tls=tls is not None,
                                        extra=console_settings(args)))
    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    _account(args.user, "ROCKETMQ_CONSOLE_PASSWORD", operator=True)
    if args.read_only_user:
        _account(args.read_only_user, "ROCKETMQ_CONSOLE_READONLY_PASSWORD", operator=False)
    from socketserver import ThreadingMixIn

    from django.core.servers.basehttp import WSGIRequestHandler

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

        def finish_request(self, request: Any, client_address: Any) -> None:
            if tls is not None:  # in the request's own thread: a slow handshake blocks no one else
                request.settimeout(30)
                try:
                    request = tls.wrap_socket(request, server_side=True)
                except (OSError, ssl.SSLError) as exc:
                    log.info("TLS handshake with %s failed: %s", client_address[0], exc)
                    return
                try:
                    super().finish_request(request, client_address)
                finally:
                    request.close()  # the plain socket was handed over to the TLS one
                return
            super().finish_request(request, client_address)

    ipv6 = ":" in args.host
    httpd = Server((args.host, args.port), WSGIRequestHandler, ipv6=ipv6)
    httpd.set_app(get_internal_wsgi_application())
    host, port = httpd.server_address[:2]
    scheme = "https" if tls is not None else "http"
    sys.stderr.write(f"RocketMQ console on {scheme}://{'[' + host + ']' if ipv6 else host}:{port}/ "
                     f"(name server {args.namesrv}); Ctrl-C stops it\n")
    sys.stderr.flush()
    from .lifecycle import reset_clients

    def stop(signum: int, frame: Any) -> None:  # SIGTERM (service managers, kill): as Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        reset_clients()
    return 0
