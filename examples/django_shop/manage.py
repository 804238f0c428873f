#!/usr/bin/env python
"""The django_shop example's manage.py (``python manage.py test`` runs its end-to-end tests
against the embedded reference broker; ``python manage.py rocketmq_consume`` runs its listeners)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop_project.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
