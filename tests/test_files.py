"""`searchgym.files`: atomic writes keep the permissions the umask gives a new file."""

from __future__ import annotations

import os

from searchgym.files import replace_atomically


def test_atomic_writes_keep_the_umask_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with replace_atomically(tmp_path / "a.txt") as f:
            f.write("x")
        os.umask(0o077)
        with replace_atomically(tmp_path / "b.txt") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o600
