"""See what an agent did: a trajectory viewer for eval, training and sweep run directories.

`create_app` is the web app (FastAPI) that ``searchgym view`` serves on 127.0.0.1;
`export_html` writes the same viewer as one self-contained HTML file. Episodes are read lazily
(`EpisodeTable`), so a directory of 100,000 episodes opens at once; the served page picks up
the steps a running trainer writes later (`searchgym.viewer.live`). Every run is shown with the
env it played (`Run.env`). Malformed lines and files that cannot be read are skipped and said so
(`Skipped`), never an error for the rest.
"""

from searchgym.viewer.app import create_app
from searchgym.viewer.export import Export, export_html
from searchgym.viewer.runs import Run, Skipped, Source, discover
from searchgym.viewer.server import ViewerServer
from searchgym.viewer.table import EpisodeTable

__all__ = [
    "EpisodeTable",
    "Export",
    "Run",
    "Skipped",
    "Source",
    "ViewerServer",
    "create_app",
    "discover",
    "export_html",
]
