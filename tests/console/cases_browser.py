"""The console in a real headless Chromium (Debian's chromium + chromium-driver, driven by
Selenium; nothing is downloaded), on two masters with a slave each: log in (and again after
logging out: the cluster page, not a 404), create a topic, send a message, find it by key, see
its trace (also found by key), resend a DLQ message into its own group, watch lag fall while a
consumer runs (a lag alarm fires, then resolves), reset the group's offset (online, then with the
consumer stopped), create a group
that no client uses and see its config, look at the charts, then stop broker-b's master: the
numbers stay, read from its slave, under a banner naming it. Two more cases run on broker
processes (``start_dev_cluster``): broker-b's master killed with SIGKILL (the issue's operator
case), and a DLedger group's cluster page.

Run by test_console.py through Django's test runner. With ``CONSOLE_SCREENSHOTS=<dir>`` every
page is also saved there as PNG (docs/tools/console_screenshots.py uses this for docs/console/).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import unittest

from django.test import LiveServerTestCase, override_settings
from rocketmq_broker import embedded
from rocketmq_sdk.admin import AdminClient
from rocketmq_sdk.consumer import ConsumeConcurrentlyStatus, PushConsumer
from rocketmq_sdk.exceptions import MQBrokerError
from rocketmq_sdk.integrations.django.console import lifecycle
from rocketmq_sdk.producer import Producer
from rocketmq_sdk.protocol.codes import RequestCode
from rocketmq_sdk.protocol.message import Message

from .support import make_user, start_cluster, stop_cluster, wait_until

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TOPIC, GROUP = "BrowserOrders", "browser_cg"

try:
    from selenium import webdriver
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC  # noqa: N812 - selenium's idiom
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # pragma: no cover - test_console.py skips before
    webdriver = None


def browser_missing() -> str | None:
    if webdriver is None:
        return "selenium is not installed"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            return f"{path} is not installed"
    return None


class Listener:
    """Counts deliveries; ``delay_s`` per message makes a backlog drain over a few seconds;
    keys in ``fail`` go to the DLQ at once."""

    def __init__(self, delay_s: float = 0.0, fail: frozenset[str] = frozenset()) -> None:
        self.delay_s, self.fail, self.count, self.lock = delay_s, set(fail), 0, threading.Lock()

    def __call__(self, msgs, ctx):
        if self.delay_s:
            threading.Event().wait(self.delay_s * len(msgs))  # simulated work, not synchronisation
        with self.lock:
            self.count += len(msgs)
        if any(self.fail.intersection(m.keys) for m in msgs):
            ctx.delay_level_when_next_consume = -1
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS


class ChromiumCase(LiveServerTestCase):
    """A live console and a headless Chromium; subclasses start the cluster it shows
    (:meth:`start_console_cluster`) and stop it (:meth:`stop_console_cluster`)."""

    host = "127.0.0.1"

    @classmethod
    def start_console_cluster(cls) -> None:
        raise NotImplementedError

    @classmethod
    def stop_console_cluster(cls) -> None:
        raise NotImplementedError

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.start_console_cluster()
        cls.profile = tempfile.mkdtemp(prefix="console-chromium-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                     f"--user-data-dir={cls.profile}", "--window-size=1280,900", "--force-device-scale-factor=1"):
            opts.add_argument(flag)
        cls.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        cls.driver.set_page_load_timeout(60)
        cls.shots = os.environ.get("CONSOLE_SCREENSHOTS")

    @classmethod
    def tearDownClass(cls) -> None:
        try:
            cls.driver.quit()
        finally:
            shutil.rmtree(cls.profile, ignore_errors=True)
            cls.stop_console_cluster()
            super().tearDownClass()

    # ------------------------------------------------------------------ helpers

    def go(self, path: str) -> None:
        self.driver.get(f"{self.live_server_url}/rocketmq/{path}")

    def find(self, css: str):
        """The element, waiting up to 10 s for it to appear."""
        return WebDriverWait(self.driver, 10).until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))

    def submit(self, css: str) -> None:
        """Click a submit button (or link) and wait until the next page replaced this one."""
        old = self.driver.find_element(By.TAG_NAME, "html")
        self.find(css).click()

        def replaced(_driver) -> bool:
            # EC.staleness_of, plus what chromium answers for a node of a page already gone
            # ("Node with given id does not belong to the document": not a StaleElementReference)
            try:
                old.is_enabled()
            except StaleElementReferenceException:
                return True
            except WebDriverException as exc:
                if "does not belong to the document" in str(exc):
                    return True
                raise
            return False

        WebDriverWait(self.driver, 30).until(replaced)

    def text(self, css: str) -> str:
        return self.find(css).text

    def now_text(self, css: str) -> str:
        """The element's text, "" when the page has none (no waiting: for polled conditions)."""
        found = self.driver.find_elements(By.CSS_SELECTOR, css)
        return found[0].text if found else ""

    def shot(self, name: str) -> None:
        if not self.shots:
            return
        os.makedirs(self.shots, exist_ok=True)
        height = int(self.driver.execute_script("return document.documentElement.scrollHeight"))
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 1280, "height": max(600, min(height, 2400)), "deviceScaleFactor": 1, "mobile": False})
        try:
            self.driver.save_screenshot(os.path.join(self.shots, f"{name}.png"))
        finally:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    def reload_until(self, path: str, cond, timeout_s: float, what: str):
        def check():
            self.go(path)
            return cond()
        return wait_until(check, timeout_s, what)

    def log_in(self, user: str) -> None:
        """Log in from the login page as ``user`` (password ``<user>-pw``, see make_user)."""
        self.find("#id_username").send_keys(user)
        self.find("#id_password").send_keys(f"{user}-pw")
        self.submit("#login")

    def lag(self) -> int:
        """The group page's total lag, -1 when the page shows none (offsets not there yet)."""
        text = self.now_text("#total-lag")
        return int(text) if text else -1



