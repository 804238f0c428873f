"""The ```python blocks of the user docs run against an embedded reference broker.

Each page's blocks run in order in one namespace (later blocks use names of earlier ones), with
the documented name server addresses (``"127.0.0.1:9876"``, ``"10.0.0.11:9876;10.0.0.12:9876"``,
...) replaced by the embedded cluster's. A block that cannot run here (Spark, certificate files,
an address server) is preceded in the Markdown source by ``<!-- snippet: skip (reason) -->``.
A wrong API name or argument in a doc makes its page fail, with the doc's own line number in the
traceback.
"""

from __future__ import annotations

import ast
import importlib
import re
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from rocketmq_broker.embedded import start_dev_cluster

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/getting-started.md", "docs/producer.md", "docs/consumer.md", "docs/broker.md",
         "docs/asyncio.md"]
#: pages whose blocks are only compiled and have their imports resolved (Spark, placeholders).
CHECKED_PAGES = [*PAGES, "docs/admin.md", "docs/spark.md", "docs/message-trace.md", "docs/console.md"]
#: every block of a page must finish within this many seconds.
BLOCK_TIMEOUT_S = 15.0

_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_SKIP = re.compile(r"^\s*<!--\s*snippet:\s*skip\s*\((.+)\)\s*-->\s*$")
#: a quoted name server list "host:9876" or "a:9876;b:9876"
_NAMESRV = re.compile(r"""(["'])[\w.-]+:9876(?:;[\w.-]+:9876)*\1""")


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the first code line
    code: str
    skip_reason: str | None


def extract_blocks(page: str, text: str) -> list[Block]:
    """The page's ```python blocks, dedented to their fence, with the skip marker (if any)."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or not m.group(2):
            i += 1
            continue
        indent, lang = len(m.group(1)), m.group(2)
        end = i + 1
        while end < len(lines) and not _FENCE.match(lines[end]):
            end += 1
        if lang == "python":
            prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            skip = _SKIP.match(prev)
            code = "\n".join(line[indent:] for line in lines[i + 1:end])
            blocks.append(Block(page, i + 2, code, skip.group(1) if skip else None))
        i = end + 1
    return blocks


def _run_with_timeout(code: object, namespace: dict, timeout_s: float) -> BaseException | None:
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            exec(code, namespace)  # noqa: S102 - the docs' own examples
            outcome.append(None)
        except BaseException as exc:  # reported by the caller
            outcome.append(exc)

    t = threading.Thread(target=target, name="doc-snippet", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return TimeoutError(f"did not finish within {timeout_s} s (a wait that never ends?)")
    return outcome[0]


def _shutdown_clients(namespace: dict) -> None:
    """Stop what a page left running, so one page cannot disturb the next."""
    for value in list(namespace.values()):
        shutdown = getattr(value, "shutdown", None)
        if callable(shutdown) and type(value).__module__.startswith("rocketmq_sdk"):
            try:
                shutdown()
            except Exception:  # already stopped, or never started
                pass


@pytest.fixture(scope="module")
def cluster():
    with start_dev_cluster(in_process=True) as c:
        yield c


def test_extract_blocks_reads_indented_fences_and_skip_markers():
    text = "x\n<!-- snippet: skip (needs Spark) -->\n```python\na = 1\n```\n- item\n\n  ```python\n  b = 2\n  ```\n"
    blocks = extract_blocks("p.md", text)
    assert [(b.line, b.code, b.skip_reason) for b in blocks] == [(4, "a = 1", "needs Spark"), (9, "b = 2", None)]


def test_namesrv_pattern_replaces_documented_addresses():
    src = 'P("g", "127.0.0.1:9876"); P("g", namesrv_addr="10.0.0.11:9876;10.0.0.12:9876"); P("g", "ns:9876")'
    assert _NAMESRV.sub('"X"', src) == 'P("g", "X"); P("g", namesrv_addr="X"); P("g", "X")'


@pytest.fixture
def otel_globals_restored():
    """A page may configure OpenTelemetry (``trace.set_tracer_provider``, once per process): put
    the global provider back afterwards so the tracing of later tests is not switched on."""
    trace = pytest.importorskip("opentelemetry.trace")
    saved = (trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done)
    yield
    trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE._done = saved


@pytest.mark.parametrize("page", PAGES)
def test_doc_page_python_blocks_run(page: str, cluster, otel_globals_restored) -> None:
    blocks = extract_blocks(page, (REPO_ROOT / page).read_text(encoding="utf-8"))
    assert blocks, f"{page} has no python blocks"
    namespace: dict = {"__name__": f"doc_snippet_{Path(page).stem.replace('-', '_')}"}
    replacement = f'"{cluster.namesrv_addr}"'
    try:
        for block in blocks:
            if block.skip_reason is not None:
                continue
            source = "\n" * (block.line - 1) + _NAMESRV.sub(replacement, block.code)
            code = compile(source, str(REPO_ROOT / page), "exec")
            error = _run_with_timeout(code, namespace, BLOCK_TIMEOUT_S)
            if error is not None:
                detail = "".join(traceback.format_exception(error))
                pytest.fail(f"{page}: the block at line {block.line} failed:\n{detail}", pytrace=False)
    finally:
        _shutdown_clients(namespace)


def test_skips_are_few_and_explained() -> None:
    skipped = [b for page in PAGES
               for b in extract_blocks(page, (REPO_ROOT / page).read_text(encoding="utf-8"))
               if b.skip_reason is not None]
    assert all(len(b.skip_reason.strip()) >= 8 for b in skipped), skipped
    assert len(skipped) <= 5, [f"{b.page}:{b.line} ({b.skip_reason})" for b in skipped]


@pytest.mark.parametrize("page", CHECKED_PAGES)
def test_doc_page_python_blocks_compile_and_their_imports_exist(page: str) -> None:
    """Every block (skipped ones too) is valid Python and imports only names that exist."""
    for block in extract_blocks(page, (REPO_ROOT / page).read_text(encoding="utf-8")):
        where = f"{page}:{block.line}"
        tree = ast.parse(block.code, filename=where)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{where}: {node.module} has no {alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
