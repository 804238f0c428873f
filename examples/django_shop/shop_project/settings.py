"""Settings of the django_shop example: SQLite, the RocketMQ app, the orders app."""

import os
import tempfile
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "django-shop-example"
DEBUG = True
USE_TZ = True
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "shop_project.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "rocketmq_sdk.integrations.django",
    "orders",
]

_DB_DIR = os.environ.get("SHOP_DB_DIR") or tempfile.gettempdir()
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.path.join(_DB_DIR, "django_shop.sqlite3"),
        "OPTIONS": {"timeout": 30},
        # a file, not SQLite's in-memory test database: listener threads write to it concurrently
        "TEST": {"NAME": os.path.join(_DB_DIR, f"django_shop_test_{os.getpid()}.sqlite3")},
    }
}

ROCKETMQ = {
    "NAME_SERVER": os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
    "PRODUCER": {"GROUP": "shop", "SEND_MSG_TIMEOUT": 3000},
    "TRANSACTION": {"GROUP": "shop_payments"},
    "CONSUMER": {"CONSUME_THREAD_MAX": 4, "CONSUME_THREAD_MIN": 4,
                 "CONSUME_FROM_WHERE": "CONSUME_FROM_FIRST_OFFSET"},
}

# `manage.py test` starts the embedded reference broker for the run
TEST_RUNNER = "rocketmq_sdk.integrations.django.testing.RocketMQTestRunner"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"rocketmq_sdk.integrations.django": {"handlers": ["console"], "level": "WARNING"}},
}
