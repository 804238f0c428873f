"""The console's views through Django's test client against the embedded reference cluster
(run by Django's test runner: ``python -m django test tests.console.cases_views
--settings=tests.console.settings``; test_console.py does it in ``make test``)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from unittest.mock import patch

import yaml
from django.core.cache import cache
from django.template.defaultfilters import floatformat
from django.test import Client, SimpleTestCase, TestCase, override_settings
from django.urls import reverse
from rocketmq_broker import embedded
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_sdk.integrations.django.console import lifecycle, service
from rocketmq_sdk.integrations.django.console.models import ChartPoint, LagAlarm, LagThreshold
from rocketmq_sdk.integrations.django.console.monitor import check_thresholds
from rocketmq_sdk.integrations.django.console.sampler import Sample, Sampler
from rocketmq_sdk.integrations.django.console.svg import axis_ticks, line_chart, trace_timeline
from rocketmq_sdk.integrations.django.console.templatetags.rocketmq_console import ms_time
from rocketmq_sdk.integrations.django.console.views.messages import body_preview
from rocketmq_sdk.producer import Producer
from rocketmq_sdk.protocol.message import Message
from rocketmq_sdk.protocol.msgid import decode_uniq_id
from rocketmq_sdk.trace import TraceRecord, TraceType, build_trace_graph
from rocketmq_sdk.trace.view import records_in_order

from .support import make_user, start_cluster, stop_cluster, wait_until

CLUSTER = None
TOPIC = "ConsoleOrders"


def setUpModule() -> None:  # noqa: N802 - unittest's name
    global CLUSTER
    CLUSTER = start_cluster()
    with AdminClient(CLUSTER.namesrv_addr) as adm:
        adm.create_topic(TOPIC, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)


def tearDownModule() -> None:  # noqa: N802
    stop_cluster()


def url(name: str, *args: str) -> str:
    return reverse(f"rocketmq_console:{name}", args=args)


class Counting:
    """A listener counting deliveries per key; ``fail`` keys go straight to the DLQ."""

    def __init__(self, fail: set[str] | None = None) -> None:
        self.seen: dict[str, int] = {}
        self.lock = threading.Lock()
        self.fail = fail or set()

    def __call__(self, msgs, ctx):
        with self.lock:
            for m in msgs:
                for k in m.keys:
                    self.seen[k] = self.seen.get(k, 0) + 1
                if self.fail.intersection(m.keys):
                    ctx.delay_level_when_next_consume = -1  # no retry: to the DLQ at once (Java)
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


def consumer(group: str, listener, topic: str = TOPIC, expression: str = "*", **kw) -> PushConsumer:
    c = PushConsumer(group, CLUSTER.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **kw)
    c.subscribe(topic, expression)
    c.register_message_listener(listener)
    c.start()
    return c


class AccessTests(TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        make_user("reader", "view_console")
        make_user("operator", "view_console", "operate_console")
        make_user("nobody")

    def test_anonymous_is_sent_to_login(self) -> None:
        resp = self.client.get(url("topics"))
        self.assertEqual(resp.status_code, 302)
        self.assertTrue(resp["Location"].startswith(url("login")))

    def test_login_lands_on_the_cluster_page_also_after_logging_out(self) -> None:
        resp = self.client.post(url("login"), {"username": "reader", "password": "reader-pw"})
        self.assertRedirects(resp, url("cluster"), fetch_redirect_response=False)
        self.assertEqual(self.client.get(resp["Location"]).status_code, 200)
        resp = self.client.post(url("logout"), follow=True)
        self.assertEqual(resp.request["PATH_INFO"], url("login"))
        resp = self.client.post(url("login"), {"username": "reader", "password": "reader-pw", "next": ""},
                                follow=True)
        self.assertEqual((resp.status_code, resp.request["PATH_INFO"]), (200, url("cluster")))

    def test_login_throttled_after_five_failures_per_user_and_address_and_audited(self) -> None:
        self.addCleanup(cache.clear)  # the failure counts live in the cache: no lock-out for later tests
        with self.assertLogs("rocketmq_sdk.integrations.django.console.audit", "INFO") as logs:
            for _ in range(5):
                resp = self.client.post(url("login"), {"username": "reader", "password": "wrong"})
                self.assertEqual(resp.status_code, 200)
            # the right password is not even checked now
            resp = self.client.post(url("login"), {"username": "reader", "password": "reader-pw"})
            self.assertEqual(resp.status_code, 429)
            self.assertContains(resp, "Too many failed logins for reader", status_code=429)
            self.assertFalse(resp.wsgi_request.user.is_authenticated)
            # another address, or another user, is not locked out
            other = Client(REMOTE_ADDR="10.0.0.9")
            self.assertRedirects(other.post(url("login"), {"username": "reader", "password": "reader-pw"}),
                                 url("cluster"), fetch_redirect_response=False)
            resp = self.client.post(url("login"), {"username": "operator", "password": "operator-pw"})
            self.assertRedirects(resp, url("cluster"), fetch_redirect_response=False)
        lines = [r.getMessage() for r in logs.records]
        self.assertEqual(sum("action=login" in x and "outcome=failed" in x for x in lines), 5)
        self.assertTrue(any("outcome=refused: 5 failures" in x and "username='reader'" in x for x in lines))
        self.assertEqual(sum("action=login" in x and "outcome=ok" in x for x in lines), 2)

    def test_session_lasts_eight_hours_and_body_pages_are_not_stored(self) -> None:
        self.client.post(url("login"), {"username": "reader", "password": "reader-pw"})
        self.assertEqual(self.client.session.get_expiry_age(), 8 * 3600)
        sent = service.producer().send(Message(TOPIC, b"a body", keys="no-store-1"))
        pages = [url("messages") + f"?mode=time&topic={TOPIC}", url("message", TOPIC, sent.msg_id), url("dlq"),
                 url("dlq_export") + "?group=views_cg", url("trace"),
                 url("dlq_copy_confirm") + f"?group=views_cg&msg_id={sent.msg_id}"]  # operators only
        for page in pages:
            if page == pages[-1]:
                self.client.post(url("login"), {"username": "operator", "password": "operator-pw"})
            resp = self.client.get(page)
            self.assertIn(resp.status_code, (200, 302, 400), page)  # 302: not a DLQ message, back to the list
            self.assertEqual(resp["Cache-Control"], "no-store", page)
            self.assertIn("script-src", resp["Content-Security-Policy"].replace("default-src 'none'", "script-src"))
            self.assertIn("frame-ancestors 'none'", resp["Content-Security-Policy"])

    def test_user_without_view_permission_is_refused(self) -> None:
        self.client.login(username="nobody", password="nobody-pw")
        self.assertEqual(self.client.get(url("cluster")).status_code, 403)

    def test_read_only_user_sees_pages_but_cannot_change(self) -> None:
        self.client.login(username="reader", password="reader-pw")
        resp = self.client.get(url("topics"))
        self.assertContains(resp, TOPIC)
        self.assertNotContains(resp, 'id="topic-form"')
        with self.assertLogs("rocketmq_sdk.integrations.django.console.audit", "INFO") as logs:
            service.audit_log.info("marker")  # assertLogs needs one record; no audit line follows
            resp = self.client.post(url("topic_create"), {"topic": "ReaderTopic", "cluster": "DefaultCluster",
                                                          "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6})
        self.assertEqual(resp.status_code, 403)
        # the refused attempt is audited (the marker, then the refusal)
        self.assertEqual(len(logs.records), 2)
        self.assertIn("user=reader", logs.records[1].getMessage())
        self.assertIn("refused: no operate_console permission (403)", logs.records[1].getMessage())
        self.assertNotIn("ReaderTopic", service.admin().topic_list())

    def test_changes_need_post_and_csrf_token(self) -> None:
        csrf = Client(enforce_csrf_checks=True)
        csrf.login(username="operator", password="operator-pw")
        data = {"topic": "CsrfTopic", "cluster": "DefaultCluster", "read_queue_nums": 1, "write_queue_nums": 1,
                "perm": 6}
        self.assertEqual(csrf.post(url("topic_create"), data).status_code, 403)
        self.assertEqual(csrf.get(url("topic_create")).status_code, 405)
        self.assertNotIn("CsrfTopic", service.admin().topic_list())

    def test_hostile_names_are_refused_before_anything_is_sent(self) -> None:
        self.client.login(username="operator", password="operator-pw")
        self.assertEqual(self.client.get(url("topic", "..%2Fetc")).status_code, 404)
        self.assertEqual(self.client.get(url("message", TOPIC, "<script>")).status_code, 404)
        resp = self.client.post(url("topic_create"), {"topic": "bad/name", "cluster": "DefaultCluster",
                                                      "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6},
                                follow=True)
        self.assertContains(resp, "illegal topic name")
        resp = self.client.get(url("trace") + "?msg_id=<b>x</b>")
        self.assertContains(resp, "illegal message id")
        self.assertNotContains(resp, "<b>x</b>")


class OperatorTests(TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        make_user("op", "view_console", "operate_console")

    def setUp(self) -> None:
        self.client.login(username="op", password="op-pw")

    def test_cluster_page_lists_both_masters(self) -> None:
        resp = self.client.get(url("cluster"))
        for name in ("broker-a", "broker-b"):
            self.assertContains(resp, name)
            self.assertContains(resp, CLUSTER.addr(name))
        self.assertContains(resp, "MASTER", count=2)
        self.assertContains(resp, "V4_9_8", count=2)
        resp = self.client.get(url("broker", CLUSTER.addr("broker-a")))
        self.assertContains(resp, "brokerName")  # broker config
        self.assertContains(resp, "msgPutTotalTodayNow")  # runtime info

    def test_create_update_and_delete_topic_is_audited(self) -> None:
        with self.assertLogs("rocketmq_sdk.integrations.django.console.audit", "INFO") as logs:
            resp = self.client.post(url("topic_create"), {"topic": "Made", "cluster": "DefaultCluster",
                                                          "read_queue_nums": 3, "write_queue_nums": 3, "perm": 6},
                                    follow=True)
        self.assertContains(resp, "Topic Made")
        route = service.admin().topic_route("Made")
        self.assertEqual(sorted((q.broker_name, q.read_queue_nums) for q in route.queue_datas),
                         [("broker-a", 3), ("broker-b", 3)])
        self.assertIn("user=op", logs.output[0])
        self.assertIn("action=create/update topic", logs.output[0])
        self.assertIn("topic='Made'", logs.output[0])
        self.assertIn("outcome=ok", logs.output[0])
        self.client.post(url("topic_perm", "Made"), {"perm": 4})
        wait_until(lambda: {q.perm for q in service.admin().topic_route("Made").queue_datas} == {4}, 10,
                   "perm 4 in the route (the brokers re-register the topic)")
        resp = self.client.post(url("topic_delete", "Made"), {"cluster": "DefaultCluster"}, follow=True)
        self.assertContains(resp, "deleted")
        self.assertNotIn("Made", service.admin().topic_list())

    def test_audit_keeps_a_message_body_as_its_length_and_hash(self) -> None:
        body = "order 4711 for Alice, card 4111-1111"
        with self.assertLogs("rocketmq_sdk.integrations.django.console.audit", "INFO") as logs:
            self.client.post(url("topic_send", TOPIC), {"keys": "audited-1", "body": body})
        [line] = logs.output
        self.assertNotIn("Alice", line)
        digest = hashlib.sha256(body.encode()).hexdigest()[:16]
        self.assertIn(f"body='<{len(body)} bytes sha256:{digest}>'", line)
        self.assertIn("action=send test message", line)

    def test_topic_filters(self) -> None:
        resp = self.client.get(url("topics") + "?kind=system")
        self.assertContains(resp, "TBW102")
        self.assertNotContains(resp, TOPIC)
        resp = self.client.get(url("topics") + "?kind=normal")
        self.assertContains(resp, TOPIC)
        self.assertNotContains(resp, ">TBW102<")
        # the name search box (case-insensitive substring)
        resp = self.client.get(url("topics") + "?kind=all&q=consoleord")
        self.assertEqual([t for t, _ in resp.context["rows"]], [TOPIC])
        # the topic page: config per broker, an update form filled with it
        resp = self.client.get(url("topic", TOPIC))
        self.assertEqual(sorted(resp.context["configs"]), ["broker-a", "broker-b"])
        self.assertEqual({(c.read_queue_nums, c.order) for c in resp.context["configs"].values()}, {(2, False)})
        self.assertEqual(resp.context["update_form"].initial["read_queue_nums"], 2)
        self.assertContains(resp, 'id="topic-update-form"')

    def test_send_find_by_key_time_and_id_and_detail(self) -> None:
        resp = self.client.post(url("topic_send", TOPIC), {"tags": "TagA", "keys": "views-key-1",
                                                           "body": '{"order": 1, "名": "值"}'}, follow=True)
        self.assertContains(resp, 'id="sent"')
        found = service.admin().query_message_by_key(TOPIC, "views-key-1")
        self.assertEqual(len(found), 1)
        msg = found[0]
        resp = self.client.get(url("messages") + f"?mode=key&topic={TOPIC}&key=views-key-1")
        self.assertContains(resp, msg.msg_id)
        resp = self.client.get(url("messages") + f"?mode=time&topic={TOPIC}")
        self.assertContains(resp, msg.msg_id)
        resp = self.client.get(url("messages") + f"?mode=id&msg_id={msg.offset_msg_id}")
        self.assertRedirects(resp, url("message", TOPIC, msg.msg_id))
        resp = self.client.get(url("message", TOPIC, msg.msg_id))
        self.assertContains(resp, "views-key-1")
        self.assertContains(resp, '<span class="badge">json</span>', html=False)
        self.assertContains(resp, "&quot;名&quot;: &quot;值&quot;")
        self.assertEqual(resp.context["preview"]["encoding"], "json")

    def test_group_page_clients_consistency_reset_and_resend(self) -> None:
        Producer_ = Producer("views_pg", CLUSTER.namesrv_addr)
        Producer_.start()
        listener = Counting()
        c1 = consumer("views_cg", listener)
        c2 = None
        try:
            sent = [Producer_.send(Message(TOPIC, f"m{i}".encode(), keys=f"grp-{i}")) for i in range(4)]
            wait_until(lambda: all(listener.seen.get(f"grp-{i}") for i in range(4)), 20, "first deliveries")
            resp = self.client.get(url("group", "views_cg"))
            self.assertContains(resp, "PYTHON")
            self.assertContains(resp, 'id="consistency">consistent<', html=False)
            # a client's full running info: subscriptions, owned queues with their state, settings
            client_id = resp.context["conns"].connections[0].client_id
            self.assertContains(resp, url("group_client", "views_cg", client_id))
            page = self.client.get(url("group_client", "views_cg", client_id))
            self.assertContains(page, f"<td>{TOPIC}</td><td>TAG</td><td>*</td>", html=False)
            owned = {(mq.broker_name, mq.queue_id) for mq, _ in page.context["queues"] if mq.topic == TOPIC}
            self.assertEqual(owned, {("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)})
            self.assertEqual(page.context["queue_columns"][:4],
                             ["commitOffset", "cachedMsgMinOffset", "cachedMsgMaxOffset", "cachedMsgCount"])
            self.assertIn(("consumeFromWhere", "CONSUME_FROM_FIRST_OFFSET"), page.context["properties"])
            self.assertEqual(self.client.get(url("group_client", "views_cg", "<x>")).status_code, 404)
            # reset to the earliest offset: every message is delivered again
            wait_until(lambda: service.admin().consumer_progress("views_cg", TOPIC).total_lag == 0, 20, "lag 0")
            resp = self.client.post(url("group_reset", "views_cg"), {"topic": TOPIC, "timestamp": "earliest"},
                                    follow=True)
            self.assertContains(resp, 'id="reset-result"')
            self.assertTrue(all(e["offset"] == 0 for e in resp.context["reset"]))
            wait_until(lambda: all(listener.seen.get(f"grp-{i}", 0) >= 2 for i in range(4)), 30,
                       "redelivery after the reset")
            # resend one message to the group (CONSUME_MESSAGE_DIRECTLY)
            before = listener.seen["grp-0"]
            resp = self.client.post(url("message_resend", TOPIC, sent[0].msg_id), {"group": "views_cg"}, follow=True)
            self.assertContains(resp, "CR_SUCCESS")
            self.assertEqual(listener.seen["grp-0"], before + 1)
            # the detail page says the group consumed it
            wait_until(lambda: {"group": "views_cg", "status": "CONSUMED"} in self.client.get(
                url("message", TOPIC, sent[0].msg_id)).context["groups"], 20, "the committed offset (CONSUMED)")
            resp = self.client.get(url("producers") + f"?group=views_pg&topic={TOPIC}")
            self.assertContains(resp, "PYTHON")
            # a second member subscribing with another expression is flagged (last: the broker
            # then filters the group's pulls with the newer subscription, as 4.9.8 does)
            c2 = consumer("views_cg", Counting(), expression="TagOnly")
            wait_until(lambda: len(service.admin().consumer_connection("views_cg").connections) == 2, 20, "two clients")
            resp = self.client.get(url("group", "views_cg"))
            self.assertContains(resp, 'id="consistency">inconsistent<', html=False)
            self.assertContains(resp, "differs")
        finally:
            if c2 is not None:
                c2.shutdown()
            c1.shutdown()
            Producer_.shutdown()

    def test_client_page_shows_consume_statistics_of_our_consumer(self) -> None:
        """Our SDK consumer's statusTable (Java ConsumerStatsManager): 3 messages consumed, 2 failed
        (RECONSUME_LATER) in the last minute show as 3/60 OK TPS and 2 failed messages."""
        topic = "ConsoleStats"
        with AdminClient(CLUSTER.namesrv_addr) as adm:
            adm.create_topic(topic, cluster="DefaultCluster", read_queue_nums=1, write_queue_nums=1)
        first: list[bytes] = []

        def listener(msgs, ctx):
            first.extend(m.body for m in msgs if not m.reconsume_times)
            if any(m.body.startswith(b"fail") for m in msgs):
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        c = consumer("views_stats_cg", listener, topic=topic)
        try:
            with Producer("views_stats_pg", CLUSTER.namesrv_addr) as prod:
                for body in (b"ok-0", b"fail-1", b"ok-2", b"fail-3", b"ok-4"):
                    prod.send(Message(topic, body))
            wait_until(lambda: len(first) >= 5, 20, "5 first deliveries")
            client_id = c.instance.client_id
            page = wait_until(lambda: (p := self.client.get(url("group_client", "views_stats_cg", client_id)))
                              and round(sum(dict(p.context["status"]).get(topic, [0] * 6)[3:5]) * 60) == 5 and p,
                              20, "the 5 results recorded")
        finally:
            c.shutdown()
        row = dict(zip(page.context["status_columns"], dict(page.context["status"])[topic], strict=True))
        self.assertAlmostEqual(row["consumeOKTPS"] * 60, 3)
        self.assertAlmostEqual(row["consumeFailedTPS"] * 60, 2)
        self.assertAlmostEqual(row["pullTPS"] * 60, 5)
        self.assertGreater(row["pullRT"], 0)
        # shown to three decimals at most (was 0.8939166259551712 ms)
        self.assertContains(page, f'<tr><td>{topic}</td><td class="num">{floatformat(row["pullRT"], "-3")}</td>',
                            html=False)
        self.assertContains(page, '<td class="num">0.050</td><td class="num">0.033</td>'
                                  '<td class="num">2</td></tr>', html=False)

    def test_reset_offset_of_a_group_whose_consumers_are_stopped(self) -> None:
        listener = Counting()
        c = consumer("offline_view_cg", listener)
        try:
            with Producer("offline_view_pg", CLUSTER.namesrv_addr) as prod:
                for i in range(4):
                    prod.send(Message(TOPIC, f"o{i}".encode(), keys=f"offline-{i}"))
            wait_until(lambda: all(listener.seen.get(f"offline-{i}") for i in range(4)), 20, "first deliveries")
        finally:
            c.shutdown()  # offsets committed, the group is offline: the broker answers 206 to a reset
        adm = service.admin()
        wait_until(lambda: adm.consumer_progress("offline_view_cg", TOPIC).total_lag == 0, 20, "lag 0")
        resp = self.client.post(url("group_reset", "offline_view_cg"), {"topic": TOPIC, "timestamp": "earliest"},
                                follow=True)
        self.assertContains(resp, "group offline: offsets written on the brokers directly")
        self.assertTrue(resp.context["reset"] and all(e["offset"] == 0 and e["direct"] for e in resp.context["reset"]))
        lag = adm.consumer_progress("offline_view_cg", TOPIC).total_lag
        self.assertGreaterEqual(lag, 4)
        # the topic page lists the group with its lag there, per queue too
        [row] = [g for g in self.client.get(url("topic", TOPIC)).context["groups"] if g["group"] == "offline_view_cg"]
        self.assertEqual((row["total"], sum(q.lag for q in row["queues"]), len(row["queues"])), (lag, lag, 4))
        again = Counting()
        c = consumer("offline_view_cg", again)
        try:
            wait_until(lambda: all(again.seen.get(f"offline-{i}") for i in range(4)), 30, "redelivery after restart")
        finally:
            c.shutdown()

    def test_group_config_create_and_delete(self) -> None:
        resp = self.client.post(url("group_config"), {"group": "cfg_cg", "cluster": "DefaultCluster",
                                                      "consume_enable": "on", "retry_queue_nums": 1,
                                                      "retry_max_times": 3}, follow=True)
        self.assertContains(resp, "cfg_cg created/updated")
        broker = CLUSTER.brokers["broker-a"]
        self.assertEqual(broker.groups.find("cfg_cg").retry_max_times, 3)
        # never used by a client: listed from the brokers' tables, its page shows the config
        resp = self.client.get(url("groups"))
        self.assertContains(resp, 'cfg_cg</a> <span class="badge config-only">config only</span>', html=False)
        self.assertNotContains(resp, "TOOLS_CONSUMER")
        resp = self.client.get(url("group", "cfg_cg"))
        self.assertEqual([str(m) for m in resp.context["messages"]], [])  # was "no route for %RETRY%cfg_cg"
        self.assertContains(resp, 'id="config-only"')
        self.assertEqual(sorted(resp.context["config"].brokers), ["broker-a", "broker-b"])
        self.assertEqual(resp.context["config_form"].initial["retry_max_times"], 3)
        # edit it from its page
        form = {**resp.context["config_form"].initial, "retry_max_times": 7, "consume_enable": ""}
        form = {k: ("on" if v is True else "" if v is False else v) for k, v in form.items()}
        resp = self.client.post(url("group_config"), form, follow=True)
        self.assertContains(resp, "cfg_cg created/updated")
        self.assertEqual([(c.retry_max_times, c.consume_enable) for c in resp.context["config"].brokers.values()],
                         [(7, False), (7, False)])
        self.client.post(url("group_delete", "cfg_cg"), {"cluster": "DefaultCluster"})
        self.assertNotIn("cfg_cg", broker.groups.table)

    def test_dlq_view_export_and_resend(self) -> None:
        listener = Counting(fail={"dlq-1"})
        c = consumer("dlq_cg", listener)
        other = Counting()
        c_other = consumer("dlq_other_cg", other)
        try:
            prod = service.producer()
            prod.send(Message(TOPIC, b"poison", tags="T", keys="dlq-1"))
            wait_until(lambda: "%DLQ%dlq_cg" in service.admin().topic_list(), 20, "the DLQ topic")
            resp = wait_until(lambda: (r := self.client.get(url("dlq") + "?group=dlq_cg")).context["results"] and r,
                              20, "the message in the DLQ")
            dead = resp.context["results"][0]
            self.assertEqual(dead.properties.get("RETRY_TOPIC"), TOPIC)
            export = self.client.get(url("dlq_export") + "?group=dlq_cg")
            self.assertEqual(export["Content-Disposition"], 'attachment; filename="dlq-dlq_cg.json"')
            rows = json.loads(export.content)
            self.assertEqual([r["keys"] for r in rows], [["dlq-1"]])
            self.assertEqual(rows[0]["body"], "poison")
            listener.fail.clear()
            # resend (default): a client of dlq_cg consumes it directly; nothing new is written,
            # so another group of the topic does not get it again
            before = listener.seen["dlq-1"]
            resp = self.client.post(url("dlq_resend"), {"group": "dlq_cg", "msg_id": dead.msg_id}, follow=True)
            self.assertContains(resp, "consumed again by")
            self.assertContains(resp, f"{dead.msg_id}: CR_SUCCESS")
            self.assertEqual(listener.seen["dlq-1"], before + 1)
            self.assertEqual(len(service.admin().query_message_by_key(TOPIC, "dlq-1")), 1)
            self.assertEqual(other.seen.get("dlq-1"), 1)
            # "send a copy": a confirmation page first, then a new message in the topic, for every group
            self.assertContains(resp, 'id="dlq-send-copy"')
            resp = self.client.post(url("dlq_send_copy"), {"group": "dlq_cg", "msg_id": dead.msg_id}, follow=True)
            self.assertContains(resp, "confirm on the confirmation page first")
            confirm = self.client.get(url("dlq_copy_confirm") + f"?group=dlq_cg&msg_id={dead.msg_id}")
            self.assertContains(confirm, "every consumer group subscribed there receives it")
            self.assertContains(confirm, f'<td>{TOPIC}</td>', html=False)
            resp = self.client.post(url("dlq_send_copy"), {"group": "dlq_cg", "msg_id": dead.msg_id,
                                                           "confirmed": "yes"}, follow=True)
            self.assertContains(resp, "sent to the original topic, for every group subscribed")
            wait_until(lambda: listener.seen["dlq-1"] > before + 1, 20, "the copy consumed")
            wait_until(lambda: other.seen.get("dlq-1") == 2, 20, "the copy consumed by the other group")
            self.assertEqual(len(service.admin().query_message_by_key(TOPIC, "dlq-1")), 2)
        finally:
            c.shutdown()
            c_other.shutdown()

    def test_trace_page_shows_the_timeline(self) -> None:
        c = consumer("trace_view_cg", Counting(), enable_msg_trace=True)
        try:
            self.client.post(url("topic_send", TOPIC), {"keys": "traced-1", "body": "traced"})
            msg = wait_until(lambda: service.admin().query_message_by_key(TOPIC, "traced-1"), 10, "the message")[0]
            resp = wait_until(lambda: (r := self.client.get(url("trace") + f"?msg_id={msg.msg_id}"))
                              and len(r.context["records"]) >= 3 and r, 20, "Pub, SubBefore and SubAfter")
            types = [r.type.value for r in resp.context["records"]]
            self.assertEqual(sorted(types), ["Pub", "SubAfter", "SubBefore"])
            self.assertContains(resp, "<svg")
            self.assertContains(resp, "send · rocketmq_console_producer")
            self.assertContains(resp, "consume · trace_view_cg")
            self.assertContains(resp, 'class="bar ok"')
            self.assertEqual(types, ["Pub", "SubBefore", "SubAfter"])  # in the order they happen
            # found by key (one match: its trace at once); the send's and deliveries' details
            resp = self.client.get(url("trace") + f"?mode=key&topic={TOPIC}&key=traced-1")
            self.assertEqual(resp.context["msg_id"], msg.msg_id)
            self.assertEqual(len(resp.context["records"]), 3)
            pub = resp.context["graph"].producer
            self.assertEqual((pub.topic, pub.keys, resp.context["msg_type"]), (TOPIC, "traced-1", "Normal_Msg"))
            self.assertContains(resp, 'id="pub-details"')
            [node] = resp.context["graph"].consumers["trace_view_cg"]
            self.assertEqual(node.client_host, decode_uniq_id(node.request_id)[0])
            self.assertContains(resp, f"<td>{node.client_host}</td>", html=False)
            # a key is not an id: the id tab says where to go
            self.assertContains(self.client.get(url("trace") + "?msg_id=n-42"), "use the Key tab")
            # by topic and time: the messages of the last hour, each linked to its trace
            resp = self.client.get(url("trace") + f"?mode=time&topic={TOPIC}")
            self.assertIn(msg.msg_id, [m.msg_id for m in resp.context["found"]])
        finally:
            c.shutdown()

    def test_charts_from_samples(self) -> None:
        smp = Sampler(0.5, 60)
        s1 = smp.take()
        service.producer().send(Message(TOPIC, b"chart", keys="chart-1"))
        s2 = smp.take()
        self.assertEqual(s1.broker_in_tps, {})  # rates need two samples
        self.assertEqual(set(s2.broker_in_tps), {"broker-a", "broker-b"})
        self.assertGreater(sum(s2.broker_in_tps.values()), 0)  # the put counter grew
        self.assertGreater(s2.topic_tps.get(TOPIC, 0), 0)
        self.assertNotIn("TBW102", s2.topic_tps)  # normal topics only
        resp = self.client.get(url("charts"))
        self.assertContains(resp, "Consumer lag (messages)")
        self.assertContains(resp, "Put TPS per broker")


NOTIFIED: list = []


def collecting_notifier(event) -> str:
    """The notifier of the monitor tests (``NOTIFIER`` points here)."""
    NOTIFIED.append(event)
    return "collected"


class MonitorTests(TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        make_user("mon", "view_console", "operate_console")

    def setUp(self) -> None:
        self.client.login(username="mon", password="mon-pw")
        NOTIFIED.clear()

    def console(self, **extra):
        return override_settings(ROCKETMQ_CONSOLE={"NAMESRV_ADDR": CLUSTER.namesrv_addr,
                                                   "NOTIFIER": f"{__name__}.collecting_notifier", **extra})

    def test_a_lag_alarm_fires_once_is_notified_shown_and_resolves(self) -> None:
        resp = self.client.post(url("threshold_set"), {"group": "monitor_cg", "max_lag": 100, "enabled": "on"},
                                follow=True)
        self.assertContains(resp, "lag threshold of monitor_cg: 100")
        t = 1_790_000_000.0
        with self.console():
            self.assertEqual(check_thresholds({"monitor_cg": 100}, t), [])  # at the threshold: fine
            [fired] = check_thresholds({"monitor_cg": 150, "other_cg": 10**6}, t + 10)
            self.assertEqual(check_thresholds({"monitor_cg": 170}, t + 20), [])  # still over: once
            resp = self.client.get(url("monitor"))
            self.assertContains(resp, 'id="firing">1 alarm firing<', html=False)
            self.assertEqual([(a.group, a.lag, a.max_lag, a.resolved, a.notified) for a in resp.context["alarms"]],
                             [("monitor_cg", 150, 100, None, "collected")])
            [resolved] = check_thresholds({"monitor_cg": 3}, t + 30)
        self.assertEqual([(e.group, e.lag, e.max_lag, e.state) for e in NOTIFIED],
                         [("monitor_cg", 150, 100, "firing"), ("monitor_cg", 3, 100, "resolved")])
        self.assertEqual((fired, resolved), tuple(NOTIFIED))
        self.assertIsNotNone(self.client.get(url("monitor")).context["alarms"][0].resolved)
        # a threshold switched off fires nothing; deleting it is audited like every change
        self.client.post(url("threshold_set"), {"group": "monitor_cg", "max_lag": 1})
        with self.console():
            self.assertEqual(check_thresholds({"monitor_cg": 10**6}, t + 40), [])
        self.client.post(url("threshold_delete", "monitor_cg"))
        self.assertFalse(LagThreshold.objects.exists())

    def test_webhook_notifier_posts_the_alarm_as_json(self) -> None:
        received: list = []

        class Hook(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                received.append((self.headers["Content-Type"], json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        server = HTTPServer(("127.0.0.1", 0), Hook)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            LagThreshold.objects.create(group="hook_cg", max_lag=5)
            with self.console(WEBHOOK_URL=f"http://127.0.0.1:{server.server_port}/alarms"):
                check_thresholds({"hook_cg": 9}, 1_790_000_000.0)
        finally:
            server.shutdown()
            server.server_close()
        self.assertEqual(received, [("application/json", {"group": "hook_cg", "lag": 9, "max_lag": 5,
                                                          "state": "firing", "at": "2026-09-21T14:13:20+00:00"})])
        self.assertEqual(LagAlarm.objects.get(group="hook_cg").notified, "collected; webhook 204")

    def test_chart_points_are_stored_a_minute_apart_and_shown_after_a_restart(self) -> None:
        now = time.time() // 60 * 60  # a minute's start: the times below fall in known minutes
        before = Sampler(10, 3600)
        for i, at in enumerate((now - 119, now - 115, now - 59)):  # the 2nd is in the 1st one's minute
            before.record(Sample(at, group_lag={"chart_cg": 10 + i}, topic_tps={"ChartTopic": 2.5 + i}))
        self.assertEqual(sorted(ChartPoint.objects.filter(kind="group_lag").values_list("value", flat=True)),
                         [10.0, 12.0])
        ChartPoint.objects.create(at=now - 2 * 86400, kind="group_lag", name="old_cg", value=1.0)
        before.record(Sample(now, group_lag={"chart_cg": 4}))  # a new minute: stored, the old point pruned
        self.assertFalse(ChartPoint.objects.filter(name="old_cg").exists())
        # "restart": a new sampler has nothing in memory; the page draws the stored points
        with patch("rocketmq_sdk.integrations.django.console.views.charts.ensure_sampler",
                   return_value=Sampler(10, 3600)):
            resp = self.client.get(url("charts"))
            self.assertContains(resp, 'data-series="chart_cg"')
            self.assertIn(("Groups by lag", [("chart_cg", 4.0)]), resp.context["top"])
            self.assertIn(("Topics by TPS", [("ChartTopic", 4.5)]), resp.context["top"])
            self.assertContains(self.client.get(url("charts") + "?range=day"), 'data-series="chart_cg"')


class MasterDownTests(TestCase):
    """A cluster of its own: broker-s with a slave, whose master is stopped."""

    @classmethod
    def setUpTestData(cls) -> None:
        make_user("op2", "view_console", "operate_console")

    def test_numbers_come_from_the_slave_and_a_banner_names_the_broker(self) -> None:
        with embedded.start_cluster(("broker-s",), slaves=1, broker_role="SYNC_MASTER",
                                    broker_config={"slave_sync_interval": 300}) as cluster, \
                override_settings(ROCKETMQ_CONSOLE={"NAMESRV_ADDR": cluster.namesrv_addr}):
            lifecycle.reset_clients()
            try:
                self.client.login(username="op2", password="op2-pw")
                adm = service.admin()
                adm.create_topic("DownTopic", cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
                with Producer("down_pg", cluster.namesrv_addr) as prod:
                    for i in range(6):
                        prod.send(Message("DownTopic", f"d{i}".encode(), keys=f"down-{i}"))
                # a group consumes them all, then stops (its offsets reach the slave)
                c = PushConsumer("down_cg", cluster.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
                c.subscribe("DownTopic", "*")
                c.register_message_listener(Counting())
                c.start()
                try:
                    wait_until(lambda: adm.consumer_progress("down_cg", "DownTopic").total_lag == 0
                               and sum(q.consumer_offset for q in adm.consumer_progress("down_cg", "DownTopic").queues) == 6,
                               20, "down_cg caught up")
                finally:
                    c.shutdown()
                self.assertNotContains(self.client.get(url("topic", "DownTopic")), 'id="masters-down"')
                master, slave = cluster.brokers["broker-s"], cluster.slaves["broker-s"][0]
                wait_until(lambda: slave.topics.get("DownTopic") is not None
                           and slave.store.reput_from_offset == master.store.get_max_phy_offset()
                           and all(slave.offsets.query("down_cg", "DownTopic", q) == master.offsets.query("down_cg", "DownTopic", q)
                                   for q in range(2)), 20,
                           "the slave holding the topic, its messages and the group's offsets")
                cluster.stop_broker("broker-s")
                wait_until(lambda: adm.masterless_brokers(), 20, "the name server without the master")
                resp = self.client.get(url("topic", "DownTopic"))
                self.assertContains(resp, 'id="masters-down"')
                self.assertContains(resp, f"broker-s (DefaultCluster) is read from its slave "
                                          f"{cluster.slaves['broker-s'][0].config.broker_addr}")
                self.assertEqual(sum(q.max_offset for q in resp.context["status"]), 6)
                resp = self.client.get(url("messages") + "?mode=key&topic=DownTopic&key=down-3")
                self.assertEqual(len(resp.context["results"]), 1)
                self.assertContains(resp, "down-3")
                found = resp.context["results"][0]
                self.assertContains(resp, f'<td class="num">broker-s/{found.queue_id}</td>', html=False)
                # its page: the queue named, and the group's status read from the slave's offsets
                # (a message from the slave carries the master's store host, which the name
                # server no longer lists: the page said "- / 1" and UNKNOWN)
                # the topic's groups asked of its own brokers, not found by scanning every topic
                with patch.object(type(adm), "topic_list_by_cluster", side_effect=AssertionError("every topic scanned")):
                    resp = self.client.get(url("message", "DownTopic", found.msg_id))
                    self.assertEqual([g["group"] for g in self.client.get(url("topic", "DownTopic")).context["groups"]],
                                     ["down_cg"])
                self.assertContains(resp, f"broker-s / {found.queue_id} @ {found.queue_offset}")
                self.assertEqual(resp.context["groups"], [{"group": "down_cg", "status": "CONSUMED"}])
                # cluster-wide changes skip a broker without its master (as mqadmin's -c): said so,
                # not "created" (it was, silently, on no broker at all here)
                for post, form in ((url("group_config"), {"group": "down_cfg_cg", "cluster": "DefaultCluster",
                                                         "consume_enable": "on", "retry_queue_nums": 1,
                                                         "retry_max_times": 3}),
                                   (url("topic_create"), {"topic": "DownTopic2", "cluster": "DefaultCluster",
                                                          "read_queue_nums": 2, "write_queue_nums": 2, "perm": 6})):
                    with self.assertLogs("rocketmq_sdk.integrations.django.console.audit", "INFO") as audit:
                        resp = self.client.post(post, form, follow=True)
                    # the audit line says so too (was outcome=ok)
                    self.assertTrue(audit.output[-1].endswith("outcome=partial: not written on broker-s "
                                                              "(master down)"), audit.output)
                    shown = [(m.level_tag, str(m)) for m in resp.context["messages"]]
                    self.assertIn(("warning", "not written on broker-s: its master is down (write it again when it "
                                              "is back)"), shown, post)
                    self.assertNotIn("success", [level for level, _ in shown], post)
            finally:
                lifecycle.reset_clients()


class DLedgerClusterTests(TestCase):
    """A DLedger group of its own (three reference brokers in one process): the cluster page shows
    its leader, term and each member's log index and lag."""

    @classmethod
    def setUpTestData(cls) -> None:
        make_user("op3", "view_console")

    def test_cluster_page_shows_leader_term_and_member_lag(self) -> None:
        with embedded.start_dev_cluster(in_process=True, cluster="dledger") as cluster, \
                override_settings(ROCKETMQ_CONSOLE={"NAMESRV_ADDR": cluster.namesrv_addr}):
            lifecycle.reset_clients()
            try:
                self.client.login(username="op3", password="op3-pw")
                with Producer("dl_console_pg", cluster.namesrv_addr) as prod:
                    for i in range(5):
                        prod.send(Message("DLConsole", f"m{i}".encode()))
                master = cluster.broker
                node = master.dledger.node
                end = node.ledger.end_index
                wait_until(lambda: all(b.dledger.node.ledger.end_index == end for b in cluster._servers[1:]), 20,
                           "every member holding the whole log")
                wait_until(lambda: set(node.peer_status().values()) == {end}, 20, "the leader's water marks")
                resp = self.client.get(url("cluster"))
                self.assertContains(resp, 'id="dledger-broker-a"')
                group = resp.context["clusters"][0][2][0]
                self.assertEqual((group["name"], group["leader"], group["term"]),
                                 ("broker-a", node.config.self_id, node.term))
                self.assertEqual([(m["id"], m["index"], m["lag"]) for m in group["members"]],
                                 [(f"n{i}", end, 0) for i in range(3)])
                roles = {m["id"]: m["role"] for m in group["members"]}
                self.assertEqual(roles.pop(node.config.self_id), "LEADER")
                self.assertEqual(set(roles.values()), {"FOLLOWER"})
                self.assertContains(resp, f'<span class="dledger-leader">{node.config.self_id}</span>')
                self.assertContains(resp, f'<span class="dledger-term">{node.term}</span>')
            finally:
                lifecycle.reset_clients()


