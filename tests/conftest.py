"""Shared fixtures: tiny models written in the test suite's own words."""

from __future__ import annotations
