"""The machine line every benchmark prints next to its table: CPU model, cores and the flags
that decide bf16/int8 speed (AMX, AVX512-BF16, VNNI)."""

import os

FLAGS = ("amx_bf16", "amx_int8", "avx512_bf16", "avx512_vnni", "avx512f", "avx2")


def cpu():
    """{"model": str, "cores": int, "flags": {flag: bool}} from /proc/cpuinfo (empty where unknown)."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not model:
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return {"model": model, "cores": os.cpu_count(), "flags": {f: f in flags for f in FLAGS}}


def describe():
    """One line: 'cpu: MODEL, N cores; amx_bf16 yes, ...'."""
    info = cpu()
    flags = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in info["flags"].items())
    return f"cpu: {info['model'] or 'unknown'}, {info['cores']} cores; {flags}"