@unittest.skipIf(browser_missing() is not None, f"browser tests skipped: {browser_missing()}")
class ConsoleInChromium(ChromiumCase):
    @classmethod
    def start_console_cluster(cls) -> None:
        cls.cluster = start_cluster(slaves=1, SAMPLE_INTERVAL_S=0.5)

    @classmethod
    def stop_console_cluster(cls) -> None:
        stop_cluster()

    # ------------------------------------------------------------------ the scenario

    def test_console_scenario(self) -> None:
        make_user("operator", "view_console", "operate_console")
        d = self.driver
        # log in
        self.go("")
        self.assertIn("/rocketmq/login/", d.current_url)
        self.shot("login")
        self.log_in("operator")
        self.assertIn("broker-a", self.text("#brokers"))
        self.assertIn("broker-b", self.text("#brokers"))
        self.shot("cluster")
        self.go(f"brokers/{self.cluster.addr('broker-a')}/")
        self.shot("broker")
        # log out, log in again from the login page: the cluster page (was Django's 404 default)
        self.submit("header .user button")
        self.assertIn("/rocketmq/login/", d.current_url)
        self.log_in("operator")
        self.assertTrue(d.current_url.endswith("/rocketmq/"), d.current_url)
        self.assertIn("broker-a", self.text("#brokers"))

        # create a topic
        self.go("topics/")
        self.find("#id_topic").send_keys(TOPIC)
        for field in ("#id_read_queue_nums", "#id_write_queue_nums"):
            self.find(field).clear()
            self.find(field).send_keys("2")
        self.submit("#create-topic")
        self.assertIn(f"Topic {TOPIC}", self.text("h1"))
        with AdminClient(self.cluster.namesrv_addr) as adm:
            self.assertEqual(sorted(q.broker_name for q in adm.topic_route(TOPIC).queue_datas), ["broker-a", "broker-b"])
        self.go("topics/")
        self.assertIn(TOPIC, self.text("#topics"))
        self.shot("topics")
        # a lag threshold for the group: the backlog below fires an alarm
        self.go("monitor/")
        self.find("#id_group").send_keys(GROUP)
        self.find("#id_max_lag").clear()
        self.find("#id_max_lag").send_keys("100")
        self.submit("#threshold-save")
        self.assertIn(GROUP, self.text("#thresholds"))

        # a traced consumer, then send a message from the topic page
        listener = Listener(fail=frozenset({"poison-1"}))
        consumer = self.start_consumer(listener)
        try:
            self.go(f"topics/{TOPIC}/")
            self.find("#id_tags").send_keys("TagA")
            self.find("#id_keys").send_keys("browser-key-1")
            self.find("#id_body").send_keys('{"order": 1001, "amount": 42.5}')
            self.submit("#send")
            self.assertIn("SEND_OK", self.text("#sent"))
            self.shot("topic")

            # find it by key, open it, see its trace
            self.go("messages/?mode=key")
            self.find("#id_topic").send_keys(TOPIC)
            self.find("#id_key").send_keys("browser-key-1")
            self.submit("#search")
            search = d.current_url.split("/rocketmq/", 1)[1]  # the broker indexes keys asynchronously
            self.reload_until(search, lambda: d.find_elements(By.CSS_SELECTOR, "#results tr td a"), 20, "the key found")
            rows = d.find_elements(By.CSS_SELECTOR, "#results tr td a")
            self.assertEqual(len(rows), 1)
            self.shot("messages")
            old = d.find_element(By.TAG_NAME, "html")
            rows[0].click()
            WebDriverWait(d, 30).until(EC.staleness_of(old))
            self.assertIn("browser-key-1", self.text("#message"))
            self.assertIn('"amount": 42.5', self.text("#body"))
            msg_path = d.current_url.split("/rocketmq/", 1)[1]
            self.reload_until(msg_path, lambda: "CONSUMED" in self.now_text("#consumed"), 20, "the group's offset past it")
            self.shot("message")
            self.submit("#trace-link")
            trace_path = d.current_url.split("/rocketmq/", 1)[1]
            self.reload_until(trace_path, lambda: "SubAfter" in self.now_text("#records"), 20, "the consume records")
            self.assertIn("Pub", self.text("#records"))
            bars = d.find_elements(By.CSS_SELECTOR, "#timeline svg rect.bar.ok")
            self.assertEqual(len(bars), 2)  # the send and the delivery
            self.shot("trace")
            # the same trace found by the message's key
            self.go("traces/?mode=key")
            self.find("#id_topic").send_keys(TOPIC)
            self.find("#id_key").send_keys("browser-key-1")
            self.submit("#show-trace")
            self.assertIn("SubAfter", self.text("#records"))
            self.assertIn(TOPIC, self.text("#pub-details"))
            self.assertIn("browser-key-1", self.text("#pub-details"))
            self.assertNotIn("-", self.text("#deliveries tr:nth-child(2) td:nth-child(2)"))  # the consumer's host
            self.shot("trace-by-key")

            # a poisoned message ends in the group's DLQ
            with Producer("browser_pg", self.cluster.namesrv_addr) as producer:
                producer.send(Message(TOPIC, b"cannot be processed", tags="TagB", keys="poison-1"))
                self.reload_until(f"dlq/?group={GROUP}", lambda: "poison-1" in self.now_text("#dlq"), 20, "the DLQ message")
                self.shot("dlq")
                # resend: a client of the group consumes it directly (nothing new in the topic)
                listener.fail.clear()
                before = listener.count
                self.find('#dlq input[name="msg_id"]').click()
                self.submit("#dlq-resend")
                self.assertIn("CR_SUCCESS", self.text(".msg.success"))
                self.assertEqual(listener.count, before + 1)
                with AdminClient(self.cluster.namesrv_addr) as adm:
                    self.assertEqual(len(adm.query_message_by_key(TOPIC, "poison-1")), 1)
                self.go(f"producers/?group=browser_pg&topic={TOPIC}")
                self.assertIn("PYTHON", self.text("#producers"))
                self.shot("producers")
            consumer.shutdown()
            consumer = None

            # a backlog while the group is offline, then lag falls while a consumer runs
            with Producer("browser_pg", self.cluster.namesrv_addr) as producer:
                for i in range(300):
                    producer.send(Message(TOPIC, f"backlog {i}".encode(), tags="TagC", keys=f"backlog-{i}"))
            self.reload_until(f"groups/{GROUP}/", lambda: self.lag() == 300, 20, "lag 300")
            self.reload_until("monitor/", lambda: "1 alarm firing" in self.now_text("#firing"), 20, "the alarm")
            self.assertIn("logged", self.text("#alarms"))  # the default notifier
            self.shot("monitor")
            self.go("groups/")
            self.assertIn(GROUP, self.text("#groups"))
            self.shot("groups")
            slow = Listener(delay_s=0.01)
            consumer = self.start_consumer(slow)
            seen = [300]
            self.reload_until(f"groups/{GROUP}/", lambda: (lag := self.lag()) >= 0 and (seen.append(lag) or lag == 0),
                              60, "lag 0")
            self.assertGreaterEqual(slow.count, 300)
            self.reload_until("monitor/", lambda: not self.driver.find_elements(By.CSS_SELECTOR, "#firing"), 20,
                              "the alarm resolved")
            self.go(f"groups/{GROUP}/")
            self.assertEqual(seen, sorted(seen, reverse=True), "lag only falls while the consumer runs")

            # reset the offset to the earliest: everything is consumed again and lag falls back to 0
            before = slow.count
            Select(self.find("#id_topic")).select_by_visible_text(TOPIC)
            self.find("#id_timestamp").clear()
            self.find("#id_timestamp").send_keys("earliest")
            self.submit("#reset")
            offsets = [int(td.text) for td in d.find_elements(By.CSS_SELECTOR, "#reset-result td:last-child")]
            self.assertEqual(offsets, [0, 0, 0, 0])
            self.reload_until(f"groups/{GROUP}/", lambda: self.lag() == 0 and slow.count >= before + 300, 60,
                              "the group consumed everything again")
            self.assertIn("PYTHON", self.text("#clients"))
            self.assertEqual(self.text("#consistency"), "consistent")
            self.shot("group")
            # the client's full running info: subscription and the four queues it owns
            self.submit("#clients a")
            self.assertIn(TOPIC, self.text("#client-subscriptions"))
            self.assertEqual(len(d.find_elements(By.CSS_SELECTOR, "#client-queues tr")), 1 + 4 + 2)  # + retry queues
            self.shot("client")

            # stop the consumers, rewind, (restart): the reset of an offline group works
            consumer.shutdown()
            consumer = None
            with AdminClient(self.cluster.namesrv_addr) as adm:
                wait_until(lambda: not self.online(adm), 20, "the group offline")
                stored = sum(q.max_offset - q.min_offset for q in adm.topic_status(TOPIC))
            self.go(f"groups/{GROUP}/")
            Select(self.find("#id_topic")).select_by_visible_text(TOPIC)
            self.find("#id_timestamp").clear()
            self.find("#id_timestamp").send_keys("earliest")
            self.submit("#reset")
            self.assertIn("group offline", self.text(".msg.success"))
            offsets = [int(td.text) for td in d.find_elements(By.CSS_SELECTOR, "#reset-result td:last-child")]
            self.assertEqual(offsets, [0, 0, 0, 0])
            lag = self.lag()
            self.assertGreaterEqual(lag, stored)  # the topic's messages (plus any retry-topic lag)
            self.shot("group-offline-reset")

            # a group created here but used by no client: listed, its config shown and editable
            self.go("groups/")
            self.find("#id_group").send_keys("browser_cfg_cg")
            self.find("#id_retry_max_times").clear()
            self.find("#id_retry_max_times").send_keys("5")
            self.submit("form.inline button[type=submit]")
            self.assertIn("browser_cfg_cg", self.text("h1"))
            self.assertIn("not used by any client yet", self.text("#config-only"))
            self.assertEqual(self.config_row("retryMaxTimes"), ["5", "5"])  # broker-a, broker-b
            # edited on its page: the form comes filled with the current config
            self.assertEqual(self.find("#config-form #id_retry_max_times").get_attribute("value"), "5")
            self.find("#config-form #id_retry_max_times").clear()
            self.find("#config-form #id_retry_max_times").send_keys("7")
            broadcast = self.find("#config-form #id_consume_broadcast_enable")
            was = broadcast.is_selected()
            self.assertEqual(self.config_row("consumeBroadcastEnable"), [str(was).lower()] * 2)
            broadcast.click()
            self.submit("#config-save")
            self.assertEqual(self.config_row("retryMaxTimes"), ["7", "7"])
            self.assertEqual(self.config_row("consumeBroadcastEnable"), [str(not was).lower()] * 2)
            with AdminClient(self.cluster.namesrv_addr) as adm:
                stored = adm.subscription_group_config("browser_cfg_cg").brokers.values()
                self.assertEqual({(c.retry_max_times, c.consume_broadcast_enable) for c in stored}, {(7, not was)})
            self.shot("group-config")
            self.go("groups/")
            self.assertIn("config only", self.text("#groups"))

            # the charts saw the lag rise and fall
            self.reload_until("charts/", lambda: d.find_elements(By.CSS_SELECTOR, f'polyline[data-series="{GROUP}"]'),
                              20, "a lag series")
            points = self.find(f'svg polyline[data-series="{GROUP}"]').get_attribute("points").split()
            ys = [float(p.split(",")[1]) for p in points]
            self.assertGreater(max(ys), min(ys))  # not flat: the lag moved
            self.shot("charts")

            # broker-b's master dies, its slave lives: same numbers, read from the slave, a banner
            self.assertEqual(d.find_elements(By.CSS_SELECTOR, "#masters-down"), [])
            master, slave = self.cluster.brokers["broker-b"], self.cluster.slaves["broker-b"][0]
            wait_until(lambda: slave.store.reput_from_offset == master.store.get_max_phy_offset()
                       and all(slave.offsets.query(GROUP, TOPIC, q) == master.offsets.query(GROUP, TOPIC, q)
                               for q in range(2)), 20, "broker-b's slave in sync")
            self.go(f"topics/{TOPIC}/")
            total_before = self.text("#queues")
            with AdminClient(self.cluster.namesrv_addr) as adm:  # a backlog message stored on broker-b
                on_b = next(k for k in (f"backlog-{i}" for i in range(300))
                            if adm.query_message_by_key(TOPIC, k)[0].store_host == master.config.broker_addr)
            self.cluster.stop_broker("broker-b")
            self.reload_until(f"groups/{GROUP}/", lambda: self.now_text("#masters-down"), 20, "the banner")
            self.assertIn(f"broker-b (DefaultCluster) is read from its slave {slave.config.broker_addr}",
                          self.text("#masters-down"))
            self.assertEqual(self.lag(), lag)
            self.shot("master-down")
            self.go(f"topics/{TOPIC}/")
            self.assertEqual(self.text("#queues"), total_before)
            # broker-b's message is found by key on the slave and shown as broker-b's, with the
            # group's status from the slave's offsets (reset to the earliest above: not consumed)
            self.go(f"messages/?mode=key&topic={TOPIC}&key={on_b}")
            self.assertIn("broker-b/", self.text("#results"))
            self.submit("#results tr td a")
            self.assertIn("broker-b / ", self.text("#message"))
            self.assertIn(f"{GROUP} NOT_CONSUMED_YET", self.text("#consumed"))
        finally:
            if consumer is not None:
                consumer.shutdown()

    def config_row(self, setting: str) -> list[str]:
        """The group config table's values of ``setting``, one per broker."""
        row = next(r for r in self.find("#group-config").find_elements(By.TAG_NAME, "tr")
                   if r.find_elements(By.TAG_NAME, "td") and r.find_elements(By.TAG_NAME, "td")[0].text == setting)
        return [td.text for td in row.find_elements(By.TAG_NAME, "td")[1:]]

    @staticmethod
    def online(adm: AdminClient) -> bool:
        try:
            return bool(adm.consumer_connection(GROUP).connections)
        except MQBrokerError:
            return False

    def start_consumer(self, listener) -> PushConsumer:
        c = PushConsumer(GROUP, self.cluster.namesrv_addr, enable_msg_trace=True,
                         consume_from_where="CONSUME_FROM_FIRST_OFFSET", pull_batch_size=8)
        c.subscribe(TOPIC, "*")
        c.register_message_listener(listener)
        c.start()
        return c


