"""Builds the optional compiled part of the offsets loader; everything else is in setup.cfg.

Without a C compiler the build skips it and the loader runs in Python alone (docs/performance.md).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("zkcoord.log._compiled", ["zkcoord/log/_compiled.c"], optional=True)])
