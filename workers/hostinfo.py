"""Machine fingerprint and host checks, recorded with every result (standard library only; runs on workers).

The fingerprint decides which results may be compared: a series never mixes two fingerprints. The host checks
say whether this host can be trusted for wall-clock numbers (frequency scaling, SMT, turbo, ASLR, swap,
transparent huge pages, load): a host that looks noisy is flagged in the result, not silently trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

PROC = Path("/proc")
SYS = Path("/sys")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return None


def cpu_model(proc: Path = PROC) -> str:
    text = _read(proc / "cpuinfo") or ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Processor", "cpu model", "uarch"):
            return value.strip()
    return platform.processor() or platform.machine() or "unknown"


def memory_bytes(proc: Path = PROC) -> int:
    text = _read(proc / "meminfo") or ""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.M)
    return int(m.group(1)) * 1024 if m else 0


def compiler_version(cc: str | None = None) -> str:
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or ""
    if not cc:
        return "none"
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return "none"
    return out.splitlines()[0].strip() if out else "unknown"


def fingerprint() -> dict[str, Any]:
    """What makes two machines' numbers incomparable. Stable across reboots; no hostnames or load."""
    return {
        "cpu_model": cpu_model(),
        "cores": os.cpu_count() or 0,
        "memory_bytes": memory_bytes(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "os": _os_release(),
        "compiler": compiler_version(),
    }


def identity(fp: dict[str, Any]) -> dict[str, Any]:
    """What of a fingerprint names the machine: all of it, memory rounded to GiB (a kernel's reservation change
    moves memory_bytes, not the machine). Two fingerprints of one machine have equal identities."""
    key = dict(fp)
    key["memory_bytes"] = round(int(key.get("memory_bytes", 0)) / 2**30)
    return key


def machine_id(fp: dict[str, Any]) -> str:
    """A short stable id of a fingerprint's identity: the master recomputes it to check a result's machine id."""
    blob = json.dumps(identity(fp), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _os_release() -> str:
    text = _read(Path("/etc/os-release")) or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else platform.system()


def host_checks(proc: Path = PROC, sys_root: Path = SYS) -> dict[str, Any]:
    """Settings that make wall-clock numbers noisy, with `noisy_reasons` listing what looks wrong."""
    cpu = sys_root / "devices/system/cpu"
    governors = sorted({g for p in cpu.glob("cpu[0-9]*/cpufreq/scaling_governor") if (g := _read(p)) is not None})
    smt = _read(cpu / "smt/active")
    no_turbo = _read(cpu / "intel_pstate/no_turbo")
    boost = _read(cpu / "cpufreq/boost")
    aslr = _read(proc / "sys/kernel/randomize_va_space")
    thp = _read(sys_root / "kernel/mm/transparent_hugepage/enabled")
    thp_mode = re.search(r"\[(\w+)\]", thp).group(1) if thp and "[" in thp else thp
    meminfo = _read(proc / "meminfo") or ""
    swap = re.search(r"^SwapTotal:\s+(\d+)", meminfo, re.M)
    load = _read(proc / "loadavg")
    load1 = float(load.split()[0]) if load else None
    cores = os.cpu_count() or 1

    checks: dict[str, Any] = {
        "cpu_governor": governors[0] if len(governors) == 1 else (governors or None),
        "smt_active": None if smt is None else smt == "1",
        "turbo": None if no_turbo is None and boost is None else (no_turbo == "0" if no_turbo else boost == "1"),
        "aslr": None if aslr is None else int(aslr),
        "swap_bytes": int(swap.group(1)) * 1024 if swap else None,
        "transparent_hugepages": thp_mode,
        "load_1min": load1,
        "virtualized": _virtualized(proc),
    }
    reasons = []
    if checks["cpu_governor"] not in (None, "performance"):
        reasons.append(f"CPU governor is {checks['cpu_governor']} (want performance)")
    if checks["smt_active"]:
        reasons.append("SMT (hyper-threading) is on")
    if checks["turbo"]:
        reasons.append("turbo boost is on")
    if checks["aslr"]:
        reasons.append("ASLR is on (randomize_va_space != 0)")
    if checks["swap_bytes"]:
        reasons.append("swap is enabled")
    if thp_mode == "always":
        reasons.append("transparent huge pages are 'always'")
    if load1 is not None and load1 > 0.5 * cores:
        reasons.append(f"load average {load1:.2f} on {cores} cores at start")
    if checks["virtualized"]:
        reasons.append("running in a virtual machine (neighbours share the hardware)")
    checks["noisy_reasons"] = reasons
    checks["noisy"] = bool(reasons)
    return checks


def _virtualized(proc: Path) -> bool:
    flags = _read(proc / "cpuinfo") or ""
    return bool(re.search(r"^flags\s*:.*\bhypervisor\b", flags, re.M))


if __name__ == "__main__":
    fp = fingerprint()
    print(json.dumps({"machine_id": machine_id(fp), "fingerprint": fp, "host_checks": host_checks()}, indent=2))
