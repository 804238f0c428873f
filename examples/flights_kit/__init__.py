"""Support code of ``examples/flights_demo.py``: data loading, consumer group, audit, progress, report.

Kept out of the library on purpose: it is demo logic. Each module is small and unit-tested in
``tests/spark/``.
"""
