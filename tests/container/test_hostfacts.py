"""Host facts from synthetic /proc/meminfo, cgroup v1/v2 trees, mountinfo, /sys and statvfs."""

from __future__ import annotations

from pathlib import Path

from lmikit_runtime.hostfacts import Host

from tests.container.conftest import (
    EBS,
    GIB,
    INSTANCE_NVME,
    OVERLAY_ROOT,
    fake_statvfs,
    make_root,
)


def test_meminfo_reads_total_and_available(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=1152, mem_available_gib=1100)
    total, available = Host(root, env={}).meminfo()
    assert (total, available) == (1152 * GIB, 1100 * GIB)


def test_cgroup_v2_limit_and_usage(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     cgroup=("v2", 32 * GIB, GIB))
    assert Host(root, env={}).cgroup() == (2, 32 * GIB, GIB)


def test_cgroup_v2_max_is_no_limit(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60, cgroup=("v2", "max", 0))
    assert Host(root, env={}).cgroup() == (2, None, 0)


def test_cgroup_v2_nested_takes_smallest_ancestor_limit(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     cgroup=("v2", 16 * GIB, 0))
    (root / "proc/self/cgroup").write_text("0::/ic/copy1\n")
    leaf = root / "sys/fs/cgroup/ic/copy1"
    leaf.mkdir(parents=True)
    (leaf / "memory.max").write_text("max\n")
    (leaf / "memory.current").write_text(f"{2 * GIB}\n")
    assert Host(root, env={}).cgroup() == (2, 16 * GIB, 2 * GIB)


def test_cgroup_v1_limit(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     cgroup=("v1", 24 * GIB, 3 * GIB))
    assert Host(root, env={}).cgroup() == (1, 24 * GIB, 3 * GIB)


def test_cgroup_v1_huge_value_is_no_limit(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     cgroup=("v1", 9223372036854771712, 0))
    assert Host(root, env={}).cgroup() == (1, None, 0)


def test_gpus_from_visible_devices_then_driver(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60, gpus=8)
    assert Host(root, env={}).gpus() == 8
    assert Host(root, env={"NVIDIA_VISIBLE_DEVICES": "all"}).gpus() == 8
    assert Host(root, env={"CUDA_VISIBLE_DEVICES": "2,3"}).gpus() == 2
    assert Host(root, env={"NVIDIA_VISIBLE_DEVICES": "void"}).gpus() == 0


def test_disk_instance_store_nvme_uses_free_space(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     mounts=[OVERLAY_ROOT, ("259:1", "/tmp", "xfs", "/dev/nvme1n1")],
                     models={"259:1": INSTANCE_NVME})
    host = Host(root, env={}, statvfs=fake_statvfs({"/tmp": (300 * GIB, 3800 * GIB)}))
    disk = host.disk("/tmp/lmcache/")
    assert disk is not None and disk.is_nvme and disk.mount_point == "/tmp"
    assert (disk.free_bytes, disk.total_bytes) == (300 * GIB, 3800 * GIB)


def test_disk_ebs_nvme_is_not_local(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     mounts=[("259:0", "/", "ext4", "/dev/nvme0n1p1")], models={"259:0": EBS})
    host = Host(root, env={}, statvfs=fake_statvfs({"/": (100 * GIB, 200 * GIB)}))
    disk = host.disk("/tmp/lmcache/")
    assert disk is not None and not disk.is_nvme and "EBS" in disk.reason


def test_disk_overlay_is_not_local(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60, mounts=[OVERLAY_ROOT])
    host = Host(root, env={}, statvfs=fake_statvfs({"/": (100 * GIB, 200 * GIB)}))
    disk = host.disk("/tmp/lmcache/")
    assert disk is not None and not disk.is_nvme and "overlay" in disk.reason


def test_disk_raid_of_instance_drives_is_nvme(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     mounts=[("9:0", "/mnt/nvme", "xfs", "/dev/md0")],
                     models={"259:1": INSTANCE_NVME, "259:2": INSTANCE_NVME})
    slaves = root / "sys/dev/block/9:0/slaves"
    slaves.mkdir(parents=True)
    for mm in ("259:1", "259:2"):
        (slaves / mm).symlink_to(root / "sys/dev/block" / mm)
    host = Host(root, env={}, statvfs=fake_statvfs({"/mnt/nvme": (7000 * GIB, 7600 * GIB)}))
    assert host.disk("/mnt/nvme/lmcache").is_nvme


def test_disk_mount_point_with_escaped_space(tmp_path: Path) -> None:
    root = make_root(tmp_path, mem_total_gib=64, mem_available_gib=60,
                     mounts=[("259:1", "/mnt/local\\040disk", "xfs", "/dev/nvme1n1")],
                     models={"259:1": INSTANCE_NVME})
    host = Host(root, env={}, statvfs=fake_statvfs({"/mnt/local disk": (GIB, 2 * GIB)}))
    assert host.disk("/mnt/local disk/cache").mount_point == "/mnt/local disk"
