"""The report of ``llvsparse bench``: tables per kernel, summaries against the fastest
peer, thread scaling and the SpMV roofline, as text or Markdown, and a PNG chart."""

from __future__ import annotations

import math

from .bench_kernels import KERNELS
from .bench_progress import note
from .bench_timing import Record

LARGE_S = 0.001  # the second summary keeps inputs where the fastest peer takes this long


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 0.1:
        return f"{seconds * 1e3:.0f}"
    if seconds >= 0.001:
        return f"{seconds * 1e3:.2f}"
    return f"{seconds * 1e3:.4f}"


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _columns(records: list[Record], kernel: str) -> list[str]:
    seen: list[str] = []
    for record in records:
        if record.kernel == kernel and record.impl not in seen:
            seen.append(record.impl)
    return seen


def kernel_tables(records: list[Record], markdown: bool = False) -> str:
    """Per kernel: median ms per implementation and input, and llvsparse / best peer."""
    lines: list[str] = []
    for kernel in KERNELS:
        rows = [r for r in records if r.kernel == kernel]
        if not rows:
            continue
        columns = _columns(records, kernel)
        header = ["input", "nnz"] + columns + ["best peer", "llvsparse / best"]
        table: list[list[str]] = []
        for input_name in dict.fromkeys(r.input for r in rows):
            group = {r.impl: r for r in rows if r.input == input_name}
            cells = [input_name, str(next(iter(group.values())).input_meta.get("nnz", ""))]
            for column in columns:
                record = group.get(column)
                if record is None:
                    cells.append("")
                elif not record.verified:
                    cells.append("FAIL" if record.error and "wrong" in record.error else "ERR")
                else:
                    cells.append(_ms(record.median_s) + ("*" if record.single_call else ""))
            peers = [r for r in group.values() if r.library != "llvsparse" and r.median_s]
            best = min(peers, key=lambda r: r.median_s, default=None)  # type: ignore
            cells.append(best.impl if best else "-")
            mine = group.get("llvsparse")
            ratio = mine.ratio_to_best_peer if mine else None
            cells.append(f"{ratio:.2f}x" if ratio else "-")
            table.append(cells)
        title = f"{kernel}: {KERNELS[kernel].title} (median ms; * = one call, too slow)"
        lines.append(_render(title, header, table, markdown))
    return "\n".join(lines)


def _best_peer_s(records: list[Record], stat: str = "median_s") -> dict[tuple[str, str], float]:
    """The fastest verified peer's time (``stat``: median_s or min_s) per kernel and input."""
    best: dict[tuple[str, str], float] = {}
    for r in records:
        seconds = getattr(r, stat)
        if r.library != "llvsparse" and r.verified and seconds:
            key = (r.kernel, r.input)
            best[key] = min(best.get(key, math.inf), seconds)
    return best


def _by_min(records: list[Record]) -> list[Record]:
    """Copies whose ratios compare minimum times instead of medians."""
    best = _best_peer_s(records, "min_s")
    out = []
    for r in records:
        copy = Record(**{k: v for k, v in r.__dict__.items()})
        peak = best.get((r.kernel, r.input))
        copy.ratio_to_best_peer = r.min_s / peak if r.min_s and peak else None
        copy.ratio_to_best_1t_peer = None
        out.append(copy)
    return out


def summary_table(records: list[Record], markdown: bool = False, min_best_s: float = 0.0,
                  stat: str = "median") -> str:
    """Per kernel: geometric mean over inputs of each implementation's ratio to the best peer
    (only inputs on which the fastest peer takes at least ``min_best_s``); ``stat="min"``
    compares minimum times instead of medians."""
    best = _best_peer_s(records)
    records = [r for r in records if best.get((r.kernel, r.input), 0.0) >= min_best_s]
    if stat == "min":
        records = _by_min(records)
    impl_names: list[str] = []
    for record in records:
        if record.impl not in impl_names:
            impl_names.append(record.impl)
    header = ["kernel", "inputs"] + impl_names + ["llvsparse / best 1t peer", "llvsparse wins"]
    table = []
    for kernel in KERNELS:
        rows = [r for r in records if r.kernel == kernel]
        if not rows:
            continue
        cells = [kernel, str(len({r.input for r in rows}))]
        for name in impl_names:
            ratios = [r.ratio_to_best_peer for r in rows if r.impl == name and
                      r.ratio_to_best_peer]
            g = geomean(ratios)  # type: ignore[arg-type]
            cells.append(f"{g:.2f}" if g else "")
        one = geomean([r.ratio_to_best_1t_peer for r in rows  # type: ignore[misc]
                       if r.impl == "llvsparse" and r.ratio_to_best_1t_peer])
        cells.append(f"{one:.2f}" if one else "")
        mine = [r for r in rows if r.impl == "llvsparse" and r.ratio_to_best_peer]
        wins = sum(1 for r in mine if r.ratio_to_best_peer and r.ratio_to_best_peer < 1.0)
        cells.append(f"{wins}/{len(mine)}")
        table.append(cells)
    title = ("Summary: geometric mean over inputs of median time / fastest peer's median "
             "(1.00 = as fast as the fastest peer; lower is better)")
    if stat == "min":
        title = title.replace("median time / fastest peer's median",
                              "minimum time / fastest peer's minimum")
    if min_best_s:
        title += f"; only inputs where the fastest peer takes >= {min_best_s * 1e3:g} ms"
    if not table:  # an empty table read as a broken report
        reason = (f"no input where a peer was verified and the fastest took "
                  f">= {min_best_s * 1e3:g} ms (--quick inputs are smaller)" if min_best_s
                  else "no verified results")
        return f"{'**' + title + '**' if markdown else title}\n({reason})\n"
    return _render(title, header, table, markdown)


