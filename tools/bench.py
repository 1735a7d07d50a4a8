"""``llvsparse bench``: run a suite of sparse kernels on generated and real inputs for
llvsparse and every installed peer, verify each result, time them interleaved, and report
a table, JSON, a PNG chart and a measured SpMV roofline.

Method: every implementation's result is checked against a scipy/numpy reference before
it is timed; then one warm-up call, then ``--rounds`` rounds in which the implementations
run one after another in an order rotated each round. A measurement repeats the call until
it has run for at least 5 ms (tiny inputs) and records the mean per call; the report gives
the median and minimum over rounds. Thread pools (BLAS, OpenMP, MKL, numba, GraphBLAS,
llvsparse) are pinned to one thread, except in the columns marked ``-2t``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from typing import Any

from .bench_compile import compile_costs
from .bench_edges import edge_costs, edges_table
from .bench_gpu import run as run_gpu
from .bench_kernels import KERNELS
from .bench_llvsparse import LS_NOTES, llvsparse_supports_threads
from .bench_machine import llvsparse_revision, machine_info, stream
from .bench_peers import discover
from .bench_progress import note
from .bench_report import (
    LARGE_S,
    kernel_tables,
    roofline_table,
    scaling_table,
    summary_table,
    write_png,
)
from .bench_suite import run_suite
from .bench_timing import MIN_MEASURE_S, SLOW_CALL_S, annotate, pin_threads


def _kernel_list(text: str) -> list[str]:
    """``--kernels``: names or families (``spmv`` is every SpMV)."""
    chosen = []
    for part in text.split(","):
        part = part.strip()
        matches = [k for k in KERNELS if k == part or k.startswith(part + "_")]
        if not matches:
            raise argparse.ArgumentTypeError(f"unknown kernel {part!r}; choose from "
                                             f"{', '.join(KERNELS)}")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _thread_counts(text: str) -> tuple[int, ...]:
    return tuple(_positive(part.strip()) for part in text.split(","))


def build_parser() -> argparse.ArgumentParser:
    # the docstring's first paragraph, as plain text
    summary = " ".join(__doc__.split("\n\n")[0].replace("``", "").split())
    parser = argparse.ArgumentParser(prog="llvsparse bench", description=summary)
    parser.add_argument("--quick", action="store_true",
                        help="tiny generated inputs and 2 small real matrices")
    parser.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    parser.add_argument("--png", metavar="FILE", help="write a chart (needs matplotlib)")
    parser.add_argument("--markdown", metavar="FILE", help="write the tables as Markdown")
    parser.add_argument("--kernels", metavar="LIST", type=_kernel_list, default=list(KERNELS),
                        help="comma-separated kernels or families (spmv, ttv, mttkrp, spmm...)")
    parser.add_argument("--inputs", metavar="LIST",
                        help="comma-separated substrings: run only inputs whose name matches")
    parser.add_argument("--rounds", type=_positive, default=7, help="timed rounds (default 7)")
    parser.add_argument("--llvsparse-threads", type=_thread_counts, default=(1,), metavar="LIST",
                        help="thread counts for llvsparse columns, e.g. 1,2 (default 1)")
    parser.add_argument("--llvsparse-out", action="store_true",
                        help="also time llvsparse writing dense results into an array "
                             "allocated ahead (call(out=...)): columns llvsparse[-Nt]-out")
    parser.add_argument("--no-roofline", action="store_true", help="skip the STREAM triad")
    parser.add_argument("--no-compile", action="store_true", help="skip compile-cost timing")
    parser.add_argument("--no-edges", action="store_true",
                        help="skip the edges section (to_numpy, to_scipy, asformat, import)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--gpu", action="store_true",
                        help="compare llvsparse's GPU kernels with cuSPARSE through cupy "
                             "instead (needs a GPU, cuda-python and cupy; bench_gpu.py)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every implementation verified, 1 otherwise."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.png and importlib.util.find_spec("matplotlib") is None:
        # said only at the end, after the whole run, it cost a rerun to get the chart
        parser.error("--png needs matplotlib, which is not installed "
                     "(pip install -e '.[bench]', or leave out --png)")
    if args.gpu:
        return run_gpu(args.quick, args.rounds)
    kernels = args.kernels
    only = [s.strip() for s in args.inputs.split(",")] if args.inputs else None
    threads = args.llvsparse_threads
    if any(t > 1 for t in threads) and not llvsparse_supports_threads():
        note("this llvsparse has no threads= option: llvsparse runs on 1 thread only")
        threads = (1,)
    pinning = pin_threads()
    impls, peer_notes, versions = discover(threads, args.llvsparse_out)
    for text in peer_notes:
        note(text)
    started = time.time()
    revision = llvsparse_revision()
    roof = None
    if not args.no_roofline:
        roof = stream(args.quick)
    records, skipped = run_suite(kernels, impls, args.rounds, args.quick, only,
                                 progress=not args.no_progress)
    bandwidth = roof["bandwidth_gbs"] if roof else {}
    annotate(records, bandwidth)
    costs = None if args.no_compile else compile_costs(args.quick)
    edges = None if args.no_edges else edge_costs(args.quick)
    print(kernel_tables(records))
    print(summary_table(records))
    print(summary_table(records, min_best_s=LARGE_S))
    scaling = scaling_table(records)
    if scaling:
        print(scaling)
    if roof:
        print(roofline_table(records, roof))
    if costs:
        cold, disk = costs["cold_compile_s"], costs["disk_cached_compile_s"]
        print(f"Compile: cold SpMV {cold['median'] * 1e3:.0f} ms (median), from the disk "
              f"cache {disk['median'] * 1e3:.1f} ms")
        print("Call overhead, 10x10 SpMV: " + ", ".join(
            f"{name} {v['median_us']:.1f} us" for name, v in
            costs["call_overhead_10x10_spmv"].items()))
    if edges:
        print(edges_table(edges))
    for text in pinning.statements:
        print(f"threads: {text}")
    if revision:
        print(f"llvsparse: commit {revision['commit']}"
              f"{' with local edits' if revision['local_edits'] else ''}")
    failures = [r for r in records if not r.verified]
    for record in failures:
        print(f"NOT VERIFIED: {record.impl} {record.kernel} {record.input}: {record.error}")
    report = {
        "meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
                 "elapsed_s": time.time() - started, "quick": args.quick,
                 "rounds": args.rounds, "min_measure_s": MIN_MEASURE_S,
                 "slow_call_s": SLOW_CALL_S, "machine": machine_info(), "versions": versions,
                 "llvsparse_revision": revision,
                 "threads": pinning.statements, "peer_notes": peer_notes,
                 "implementations": [{"name": i.name, "library": i.library,
                                      "threads": i.threads} for i in impls],
                 "kernels": {k: {"expr": KERNELS[k].expr, "title": KERNELS[k].title,
                                 "formats": KERNELS[k].formats,
                                 "out_format": KERNELS[k].out_format} for k in kernels},
                 "llvsparse_notes": dict(LS_NOTES)},
        "roofline": _jsonable(roof), "compile": costs, "edges": edges,
        "results": [r.as_json() for r in records], "skipped": skipped,
    }
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
    if args.png:
        write_png(records, args.png)
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(summary_table(records, markdown=True) + "\n")
            handle.write(summary_table(records, markdown=True, min_best_s=LARGE_S) + "\n")
            handle.write(summary_table(records, markdown=True, stat="min") + "\n")
            handle.write(kernel_tables(records, markdown=True) + "\n")
            handle.write(scaling_table(records, markdown=True) + "\n")
            if roof:
                handle.write(roofline_table(records, roof, markdown=True) + "\n")
                handle.write(roofline_table(records, roof, markdown=True,
                                            generated_only=False) + "\n")
    if pinning.controller is not None:
        pinning.controller.restore_original_limits()
    return 1 if failures else 0


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


if __name__ == "__main__":
    sys.exit(main())
