"""The broker's request table: every request code the reference broker serves, with its
:class:`~.requests.RequestSpec` (header, writes, ACL, names checked, slave rule), collected from
the ``@handles`` declarations of the processor classes listed here.

A new processor class goes into :data:`PROCESSOR_CLASSES` (a test fails for a code registered on
the broker without an entry here); a new code of an existing processor needs only its
``@handles`` line.
"""

from __future__ import annotations

from collections.abc import Mapping

from .acl_admin import AclAdminProcessor
from .admin_processor import AdminProcessor
from .broker_config_processor import BrokerConfigProcessor
from .client_processor import ClientProcessor
from .group_processor import GroupProcessor
from .lock_manager import LockProcessor
from .metadata_processor import MetadataProcessor
from .pop.processor import PopProcessor
from .pop.request_mode import RequestModeProcessor
from .pull_processor import PullProcessor
from .reply_processor import ReplyProcessor
from .requests import RequestSpec, table_of
from .send_processor import SendProcessor
from .stats_processor import StatsProcessor
from .timer.recall import RecallProcessor
from .transaction.end_transaction import EndTransactionProcessor
from .v5_topic_config import TopicConfigProcessor

__all__ = ["BROKER_REQUESTS", "PROCESSOR_CLASSES"]

PROCESSOR_CLASSES: tuple[type, ...] = (
    SendProcessor, PullProcessor, ClientProcessor, AdminProcessor, LockProcessor, GroupProcessor,
    BrokerConfigProcessor, StatsProcessor, EndTransactionProcessor, ReplyProcessor, AclAdminProcessor,
    MetadataProcessor, TopicConfigProcessor, PopProcessor, RequestModeProcessor, RecallProcessor,
)

#: request code -> its description, for every code the broker serves
BROKER_REQUESTS: Mapping[int, RequestSpec] = table_of(PROCESSOR_CLASSES)
