"""Builds the optional compiled parts of the offsets log; everything else is in setup.cfg.

Without a C compiler the build skips them: the loader runs in Python alone, and a group-commit round's fsyncs run
on Python threads (docs/performance.md).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("zkcoord.log._compiled", ["zkcoord/log/_compiled.c"], optional=True),
        Extension("zkcoord.log._fsync", ["zkcoord/log/_fsync.c"], optional=True),
    ]
)
