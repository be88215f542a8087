/* The numaprof profile format, defined once (docs/profile-format.md).
 *
 * Every table of a profile and every column of each, with its type and whether a reader
 * may do without it.  The C collector builds its column tables from these lists
 * (nmp_schema.h); the Python reader and writer read this file itself
 * (analyzer/format.py), so that adding a column is one edit here and the two sides cannot
 * disagree.
 *
 * analyzer/format.py parses this file with a strict grammar -- keep to it:
 *   #define NMP_PROFILE_FORMAT "<name>"
 *   #define NMP_PROFILE_VERSION <integer>
 *   #define NMP_COL_MAGIC "<8 characters>"
 *   #define NMP_COL_HEADER <integer>
 *   #define NMP_TABLE_<table>(COL) followed by lines  COL(<table>, <column>, <TYPE>, <REQ|OPT>) \
 *   #define NMP_TABLES(T) followed by lines  T(<table>) \
 *   #define NMP_SAMPLE_RULES(R) followed by lines  R(<ENUM>, <name>, <value>) \
 * TYPE: U8 U16 U32 U64 I16 I32 I64 (little-endian integers) or STR (u64 offsets into the
 * column's .heap of NUL-terminated strings).  REQ: a profile without the column is
 * refused; OPT: a missing column reads as zeros.
 */
#ifndef NUMAPROF_FORMAT_H
#define NUMAPROF_FORMAT_H

#define NMP_PROFILE_FORMAT "numaprof.profile"
#define NMP_PROFILE_VERSION 1
#define NMP_COL_MAGIC "NMPCOL01"
/* bytes before a column's values: the magic, then the NUL-padded numpy dtype string */
#define NMP_COL_HEADER 16

/* One row per sample.  The software backend writes the columns up to `rule` and the
 * registers of the access (`sp`, `bp_sp` to `base_off`), the hardware backends those up
 * to `phys_addr` (docs/profile-format.md).  `bp` is read in profiles written before
 * `bp_sp` (rbp as rbp - rsp in 4 bytes, not 8). */
#define NMP_TABLE_samples(COL) \
    COL(samples, time, U64, REQ) \
    COL(samples, pid, U32, REQ) \
    COL(samples, tid, U32, REQ) \
    COL(samples, cpu, U16, REQ) \
    COL(samples, ip, U64, REQ) \
    COL(samples, addr, U64, REQ) \
    COL(samples, access, U8, REQ) \
    COL(samples, size, U8, OPT) \
    COL(samples, rule, U8, OPT) \
    COL(samples, weight, U32, OPT) \
    COL(samples, data_src, U64, OPT) \
    COL(samples, phys_addr, U64, OPT) \
    COL(samples, sp, U64, OPT) \
    COL(samples, bp, U64, OPT) \
    COL(samples, bp_sp, I32, OPT) \
    COL(samples, insn_off, I16, OPT) \
    COL(samples, base_reg, U8, OPT) \
    COL(samples, index_reg, U8, OPT) \
    COL(samples, base_off, I32, OPT)

/* One row per page fault (first touch). */
#define NMP_TABLE_faults(COL) \
    COL(faults, time, U64, REQ) \
    COL(faults, pid, U32, REQ) \
    COL(faults, tid, U32, REQ) \
    COL(faults, cpu, U16, REQ) \
    COL(faults, ip, U64, REQ) \
    COL(faults, addr, U64, REQ) \
    COL(faults, flags, U8, OPT) \
    COL(faults, source, U8, OPT) \
    COL(faults, page_size, U32, OPT) \
    COL(faults, run, U32, OPT) \
    COL(faults, stride, U32, OPT) \
    COL(faults, span, U32, OPT)

/* The node of a page, queried with move_pages(2) while the program runs. */
#define NMP_TABLE_page_nodes(COL) \
    COL(page_nodes, time, U64, REQ) \
    COL(page_nodes, pid, U32, REQ) \
    COL(page_nodes, page, U64, REQ) \
    COL(page_nodes, node, I16, REQ)

#define NMP_TABLE_mappings(COL) \
    COL(mappings, time, U64, REQ) \
    COL(mappings, pid, U32, REQ) \
    COL(mappings, start, U64, REQ) \
    COL(mappings, len, U64, REQ) \
    COL(mappings, pgoff, U64, REQ) \
    COL(mappings, prot, U32, OPT) \
    COL(mappings, flags, U32, OPT) \
    COL(mappings, path, STR, REQ)

#define NMP_TABLE_threads(COL) \
    COL(threads, pid, U32, REQ) \
    COL(threads, tid, U32, REQ) \
    COL(threads, ppid, U32, OPT) \
    COL(threads, start_time, U64, OPT) \
    COL(threads, end_time, U64, OPT) \
    COL(threads, comm, STR, OPT) \
    COL(threads, affinity_first, STR, OPT) \
    COL(threads, affinity_last, STR, OPT) \
    COL(threads, samples, U64, OPT) \
    COL(threads, tls_base, U64, OPT)

