"""Micro-benchmark: encode + decode of a typical SEND_MESSAGE_V2 (310) remoting command.

Usage: ``python benchmarks/remoting_codec.py [--seconds 2] [--body-size 128]``. Prints commands
per second for encode, decode, and a full round trip (encode, split by FrameDecoder, decode), for
both header serialisations.
"""

from __future__ import annotations

import argparse
import time

from rocketmq_sdk.protocol.codes import SerializeType
from rocketmq_sdk.remoting.command import RemotingCommand
from rocketmq_sdk.remoting.frame import FrameDecoder

# Header fields as the Java 4.9.8 producer sent them (captures/java-producer.jsonl).
EXT_FIELDS = {
    "a": "bench_producer_group", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "2", "f": "0",
    "g": "1795334988219", "h": "0",
    "i": "KEYS\x01order-1001\x02UNIQ_KEY\x01C000020267645FFD2B276DE5F9BA0000\x02WAIT\x01true\x02TAGS\x01TagA",
    "j": "0", "k": "false", "m": "false", "n": "broker-a",
}


def rate(fn, seconds: float) -> float:
    """Calls of ``fn`` per second, measured over about ``seconds``."""
    n, batch = 0, 1000
    start = time.perf_counter()
    while True:
        for _ in range(batch):
            fn()
        n += batch
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement (s)")
    parser.add_argument("--body-size", type=int, default=128, help="message body size (bytes)")
    args = parser.parse_args()
    body = b"x" * args.body_size
    for st in (SerializeType.JSON, SerializeType.ROCKETMQ):
        cmd = RemotingCommand.request(310, dict(EXT_FIELDS), body, serialize_type=st)
        frame = cmd.encode()
        inner = frame[4:]
        decoder = FrameDecoder()

        def round_trip(cmd=cmd, decoder=decoder):
            for f in decoder.feed(cmd.encode()):
                RemotingCommand.decode(f)

        enc = rate(cmd.encode, args.seconds)
        dec = rate(lambda inner=inner: RemotingCommand.decode(inner), args.seconds)
        both = rate(round_trip, args.seconds)
        print(f"{st.name:8s} frame {len(frame)} B: encode {enc:,.0f}/s  decode {dec:,.0f}/s  "
              f"encode+frame+decode {both:,.0f}/s")


if __name__ == "__main__":
    main()
