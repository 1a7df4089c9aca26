"""``searchgym view``: browse the episodes of eval, training and sweep runs in a web page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from searchgym.commands.common import bounded_int


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="browse trajectories of eval, train and sweep runs in the browser (or export one HTML file)",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="run directories (or a folder of them), or JSONL files",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback only)")
    p.add_argument(
        "--port",
        type=bounded_int(0, 65535),
        default=8765,
        help="0 to 65535 (default 8765; 0 picks a free one)",
    )
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument(
        "--export",
        type=Path,
        default=None,
        metavar="FILE.html",
        help="write one self-contained HTML file and exit",
    )
    p.add_argument(
        "--export-max",
        type=bounded_int(0),
        default=1000,
        metavar="N",
        help="with --export: the first N episodes of each agent or training step (default 1000; 0 for all)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # lazy: the viewer's modules and fastapi's (25 ms), which only this command needs
    from searchgym.viewer import EpisodeTable, ViewerServer, create_app, discover, export_html
    from searchgym.viewer.export import check_export_path

    if args.export is not None:  # before the runs are read
        check_export_path(args.export)
    table = EpisodeTable(discover(args.paths))
    if args.export is not None:
        done = export_html(table, args.export, max_per_source=args.export_max or None)
        if done.report():
            print(f"searchgym view: {done.report()}", file=sys.stderr)
        size = done.path.stat().st_size / 1e6
        cut = f" (left out {done.left_out}: raise --export-max to include them)" if done.left_out else ""
        print(f"wrote {done.path} ({size:.1f} MB, {done.episodes} episodes){cut}")
        return 0
    app = create_app(table, allowed_hosts=[args.host])
    with ViewerServer(app, args.host, args.port) as viewer:
        runs = ", ".join(r.name for r in table.runs)
        print(f"{len(table)} episodes of {runs}\nviewer on {viewer.url}  (Ctrl-C to stop)", flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(viewer.url)
        try:
            while viewer.thread.is_alive():
                viewer.thread.join(0.5)
        except KeyboardInterrupt:
            pass
    return 0
