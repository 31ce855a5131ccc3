"""Pure partition assignors. Nothing here does IO or reads a clock."""
