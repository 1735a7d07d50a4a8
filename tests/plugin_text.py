"""Shipped level files as text for tests that derive plugins from them."""

from __future__ import annotations


def without_subsection(text: str) -> str:
    """``text`` (a shipped level's YAML) without its ``subsection`` function: a copy
    that stores coordinates differently would claim the shipped one's windows, which
    registering it refuses (the cross-check), not what a test of something else is
    about."""
    if "  subsection: |" not in text:
        return text
    start = text.index("  # The row's coordinates within")
    end = text.index("    return lo, end\n") + len("    return lo, end\n")
    return text[:start] + text[end:]

