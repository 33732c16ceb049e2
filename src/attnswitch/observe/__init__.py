"""Profiler scopes, metrics, memory watchdog and cost."""
