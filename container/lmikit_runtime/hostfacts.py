"""Facts of the host a container landed on, read from /proc, /sys and statvfs.

Everything is read relative to ``root`` and through an injectable ``statvfs`` so tests can
hand in synthetic ``/proc/meminfo``, cgroup v1/v2 trees, ``mountinfo`` and disk sizes.
Standard library only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CGROUP_V1_UNLIMITED = 2**60
INSTANCE_STORE_MODEL = "Instance Storage"  # "Amazon EC2 NVMe Instance Storage"
EBS_MODEL = "Elastic Block Store"  # EBS volumes are NVMe devices too on Nitro: not local


@dataclass(frozen=True)
class DiskFacts:
    path: str
    mount_point: str
    fs_type: str
    device: str
    free_bytes: int
    total_bytes: int
    is_nvme: bool
    reason: str = ""  # why it is not usable local NVMe


@dataclass(frozen=True)
class HostFacts:
    mem_total: int
    mem_available: int
    cgroup_version: int | None
    cgroup_limit: int | None  # None: no limit
    cgroup_usage: int
    gpus: int
    disk: DiskFacts | None

    def summary(self) -> str:
        gib = 1024**3
        limit = "none" if self.cgroup_limit is None else f"{self.cgroup_limit / gib:.1f} GiB"
        disk = "no disk path" if self.disk is None else (
            f"{self.disk.path} on {self.disk.fs_type} {self.disk.device or '?'} "
            f"({'NVMe' if self.disk.is_nvme else 'not NVMe'}, "
            f"{self.disk.free_bytes / gib:.0f} of {self.disk.total_bytes / gib:.0f} GiB free)")
        return (f"host {self.mem_total / gib:.1f} GiB RAM, {self.mem_available / gib:.1f} GiB "
                f"available; cgroup v{self.cgroup_version or '-'} limit {limit}; "
                f"{self.gpus} GPU(s); {disk}")


class Host:
    """Reads host facts under ``root`` ("/" in the container)."""

    def __init__(self, root: str | Path = "/", *,
                 statvfs: Callable[[str], Any] = os.statvfs,
                 env: Mapping[str, str] | None = None) -> None:
        self.root = Path(root)
        self.statvfs = statvfs
        self.env = os.environ if env is None else env

    def _p(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def _read(self, path: str | Path) -> str | None:
        try:
            return (path if isinstance(path, Path) else self._p(path)).read_text()
        except OSError:
            return None

    # --- memory ---------------------------------------------------------------------------
    def meminfo(self) -> tuple[int, int]:
        """(MemTotal, MemAvailable) in bytes."""
        text = self._read("/proc/meminfo")
        if text is None:
            raise OSError("cannot read /proc/meminfo")
        values: dict[str, int] = {}
        for line in text.splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                scale = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
                values[key.strip()] = int(parts[0]) * scale
        total = values["MemTotal"]
        available = values.get("MemAvailable",
                               values.get("MemFree", 0) + values.get("Cached", 0))
        return total, available

    def cgroup(self) -> tuple[int | None, int | None, int]:
        """(version, limit bytes or None, usage bytes) of this process's memory cgroup."""
        lines = (self._read("/proc/self/cgroup") or "").splitlines()
        base = self._p("/sys/fs/cgroup")
        if (base / "cgroup.controllers").exists():
            rel = next((ln.split(":", 2)[2] for ln in lines if ln.startswith("0::")), "/")
            leaf = base / rel.lstrip("/")
            if not leaf.is_dir():
                leaf = base  # cgroup namespace: our cgroup is the mount root
            limits = []
            node = leaf
            while True:
                raw = (self._read(node / "memory.max") or "max").strip()
                if raw.isdigit():
                    limits.append(int(raw))
                if node == base:
                    break
                node = node.parent
            usage = self._int(leaf / "memory.current") or self._int(base / "memory.current")
            return 2, min(limits) if limits else None, usage
        mem = base / "memory"
        if mem.is_dir():
            rel = next((ln.split(":", 2)[2] for ln in lines
                        if "memory" in ln.split(":")[1].split(",")), "/") if lines else "/"
            leaf = mem / rel.lstrip("/")
            if not (leaf / "memory.limit_in_bytes").exists():
                leaf = mem
            limit = self._int(leaf / "memory.limit_in_bytes")
            usage = self._int(leaf / "memory.usage_in_bytes")
            unlimited = limit is None or limit >= CGROUP_V1_UNLIMITED
            return 1, None if unlimited else limit, usage
        return None, None, 0

    def _int(self, path: Path) -> int:
        raw = (self._read(path) or "").strip()
        return int(raw) if raw.isdigit() else 0

    # --- GPUs -------------------------------------------------------------------------------
    def gpus(self) -> int:
        for var in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"):
            value = self.env.get(var)
            if value is None or value.strip() in ("", "all"):
                continue
            if value.strip() in ("void", "none", "-1"):
                return 0
            return len([v for v in value.split(",") if v.strip()])
        gpus = self._p("/proc/driver/nvidia/gpus")
        return len(list(gpus.iterdir())) if gpus.is_dir() else 0

    # --- disk -------------------------------------------------------------------------------
    def disk(self, path: str) -> DiskFacts | None:
        """Facts of the filesystem holding ``path`` (or its nearest existing parent)."""
        mounts = self._mounts()
        target = path.rstrip("/") or "/"
        best = None
        for mount in mounts:
            mp = mount["mount_point"]
            if (target == mp or target.startswith(mp.rstrip("/") + "/")) and (
                    best is None or len(mp) > len(best["mount_point"])):
                best = mount
        if best is None:
            return None
        try:
            st = self.statvfs(best["mount_point"])
        except OSError:
            return None
        free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
        is_nvme, device, reason = self._instance_nvme(best)
        return DiskFacts(path=path, mount_point=best["mount_point"], fs_type=best["fs_type"],
                         device=device, free_bytes=free, total_bytes=total, is_nvme=is_nvme,
                         reason=reason)

    def _mounts(self) -> list[dict[str, str]]:
        mounts = []
        for line in (self._read("/proc/self/mountinfo") or "").splitlines():
            left, sep, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if not sep or len(fields) < 5 or len(tail) < 2:
                continue
            mounts.append({"major_minor": fields[2], "mount_point": _unescape(fields[4]),
                           "fs_type": tail[0], "source": tail[1]})
        return mounts

    def _instance_nvme(self, mount: dict[str, str]) -> tuple[bool, str, str]:
        """(is local instance-store NVMe, device name, reason if not)."""
        if mount["fs_type"] in ("overlay", "tmpfs", "nfs", "nfs4", "fuse", "aufs", "9p"):
            return False, mount["source"], f"{mount['fs_type']} filesystem, not a local disk"
        block = self._p(f"/sys/dev/block/{mount['major_minor']}")
        if not block.is_dir():
            return False, mount["source"], "not a block device"
        return self._block_is_instance_nvme(block.resolve())

    def _block_is_instance_nvme(self, block: Path) -> tuple[bool, str, str]:
        name = block.name
        for model_file in (block / "device" / "model", block.parent / "device" / "model"):
            model = self._read(model_file)
            if model is not None:
                if INSTANCE_STORE_MODEL in model:
                    return True, name, ""
                if EBS_MODEL in model:
                    return False, name, "EBS volume (network storage), not instance NVMe"
                return False, name, f"device model {model.strip()!r} is not instance NVMe"
        slaves = block / "slaves"
        if slaves.is_dir():  # md RAID / device-mapper over instance-store drives
            members = [self._block_is_instance_nvme(s.resolve()) for s in slaves.iterdir()]
            if members and all(m[0] for m in members):
                return True, name, ""
            return False, name, "not every member device is instance NVMe"
        return False, name, "unknown device model"

    def facts(self, disk_path: str | None) -> HostFacts:
        total, available = self.meminfo()
        version, limit, usage = self.cgroup()
        return HostFacts(mem_total=total, mem_available=available, cgroup_version=version,
                         cgroup_limit=limit, cgroup_usage=usage, gpus=self.gpus(),
                         disk=self.disk(disk_path) if disk_path else None)


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)
