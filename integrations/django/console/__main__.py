"""``python -m rocketmq_sdk.integrations.django.console --namesrv ADDR`` (see :mod:`.standalone`)."""

import sys

from .standalone import main

sys.exit(main())