class TraceTimelineTests(SimpleTestCase):
    def test_axis_labels_are_distinct_and_records_of_one_ms_in_the_order_they_happen(self) -> None:
        self.assertEqual(axis_ticks(1), [0, 1])
        self.assertEqual(axis_ticks(3), [0, 1, 2, 3])
        self.assertEqual(axis_ticks(1000), [0, 250, 500, 750, 1000])
        recs = [TraceRecord(TraceType.SubAfter, time_stamp=5), TraceRecord(TraceType.SubBefore, time_stamp=5),
                TraceRecord(TraceType.Pub, time_stamp=5), TraceRecord(TraceType.SubBefore, time_stamp=4)]
        self.assertEqual([(r.time_stamp, r.type.value) for r in records_in_order(recs)],
                         [(4, "SubBefore"), (5, "Pub"), (5, "SubBefore"), (5, "SubAfter")])
        graph = build_trace_graph("m", [TraceRecord(TraceType.Pub, time_stamp=5, cost_time=1, msg_id="m"),
                                        TraceRecord(TraceType.SubBefore, time_stamp=5, msg_id="m", request_id="x"),
                                        TraceRecord(TraceType.SubAfter, time_stamp=6, msg_id="m", request_id="x")])
        svg = trace_timeline(graph)
        self.assertEqual(svg.count("+0 ms"), 1)
        self.assertEqual(svg.count("+1 ms"), 1)