class DevClusterCase(ChromiumCase):
    """The console on a ``start_dev_cluster(**dev_cluster)``."""

    dev_cluster: dict = {}

    @classmethod
    def start_console_cluster(cls) -> None:
        cls.cluster = embedded.start_dev_cluster(**cls.dev_cluster)
        cls.override = override_settings(ROCKETMQ_CONSOLE={"NAMESRV_ADDR": cls.cluster.namesrv_addr})
        cls.override.enable()
        lifecycle.reset_clients()

    @classmethod
    def stop_console_cluster(cls) -> None:
        lifecycle.reset_clients()
        cls.override.disable()
        cls.cluster.stop()


@unittest.skipIf(browser_missing() is not None, f"browser tests skipped: {browser_missing()}")
class DLedgerGroupInChromium(DevClusterCase):
    """The cluster page of a DLedger group (three reference brokers in one process): leader,
    term, each member's log index and lag; after a leadership transfer, the new leader."""

    dev_cluster = {"in_process": True, "cluster": "dledger"}

    def test_dledger_group_on_the_cluster_page(self) -> None:
        make_user("dl_viewer", "view_console")
        with Producer("dl_browser_pg", self.cluster.namesrv_addr) as producer:
            for i in range(3):
                producer.send(Message("DLBrowser", f"m{i}".encode()))
        node = self.cluster.broker.dledger.node
        self.go("")
        self.log_in("dl_viewer")
        self.assertEqual(self.text(".dledger-leader"), node.config.self_id)
        self.assertEqual(self.text(".dledger-term"), str(node.term))
        end = node.ledger.end_index
        rows = self.reload_until("", lambda: [r for r in self.text("#dledger-broker-a").splitlines()[1:]
                                              if r.split()[-2:] == [str(end), "0"]], 20,
                                 "every member at the leader's log index with lag 0")
        self.assertEqual(len(rows), 3, rows)
        self.shot("cluster-dledger")
        nodes = {b.dledger.node.config.self_id: b.dledger.node for b in self.cluster._servers[1:]}

        def transferred(adm: AdminClient) -> str | None:
            """Hand the leadership to another member; None to try again: on a loaded machine a
            member may time out and campaign (DLedger has no pre-vote), so the term read for the
            request can be over by the time the leader gets it (EXPIRED_TERM) or no one leads."""
            leaders = {n.leader_id for n in nodes.values()}
            if len(leaders) != 1 or None in leaders:
                return None
            target = next(m for m in sorted(nodes) if m not in leaders)
            try:
                adm.dledger_leadership_transfer("broker-a", target)
            except MQBrokerError as exc:
                if "EXPIRED_TERM" not in str(exc):
                    raise
                return None
            return target

        with AdminClient(self.cluster.namesrv_addr) as adm:
            target = wait_until(lambda: transferred(adm), 40, "a leadership transfer")
        self.reload_until("", lambda: self.now_text(".dledger-leader") == target, 20, "the new leader on the page")
        self.assertEqual(self.text(".dledger-term"), str(nodes[target].term))  # the new leader's term


