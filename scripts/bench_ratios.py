#!/usr/bin/env python3
"""Prints the reference's benchmark ratios against issue 20's targets.

Usage: bench_ratios.py BENCH.json   (Google Benchmark JSON with repetitions)

Each figure is a median over repetitions; each ratio compares two benchmarks
of the same run, so machine speed cancels out. Exits 0 whatever the figures
say: a benchmark on a shared machine informs, it does not gate.
"""
import json
import operator
import sys

AT_MOST = ("≤", operator.le)
AT_LEAST = ("≥", operator.ge)


def main(path):
    runs = json.load(open(path))["benchmarks"]
    median = {b["run_name"]: b for b in runs if b.get("aggregate_name") == "median"}

    def ns(name):
        entry = median[name]
        assert entry["time_unit"] == "ns", f"{name} is timed in {entry['time_unit']}, not ns"
        return entry["real_time"]

    def scaling(name):
        return median[f"{name}/real_time/threads:2"]["items_per_second"] / median[f"{name}/real_time/threads:1"][
            "items_per_second"]

    bare = ns("BM_BareAlignedAllocFree/64")
    raw = ns("BM_RawHostAllocRelease/64")
    owning = ns("BM_OwningAllocRelease/64")
    atomic = ns("BM_AtomicIncDec")
    live = median["BM_OwningAllocRelease_Live/1000000"]
    rows = [
        ("owning allocate+release_now, items/s at 2 threads ÷ at 1", scaling("BM_OwningAllocRelease_Threads"),
         AT_LEAST, 1.8),
        ("pin acquire+release, items/s at 2 threads ÷ at 1", scaling("BM_PinAcquireRelease"), AT_LEAST, 1.8),
        ("pin acquire+release (1 thread) ÷ atomic inc+dec", ns("BM_PinAcquireRelease/real_time/threads:1") / atomic,
         AT_MOST, 1.5),
        ("snapshot, 0 quarantined ÷ atomic inc+dec", ns("BM_Snapshot_Quarantined/0") / atomic, AT_MOST, 4),
        ("snapshot, 100000 quarantined ÷ 0 quarantined",
         ns("BM_Snapshot_Quarantined/100000") / ns("BM_Snapshot_Quarantined/0"), AT_MOST, 1.2),
        ("deferred enqueue+drain ÷ owning cycle", ns("BM_DeferredEnqueueDrain/64") / owning, AT_MOST, 1.3),
        ("owning cycle ÷ bare aligned_alloc+free", owning / bare, AT_MOST, 4),
        ("  host allocator's bookkeeping: raw ÷ bare", raw / bare, AT_MOST, 2),
        ("  registry's bookkeeping: (owning − raw) ÷ bare", (owning - raw) / bare, AT_MOST, 2),
        ("owning cycle, 1000000 live ÷ 100 live",
         ns("BM_OwningAllocRelease_Live/1000000") / ns("BM_OwningAllocRelease_Live/100"), AT_MOST, 1.1),
        ("registry bookkeeping per live allocation, bytes", live["registry_bytes_per_live"], AT_MOST, 48),
        ("owner handle, bytes", live["handle_bytes"], AT_MOST, 96),
    ]
    print("| ratio | measured | target | met |\n|---|---|---|---|")
    for name, value, (sign, holds), target in rows:
        print(f"| {name} | {value:.2f} | {sign} {target} | {'yes' if holds(value, target) else 'NO'} |")
    print("\nbaselines (medians): "
          f"bare aligned_alloc+free/64 {bare:.1f} ns; raw host allocate+release/64 {raw:.1f} ns; "
          f"owning allocate+release_now/64 {owning:.1f} ns; atomic inc+dec {atomic:.1f} ns; "
          f"per-thread counter, items/s at 2 threads ÷ at 1 (the machine's ceiling) "
          f"{scaling('BM_PerThreadCounter'):.2f}; raw host allocator alone, 2 ÷ 1 threads "
          f"{scaling('BM_RawHostAllocRelease_Threads'):.2f}")
    floor = ns("BM_LockFloor/64")
    print(f"floor, reported with no target: bare aligned_alloc+free plus the six uncontended lock round trips an "
          f"owning cycle takes {floor:.1f} ns, {floor / bare:.2f} × bare; owning cycle ÷ that floor {owning / floor:.2f}")
    print("trade-off, reported with no target: a capped context grants under its mutex, so the cap stays exact "
          f"(PIN-005): pin acquire+release {ns('BM_PinAcquireRelease_Capped/real_time/threads:1'):.1f} ns at 1 "
          f"thread, items/s at 2 threads ÷ at 1 {scaling('BM_PinAcquireRelease_Capped'):.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
