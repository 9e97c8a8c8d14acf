"""A picture of each epoch's stages on a time axis, drawn from the recorded history in ZooKeeper.

Lanes, top to bottom: ``open`` (the epoch opened), one lane per barrier (first arrival to release),
one lane per partition (from the epoch's opening, or from the release of the barrier it follows, to
its seal), ``late <partition>`` (from a missed deadline to the late seal, naming the producers it waited
for) and ``seal`` (the epoch sealed). A stalled epoch shows as a long bar; a straggler as a long
barrier bar with its name in the tooltip. Output: PNG (matplotlib) and/or self-contained HTML (SVG).
"""

from __future__ import annotations

import html
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from airflow_epochs.coordination import EpochLedger, Event
from airflow_epochs.coordination.wire.events import (
    BarrierDeclared,
    BarrierReleased,
    DeadlineMissed,
    EpochOpened,
    EpochSealed,
    EventRecord,
    PartitionSealed,
    ResealOpened,
    SealedLate,
    VersionSealed,
)
from airflow_epochs.private_files import replace_file

MARK = 0.05  # seconds: width of instant stages so that they stay visible


@dataclass(frozen=True)
class Span:
    epoch: int
    lane: str
    start: float
    end: float
    note: str = ""


def spans(history: Iterable[Event], epochs: Sequence[int] | None = None) -> list[Span]:
    """The stage spans of each epoch in ``history`` (optionally only ``epochs``)."""
    by_epoch: dict[int, list[tuple[float, EventRecord]]] = {}
    for event in history:
        record = event.record
        if record.epoch is not None and (epochs is None or record.epoch in epochs):
            by_epoch.setdefault(record.epoch, []).append((event.at, record))
    found: list[Span] = []
    for epoch, events in sorted(by_epoch.items()):
        opened = [(at, r) for at, r in events if isinstance(r, EpochOpened)]
        if not opened:
            continue
        start, opening = opened[-1]  # a takeover reopens: the current attempt's opening counts
        found.append(Span(epoch, "open", start, start + MARK, f"attempt {opening.attempt}"))
        releases: list[tuple[float, str]] = []
        for released_at, released in ((at, r) for at, r in events if isinstance(r, BarrierReleased)):
            name = released.barrier
            first = min((at for at, r in events if isinstance(r, BarrierDeclared) and r.barrier == name),
                        default=start)
            late = list(released.late)
            more = (released.late_count or len(late)) - len(late)  # only the first are named
            named = ", ".join(late) + (f" and {more} more" if more > 0 else "")
            found.append(Span(epoch, f"barrier {name}", first, max(released_at, first + MARK),
                              f"{released.decision}; late: {named or 'none'}"))
            releases.append((released_at, name))
        for sealed_at, sealed in ((at, r) for at, r in events if isinstance(r, PartitionSealed) and at >= start):
            first_vote = sealed.first_vote_at or sealed_at
            # A partition produced after a barrier starts at that barrier's release.
            begin = max([start, *(when for when, _ in releases if when <= first_vote)])
            found.append(Span(epoch, sealed.partition, begin, max(sealed_at, begin + MARK),
                              f"sealed by attempt {sealed.attempt}"))
        found += _late(epoch, events)
        found += _versions(epoch, events)
        for when in (at for at, r in events if isinstance(r, EpochSealed)):
            found.append(Span(epoch, "seal", when, when + MARK, "epoch sealed"))
    return found


def _versions(epoch: int, events: Sequence[tuple[float, EventRecord]]) -> list[Span]:
    """Lane ``<partition> v<N>``: a re-sealed version, from its opening to its seal (to the newest event
    while its producers re-produce it), naming the correction it belongs to."""
    found: list[Span] = []
    newest = max((at for at, _ in events), default=0.0)
    for opened_at, opened in ((at, r) for at, r in events if isinstance(r, ResealOpened)):
        sealed = [at for at, r in events if isinstance(r, VersionSealed) and r.partition == opened.partition
                  and r.version == opened.version and at >= opened_at]
        end = min(sealed) if sealed else newest
        state = "sealed" if sealed else "being re-produced"
        found.append(Span(epoch, f"{opened.partition} v{opened.version}", opened_at, max(end, opened_at + MARK),
                          f"version {opened.version} {state}; correction {opened.correction}"))
    return found


def _late(epoch: int, events: Sequence[tuple[float, EventRecord]]) -> list[Span]:
    """A partition's missed deadline: from the deadline to its late seal (or to the alert, while unsealed)."""
    found = []
    for at, missed in ((at, r) for at, r in events if isinstance(r, DeadlineMissed)):
        sealed = [r for _, r in events if isinstance(r, SealedLate) and r.partition == missed.partition]
        end = sealed[-1].sealed_at if sealed else at
        note = f"missed its deadline waiting for {', '.join(missed.missing) or 'nobody'}" + (
            f"; sealed {sealed[-1].late_by:.1f} s late" if sealed else "; not sealed yet")
        found.append(Span(epoch, f"late {missed.partition}", missed.deadline_at,
                          max(end, missed.deadline_at + MARK), note))
    return found


