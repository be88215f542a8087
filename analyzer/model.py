"""Plain result objects the analyzer returns and the recommender and renderers consume.

Nothing here prints or computes beyond trivial derived values; see docs/analyzer.md and docs/report-json.md for the
meaning of each field.  Arrays are numpy arrays; `to_json` helpers live with the renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Node:
    id: int
    cpus: tuple[int, ...]
    memory_bytes: int


@dataclass(frozen=True)
class Topology:
    """Machine topology: NUMA nodes and the SLIT distance matrix (row = from, col = to)."""

    nodes: tuple[Node, ...]
    distances: np.ndarray  # (N, N) SLIT units, 10 = local
    source: str = "hwloc"
    name: str = ""  # preset or file name when it is a --target
    page_size: int = 4096
    # (N, N) measured latency(i, j) / latency(i, i) from `numaprof topology --measure`
    # (analyzer/measure.py apply_measured); numa_factor() prefers it when present.
    measured_factor: np.ndarray | None = None
    # (N,) local memory bandwidth per node in GB/s (NaN: unknown), from the measured triad
    # (apply_measured) or hwloc memory attributes (recommender/targets.py); None: unknown.
    node_bandwidth: np.ndarray | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)

    def numa_factor(self) -> np.ndarray:
        """The measured latency ratio when present, else the SLIT ratio (docs/measure.md)."""
        if self.measured_factor is not None:
            return np.asarray(self.measured_factor, dtype=float)
        return self.slit_factor()

    def slit_factor(self) -> np.ndarray:
        """distance(i, j) / distance(i, i) per node pair (docs/analyzer.md)."""
        d = np.asarray(self.distances, dtype=float)
        return d / np.diag(d)[:, None]

    def node_of_cpu(self) -> dict[int, int]:
        return {c: n.id for n in self.nodes for c in n.cpus}


@dataclass
class FirstTouch:
    threads: int  # distinct threads that placed pages of the object
    nodes: list[int]  # nodes those pages were placed from
    master_fraction: float  # share of first-touched pages placed by the top thread
    master_tid: int | None
    sites: list[str]  # source lines that touched first, most pages first
    pages: int  # pages with a recorded or inferred first touch
    serial: bool  # master_fraction >= 0.9 with >= 2 threads in the program
    inferred_pages: int = 0  # of `pages`, inferred from recorded neighbours (fault period > 1)
    huge_pages: int = 0  # of `pages`, placed by faults that mapped a huge page
    huge_page_size: int = 0  # bytes of those huge pages (0: none)


@dataclass
class ObjectAccess:
    """The measured access distribution of one object, for the recommender's simulation.

    One entry per attributed sample.  `thread` indexes `Analysis.threads`.
    """

    page: np.ndarray  # int64 page index inside the object (0-based)
    thread: np.ndarray  # int32 index into Analysis.threads
    weight: np.ndarray  # float64 (1.0 or latency)
    write: np.ndarray  # bool: store or read-modify-write
    n_pages: int
    time: np.ndarray | None = None  # int64 ns since the start of the run, per sample


@dataclass
class Phase:
    start: int  # ns, relative to the start of the run
    end: int
    pattern: str
    parallel: bool  # more than one thread accessed the object in this phase
    samples: int


# Where an object's pages by node came from, in words (report text, JSON "pages_source").
PAGES_SOURCES = {
    "numa_maps": "numa_maps at exit",
    "move_pages_at_exit": "move_pages at exit",
    "move_pages_at_free": "move_pages at free",
    "move_pages": "move_pages of sampled pages",
    "first_touch": "inferred from first touch",
    "none": "not located",
}

# A memory policy the kernel reports on pages that places them (not the default, nor
# "local", which is the default's placement).
PLACING_POLICIES = ("preferred", "bind", "interleave", "preferred_many", "weighted_interleave")


@dataclass
class ObjectResult:
    name: str
    site: str  # func@file:line of the allocation, or the symbol's section for statics
    kind: str  # heap | static | stack | mapping
    address: int
    size: int
    samples: int
    share: float
    pattern: str  # regular | irregular | random | unknown
    pattern_confidence: float
    reads: float  # fraction of samples that are loads
    writes: float  # fraction of samples that are stores or read-modify-writes
    rmw: float
    first_touch: FirstTouch
    pages_by_node: list[int]
    traffic: np.ndarray  # (N, N) from thread node i to memory node j
    local_fraction: float
    load_per_node: list[float]
    imbalance: float
    count: int = 1  # allocations grouped into this object (same call stack)
    threads: int = 0  # threads that accessed it
    phases: list[Phase] = field(default_factory=list)
    features: dict[str, float] = field(default_factory=dict)
    access: ObjectAccess | None = None
    unplaced_samples: int = 0  # samples whose page node is unknown (left out of traffic)
    inferred_samples: int = 0  # samples whose page node was taken from the page's first touch
    # where pages_by_node comes from (PAGES_SOURCES): numa_maps | move_pages_at_exit |
    # move_pages_at_free | move_pages (the sampled pages, while running) | first_touch
    # (inferred from the toucher's node) | none
    pages_source: str = ""
    # the memory policy the kernel reported on the object's pages (get_mempolicy at free or
    # exit): default | preferred | bind | interleave | local | preferred_many |
    # weighted_interleave, "" unknown; pages_policy_mixed: not the same one throughout
    pages_policy: str = ""
    pages_policy_mixed: bool = False
    # when the first allocation of a heap object was made (the profile's clock, ns; 0 for
    # other kinds): the allocation order `report --diff` pairs objects of one site by
    alloc_time: int = 0
    # of `samples`, gathers and scatters charged by their base register (rule vsib_base):
    # in the samples and the share, not in the pattern, pages, traffic or read/write mix
    gather_samples: int = 0
    # pattern unknown for want of samples: how many more it needs; a tentative pattern: how
    # many more make it firm
    samples_needed: int = 0
    # random or irregular on fewer samples than tell the two apart (classifier.tentative)
    pattern_tentative: bool = False
    # how the samples were tied to the object: address (an allocation, a symbol, a
    # mapping), frame (a local in the sampled frame), register (a pointer variable in the
    # access's base register), type (a type and member); docs/report-json.md
    attribution: str = "address"
    # every instance (count) is accessed only by the thread whose stack frame holds it:
    # always local to that thread, whatever the placement policy
    thread_private: bool = False
    # the read-only data of a loaded ELF file (the compiler's constants and literals in
    # its .rodata): page-cache pages, read from every core's caches; nothing to place
    read_only: bool = False
    pid: int = 0  # the process whose object it is (a profile may hold several: mpirun)
    # the source lines whose code accessed it most ("function@file:line", samples), most
    # first: where in the program the array is read and written
    access_sites: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class ThreadResult:
    tid: int
    pid: int
    comm: str
    samples: int
    cpus: list[int]
    nodes: list[int]  # nodes it ran on, most samples first
    node: int  # main node (most samples)
    migrations: int  # node changes seen between consecutive samples
    bound: bool  # affinity mask narrower than the machine
    affinity: str
    shares_core_with: list[int] = field(default_factory=list)
    # thread → node map over time: (ns since the run's first sample, node) at the first
    # sample and at every node change (at most 1000 entries)
    timeline: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class ProfileInfo:
    path: str
    command: list[str]
    backend: str
    backend_reason: dict[str, str]
    samples: int
    with_address: int
    address_coverage: float
    lost: int
    unresolved: int
    outside_objects: int
    complete: bool
    incomplete_reason: str | None
    exit_status: int | None
    duration_s: float
    env: dict[str, str]
    freq: int
    rules: dict[str, int] = field(default_factory=dict)  # samples per address rule (at_ip, skid, ...)
    faults: int = 0  # rows of the faults table
    throttled: int = 0
    host: str = ""  # hostname of the recording machine ("" in profiles before it was kept)
    numaprof_own: int = 0  # samples with an address that were numaprof's own work (not objects)
    # samples with an address that were an OpenMP runtime's work on its own state (not objects)
    runtime_samples: int = 0
    # ... a system library's (libc, libm) work on its own data (analyzer/libstate.py)
    library_samples: int = 0
    # ... the compiler's literal constants read at fixed addresses (analyzer/constants.py)
    constant_samples: int = 0
    # gathers and scatters with their base register's address (rule vsib_base): an object
    # but no element; not in with_address
    gather_samples: int = 0
    attached_pid: int | None = None  # the process recorded by `-p` (and each slice of a run in slices)


@dataclass
class NodeCounters:
    """A node's counters over the run (analyzer/counters.py): memory-controller bytes where
    the hardware has them, and the kernel's numastat deltas (machine-wide)."""

    node: int
    seconds: float
    dram_bytes: float | None = None  # read + write bytes at the node's memory controllers
    bandwidth_gbs: float | None = None  # dram_bytes / seconds
    peak_gbs: float | None = None  # measured local bandwidth (numaprof topology --measure)
    numastat: dict[str, int] = field(default_factory=dict)  # numa_hit, numa_miss, ... (pages)


@dataclass
class Analysis:
    profile: ProfileInfo
    topology: Topology
    objects: list[ObjectResult]
    threads: list[ThreadResult]
    traffic: np.ndarray
    local_fraction: float
    load_per_node: list[float]
    imbalance: float
    findings: list[str] = field(default_factory=list)  # thread placement findings, plain sentences
    node_counters: list[NodeCounters] = field(default_factory=list)
    # cache lines accessed by several threads with writes (analyzer/sharing.py)
    sharing: list = field(default_factory=list)
