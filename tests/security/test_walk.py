"""The folder walk under attack (issue 29, rows 1, 3, 8 and 9): a root or a folder swapped
for a link while a run or a job reads it is never followed, a file name that is not UTF-8
costs nothing but its own escaping, a folder nested past the depth limit and a link that
cannot be resolved are skipped with a reason. Through the real walk, the real CLI (a
subprocess, as a user runs it) and a real server's jobs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from security_testing import JOB_TIMEOUT_S, SECRET, finished

from attnswitch.documents.filesystems import pseudo_devices
from attnswitch.documents.ingest import MAX_DEPTH, Skip, ingest, load, scan
from attnswitch.indexing.store import SQLiteStore

pytestmark = pytest.mark.xdist_group("security")
CLI_TIMEOUT_S = 300.0


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        env=dict(os.environ),
    )


def secret_folder(base: Path) -> Path:
    """A folder outside every root, holding `secret.txt` with the secret marker."""
    outside = base / "outside-secret"
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text(SECRET + " from outside the root\n")
    (outside / "a.txt").write_text(SECRET + " a\n")
    return outside


# -- row 1: a root swapped for a link -----------------------------------------------------


def test_a_root_swapped_for_a_link_after_the_scan_is_not_read(tmp_path: Path) -> None:
    outside = secret_folder(tmp_path)
    root = tmp_path / "j"
    root.mkdir()
    (root / "a.txt").write_text("harmless\n")
    (root / "secret.txt").write_text("harmless too\n")
    entries = scan(root)
    root.rename(tmp_path / "j_real")
    root.symlink_to(outside, target_is_directory=True)
    docs = [load(e) for e in entries]
    assert [d.source for d in docs] == ["a.txt", "secret.txt"]
    assert all(d.skip is Skip.LINK and d.text is None and d.sha256 is None for d in docs), [
        d.reason for d in docs
    ]


def test_a_root_swapped_for_another_folder_after_the_scan_is_not_read(tmp_path: Path) -> None:
    root = tmp_path / "j"
    root.mkdir()
    (root / "secret.txt").write_text("harmless\n")
    (entry,) = scan(root)
    root.rename(tmp_path / "j_real")
    root.mkdir()
    (root / "secret.txt").write_text(SECRET + "\n")
    doc = load(entry)
    assert doc.skip is Skip.LINK and "root folder was replaced" in doc.reason


def test_a_folder_swapped_for_a_link_after_the_scan_is_not_read(tmp_path: Path) -> None:
    outside = secret_folder(tmp_path)
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "secret.txt").write_text("harmless\n")
    (entry,) = scan(root)
    (root / "sub").rename(root / "sub_real")
    (root / "sub").symlink_to(outside, target_is_directory=True)
    doc = load(entry)
    assert doc.skip is Skip.LINK and doc.sha256 is None, doc.reason


def test_scan_refuses_a_root_other_than_the_one_pinned(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    st = os.stat(tmp_path / "a")
    with pytest.raises(NotADirectoryError, match="it was replaced"):
        scan(tmp_path / "b", root_id=(st.st_dev, st.st_ino))


def test_a_job_root_swapped_for_a_link_while_it_runs_is_not_followed(keyless, layout) -> None:
    """Row 1 as reported: a job over 300 files; as soon as it has listed them the folder
    is moved away and a link to a folder outside the root put in its place. Nothing of
    the outside folder is indexed or found."""
    outside = secret_folder(layout.base)
    root = layout.jobs_root / "swapped"
    root.mkdir()
    for i in range(300):
        (root / f"f{i:03d}.txt").write_text(
            f"File number {i} of the swapped folder. It talks about gardens, rivers and bridges.\n"
        )
    (root / "secret.txt").write_text("a harmless file of the same name\n")
    with httpx.Client(base_url=keyless.url, timeout=60) as client:
        r = client.post("/v1/jobs", json={"path": "swapped"})
        assert r.status_code == 202, r.text
        job = r.json()
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while not job["progress"].get("files_total"):
            assert time.monotonic() < deadline and job["status"] in ("queued", "running"), job
            time.sleep(0.01)
            job = client.get(f"/v1/jobs/{job['id']}").json()
        root.rename(layout.jobs_root / "swapped_real")
        root.symlink_to(outside, target_is_directory=True)
        try:
            swapped_at = job["progress"]
            job = finished(client, job)
            found = client.post("/v1/search", json={"query": SECRET, "k": 50})
            # swapped before the job read a file (an idle machine): every file is skipped,
            # the index stays empty and search says so (409); either way nothing is found
            assert found.status_code == 200 or found.json()["error"]["code"] == "index_empty"
            hits = found.json().get("data", [])
        finally:
            root.unlink()
    assert swapped_at["files_done"] < swapped_at["files_total"] == 301, swapped_at
    assert job["status"] == "completed", job
    assert not any("SECRET" in h["text"] for h in hits), hits[:3]
    with SQLiteStore(layout.data) as store:
        ids, _ = store.vectors()
        assert not any("SECRET" in c.text for c in store.chunks(ids).values())


# -- row 3: a name that is not UTF-8 ------------------------------------------------------


def test_a_latin1_name_is_indexed_with_its_name_escaped(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "good.txt").write_text("A good file about the harbour and its boats.\n")
    with open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), "wb") as fh:
        fh.write(b"A caf\xe9 by the harbour, where the boats come in.\n")
    docs = {d.source: d for d in ingest(root)}
    assert set(docs) == {"good.txt", "caf\\xe9.txt"}
    assert docs["caf\\xe9.txt"].ok and "boats come in" in docs["caf\\xe9.txt"].text
    proc = cli("run", str(root), "--db", str(tmp_path / "data"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert (summary["indexed"], summary["skipped"]) == (2, 0), summary
    proc = cli("status", "--db", str(tmp_path / "data"), "--json", cwd=tmp_path)
    assert proc.returncode == 0 and json.loads(proc.stdout)["documents"] == 2, proc.stderr


def test_a_root_whose_name_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    root = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(root)
    with open(os.path.join(root, b"a.txt"), "wb") as fh:
        fh.write(b"text\n")
    proc = subprocess.run(
        [sys.executable, "-m", "attnswitch.cli", "run", root, "--db", str(tmp_path / "data")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "root: expected a folder whose path is valid UTF-8" in proc.stderr


# -- row 8: nested past the depth limit ---------------------------------------------------


def nest(root: Path, levels: int) -> None:
    """`levels` folders inside each other below `root`, a text file in the deepest (made
    through folder descriptors: the path is longer than the system allows)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        leaf = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"the deepest file\n")
        os.close(leaf)
    finally:
        os.close(fd)