def lanes(found: Sequence[Span]) -> list[str]:
    order = {"open": 0, "seal": 4}
    names = sorted({s.lane for s in found}, key=lambda n: (order.get(n, 1 if n.startswith("barrier ") else
                                                                     3 if n.startswith("late ") else 2),
                                                          min(s.start for s in found if s.lane == n)))
    return names


def draw_png(found: Sequence[Span], path: str | Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = lanes(found)
    t0 = min(s.start for s in found)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.55 * len(names)))
    colours = plt.get_cmap("tab10")
    for span in found:
        y = names.index(span.lane)
        ax.barh(y, max(span.end - span.start, MARK), left=span.start - t0, height=0.6,
                color=colours((span.epoch - 1) % 10), edgecolor="black", linewidth=0.3)
        ax.text(span.start - t0, y, str(span.epoch), va="center", ha="left", fontsize=7)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first epoch opened (bar label: epoch)")
    ax.set_title(title)
    ax.grid(axis="x", linewidth=0.3)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=100)
    plt.close(fig)
    replace_file(path, image.getvalue())  # never through a link planted where the file goes


def render_svg(found: Sequence[Span]) -> str:
    """The timeline as one SVG element: a legend (what a lane, a bar and its colour are, one swatch per
    epoch shown), then the lanes, bars coloured by epoch, a tooltip on each bar."""
    names = lanes(found)
    t0 = min(s.start for s in found)
    t1 = max(s.end for s in found)
    width, left, row, legend = 1000, 150, 28, 44
    scale = (width - left - 20) / max(t1 - t0, 1e-3)
    palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row * len(names) + 40 + legend}" '
             'font-family="sans-serif" font-size="12">',
             '<g class="legend"><text x="4" y="14">One lane per stage (left); a bar is how long the stage took, its '
             'colour the epoch; hover a bar for its epoch, stage and seconds.</text>']
    epochs = sorted({s.epoch for s in found})
    for k, epoch in enumerate(epochs[:30]):
        at = 4 + k * 64
        parts.append(f'<rect class="swatch" x="{at}" y="24" width="12" height="12" '
                     f'fill="{palette[(epoch - 1) % len(palette)]}"/><text x="{at + 16}" y="34">epoch {epoch}</text>')
    parts.append(f'</g><g transform="translate(0,{legend})">')
    for i, name in enumerate(names):
        parts.append(f'<g data-lane="{html.escape(name)}"><text x="4" y="{i * row + 18}">{html.escape(name)}</text>')
        for span in (s for s in found if s.lane == name):
            x = left + (span.start - t0) * scale
            w = max((span.end - span.start) * scale, 2)
            tip = f"epoch {span.epoch}: {name}, {span.end - span.start:.2f} s ({span.note})"
            parts.append(f'<rect class="bar" x="{x:.1f}" y="{i * row + 4}" width="{w:.1f}" height="{row - 8}" '
                         f'fill="{palette[(span.epoch - 1) % len(palette)]}"><title>{html.escape(tip)}</title></rect>')
        parts.append("</g>")
    parts.append(f'<text x="{left}" y="{row * len(names) + 30}">0 s</text>'
                 f'<text x="{width - 60}" y="{row * len(names) + 30}">{t1 - t0:.1f} s</text></g></svg>')
    return "".join(parts)


def draw_html(found: Sequence[Span], path: str | Path, title: str) -> None:
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
            f"<h1>{html.escape(title)}</h1><p>One lane per stage; colour = epoch; hover a bar for details.</p>"
            + render_svg(found) + "</body></html>")
    replace_file(path, page.encode())


def draw(ledger: EpochLedger, outputs: Sequence[str | Path], *, epochs: Sequence[int] | None = None) -> list[Span]:
    """Draw the timeline of ``ledger``'s pipeline into each output (``.png`` or ``.html``)."""
    for out in outputs:
        if Path(out).suffix.lower() not in (".png", ".html", ".htm"):
            raise ValueError(f"timeline output must end in .png or .html, not {str(out)!r}")
    found = spans(ledger.history(), epochs)
    if not found:
        raise ValueError(f"pipeline {ledger.pipeline!r} has no opened epoch to draw")
    title = f"pipeline {ledger.pipeline}: epochs {found[0].epoch}..{found[-1].epoch}"
    for out in outputs:
        suffix = Path(out).suffix.lower()
        if suffix == ".png":
            draw_png(found, out, title)
        else:
            draw_html(found, out, title)
    return found
