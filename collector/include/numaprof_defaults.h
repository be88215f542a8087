/* numaprof's default settings, defined once: the collector and the allocation shim
 * include this file and `numaprof record` reads it (numaprof/defaults.py), so that a
 * default changed here changes everywhere.  Keep to `#define NMP_DEFAULT_<NAME> <integer>`.
 */
#ifndef NUMAPROF_DEFAULTS_H
#define NUMAPROF_DEFAULTS_H

/* Hz per thread.  Measured on the 2-core VM, where a cpu-clock sample costs the target
 * ~15-25 us (timer VM exits): 1009 Hz keeps sampling near 2 % of CPU on a 2-thread
 * memory-bound OpenMP loop and still gives ~2000 samples/s there (>= 1000/s even for a
 * single thread).  A prime avoids lockstep with 1 kHz periodic activity.  perf's 4000 Hz
 * was measured too (2026-11-24, a 2-thread Jacobi of 1.8 s filling both cpus): 935 of
 * 8587 samples lost (the collector, decoding each sample, finds no idle cpu to drain the
 * rings), none at 1009 Hz; an object short of samples is reported with the rate or the
 * run length that would give it enough (docs/record.md). */
#define NMP_DEFAULT_FREQ 1009

/* Heap allocations of at least this many bytes are tracked with their call stack. */
#define NMP_DEFAULT_ALLOC_THRESHOLD 65536

/* Smaller allocations are sampled: on average one in every this many bytes a thread
 * allocates below the threshold is recorded with its call stack (and its release), so
 * that an array built from many small blocks (a row per malloc) is found by its
 * allocation site.  A site allocating B bytes gets about B / this samples: 64 on a
 * 16 MiB grid of 1 KiB rows; a program making 10^8 small allocations of 64 bytes pays
 * ~25 000 stack walks (docs/record.md).  0 turns the sampling off. */
#define NMP_DEFAULT_SMALL_SAMPLE 262144

/* One page fault in this many (per thread and cpu) is recorded with its address: the
 * first touches of the pages between two recorded ones are inferred from their
 * neighbours (docs/analyzer.md, "First touch").  A recorded fault costs the faulting
 * thread ~1.5-2 us in the kernel; an allocation-heavy program takes 10^5-10^6 of them
 * per second of run (bench/README.md).  A prime, so that the recorded faults do not
 * fall on one array only where a loop first-touches several in lockstep (16 recorded
 * every 8th page of `b` and none of `c` when one loop wrote b[j] and c[j]).  1 records
 * every fault (exact per page), the collector's default where transparent huge pages
 * are "always" on (each fault maps 2 MiB: few faults, each one standing for 512 pages). */
#define NMP_DEFAULT_FAULT_PERIOD 17

/* A tracked heap block released less than this many ns after its allocation is counted in
 * its site's summary instead of being recorded one by one (docs/record.md): at the default
 * sampling rate it lived about one sampling period. */
#define NMP_DEFAULT_SHORT_LIVED 1000000

#endif
