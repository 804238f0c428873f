"""DLedger mode of the reference broker (issue 27): the commit log as a Raft group, wire- and
disk-compatible with Apache RocketMQ 4.9.8 + DLedger 0.3.1.2 (``../shared/docs/dledger-protocol.md``).

Modules:
    entry      the 48-byte entry header and the 32-byte index record (§8)
    ledger     the data + index files of one node, checkpoint and currterm files (§5, §8)
    protocol   VOTE / HEART_BEAT / PUSH bodies (fastjson form) and result codes (§2–3)
    config     DLedger settings (broker.conf keys and DLedger's fixed timers, §11)
    node       the Raft member: election, heartbeats, push dispatch, quorum commit (§4, §6, §7)
"""
