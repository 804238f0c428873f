"""Django settings of the integration tests (SQLite file database, the integration app and a
small test app). ``ROCKETMQ_TEST_DB`` names the database file (child processes of the tests
get the test database's path through it); ``ROCKETMQ_TEST_NAMESRV`` the name server.
``ROCKETMQ_TEST_DATABASE=postgresql`` runs on a private PostgreSQL server instead (started by
conftest.py, port in ``ROCKETMQ_TEST_PG_PORT``; ``ROCKETMQ_TEST_DB`` names the database)."""

import os
import tempfile

SECRET_KEY = "rocketmq-tests"
DEBUG = False
USE_TZ = True
ROOT_URLCONF = "django_integration.testapp.urls"
ALLOWED_HOSTS = ["testserver"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "rocketmq_sdk.integrations.django",
    "django_integration.testapp",
]
_DB = os.environ.get("ROCKETMQ_TEST_DB") or os.path.join(tempfile.gettempdir(), f"rocketmq-django-{os.getpid()}.sqlite3")
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _DB,
        "OPTIONS": {"timeout": 30},
        "TEST": {"NAME": _DB if os.environ.get("ROCKETMQ_TEST_DB") else _DB + ".test"},
    }
}
if os.environ.get("ROCKETMQ_TEST_DATABASE") == "postgresql":
    # the private server conftest.py starts (tests/django_integration/pgserver.py)
    _PG_DB = os.environ.get("ROCKETMQ_TEST_DB")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _PG_DB or "rocketmq_tests",
            "USER": "rocketmq",
            "HOST": "127.0.0.1",
            "PORT": os.environ.get("ROCKETMQ_TEST_PG_PORT", "5432"),
            "TEST": {"NAME": _PG_DB or "test_rocketmq_tests"},
        }
    }
ROCKETMQ = {
    "NAME_SERVER": os.environ.get("ROCKETMQ_TEST_NAMESRV", "127.0.0.1:9"),
    "PRODUCER": {"GROUP": "django_tests", "SEND_MSG_TIMEOUT": 5000},
    "CONSUMER": {"CONSUME_THREAD_MAX": 4, "CONSUME_THREAD_MIN": 4,
                 "CONSUME_FROM_WHERE": "CONSUME_FROM_FIRST_OFFSET", "REBALANCE_INTERVAL": 500,
                 "SUSPEND_TIMEOUT": 1000, "PULL_TIMEOUT": 4000},
    "POLL_NAME_SERVER_INTERVAL": 1000,
    "PERSIST_CONSUMER_OFFSET_INTERVAL": 300,
    "CHECK_NAME_SERVER": False,
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"rocketmq_sdk.integrations.django": {"handlers": ["console"], "level": "INFO"}},
}
