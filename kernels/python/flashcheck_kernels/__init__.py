"""Attention kernels written in Python, run by flashcheck through its Python bridge.

Name one with `--kernel py:flashcheck_kernels.<module>:<function>`; docs/PYTHON_KERNELS.md gives the
interface (the function's arguments and its `contract`).
"""
