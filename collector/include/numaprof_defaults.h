/* numaprof's default settings, defined once: the collector and the allocation shim
 * include this file and `numaprof record` reads it (numaprof/defaults.py), so that a
 * default changed here changes everywhere.  Keep to `#define NMP_DEFAULT_<NAME> <integer>`
 * or `#define NMP_DEFAULT_<NAME> "<string>"`.
 */
#ifndef NUMAPROF_DEFAULTS_H
#define NUMAPROF_DEFAULTS_H

/* Hz per thread: perf's default rate (4000), made a prime so as not to run in lockstep
 * with 1 kHz periodic activity.  At 1009 Hz (the default until 2026-12-02) a 2.7 s run of
 * LULESH 2.0 (70 arrays, 15-30 samples each) left 0.31 of its samples on objects too
 * short of samples for a pattern; at 4001 Hz 0.04 (docs/record.md).  Where a cpu-clock
 * sample is dear (the 2-core development VM: 20-30 us a sample, timer VM exits) this
 * costs a busy thread ~10 % (perf record at the same rate alike, bench/README.md);
 * --freq 1009 is the cheaper choice for a long run.  The loss measured at 4000 Hz on
 * 2026-11-24 (935 of 8587 samples of a 2-thread Jacobi filling both cpus) was not seen
 * again on 2026-12-02: no sample lost in 13 recordings filling both cpus (the eleven
 * -O2 corpus runs, 20-91 K samples each, an 8.6 s memory-bound kernel, LULESH). */
#define NMP_DEFAULT_FREQ 4001

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

/* The profile directory `numaprof record` writes, and `report` and `suggest` read, when
 * given none (the native launcher reads it too: collector/launcher). */
#define NMP_DEFAULT_PROFILE "numaprof.data"

#endif
