"""Plain-text tables of run summaries (method x epsilon)."""

from __future__ import annotations

from typing import Any, Iterable


def format_epsilon(epsilon: float | None) -> str:
    return "inf" if epsilon is None else f"{epsilon:.3g}"


def accuracy_table(summaries: Iterable[dict[str, Any]]) -> str:
    """Test accuracy (%) by method (rows) and target epsilon (columns), from run summaries.

    Each summary needs ``method``, ``target_epsilon`` (None for non-private) and ``test_accuracy``.
    """
    summaries = list(summaries)
    methods = list(dict.fromkeys(s["method"] for s in summaries))
    epsilons = sorted({s["target_epsilon"] for s in summaries if s["target_epsilon"] is not None})
    cells = {(s["method"], s["target_epsilon"]): f"{100 * s['test_accuracy']:.1f}" for s in summaries}
    header = ["method"] + [f"eps={e:g}" for e in epsilons] + (["non-private"] if (None in {s["target_epsilon"] for s in summaries}) else [])
    rows = []
    for method in methods:
        row = [method] + [cells.get((method, e), "") for e in epsilons]
        if header[-1] == "non-private":
            row.append(cells.get((method, None), ""))
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    lines = ["  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [header] + rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
