"""The broker-side group coordinator's pure core: group state machine, offsets cache, timers as data."""
