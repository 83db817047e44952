"""Test helpers shared by several test modules (proxies, fixtures' building blocks)."""