def scaling_table(records: list[Record], markdown: bool = False) -> str:
    """llvsparse's own one-thread median over its N-thread median, per kernel and input,
    with fresh results and (columns ``-out``) into an array allocated ahead."""
    mine = {(r.kernel, r.input, r.impl): r.median_s for r in records
            if r.library == "llvsparse" and r.verified and r.median_s}
    columns = sorted({(impl.removesuffix("-out"), impl.endswith("-out"))
                      for _, _, impl in mine if impl.removesuffix("-out") != "llvsparse"})
    if not columns:
        return ""
    header = ["kernel", "input"] + [f"1t / {name.removeprefix('llvsparse-')}"
                                    + (" (out=)" if out else "") for name, out in columns]
    table = []
    for kernel, case in dict.fromkeys((k, i) for k, i, _ in mine):
        cells = [kernel, case]
        for name, out in columns:
            suffix = "-out" if out else ""
            one, many = (mine.get((kernel, case, f"llvsparse{suffix}")),
                         mine.get((kernel, case, f"{name}{suffix}")))
            cells.append(f"{one / many:.2f}" if one and many else "")
        table.append(cells)
    return _render("Thread scaling: llvsparse 1-thread median / N-thread median (higher is "
                   "better)", header, table, markdown)


def roofline_table(records: list[Record], roof: dict, markdown: bool = False,
                   generated_only: bool = True) -> str:
    """SpMV: achieved GB/s of minimum traffic and fraction of the measured bandwidth."""
    rows = [r for r in records if r.kernel.startswith("spmv") and r.roofline_fraction and
            (not generated_only or r.input_meta.get("source") == "generated")]
    header = ["kernel", "input", "impl", "min MB", "median ms", "GB/s", "of bound"]
    table = [[r.kernel, r.input, r.impl, f"{(r.spmv_min_bytes or 0) / 1e6:.1f}",
              _ms(r.median_s), f"{(r.spmv_min_bytes or 0) / (r.median_s or 1) / 1e9:.2f}",
              f"{r.roofline_fraction:.0%}"] for r in rows]
    bw = roof["bandwidth_gbs"]
    title = (f"SpMV roofline: triad {roof['triad_1t_gbs']:.1f} GB/s (1 thread), "
             f"{roof['triad_2t_gbs']:.1f} GB/s (2 threads); add {roof['add_1t_gbs']:.1f} / "
             f"{roof['add_2t_gbs']:.1f} GB/s; bound = {bw[1]:.1f} / {bw[2]:.1f} GB/s")
    return _render(title, header, table, markdown)


def _render(title: str, header: list[str], rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        out = [f"**{title}**", "", "| " + " | ".join(header) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(out) + "\n"
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    out = [title, fmt.format(*header), "  ".join("-" * w for w in widths)]
    out += [fmt.format(*row) for row in rows]
    return "\n".join(out) + "\n"


def write_png(records: list[Record], path: str) -> bool:
    """Bars: per kernel, each implementation's geometric-mean ratio to the fastest peer;
    dots: llvsparse on each input. Returns False (with a note) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        note("matplotlib not installed: no PNG written (pip install 'llvsparse[bench]')")
        return False
    kernels = [k for k in KERNELS if any(r.kernel == k for r in records)]
    names: list[str] = []
    for record in records:
        if record.impl not in names:
            names.append(record.impl)
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(kernels)), 5.5))
    width = 0.8 / max(len(names), 1)
    cmap = plt.get_cmap("tab10")
    for n, name in enumerate(names):
        xs, ys = [], []
        for k, kernel in enumerate(kernels):
            g = geomean([r.ratio_to_best_peer for r in records  # type: ignore[misc]
                         if r.kernel == kernel and r.impl == name and r.ratio_to_best_peer])
            if g:
                xs.append(k + (n - (len(names) - 1) / 2) * width)
                ys.append(g)
        ax.bar(xs, ys, width=width, label=name, color=cmap(n % 10),
               edgecolor="black" if name.startswith("llvsparse") else None)
        if name == "llvsparse":
            for k, kernel in enumerate(kernels):
                pts = [r.ratio_to_best_peer for r in records if r.kernel == kernel and
                       r.impl == name and r.ratio_to_best_peer]
                x0 = k + (n - (len(names) - 1) / 2) * width
                ax.scatter([x0] * len(pts), pts, s=8, color="black", zorder=3)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    low = min((r.ratio_to_best_peer for r in records if r.ratio_to_best_peer), default=1.0)
    ax.set_ylim(bottom=min(0.5, low * 0.8))
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels(kernels, rotation=30, ha="right")
    ax.set_ylabel("median time / fastest peer (geomean over inputs; log)")
    ax.set_title("llvsparse bench: time relative to the fastest peer (lower is better; "
                 "dots = llvsparse per input)", fontsize=10)
    ax.legend(fontsize=8, ncol=min(len(names), 5), loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
