"""Part 8: examples/django_shop's own tests, run by Django's test runner in a child process
(``manage.py test`` with ``RocketMQTestRunner``, which starts the embedded broker)."""

from __future__ import annotations

import subprocess

from django_integration.conftest import PY, REPO, child_env


def test_django_shop_example_passes_its_own_tests(tmp_path):
    shop = REPO / "examples" / "django_shop"
    env = child_env(SHOP_DB_DIR=str(tmp_path))
    env.pop("DJANGO_SETTINGS_MODULE")
    proc = subprocess.run([PY, "manage.py", "test", "--noinput", "-v", "2"], cwd=shop, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "Ran 3 tests" in proc.stderr and "\nOK" in proc.stderr
    assert "test_order_reserves_stock_once_and_payment_is_confirmed" in proc.stderr
