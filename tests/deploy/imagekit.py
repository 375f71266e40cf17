"""Building an image with scripts/build-image.sh and running it the way a container runtime would.

`podman run` is refused in the sandboxes the suite runs in (rlimits, cgroups), so an image's root
filesystem is exported and run with `chroot`: its own Env, User and WorkingDir from the image config,
the root mounted read-only (as the chart's readOnlyRootFilesystem), a writable state directory at
/var/lib/txnwatch and a tmpfs /tmp (the chart's emptyDirs). Shared by test_image.py (the daemon) and
test_pipeline_image.py (the pipeline target).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import socket
import subprocess
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.tools import ROOT, tool

STATE_DIR = "/var/lib/txnwatch"


@dataclass(frozen=True)
class Image:
    name: str
    config: dict[str, Any]  # podman image inspect's Config: Env, User, WorkingDir, Entrypoint, Cmd, Labels
    root: Path  # the exported root filesystem
    build_seconds: float  # scripts/build-image.sh's wall time in this run (0.x when its inputs were unchanged)
    size_bytes: int  # podman's figure for the image

    @property
    def env(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.config.get("Env") or [])


def _cache() -> Path:
    return Path(os.environ.get("TXNWATCH_CACHE", Path.home() / ".cache" / "txnwatch"))


@contextlib.contextmanager
def _image_lock() -> Iterator[None]:
    """scripts/build-image.sh's lock on the podman store: an export waits for another worker's build to finish."""
    lock = _cache() / "image" / "build.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


def podman(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cache = _cache()
    storage = os.environ.get("PODMAN_STORAGE_ROOT", str(cache / "containers" / "storage"))
    runroot = os.environ.get("PODMAN_RUNROOT", f"{os.environ.get('XDG_RUNTIME_DIR', '/tmp')}/txnwatch-podman-{os.getuid()}")
    command = [tool("podman"), "--root", storage, "--runroot", runroot, "--storage-driver", "vfs", *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(command)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    return proc


def build_and_export(root: Path, target: str = "daemon", timeout_s: float = 1800) -> Image:
    """scripts/build-image.sh for ``target``, then the image's root filesystem extracted under ``root``."""
    if os.getuid() != 0:
        pytest.fail("the image tests need root (debootstrap, podman's vfs storage, chroot)", pytrace=False)
    tool("debootstrap")
    env = {k: v for k, v in os.environ.items() if k != "TXNWATCH_IMAGE"} | {"TXNWATCH_IMAGE_TARGET": target}
    started = time.monotonic()
    built = subprocess.run(["bash", str(ROOT / "scripts" / "build-image.sh")], capture_output=True, text=True,
                           timeout=timeout_s, cwd=ROOT, env=env)
    build_seconds = time.monotonic() - started
    assert built.returncode == 0, f"scripts/build-image.sh failed:\n{built.stderr[-4000:]}"
    name = built.stdout.strip().splitlines()[-1]
    with _image_lock():
        return _export(name, root, build_seconds)


def _export(name: str, root: Path, build_seconds: float) -> Image:
    inspected = json.loads(podman("image", "inspect", name).stdout)[0]
    container = podman("create", name).stdout.strip()
    try:
        export = root.parent / f"{root.name}.tar"
        podman("export", "-o", str(export), container, timeout=600)
        with tarfile.open(export) as tar:
            tar.extractall(root, numeric_owner=True, filter="fully_trusted")
        export.unlink()
        root.chmod(0o755)  # the image's / (pytest made the directory 0700)
        # An image has no /etc/hosts: every runtime writes one at start (the kubelet: localhost and the pod's
        # own name). Spark binds "localhost" and resolves the host's name, so the chroot gets the same.
        (root / "etc" / "hosts").write_text(f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                                            f"127.0.0.1\t{socket.gethostname()}\n")
    finally:
        podman("rm", container)
    return Image(name, inspected["Config"], root, build_seconds, int(inspected["Size"]))


def chroot_command(image: Image, state: Path, *args: str, env: dict[str, str] | None = None,
                   entrypoint: list[str] | None = None, files: dict[str, Path] | None = None,
                   volumes: dict[str, Path] | None = None) -> list[str]:
    """ARGS after the image's entrypoint (or ``entrypoint``) inside the image root: read-only root, state and
    /tmp writable, the image's user and env; ``files`` maps paths in the image to host files mounted there
    read-only (a ConfigMap's subPath mount), ``volumes`` paths under /tmp to host directories mounted there
    writable (a volume a Spark cluster's executors see at the same path)."""
    for inside in files or {}:
        target = image.root / inside.lstrip("/")  # the mount point, as a runtime creates it in the container
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    root = shlex.quote(str(image.root))
    user = image.config["User"]
    variables = {**image.env, **(env or {})}
    entry = [*(image.config["Entrypoint"] if entrypoint is None else entrypoint), *args]
    inner = f'cd {shlex.quote(image.config["WorkingDir"])} && exec "$@"'
    script = " && ".join([
        f"mount --bind {root} {root}", f"mount -o remount,bind,ro {root}",
        f"mount --bind {shlex.quote(str(state))} {root}{STATE_DIR}",
        f"mount -t tmpfs -o mode=1777 tmpfs {root}/tmp",
        f"mount -t proc proc {root}/proc", f"mount --rbind /dev {root}/dev",
        *(f"mount --bind {shlex.quote(str(host))} {root}{shlex.quote(inside)}"
          f" && mount -o remount,bind,ro {root}{shlex.quote(inside)}" for inside, host in (files or {}).items()),
        *(f"mkdir -p {root}{shlex.quote(inside)} && mount --bind {shlex.quote(str(host))} {root}{shlex.quote(inside)}"
          for inside, host in (volumes or {}).items()),
        "exec env -i " + " ".join(shlex.quote(f"{k}={v}") for k, v in variables.items())
        + f" chroot --userspec={shlex.quote(user)} {root} /bin/sh -c {shlex.quote(inner)} sh "
        + " ".join(shlex.quote(a) for a in entry),
    ])
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


def state_dir(path: Path, image: Image) -> Path:
    """The volume the chart mounts at /var/lib/txnwatch, owned by the image's user."""
    path.mkdir()
    uid, _, gid = image.config["User"].partition(":")
    os.chown(path, int(uid), int(gid or uid))
    return path


def tree_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20
