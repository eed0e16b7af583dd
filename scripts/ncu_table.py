#!/usr/bin/env python3
"""Turns an Nsight Compute CSV (--csv --page raw, metrics of scripts/device_profile.sh) into a table of kernels by
total time: one row per kernel (cuBLAS products split by grid, so each projection shape is its own row), with
launches, total and mean time, DRAM bytes and achieved bandwidth, DRAM and SM throughput. Markdown on stdout."""
import argparse
import csv
import re
import sys
from collections import OrderedDict

UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3,
         "s": 1.0, "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "B": 1.0, "KB": 1e3,
         "MB": 1e6, "GB": 1e9, "TB": 1e12, "%": 1.0}


def rows_of(path):
    with open(path, newline="", errors="replace") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit(f"{path}: no ncu CSV header (a line starting with \"ID\")")
    reader = csv.reader(lines[start:])
    header = next(reader)
    units = next(reader)
    out = []
    for r in reader:
        if len(r) != len(header) or not r[0].strip().isdigit():
            continue
        out.append({h: (v, u) for h, v, u in zip(header, r, units)})
    return out


def value(row, key):
    v, u = row.get(key, ("", ""))
    try:
        return float(v.replace(",", "")) * UNITS.get(u, 1.0)
    except ValueError:
        return 0.0


def short(name):
    name = re.sub(r"\(anonymous namespace\)::|<unnamed>::|dg::|cuda::|moe_stream::", "", name)
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # drop the parameter list: the first '(' outside template brackets
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut].replace("void ", "")
    return name if len(name) <= 70 else name[:67] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=0, help="rows to print (0: all)")
    a = ap.parse_args()
    rows = rows_of(a.csv)
    groups = OrderedDict()
    total = 0.0
    for r in rows:
        name = short(r["Kernel Name"][0])
        if re.search(r"gemm|nvjet|cutlass|xmma|sm90", name, re.I):
            name += f" grid {r.get('Grid Size', ('?', ''))[0]}"
        t = value(r, "gpu__time_duration.sum")
        g = groups.setdefault(name, {"n": 0, "t": 0.0, "bytes": 0.0, "dram": 0.0, "sm": 0.0})
        g["n"] += 1
        g["t"] += t
        g["bytes"] += value(r, "dram__bytes_read.sum")
        g["dram"] += t * value(r, "dram__throughput.avg.pct_of_peak_sustained_elapsed")
        g["sm"] += t * value(r, "sm__throughput.avg.pct_of_peak_sustained_elapsed")
        total += t
    print(f"{len(rows)} kernels, {total * 1e3:.3f} ms of kernel time ({a.csv})\n")
    extra = any(value(r, "dram__bytes_read.sum") for r in rows)  # only when those metrics were collected
    print("| kernel | launches | total ms | share | mean µs |" + (" DRAM read GB | GB/s | DRAM % | SM % |" if extra else ""))
    print("|---|---|---|---|---|" + ("---|---|---|---|" if extra else ""))
    ranked = sorted(groups.items(), key=lambda kv: -kv[1]["t"])
    for i, (name, g) in enumerate(ranked):
        if a.top and i >= a.top:
            rest = sum(x["t"] for _, x in ranked[i:])
            print(f"| ({len(ranked) - i} more kernels) | | {rest * 1e3:.3f} | {rest / total:.1%} | |" + (" | | | |" if extra else ""))
            break
        t = g["t"]
        line = f"| `{name}` | {g['n']} | {t * 1e3:.3f} | {t / total:.1%} | {t / g['n'] * 1e6:.1f} |"
        if extra:
            line += (f" {g['bytes'] / 1e9:.2f} | {g['bytes'] / t / 1e9 if t else 0:.0f} | {g['dram'] / t if t else 0:.0f} |"
                     f" {g['sm'] / t if t else 0:.0f} |")
        print(line)


if __name__ == "__main__":
    main()
