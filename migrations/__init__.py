"""Offset-migration steps; loaded by path by ``zkcoord.migration.runner``, not imported as a package."""
