"""The benchmark report: Markdown with PNG plots, the runs of one suite side by side.

    simreal benchmark report out/twin.json out/real.json --out report/

Given the result files of :func:`simreal.hardware.benchmark.harness.run_benchmark` for one suite (the
twin and the real robot, or two twins), writes into the folder:

- ``report.md``: what ran (robot, driver or twin settings, bundle, trials, date, wall time),
  then per condition one table row per run: successes, the success rate with its Wilson
  interval, and each metric's mean with its t interval; with two runs, the difference of their
  success rates; then the figures;
- ``success.png``: the success rate per condition, a bar per run, the interval as error bars;
- ``metric_<name>.png``: each metric's trial values per condition and run (box plots over the
  points), the distribution the means summarise;

and, in ``report.md``, the filmed trials (:mod:`simreal.hardware.benchmark.trial_video`): per run and
condition a link to each trial's mp4 and its contact sheet inline, linked where the results
file's ``videos/`` folder lies.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simreal.errors import DataFileError
from simreal.hardware.benchmark.harness import FORMAT
from simreal.yaml_io import atomic_write_bytes, atomic_write_text, read_text

Run = tuple[str, Mapping[str, Any]]  # (label, results)


def load_results(paths: Sequence[str | Path]) -> list[Run]:
    """Read result files of one suite; labels are the robot kinds (``twin``, ``real``), numbered
    where runs share one (``twin 1``, ``twin 2``). Any other file is a DataFileError naming it."""
    runs = []
    for p in paths:
        try:
            data = json.loads(read_text(p, "benchmark results JSON file"))
        except json.JSONDecodeError as e:
            raise DataFileError(
                str(p), f"not JSON (line {e.lineno}: {e.msg}); expected `simreal benchmark` results"
            ) from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise DataFileError(str(p), f"not `simreal benchmark` results (format {FORMAT})")
        runs.append((str(data["robot"]), {**data, "file": str(p)}))
    suites = {r["suite"] for _, r in runs}
    if len(suites) > 1:
        raise DataFileError(
            str(paths[-1]),
            f"results of different suites ({', '.join(sorted(suites))}); a report compares runs of one suite",
        )
    kinds = [kind for kind, _ in runs]
    return [
        (f"{kind} {kinds[: i + 1].count(kind)}" if kinds.count(kind) > 1 else kind, r)
        for i, (kind, r) in enumerate(runs)
    ]


def _fmt(x: float | None, ci: Sequence[float] | None = None) -> str:
    if x is None:
        return "-"
    return f"{x:.4g}" + ("" if ci is None else f" [{ci[0]:.4g}, {ci[1]:.4g}]")


def _conditions(runs: Sequence[Run]) -> list[str]:
    names: list[str] = []
    for _, r in runs:
        names += [c["name"] for c in r["conditions"] if c["name"] not in names]
    return names


def _condition(results: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((c for c in results["conditions"] if c["name"] == name), None)


def _metric_names(runs: Sequence[Run]) -> list[str]:
    names: list[str] = []
    for _, r in runs:
        for c in r["conditions"]:
            names += [m for m, s in c["metrics"].items() if s["n"] and m not in names]
    return names


def _describe(label: str, r: Mapping[str, Any]) -> str:
    where = f"twin {json.dumps(r['twin'])}" if r["robot"] == "twin" else f"driver `{r['driver']}` ({r['driver_class']})"
    n = r["config"]["trials"]
    done = "" if r["complete"] else ", stopped by the operator before the end"
    return (
        f"- **{label}** (`{r['file']}`): {where}; "
        f"bundle `{r['bundle']}` ({r['bundle_robot']}, task {r['bundle_task']}); "
        f"{n} trials per condition of {r['duration_s']:g} s, seed {r['config']['seed']}{done}; "
        f"{r['created_utc']}, {r['wall_s']:.1f} s wall"
    )


def _videos(runs: Sequence[Run], out: Path) -> list[str]:
    """The report's video section: a line per filmed trial, its contact sheet inline."""
    lines = []
    for label, r in runs:
        where = Path(r["file"]).parent / "videos"
        for c in r["conditions"]:
            for t in c["trials"]:
                v = t.get("video")
                if v is None:
                    continue
                rel = Path(os.path.relpath(where, out))
                outcome = "pass" if t["success"] else f"FAIL ({t['reason']})" if t["reason"] else "FAIL"
                lines += [
                    f"- {label}, {c['name']}, trial {t['trial'] + 1}: {outcome}, "
                    f"[video]({(rel / v['video']).as_posix()}) ({v['frames']} frames)",
                    "",
                    f"  ![{label} {c['name']} trial {t['trial'] + 1}]({(rel / v['sheet']).as_posix()})",
                    "",
                ]
    return lines