class TimeZoneTests(SimpleTestCase):
    def test_times_are_shown_with_their_zone(self) -> None:
        at = 1_790_000_000_123  # 2026-09-21 14:13:20.123 UTC
        self.assertEqual(ms_time(at), "2026-09-21 14:13:20.123 UTC")
        with override_settings(TIME_ZONE="Asia/Shanghai"):
            self.assertEqual(ms_time(at), "2026-09-21 22:13:20.123 CST")
            self.assertIn("22:13:20 CST</text>", line_chart("t", {"s": [(at / 1000 - 60, 1.0), (at / 1000, 2.0)]}))


ACL_FILE = """globalWhiteRemoteAddresses:
accounts:
  - accessKey: ConsoleAdmin
    secretKey: console-admin-1
    admin: true
"""


class AclTests(TestCase):
    """A broker of its own with ACL on; the console signs with an admin account."""

    @classmethod
    def setUpTestData(cls) -> None:
        make_user("aclop", "view_console", "operate_console")

    def test_accounts_and_white_list_managed_and_secrets_never_audited(self) -> None:
        # ACL off on the shared cluster: no ACL link, no page
        self.client.login(username="aclop", password="aclop-pw")
        lifecycle.reset_clients()
        self.assertNotContains(self.client.get(url("cluster")), 'id="nav-acl"')
        self.assertEqual(self.client.get(url("acl")).status_code, 404)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "plain_acl.yml")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(ACL_FILE)
            with embedded.start_cluster(("broker-acl",), broker_config={"acl_enable": True, "acl_config_file": path}) \
                    as cluster, override_settings(ROCKETMQ_CONSOLE={"NAMESRV_ADDR": cluster.namesrv_addr,
                                                                    "ACCESS_KEY": "ConsoleAdmin",
                                                                    "SECRET_KEY": "console-admin-1"}):
                lifecycle.reset_clients()
                try:
                    resp = self.client.get(url("acl"))
                    self.assertContains(resp, 'id="nav-acl"')
                    self.assertContains(resp, cluster.addr("broker-acl"))
                    with self.assertLogs("rocketmq_sdk.integrations.django.console.audit", "INFO") as logs:
                        resp = self.client.post(url("acl_account"), {
                            "cluster": "DefaultCluster", "access_key": "ConsoleUser1", "secret_key": "console-user-1",
                            "default_topic_perm": "DENY", "default_group_perm": "SUB",
                            "topic_perms": "Orders=PUB\nAudit=PUB|SUB", "group_perms": ""}, follow=True)
                        self.assertContains(resp, "ACL account ConsoleUser1 created/updated")
                        resp = self.client.post(url("acl_account"), {
                            "cluster": "DefaultCluster", "access_key": "ConsoleUser2", "secret_key": "x",
                            "default_topic_perm": "DENY", "default_group_perm": "SUB"}, follow=True)
                        self.assertContains(resp, "secret_key: 7 to 64 letters")  # refused before sending
                        self.client.post(url("acl_white_list"), {"cluster": "DefaultCluster",
                                                                 "addresses": "10.10.103.*, 127.0.0.1"})
                    data = yaml.safe_load(open(path, encoding="utf-8"))
                    account = next(a for a in data["accounts"] if a["accessKey"] == "ConsoleUser1")
                    self.assertEqual((account["secretKey"], account["defaultTopicPerm"], account["topicPerms"]),
                                     ("console-user-1", "DENY", ["Orders=PUB", "Audit=PUB|SUB"]))
                    self.assertEqual(data["globalWhiteRemoteAddresses"], ["10.10.103.*", "127.0.0.1"])
                    self.assertFalse(any("console-user-1" in line for line in logs.output))
                    self.assertIn("secret_key='<hidden>'", logs.output[0])
                    resp = self.client.post(url("acl_delete"), {"cluster": "DefaultCluster",
                                                                "access_key": "ConsoleUser1"}, follow=True)
                    self.assertContains(resp, "ACL account ConsoleUser1 deleted")
                    data = yaml.safe_load(open(path, encoding="utf-8"))
                    self.assertNotIn("ConsoleUser1", [a["accessKey"] for a in data["accounts"]])
                finally:
                    lifecycle.reset_clients()


class BodyPreviewTests(SimpleTestCase):
    def test_encodings(self) -> None:
        self.assertEqual(body_preview(b'{"a": [1, 2]}')["encoding"], "json")
        self.assertEqual(body_preview("订单 1001".encode())["text"], "订单 1001")
        gbk = body_preview("订单 1001".encode("gbk"))
        self.assertEqual((gbk["encoding"], gbk["text"]), ("gbk", "订单 1001"))
        binary = body_preview(bytes(range(40)))
        self.assertEqual(binary["encoding"], "binary")
        self.assertTrue(binary["text"].startswith("00000000  00 01 02 03"))
        self.assertTrue(body_preview(b"x" * 5000, limit=4096)["truncated"])