def unnest(root: Path) -> None:
    """Remove what `nest` made, one level at a time from the top (a recursive removal,
    pytest's own included, would exceed Python's recursion limit)."""
    top = root / "d"
    while top.is_dir():
        inner = top / "d"
        if inner.is_dir():
            inner.rename(root / "d-next")
        for leftover in top.iterdir():
            leftover.unlink()
        top.rmdir()
        if (root / "d-next").is_dir():
            (root / "d-next").rename(top)


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    root = tmp_path / "deep"
    root.mkdir()
    (root / "top.txt").write_text("A file at the top, about lighthouses.\n")
    nest(root, 1100)
    yield root
    unnest(root)


def test_a_folder_nested_1100_levels_is_skipped_with_a_reason(tmp_path: Path, deep: Path) -> None:
    root = deep
    entries = scan(root)
    deep = [e for e in entries if e.skip is Skip.TOO_DEEP]
    assert len(deep) == 1 and deep[0].source.count("/") == MAX_DEPTH
    assert f"more than {MAX_DEPTH} folders" in deep[0].error
    proc = cli("run", str(root), "--db", str(tmp_path / "data"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["indexed"] == 1 and summary["skipped_by_reason"] == {"folder too deep": 1}


def test_a_job_over_a_deep_folder_completes(keyless, layout) -> None:
    root = layout.jobs_root / "deep"
    root.mkdir()
    (root / "top.txt").write_text("A file at the top, about lighthouses.\n")
    nest(root, 1100)
    try:
        with httpx.Client(base_url=keyless.url, timeout=60) as client:
            r = client.post("/v1/jobs", json={"path": "deep"})
            assert r.status_code == 202, r.text
            job = finished(client, r.json())
    finally:
        unnest(root)
    assert job["status"] == "completed", job
    assert job["summary"]["skipped_by_reason"] == {"folder too deep": 1}


# -- row 9: a link that cannot be resolved ------------------------------------------------


def test_a_link_that_cannot_be_resolved_is_skipped_with_a_reason(tmp_path: Path) -> None:
    try:
        os.path.realpath("/proc/1/cwd")
    except PermissionError:
        pass
    else:
        pytest.skip("this system lets the process resolve /proc/1/cwd")
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("A readable file about windmills.\n")
    (root / "cwd").symlink_to("/proc/1/cwd")
    docs = {d.source: d for d in ingest(root)}
    assert docs["a.txt"].ok
    assert docs["cwd"].skip is Skip.LINK and "cannot be resolved" in docs["cwd"].reason
    proc = cli("run", str(root), "--db", str(tmp_path / "data"), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["indexed"] == 1


@pytest.mark.parametrize("folder", ["/proc", "/sys", "/proc/self"])
def test_a_pseudo_filesystem_root_is_refused_at_once(tmp_path: Path, folder: str) -> None:
    """Issue 41 (8): `run /proc --json` read pseudo-files for minutes; a root on a pseudo
    filesystem (told by its device's type in the mount table) is refused in one line."""
    if not Path(folder).is_dir() or not pseudo_devices():
        pytest.skip(f"{folder} is not mounted here")
    out = cli("run", folder, "--json", cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    error = json.loads(out.stdout)["error"]
    assert error.startswith("PATH: expected a folder of documents") and "pseudo" in error
    assert not (tmp_path / "index.sqlite3").exists()


def test_a_pseudo_filesystem_below_the_root_is_skipped_with_its_type() -> None:
    if not Path("/proc/self").is_dir() or not pseudo_devices():
        pytest.skip("no /proc here")
    entries = {e.path: e for e in scan("/", max_depth=1)}
    proc = entries[Path("/proc")]
    assert proc.skip is Skip.NOT_A_FILE and "proc pseudo filesystem" in proc.error
    assert not [p for p in entries if p.is_relative_to("/proc") and p != Path("/proc")]


def test_the_mount_table_names_pseudo_devices_by_type(tmp_path: Path) -> None:
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 1 0:21 / /proc rw,nosuid shared:5 - proc proc rw\n"
        "23 1 0:22 / /sys rw shared:6 - sysfs sysfs rw\n"
        "24 1 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n"
        "a broken line\n"
    )
    assert pseudo_devices(str(table)) == {os.makedev(0, 21): "proc", os.makedev(0, 22): "sysfs"}
    assert pseudo_devices(str(tmp_path / "missing")) == {}