/* Tracked heap allocations (from the allocation shim's records; attaching, from the heap),
 * and a sample of the smaller ones (sample_period > 0).  A row with extent > 0 is a
 * summary of `instances` short-lived blocks of one site (addr: the lowest, extent: from
 * there to the end of the highest, size: the largest, lifetime: their lifetimes' sum in
 * ns), not matched to samples by address. */
#define NMP_TABLE_objects(COL) \
    COL(objects, time, U64, REQ) \
    COL(objects, free_time, U64, OPT) \
    COL(objects, pid, U32, REQ) \
    COL(objects, tid, U32, OPT) \
    COL(objects, addr, U64, REQ) \
    COL(objects, size, U64, REQ) \
    COL(objects, kind, U8, OPT) \
    COL(objects, stack, U32, OPT) \
    COL(objects, prev, U64, OPT) \
    COL(objects, holder, STR, OPT) \
    COL(objects, sample_period, U32, OPT) \
    COL(objects, instances, U32, OPT) \
    COL(objects, lifetime, U64, OPT) \
    COL(objects, extent, U64, OPT)

/* Where the kernel put the pages of a tracked allocation, asked with move_pages(2) by the
 * allocation shim when the program releases it (source 1) or at process exit (source 2):
 * one row per node holding some of the pages queried, node -1 for pages not present (never
 * touched, or swapped out).  Objects of more than a few thousand pages are sampled at an
 * even stride: `sampled` of the object's `pages` were asked.  `policy` is the memory
 * policy in effect (get_mempolicy(2) MPOL_F_ADDR on up to 4 pages spread over the object:
 * the first mode other than the default, else the thread's; 0 default, 1 preferred,
 * 2 bind, 3 interleave, 4 local, ...; 255 unknown, and always on a machine of one memory
 * node, where no policy places anything), `mixed` 1 when those pages do not all have the
 * same policy and nodes (numaprof_place's bind_block).  The rows count the pages per
 * node and `segment`: the object cut into NMP_OBJECT_PAGES_SEGMENTS equal parts in
 * address order, 0 the first (profiles before it have one row per node and no such
 * column). */
#define NMP_OBJECT_PAGES_SEGMENTS 16
#define NMP_TABLE_object_pages(COL) \
    COL(object_pages, time, U64, REQ) \
    COL(object_pages, pid, U32, REQ) \
    COL(object_pages, addr, U64, REQ) \
    COL(object_pages, source, U8, REQ) \
    COL(object_pages, pages, U64, REQ) \
    COL(object_pages, sampled, U64, REQ) \
    COL(object_pages, node, I16, REQ) \
    COL(object_pages, count, U64, REQ) \
    COL(object_pages, policy, U8, OPT) \
    COL(object_pages, mixed, U8, OPT) \
    COL(object_pages, segment, U8, OPT)

/* The call stacks of the allocations, one row per frame. */
#define NMP_TABLE_stack_frames(COL) \
    COL(stack_frames, stack, U32, REQ) \
    COL(stack_frames, depth, U16, REQ) \
    COL(stack_frames, ip, U64, REQ)

/* The static TLS block of each module loaded with a process that has one (a shared
 * library's thread-local variables): at `offset` below every thread's pointer
 * (threads.tls_base); `base` is the module's load address.  From the allocation shim. */
#define NMP_TABLE_tls_modules(COL) \
    COL(tls_modules, pid, U32, REQ) \
    COL(tls_modules, base, U64, REQ) \
    COL(tls_modules, offset, U64, REQ)

/* Node-level counters, read before (phase 0) and after (phase 1) the run. */
#define NMP_TABLE_counters(COL) \
    COL(counters, time, U64, REQ) \
    COL(counters, phase, U8, REQ) \
    COL(counters, node, I16, REQ) \
    COL(counters, name, STR, REQ) \
    COL(counters, value, U64, REQ)

#define NMP_TABLES(T) \
    T(samples) \
    T(faults) \
    T(page_nodes) \
    T(mappings) \
    T(threads) \
    T(objects) \
    T(object_pages) \
    T(stack_frames) \
    T(tls_modules) \
    T(counters)

/* The rules of samples.rule: how a sample's data address was found, or why it was not
 * (docs/profile-format.md, docs/backends.md).  R(<ENUM>, <name>, <value>): the C constant
 * NMP_RULE_<ENUM>, the name collector.json and the analyzer count it under, the value in
 * the u8 column.  In ascending order of value (collector.json lists them in this order);
 * a value is never reused for another meaning (profiles keep it). */
#define NMP_SAMPLE_RULES(R) \
    R(NO_MEM, no_mem, 0) \
    R(AT_IP, at_ip, 1) \
    R(SKID, skid, 2) \
    R(HW, hw, 3) \
    R(UNREADABLE, unreadable, 10) \
    R(UNDECODABLE, undecodable, 11) \
    R(SEGMENT, segment, 12) \
    R(KERNEL, kernel, 13) \
    R(VSIB, vsib, 14) \
    R(CLOBBERED, clobbered, 15) \
    R(SPIN, spin, 16) \
    R(SKID_PATH, skid_path, 17) \
    R(SKID_LOOP, skid_loop, 18) \
    R(VSIB_BASE, vsib_base, 19) \
    R(DIVIDE, divide, 20)

#endif
