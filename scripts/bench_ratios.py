#!/usr/bin/env python3
"""Prints the benchmark ratios of issue 8 as a Markdown table.

Usage: bench_ratios.py BENCH.json   (Google Benchmark JSON with repetitions)

Each figure is a median over repetitions; each ratio compares two benchmarks
of the same run, so machine speed cancels out.
"""
import json
import sys


def main(path):
    runs = json.load(open(path))["benchmarks"]
    median = {b["run_name"]: b for b in runs if b.get("aggregate_name") == "median"}

    def ns(name):
        return median[name]["real_time"] if median[name]["time_unit"] == "ns" else None

    def rate(name):
        return median[name]["items_per_second"]

    rows = [
        ("OwningAllocRelease/64 ÷ RawHostAllocRelease/64", ns("BM_OwningAllocRelease/64") / ns("BM_RawHostAllocRelease/64"), "≤ 3.0"),
        ("Live/1000000 ÷ Live/100", ns("BM_OwningAllocRelease_Live/1000000") / ns("BM_OwningAllocRelease_Live/100"), "≤ 1.3"),
        ("Threads: items/s at 2 ÷ at 1",
         rate("BM_OwningAllocRelease_Threads/real_time/threads:2") / rate("BM_OwningAllocRelease_Threads/real_time/threads:1"), "≥ 1.0"),
        ("Threads, raw host allocator alone (the baseline's own scaling)",
         rate("BM_RawHostAllocRelease_Threads/real_time/threads:2") / rate("BM_RawHostAllocRelease_Threads/real_time/threads:1"), "—"),
        ("DeferredEnqueueDrain/64 ÷ RawHostAllocRelease/64", ns("BM_DeferredEnqueueDrain/64") / ns("BM_RawHostAllocRelease/64"), "≤ 3.5"),
        ("PinAcquireRelease (1 thread) ÷ AtomicIncDec",
         ns("BM_PinAcquireRelease/real_time/threads:1") / ns("BM_AtomicIncDec"), "≤ 2.0"),
        ("Snapshot_Quarantined/100000 ÷ /0", ns("BM_Snapshot_Quarantined/100000") / ns("BM_Snapshot_Quarantined/0"), "≤ 2.0"),
    ]
    print("| ratio | measured | target |\n|---|---|---|")
    for name, value, target in rows:
        print(f"| {name} | {value:.2f} | {target} |")
    live = median["BM_OwningAllocRelease_Live/1000000"]
    print(f"\nraw host allocate+release/64: {ns('BM_RawHostAllocRelease/64'):.1f} ns; "
          f"owning allocate+release_now/64: {ns('BM_OwningAllocRelease/64'):.1f} ns")
    print(f"registry bookkeeping per live owning allocation: {live['registry_bytes_per_live']:.0f} bytes "
          f"(target ≤ 64); owner handle held by the caller: {live['handle_bytes']:.0f} bytes")


if __name__ == "__main__":
    main(sys.argv[1])