def markdown(runs: Sequence[Run], figures: Sequence[str], out: Path = Path(".")) -> str:
    """The report's text (see module docstring); ``out``: the report's folder (video links are
    relative to it)."""
    first = runs[0][1]
    pct = round(100 * first["config"]["confidence"])
    metrics = _metric_names(runs)
    lines = [f"# Benchmark: {first['suite']}", "", f"Success: {first['summary']}.", "", "## Runs", ""]
    lines += [_describe(label, r) for label, r in runs]
    lines += [
        "",
        f"## Results ({pct} % intervals: Wilson for success rates, Student's t for means)",
        "",
        "| condition | run | successes | success rate | " + " | ".join(metrics) + " |",
        "| --- | --- | ---: | --- |" + " --- |" * len(metrics),
    ]
    gaps = []
    for name in _conditions(runs):
        rates = []
        for label, r in runs:
            c = _condition(r, name)
            if c is None:
                continue
            s = c["success"]
            rates.append(s["rate"])
            cells = [
                _fmt(c["metrics"][m]["mean"], c["metrics"][m]["ci"]) if m in c["metrics"] else "-" for m in metrics
            ]
            lines.append(
                f"| {name} | {label} | {s['k']}/{s['n']} | {_fmt(s['rate'], s['ci'])} | " + " | ".join(cells) + " |"
            )
        if len(runs) == 2 and len(rates) == 2 and None not in rates:
            gaps.append(f"- {name}: {runs[1][0]} - {runs[0][0]} success rate = {rates[1] - rates[0]:+.3f}")
    if gaps:
        lines += ["", "Differences:", "", *gaps]
    lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    videos = _videos(runs, out)
    lines += ["", "## Videos", ""] + (
        videos or ["No trial was filmed (`simreal benchmark --videos N`; a real robot needs `--camera`).", ""]
    )
    return "\n".join(lines)


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    atomic_write_bytes(path, buf.getvalue())


def plot_success(runs: Sequence[Run], path: Path) -> None:
    """Success rate per condition, a bar per run, Wilson intervals as error bars."""
    from matplotlib.figure import Figure  # no pyplot: no global backend state

    names = _conditions(runs)
    fig = Figure(figsize=(max(4.0, 1.6 * len(names) * len(runs)), 3.4), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(runs)
    for j, (label, r) in enumerate(runs):
        x: list[float] = []
        y: list[float] = []
        err: list[list[float]] = [[], []]
        for i, name in enumerate(names):
            c = _condition(r, name)
            if c is None or not c["success"]["n"]:
                continue
            s = c["success"]
            x.append(i + (j - (len(runs) - 1) / 2) * width)
            y.append(s["rate"])
            err[0].append(s["rate"] - s["ci"][0])
            err[1].append(s["ci"][1] - s["rate"])
        ax.bar(x, y, width, yerr=err, capsize=4, label=label)
    ax.set_xticks(range(len(names)), names)
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel("success rate")
    ax.set_title(runs[0][1]["suite"])
    fig.legend(loc="outside lower center", ncols=len(runs))
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


def plot_metric(runs: Sequence[Run], metric: str, path: Path) -> None:
    """One metric's trial values per condition and run: box plots over the (jittered) points."""
    from matplotlib.figure import Figure

    names = _conditions(runs)
    fig = Figure(figsize=(max(4.0, 1.6 * len(names) * len(runs)), 3.4), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(runs)
    jitter = np.random.default_rng(0)  # fixed: the same report for the same results
    for j, (label, r) in enumerate(runs):
        color, labelled = f"C{j}", False
        for i, name in enumerate(names):
            c = _condition(r, name)
            x = [t["metrics"].get(metric) for t in (c["trials"] if c else [])]
            x = [v for v in x if v is not None]
            if not x:
                continue
            pos = i + (j - (len(runs) - 1) / 2) * width
            ax.boxplot([x], positions=[pos], widths=0.7 * width, showfliers=False, medianprops={"color": color})
            ax.plot(
                pos + jitter.uniform(-0.2, 0.2, len(x)) * width,
                x,
                ".",
                color=color,
                alpha=0.6,
                label=None if labelled else label,
            )
            labelled = True
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel(metric)
    ax.set_title(f"{runs[0][1]['suite']}: {metric}")
    fig.legend(loc="outside lower center", ncols=len(runs))
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


def write_report(runs: Sequence[Run], out_dir: str | Path) -> Path:
    """Write report.md and its PNG figures into ``out_dir``; returns report.md's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = ["success.png"]
    plot_success(runs, out / "success.png")
    for m in _metric_names(runs):
        figures.append(f"metric_{m}.png")
        plot_metric(runs, m, out / figures[-1])
    atomic_write_text(out / "report.md", markdown(runs, figures, out))
    return out / "report.md"
