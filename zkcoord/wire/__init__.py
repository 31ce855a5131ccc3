"""zkcoord's wire protocol (wire-protocol.md): codecs for what travels between clients and coordinators."""