@unittest.skipIf(browser_missing() is not None, f"browser tests skipped: {browser_missing()}")
class MasterKilledInChromium(DevClusterCase):
    """What the operator of issue #29 saw: a 2-master/2-slave cluster of broker processes,
    broker-b's master killed (SIGKILL, no unregistering) with its slave alive; the numbers a
    read-only user sees stay the same, under the banner, and a message of broker-b is found."""

    dev_cluster = {"cluster": "2m-2s-sync", "broker_config": {"slaveSyncInterval": 300}}

    def test_master_killed_numbers_unchanged_under_a_banner(self) -> None:
        from tests.broker.conftest import SyncClient

        topic, group = "KilledOrders", "killed_cg"
        ns = self.cluster.namesrv_addr
        with AdminClient(ns) as adm:
            adm.create_topic(topic, cluster="DefaultCluster", read_queue_nums=2, write_queue_nums=2)
        with Producer("killed_pg", ns) as producer:
            for i in range(20):
                producer.send(Message(topic, f"first {i}".encode(), keys=f"first-{i}"))
            counted = Listener()
            c = PushConsumer(group, ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            c.subscribe(topic, "*")
            c.register_message_listener(counted)
            c.start()
            try:
                with AdminClient(ns) as adm:
                    wait_until(lambda: counted.count >= 20 and adm.consumer_progress(group, topic).total_lag == 0,
                               30, "the group caught up")
            finally:
                c.shutdown()
            for i in range(30):  # a backlog on both brokers
                producer.send(Message(topic, f"later {i}".encode(), keys=f"later-{i}"))
        master, slave = self.cluster.broker("broker-b", 0), self.cluster.broker("broker-b", 1)
        with AdminClient(ns) as adm:
            on_b = next(k for k in (f"later-{i}" for i in range(30))
                        if adm.query_message_by_key(topic, k)[0].store_host == master.addr)
        # broker-b's slave holds its messages, queues and the group's offsets (copied every 300 ms)
        sync = SyncClient()
        try:
            stats = {"topic": topic}
            wait_until(lambda: all(sync.invoke(slave.addr, code, ext).body == sync.invoke(master.addr, code, ext).body
                                   for code, ext in ((RequestCode.GET_TOPIC_STATS_INFO, stats),
                                                     (RequestCode.GET_ALL_CONSUMER_OFFSET, None))),
                       30, "broker-b's slave in sync")
        finally:
            sync.close()

        make_user("killed_viewer", "view_console")
        self.go("")
        self.log_in("killed_viewer")
        self.reload_until(f"groups/{group}/", lambda: self.lag() == 30, 20, "lag 30")
        self.go(f"topics/{topic}/")
        queues = self.text("#queues")
        self.assertIn("(50 messages stored)", self.text("body"))

        self.cluster.kill_broker("broker-b", 0)  # SIGKILL
        self.reload_until(f"groups/{group}/", lambda: self.now_text("#masters-down"), 60, "the banner")
        self.assertIn(f"broker-b (DefaultCluster) is read from its slave {slave.addr}", self.text("#masters-down"))
        self.assertEqual(self.lag(), 30)
        self.go(f"topics/{topic}/")
        self.assertEqual(self.text("#queues"), queues)
        self.assertIn("(50 messages stored)", self.text("body"))
        self.go(f"messages/?mode=key&topic={topic}&key={on_b}")
        self.assertIn("broker-b/", self.text("#results"))
        self.submit("#results tr td a")
        self.assertIn(on_b, self.text("#message"))
        self.assertIn(f"{group} NOT_CONSUMED_YET", self.text("#consumed"))
