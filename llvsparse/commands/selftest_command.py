"""``llvsparse selftest``: a soak of random cases against numpy (see selftest.py)."""

from __future__ import annotations

import argparse
import sys

from .common import CliError


def selftest(args: argparse.Namespace) -> int:
    """Run random cases (expressions, formats, shapes, dtypes, inf/NaN, corrupted inputs)
    against numpy, each in a worker subprocess so that crashes and hangs are counted
    against their case; exit 1 if any case failed."""
    # loaded by the subcommand that runs: `llvsparse --help` loads no compiler
    from ..soak.selftest import show_case, soak

    first, cases, seed = args.first, args.cases, args.seed
    if args.case:
        seed_text, sep, index_text = args.case.partition(":")
        if not sep or not seed_text.strip().lstrip("-").isdigit() or not index_text.isdigit():
            raise CliError(f"--case expects SEED:INDEX, not {args.case!r}")
        seed, first, cases = int(seed_text), int(index_text), 1
        print(show_case(seed, first, args.small))

    def progress(report) -> None:
        """Failures are printed as they come, so a run cut short still names them."""
        done, latest = len(report.results), report.results[-1]
        if latest.failed and not args.case:
            print(report.line(latest), flush=True)
        if not args.case and (done % 50 == 0 or done == cases):
            tallies = report.tallies
            print(f"  {done}/{cases}: " + ", ".join(f"{n} {s}" for s, n in sorted(
                tallies.items())), file=sys.stderr, flush=True)

    report = soak(cases, seed=seed, timeout=args.timeout, jobs=args.jobs, first=first,
                  small=args.small, progress=progress)
    print(report.summary())
    return 1 if report.failures else 0


def add_parser(sub, positive) -> None:
    """The ``selftest`` subcommand and its options."""
    p = sub.add_parser("selftest", formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="soak: random cases against numpy, crashes and hangs counted",
                       description=selftest.__doc__,
                       epilog="example: nice -n 19 llvsparse selftest --cases 2000 --seed 7")
    p.add_argument("--cases", type=positive, default=200, help="how many (default 200)")
    p.add_argument("--seed", type=int, default=0, help="which random cases (default 0)")
    p.add_argument("--first", type=int, default=0, metavar="INDEX",
                   help="number of the first case (default 0): a crash that needs the cases "
                        "run before it in the same worker reproduces from there")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="per case, compiling included; a case past it is a hang (default 60)")
    p.add_argument("--jobs", type=positive, default=1,
                   help="worker processes (default 1)")
    p.add_argument("--case", metavar="SEED:INDEX",
                   help="run only this case (as a failure names it) and show its operands")
    p.add_argument("--small", action="store_true",
                   help="shallower expressions over at most two operands, quicker to compile "
                        "(the cases the test suite runs)")
    p.set_defaults(run=selftest)
