"""Generated from packages/protocol/proto/sluice/throttler/v1/quota.proto by generate.py; do not edit."""
