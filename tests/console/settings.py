"""Django settings of the console's test project (used by ``python -m django test`` in a child
process, see test_console.py). The name server is set by the cases once the embedded cluster runs."""

from rocketmq_sdk.integrations.django.console.standalone import build_settings

globals().update(build_settings("127.0.0.1:1", ":memory:", secret_key="console-tests-only"))
ROOT_URLCONF = "tests.console.urls"
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
LOGGING = {"version": 1, "disable_existing_loggers": False}
