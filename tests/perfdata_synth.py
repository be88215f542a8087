"""Builds a `perf mem record`-style perf.data file byte by byte, from the documented format
(linux tools/perf/Documentation/perf.data-file-format.txt; record layouts from
include/uapi/linux/perf_event.h): header, one attr with
sample_type IP|TID|TIME|ADDR|CPU|PERIOD|WEIGHT|DATA_SRC, MMAP2 records of a real ELF
file's PT_LOAD segments, COMM records and samples whose data addresses fall in that
file's static arrays.  perf itself must read it back.
"""

from __future__ import annotations

import struct
from pathlib import Path

PERF_RECORD_MMAP2, PERF_RECORD_COMM, PERF_RECORD_SAMPLE = 10, 3, 9
MISC_USER = 2
IP, TID, TIME, ADDR, CPU, PERIOD, WEIGHT, DATA_SRC = (1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 7,
                                                      1 << 8, 1 << 14, 1 << 15)
SAMPLE_TYPE = IP | TID | TIME | ADDR | CPU | PERIOD | WEIGHT | DATA_SRC
# SKL DSE 0x0a: load from local DRAM (test vector of shared/hw-sampling.md §2).
DATA_SRC_LOCAL_DRAM_LOAD = 0x11A68201042


IDENTIFIER = 1 << 16
FORMAT_ID, FORMAT_LOST = 1 << 2, 1 << 4
PERF_RECORD_LOST, PERF_RECORD_LOST_SAMPLES = 2, 13


def _attr(config: int, sample_type: int = SAMPLE_TYPE, read_format: int = 0) -> bytes:
    """struct perf_event_attr, PERF_ATTR_SIZE_VER5 (112 bytes)."""
    flags = (1 << 8) | (1 << 9) | (1 << 23) | (2 << 15)  # mmap, comm, mmap2, precise_ip=2
    return struct.pack("<IIQQQQQIIQQQQIiQIHH", 4, 112, config, 4000, sample_type, read_format,
                       flags, 0, 0, 30, 0, 0, 0, 0, 0, 0, 0, 0, 0)


def _record(rtype: int, body: bytes, misc: int = MISC_USER) -> bytes:
    return struct.pack("<IHH", rtype, misc, 8 + len(body)) + body


def _padded(s: str) -> bytes:
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 8)


def mmap2(pid: int, tid: int, addr: int, length: int, pgoff: int, prot: int, path: str) -> bytes:
    body = struct.pack("<IIQQQIIQQII", pid, tid, addr, length, pgoff, 0, 0, 0, 0, prot, 2)
    return _record(PERF_RECORD_MMAP2, body + _padded(path))


def comm(pid: int, tid: int, name: str) -> bytes:
    return _record(PERF_RECORD_COMM, struct.pack("<II", pid, tid) + _padded(name))


def sample(ip: int, pid: int, tid: int, time: int, addr: int, cpu: int, weight: int,
           data_src: int) -> bytes:
    body = struct.pack("<QIIQQIIQQQ", ip, pid, tid, time, addr, cpu, 0, 4000, weight, data_src)
    return _record(PERF_RECORD_SAMPLE, body)


def sample_ident(event_id: int, ip: int, pid: int, tid: int, time: int, addr: int, cpu: int,
                 weight: int, data_src: int) -> bytes:
    """A sample of an attr whose sample_type is SAMPLE_TYPE | IDENTIFIER (the event's id
    first, so perf can tell the events of one file apart)."""
    return _record(PERF_RECORD_SAMPLE, struct.pack("<Q", event_id) + sample(
        ip, pid, tid, time, addr, cpu, weight, data_src)[8:])


def lost(event_id: int, count: int) -> bytes:
    """PERF_RECORD_LOST: records the kernel's ring buffer dropped."""
    return _record(PERF_RECORD_LOST, struct.pack("<QQ", event_id, count))


def lost_samples(count: int) -> bytes:
    """PERF_RECORD_LOST_SAMPLES: samples of one event that were lost."""
    return _record(PERF_RECORD_LOST_SAMPLES, struct.pack("<Q", count))


def write(path: Path, records: list[bytes], config: int = 0x1CD,
          attrs: list[tuple[bytes, int]] | None = None) -> None:
    """Writes header + attrs (+ ids) + data; `attrs` is [(attr bytes, event id)], by
    default one attr of `config` with id 1."""
    header_size = 104
    attrs = attrs or [(_attr(config), 1)]
    attr_size = len(attrs[0][0]) + 16
    attr_off = header_size
    ids_off = attr_off + attr_size * len(attrs)
    entries = b"".join(a + struct.pack("<QQ", ids_off + 8 * i, 8)
                       for i, (a, _) in enumerate(attrs))
    ids = b"".join(struct.pack("<Q", event_id) for _, event_id in attrs)
    data_off = ids_off + len(ids)
    data = b"".join(records)
    header = (b"PERFILE2" + struct.pack("<QQ", header_size, attr_size)
              + struct.pack("<QQ", attr_off, len(entries))
              + struct.pack("<QQ", data_off, len(data))
              + struct.pack("<QQ", 0, 0) + b"\0" * 32)
    assert len(header) == header_size
    path.write_bytes(header + entries + ids + data)


def load_segments(elf_path: Path):
    """(p_offset, p_vaddr, p_memsz, prot) of each PT_LOAD of an ELF file."""
    from elftools.elf.elffile import ELFFile

    with open(elf_path, "rb") as f:
        elf = ELFFile(f)
        out = []
        for seg in elf.iter_segments():
            if seg["p_type"] == "PT_LOAD":
                flags = seg["p_flags"]
                prot = (1 if flags & 4 else 0) | (2 if flags & 2 else 0) | (4 if flags & 1 else 0)
                out.append((seg["p_offset"], seg["p_vaddr"], seg["p_memsz"], prot))
        syms = {}
        symtab = elf.get_section_by_name(".symtab")
        for s in symtab.iter_symbols():
            if s["st_info"]["type"] == "STT_OBJECT" and s["st_size"] > 0:
                syms[s.name] = (s["st_value"], s["st_size"])
        return out, syms
