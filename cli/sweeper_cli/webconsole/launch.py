"""`sweeper console --open`: the browser is handed a file, never the login code.

A browser started with a URL keeps it in its command line, which any local user can read (`ps`,
/proc/PID/cmdline). So the browser is started with a file instead, in a private directory (0700)
and readable by the operator alone (0600), whose page moves the browser on to the login URL.
The code it holds signs one browser in, once (guard.LoginCode); the file goes when the console
stops. Jupyter opens its notebooks the same way.
"""

from __future__ import annotations

import os
import tempfile
import webbrowser
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from pathlib import Path

LAUNCH_FILE_NAME = "open-sweeper-console.html"


def launch_page(url: str) -> str:
    """A page that moves the browser on to `url` (with a link, should it not)."""
    href = escape(url, quote=True)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="referrer" content="no-referrer">'
        f'<meta http-equiv="refresh" content="0;url={href}"><title>sweeper console</title>'
        f'</head><body><p><a href="{href}">Open the sweeper console</a></p></body></html>\n'
    )


@contextmanager
def launch_file(url: str) -> Iterator[Path]:
    """The launch page for `url` in a private directory, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="sweeper-console-") as folder:
        path = Path(folder) / LAUNCH_FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(launch_page(url))
        yield path


def open_in_browser(path: Path) -> bool:
    """Open the launch file in the operator's browser (its command line names the file only)."""
    return webbrowser.open(path.as_uri())
