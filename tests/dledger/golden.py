"""The DLedger golden data of ``tests/data/dledger`` (frames of a real 4.9.8 DLedger group and
its on-disk sample; provenance in ``tests/data/README.md``)."""

from __future__ import annotations

import base64
import functools
import json
import os
import struct
from dataclasses import dataclass

DATA = os.path.join(os.path.dirname(__file__), "..", "data", "dledger")


@dataclass
class Frame:
    src: str
    seq: int
    sender: str
    receiver: str
    name: str
    request_name: str | None
    raw: bytes

    @property
    def header(self) -> bytes:
        hlen = struct.unpack_from(">i", self.raw, 4)[0] & 0xFFFFFF
        return self.raw[8:8 + hlen]

    @property
    def body(self) -> bytes:
        hlen = struct.unpack_from(">i", self.raw, 4)[0] & 0xFFFFFF
        return self.raw[8 + hlen:]

    @property
    def json(self) -> dict:
        return json.loads(self.body)


@functools.cache
def frames() -> list[Frame]:
    out = []
    with open(os.path.join(DATA, "frames.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            out.append(Frame(r["src"], r["seq"], r["from"], r["to"], r["name"], r["request_name"],
                             base64.b64decode(r["frame_b64"])))
    return out


@functools.cache
def store_sample() -> dict:
    with open(os.path.join(DATA, "store_sample.json"), encoding="utf-8") as fh:
        return json.load(fh)


def xxd_bytes(lines: list[str]) -> bytes:
    """The bytes of an xxd-style dump (``offset: hhhh hhhh ...  ascii``)."""
    out = bytearray()
    for line in lines:
        hexpart = line.split(":", 1)[1].split("  ")[0]
        out += bytes.fromhex(hexpart.replace(" ", ""))
    return bytes(out)


def replicated_pushes() -> list[Frame]:
    """The leader n0's TRUNCATE of entry 0 and APPENDs of entries 1..199 to n1 (replication scenario)."""
    return [f for f in frames() if f.src == "dledger_replication.jsonl" and f.name == "PUSH" and f.sender == "n0"
            and f.json["type"] in ("TRUNCATE", "APPEND")]
