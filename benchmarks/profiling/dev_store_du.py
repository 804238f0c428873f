"""Disk use of a fresh dev broker's store: ``python -m rocketmq_broker dev`` on a new store
directory, ``du -sh`` after start and after one 100 B send with a key (which creates the
CommitLog, consume-queue and index files), and the largest files.

Usage: ``python benchmarks/profiling/dev_store_du.py [--code DIR_OR_REV] [-- DEV_OPTIONS...]``,
e.g. ``--code 22dc672`` (a git revision, extracted as ``ab.py`` does) or ``-- --commit-log-file-size
1073741824``. The broker and the store directory are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from ab import checkout  # noqa: E402


def du(path: str) -> str:
    return subprocess.run(["du", "-sh", path], capture_output=True, text=True).stdout.split()[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", default=None, help="a git revision or a directory (default: this tree)")
    ap.add_argument("dev_options", nargs="*")
    args = ap.parse_args()
    from rocketmq_sdk import Message, Producer

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if args.code:
            env["PYTHONPATH"] = checkout(args.code, Path(tmp) / "code")
        store, log_path = os.path.join(tmp, "store"), os.path.join(tmp, "broker.log")
        with open(log_path, "w") as log:
            broker = subprocess.Popen([sys.executable, "-m", "rocketmq_broker", "dev", "--store-dir", store,
                                       "--namesrv-port", "0", "--broker-port", "0", *args.dev_options],
                                      stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp)
        try:
            deadline = time.monotonic() + 60
            namesrv = None
            while namesrv is None or "broker registered" not in Path(log_path).read_text():
                if time.monotonic() > deadline or broker.poll() is not None:
                    raise SystemExit(f"the dev broker did not start:\n{Path(log_path).read_text()[-2000:]}")
                for line in Path(log_path).read_text().splitlines():
                    if line.startswith("NAMESRV "):
                        namesrv = line.split()[1]
                time.sleep(0.2)
            print(f"after start:  {du(store)}")
            with Producer("pg_du", namesrv) as p:
                p.send(Message("TopicDu", b"x" * 100, keys="k1"))
            print(f"after 1 send: {du(store)}")
            files = subprocess.run(f"find {store} -type f -size +64k -exec du -h {{}} +", shell=True,
                                   capture_output=True, text=True).stdout
            print(files.replace(store + "/", "  "), end="")
        finally:
            broker.terminate()
            broker.wait(20)


if __name__ == "__main__":
    main()
