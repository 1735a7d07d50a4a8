"""What ``llvsparse bench`` says on stderr while it runs: a progress bar and notes."""

from __future__ import annotations

import sys
import time


class Progress:
    """A one-line progress bar on stderr (a line per step when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.start = time.perf_counter()
        self.enabled = enabled
        self.tty = sys.stderr.isatty()

    def step(self, label: str) -> None:
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        fraction = self.done / self.total
        width = 30
        bar = "#" * int(fraction * width) + "." * (width - int(fraction * width))
        eta = f" eta {elapsed / fraction * (1 - fraction):4.0f}s" if self.done else ""
        text = f"[{bar}] {self.done:>3}/{self.total} {elapsed:5.0f}s{eta}  {label[:48]:<48}"
        if self.tty:
            sys.stderr.write("\r" + text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def advance(self) -> None:
        self.done += 1

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\r" + " " * 110 + "\r")
            sys.stderr.flush()


def note(text: str) -> None:
    """A note on stderr, on its own line."""
    sys.stderr.write(("\n" if sys.stderr.isatty() else "") + f"note: {text}\n")
    sys.stderr.flush()
