"""A fuzzer for the profile reader: damaged and hostile profiles through `report` and `suggest`.

Each case copies a seed profile (tests/data/fuzz-seed/), applies one to three mutations
(truncations, bit flips, deleted or swapped files, values of the wrong JSON type, huge
counts, hostile strings, special files in place of profile files, archive entries that
point outside the profile) and runs one command on it: `report` (text, json, html),
`suggest` (text, json), `topology --profile` or `report --diff`.

The command runs in-process in a forked child of this process (everything is imported
once, so a case costs the command's own work, not Python's start-up), with its stdout
and stderr in files, under a per-case timeout.  The outcome is classified:

* ``ok``        exit 0;
* ``refused``   exit 2 with one line ``numaprof: ...`` that names the profile;
* ``internal``  exit 70 (``numaprof: internal error``) or an exception out of main();
* ``unclean``   any other exit status, or stderr that is not one ``numaprof:`` line;
* ``control``   a control character (ESC, ...) in a text output or on stderr;
* ``escaped``   a file outside the profile was opened (inotify on a canary directory);
* ``hang``      still running at the timeout (killed);
* ``crash``     killed by a signal;
* ``memory``    peak RSS above the bound.

The first two pass; every other one is a failure.  `run()` returns the tallies and the
failures; tests/test_profile_fuzz.py runs a seeded, bounded set in `make test`, and
bench/fuzz_profiles.py a longer one.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import stat
import struct
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SEEDS = Path(__file__).resolve().parent / "data" / "fuzz-seed"
PASS = ("ok", "refused")
# Control characters a terminal acts on: C0 except newline and tab, DEL, C1.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")
ESCAPES = ["\x1b[2J\x1b[H", "\x1b]0;owned\x07", "\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\",
           "\x9b31m", "a\rb", "\x08\x08\x08", "\x00nul", "\x7f"]


# --------------------------------------------------------------------------- mutations

def _files(d: Path, small: bool = False) -> list[Path]:
    """Regular files of a profile; ``small``: only those a mutation may read whole (an
    earlier mutation may have made one sparse and huge)."""
    return sorted(p for p in d.rglob("*") if p.is_file() and not p.is_symlink()
                  and (not small or p.stat().st_size <= 16 << 20))


def _pick(rng: random.Random, items):
    return items[rng.randrange(len(items))]


def m_truncate(rng, d, _out):
    f = _pick(rng, _files(d))
    size = f.stat().st_size
    new = _pick(rng, [0, 1, 8, 15, 16, 17, max(size - 1, 0), rng.randrange(size + 1)])
    os.truncate(f, min(new, size))
    return f"truncate {f.relative_to(d)} to {min(new, size)}"


def m_bitflip(rng, d, _out):
    f = _pick(rng, _files(d, small=True))
    data = bytearray(f.read_bytes())
    if not data:
        return f"bitflip {f.relative_to(d)} (empty)"
    n = rng.randint(1, 16)
    for _ in range(n):
        pos = rng.randrange(min(len(data), 64)) if rng.random() < 0.3 else rng.randrange(len(data))
        data[pos] ^= 1 << rng.randrange(8)
    f.write_bytes(bytes(data))
    return f"bitflip {f.relative_to(d)} x{n}"


def m_delete(rng, d, _out):
    choices = _files(d) + ([d / "archive"] if (d / "archive").is_dir() else [])
    f = _pick(rng, choices)
    if f.is_dir():
        shutil.rmtree(f)
    else:
        f.unlink()
    return f"delete {f.relative_to(d)}"


def m_swap(rng, d, _out):
    files = _files(d)
    a, b = _pick(rng, files), _pick(rng, files)
    tmp = a.with_name(a.name + ".swap")
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    return f"swap {a.relative_to(d)} {b.relative_to(d)}"


def _deep(n: int) -> str:
    return "[" * n + "]" * n


def _hostile(rng):
    return _pick(rng, [
        None, True, False, 0, -1, 1, 2**31, 2**63, 2**64 + 5, -(2**63), 10**30, 1.5, -0.0,
        float("nan"), float("inf"), float("-inf"), "", "x", _pick(rng, ESCAPES),
        "../../../../outside/x.c", "/dev/zero", "9" * 400, [], [1, 2], {}, {"a": 1},
        [[[[[]]]]], {"id": 99999999}, "\ud800",
    ])


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:50]):
            yield from _paths(v, (*prefix, i))


def _json_files(d):
    return [p for p in (d / "manifest.json", d / "topology.json", d / "archive.json",
                        d / "sources.json") if p in _files(d, small=True)]


def _load(p):
    try:
        return json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _dump(p, doc):
    p.write_text(json.dumps(doc, ensure_ascii=False), errors="surrogatepass")


def m_json_type(rng, d, _out):
    files = _json_files(d)
    if not files:
        return "json_type (no json)"
    f = _pick(rng, files)
    doc = _load(f)
    if doc is None:
        return f"json_type {f.name} (unreadable)"
    path = _pick(rng, list(_paths(doc)))
    value = _hostile(rng)
    if not path:
        doc = value
    else:
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = value
    _dump(f, doc)
    return f"json_type {f.name} {'/'.join(map(str, path))} = {value!r:.40}"


def m_json_encoding(rng, d, _out):
    files = _json_files(d)
    if not files:
        return "json_encoding (no json)"
    f = _pick(rng, files)
    text = f.read_bytes().decode("utf-8", "replace")
    kind = _pick(rng, ["utf-16", "utf-32", "bom", "latin1-bytes", "deep", "deep-dict", "nan",
                       "huge-int", "dup-keys", "empty", "bare-string"])
    if kind in ("utf-16", "utf-32"):
        f.write_bytes(text.encode(kind))
    elif kind == "bom":
        f.write_bytes(b"\xef\xbb\xbf" + text.encode())
    elif kind == "latin1-bytes":
        f.write_bytes(text.encode().replace(b'"', b'"\xff\xfe', 1))
    elif kind == "deep":
        f.write_text(_deep(rng.choice([200, 5000, 100000])))
    elif kind == "deep-dict":
        n = rng.choice([1000, 50000])
        f.write_text('{"format": ' * n + "1" + "}" * n)
    elif kind == "nan":
        f.write_text(text.replace("0", "NaN", 1).replace("1", "Infinity", 1))
    elif kind == "huge-int":
        f.write_text(re.sub(r"\d+", "9" * 5000, text, count=3))
    elif kind == "dup-keys":
        f.write_text(text.replace("{", '{"format": 1, ', 1))
    elif kind == "empty":
        f.write_text("")
    else:
        f.write_text('"numaprof.profile"')
    return f"json_encoding {f.name} {kind}"


def _topology_doc(rng):
    kind = _pick(rng, ["many-nodes", "big-node-id", "big-cpu", "many-cpus", "page-size",
                       "distances", "mismatch"])
    nodes = [{"id": 0, "cpus": [0, 1], "memory_bytes": 1 << 30}]
    dist = [[10]]
    page = 4096
    if kind == "many-nodes":
        n = rng.choice([1025, 3000, 20000])
        nodes = [{"id": i, "cpus": [i], "memory_bytes": 1} for i in range(n)]
        dist = [[10 if i == j else 20 for j in range(n)] for i in range(n)] if n <= 3000 else [[10]]
    elif kind == "big-node-id":
        nodes = [{"id": 0, "cpus": [0]}, {"id": rng.choice([99999999, 2**40, -5, 32767]), "cpus": [1]}]
        dist = [[10, 20], [20, 10]]
    elif kind == "big-cpu":
        nodes = [{"id": 0, "cpus": [0, rng.choice([2**40, 10**8, 65535, 65536, -1])]}]
    elif kind == "many-cpus":
        nodes = [{"id": 0, "cpus": list(range(rng.choice([70000, 500000])))}]
    elif kind == "page-size":
        page = rng.choice([0, -4096, 3, 2**62, 1 << 40, 4095, "4096"])
    elif kind == "distances":
        nodes = [{"id": 0, "cpus": [0]}, {"id": 1, "cpus": [1]}]
        dist = _pick(rng, [[[10, float("nan")], [20, 10]], [[10, -20], [20, 10]],
                           [[10, 1e308], [1e308, 10]], [[0, 20], [20, 0]], [[10, 20]],
                           [[10, "x"], [20, 10]]])
    else:
        nodes = [{"id": 0, "cpus": [0]}, {"id": 0, "cpus": [1]}]
        dist = [[10, 20], [20, 10]]
    return kind, {"source": "fuzz", "nodes": nodes, "distances": dist, "page_size": page}


def m_huge_topology(rng, d, _out):
    if rng.random() < 0.6:
        kind, doc = _topology_doc(rng)
        (d / "topology.json").write_text(json.dumps(doc))
        return f"topology.json {kind}"
    (d / "topology.json").unlink(missing_ok=True)
    kind = _pick(rng, ["many-numa", "wide-cpuset", "deep", "entities", "distances2", "bad-index"])
    if kind == "many-numa":
        n = rng.choice([1025, 3000])
        objs = "".join(f'<object type="NUMANode" os_index="{i}" cpuset="0x1" local_memory="1"/>'
                       for i in range(n))
        xml = f'<?xml version="1.0"?><topology version="2.0"><object type="Machine">{objs}</object></topology>'
    elif kind == "wide-cpuset":
        cs = ",".join(["0xffffffff"] * rng.choice([3000, 100000]))
        xml = (f'<topology version="2.0"><object type="Machine"><object type="NUMANode" '
               f'os_index="0" cpuset="{cs}"/></object></topology>')
    elif kind == "deep":
        n = rng.choice([1000, 100000])
        xml = "<topology>" + '<object type="Group">' * n + "</object>" * n + "</topology>"
    elif kind == "entities":
        xml = ('<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaaaaaaaa">'
               + "".join(f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in
                         zip("abcdefgh", "bcdefghi", strict=True))
               + ']><topology><object type="Machine" name="&i;"/></topology>')
    elif kind == "distances2":
        k = rng.choice([2, 3000])
        xml = ('<topology version="2.0"><object type="Machine">'
               '<object type="NUMANode" os_index="0" cpuset="0x1"/>'
               '<object type="NUMANode" os_index="1" cpuset="0x2"/></object>'
               f'<distances2 type="NUMANode" nbobjs="{k}" kind="5" name="NUMALatency" '
               'indexing="os"><indexes length="3">0 1</indexes>'
               '<u64values length="12">10 20 20 10</u64values></distances2></topology>')
    else:
        xml = ('<topology><object type="Machine"><object type="NUMANode" os_index="x" '
               'cpuset="0xzz" local_memory="-1"/><object type="PU" os_index="99999999999"/>'
               '</object></topology>')
    (d / "topology.xml").write_text(xml)
    return f"topology.xml {kind}"


_EXTREMES = {1: [0, 0xFF, 0x7F], 2: [0, 0xFFFF, 0x7FFF, 0x8000], 4: [0, 0xFFFFFFFF, 0x7FFFFFFF],
             8: [0, 2**64 - 1, 2**63, 2**63 - 1, 2**47, 1 << 40]}


def m_column_values(rng, d, _out):
    cols = [p for p in _files(d, small=True) if p.suffix == ".col" and p.stat().st_size > 16]
    if not cols:
        return "column_values (none)"
    f = _pick(rng, cols)
    head = f.read_bytes()[:16]
    try:
        itemsize = int(head[10:11].decode())
    except ValueError:
        return f"column_values {f.name} (bad header)"
    data = bytearray(f.read_bytes())
    n = (len(data) - 16) // itemsize
    if n <= 0:
        return f"column_values {f.name} (empty)"
    rows = range(n) if rng.random() < 0.3 else [rng.randrange(n) for _ in range(rng.randint(1, 8))]
    value = _pick(rng, _EXTREMES.get(itemsize, [0])) if rng.random() < 0.8 else None
    for r in rows:
        v = value if value is not None else rng.getrandbits(8 * itemsize)
        data[16 + r * itemsize : 16 + (r + 1) * itemsize] = v.to_bytes(itemsize, "little")
    f.write_bytes(bytes(data))
    return f"column_values {f.name} {len(rows)} rows = {value}"


def m_column_header(rng, d, _out):
    cols = list(d.glob("*.col"))
    if not cols:
        return "column_header (none)"
    f = _pick(rng, cols)
    new = _pick(rng, [b"|u1", b"<u2", b"<u4", b"<u8", b"<i2", b"<i8", b"<f8", b"<f4", b"|O",
                      b"<U9", b"<c16", b"V8", b"\xff\xfe", b""])
    with open(f, "r+b") as fh:
        fh.seek(8)
        fh.write(new.ljust(8, b"\0")[:8])
    return f"column_header {f.name} dtype {new!r}"


def m_sparse(rng, d, _out):
    tables = sorted({p.name.split(".")[0] for p in d.glob("*.col")})
    if not tables:
        return "sparse (none)"
    t = _pick(rng, tables)
    size = _pick(rng, [1 << 31, 1 << 36, 1 << 44])
    files = list(d.glob(f"{t}.*.col")) + (list(d.glob(f"{t}.*.heap")) if rng.random() < 0.5 else [])
    for f in files:
        os.truncate(f, size)
    return f"sparse {t} to {size}"


def m_special(rng, d, out):
    files = _files(d)
    f = _pick(rng, files)
    kind = _pick(rng, ["fifo", "zero", "urandom", "loop", "outside", "dir", "dangling", "self"])
    f.unlink()
    if kind == "fifo":
        os.mkfifo(f)
    elif kind == "zero":
        f.symlink_to("/dev/zero")
    elif kind == "urandom":
        f.symlink_to("/dev/urandom")
    elif kind == "loop":
        other = f.with_name(f.name + ".loop")
        f.symlink_to(other.name)
        other.symlink_to(f.name)
    elif kind == "outside":
        f.symlink_to(out / "secret")
    elif kind == "dir":
        f.mkdir()
    elif kind == "dangling":
        f.symlink_to("/nonexistent/numaprof-fuzz")
    else:
        f.symlink_to(f.name)
    if rng.random() < 0.2 and kind in ("fifo", "zero", "outside"):
        # the whole profile directory's manifest too
        m = d / "manifest.json"
        if m.is_file() and m != f:
            m.unlink()
            if kind == "fifo":
                os.mkfifo(m)
            else:
                m.symlink_to("/dev/zero" if kind == "zero" else out / "secret")
    return f"special {f.relative_to(d)} {kind}"


def m_archive(rng, d, out):
    doc = _load(d / "archive.json") if d / "archive.json" in _json_files(d) else None
    if not isinstance(doc, dict):
        doc = {"binaries": {}, "sources": {}, "skipped": []}
    kind = _pick(rng, ["dotdot", "absolute", "dir-symlink", "copy-symlink", "bad-digest",
                       "sources-json", "many"])
    group = _pick(rng, ["binaries", "sources"])
    entries = doc.setdefault(group, {}) if isinstance(doc.get(group), dict) else {}
    doc[group] = entries
    key = next(iter(entries), "/tmp/x.c")
    if kind == "dotdot":
        entries[key] = "../" * rng.randint(1, 6) + "outside/secret"
    elif kind == "absolute":
        entries[key] = str(out / "secret")
    elif kind == "dir-symlink":
        shutil.rmtree(d / "archive", ignore_errors=True)
        (d / "archive").symlink_to(out)
        for k in list(entries):
            entries[k] = "secret"
    elif kind == "copy-symlink":
        (d / "archive").mkdir(exist_ok=True)
        digest = entries.get(key) if isinstance(entries.get(key), str) else "0" * 64
        target = d / "archive" / digest
        if target.is_file() or target.is_symlink():
            target.unlink()
        if "/" not in digest and digest not in ("", ".", ".."):
            target.symlink_to(out / "secret")
        entries[key] = digest
    elif kind == "bad-digest":
        entries[key] = _pick(rng, ["", ".", "..", "/", "a/b", "\x00", "x" * 5000, 12, None])
    elif kind == "sources-json":
        s = (_load(d / "sources.json") if d / "sources.json" in _json_files(d) else None) or {"schema": "numaprof.sources/1", "files": {}}
        if isinstance(s, dict):
            s["files"] = {str(out / "secret"): "0" * 64, "../../outside/secret": "1" * 64}
            _dump(d / "sources.json", s)
    else:
        for i in range(rng.choice([10, 100000])):
            entries[f"/src/{i}.c"] = "../outside/secret"
    _dump(d / "archive.json", doc)
    return f"archive {kind} {group}"


def m_strings(rng, d, _out):
    heaps = [p for p in _files(d, small=True) if p.suffix == ".heap"]
    if not heaps:
        return "strings (none)"
    f = _pick(rng, heaps)
    kind = _pick(rng, ["escape", "invalid-utf8", "long", "no-nul", "offsets", "empty"])
    data = f.read_bytes()
    if kind == "escape":
        data = _pick(rng, ESCAPES).encode("utf-8", "surrogatepass") + data
    elif kind == "invalid-utf8":
        data = b"\xff\xfe\xc3(" + data
    elif kind == "long":
        data = b"A" * rng.choice([70000, 5 << 20]) + data
    elif kind == "no-nul":
        data = data.replace(b"\0", b"/")
    elif kind == "empty":
        data = b""
    else:
        col = f.with_suffix(".col")
        if col.is_file() and 16 < col.stat().st_size <= 16 << 20:
            raw = bytearray(col.read_bytes())
            raw[16:24] = (2**64 - 1 if rng.random() < 0.5 else len(data) + 7).to_bytes(8, "little")
            col.write_bytes(bytes(raw))
    f.write_bytes(data)
    return f"strings {f.name} {kind}"


def m_text_escapes(rng, d, _out):
    m = _load(d / "manifest.json") if d / "manifest.json" in _json_files(d) else None
    if not isinstance(m, dict):
        return "text_escapes (no manifest)"
    esc = _pick(rng, ESCAPES)
    key = _pick(rng, ["command", "backend_reason", "incomplete_reason", "env", "host", "cwd",
                      "warnings", "backend"])
    if key == "command":
        m["command"] = [f"./app{esc}", f"--x={esc}"]
    elif key == "backend_reason":
        m["backend_reason"] = {"pebs": f"no{esc}", "ibs": esc, "soft": "selected"}
    elif key == "incomplete_reason":
        m["complete"] = False
        m["incomplete_reason"] = f"killed{esc}"
    elif key == "env":
        m["env"] = {f"OMP_{esc}": esc}
    elif key == "warnings":
        m["warnings"] = [f"warn{esc}"]
    else:
        m[key] = f"h{esc}"
    _dump(d / "manifest.json", m)
    return f"text_escapes manifest {key} {esc!r}"


def m_extra_files(rng, d, _out):
    kind = _pick(rng, ["unknown-col", "numa_maps", "numa_maps-big", "weird-names"])
    if kind == "unknown-col":
        (d / "samples.bogus.col").write_bytes(b"NMPCOL01<u8\0\0\0\0\0" + bytes(8))
    elif kind == "numa_maps":
        (d / "numa_maps.99999999999999999999").write_text("7f00 default N0=9999999999999 "
                                                          "kernelpagesize_kB=x\n")
        (d / "numa_maps.1").write_text("zz\n7f0000000000 default N99999999=1 N0=-1 "
                                       "kernelpagesize_kB=99999999999999999\n")
    elif kind == "numa_maps-big":
        nm = next(d.glob("numa_maps.*"), d / "numa_maps.4000")
        with open(nm, "w") as f:
            for i in range(rng.choice([1000, 200000])):
                f.write(f"{0x7f0000000000 + i * 4096:x} default anon=1 N{i % 64}=1 "
                        "kernelpagesize_kB=4\n")
    else:
        (d / "samples..col").write_bytes(b"NMPCOL01<u8\0\0\0\0\0")
        (d / "samples.time.col.heap").write_bytes(b"x")
        (d / "samples.x.y.col").write_bytes(b"junk")
    return f"extra_files {kind}"


def m_elf_strings(rng, d, _out):
    """Escape sequences in the names an archived binary gives: its DWARF file name and a
    symbol name (same length, so the ELF stays well-formed)."""
    copies = [p for p in _files(d, small=True) if p.parent.name == "archive"
              and p.read_bytes()[:4] == b"\x7fELF"]
    if not copies:
        return "elf_strings (no archived binary)"
    f = _pick(rng, copies)
    data = f.read_bytes()
    for old in (b"serial_init.c", b"main\0"):
        new = (b"\x1b[2J\x1b]0;ab\x07.c" if old.endswith(b".c") else b"\x1b[2J\0")[:len(old)]
        data = data.replace(old, new.ljust(len(old), b"x"))
    f.write_bytes(data)
    return f"elf_strings {f.name[:12]}"


MUTATIONS = [m_truncate, m_bitflip, m_delete, m_swap, m_json_type, m_json_encoding,
             m_huge_topology, m_column_values, m_column_header, m_sparse, m_special, m_archive,
             m_strings, m_text_escapes, m_extra_files, m_elf_strings]


# ------------------------------------------------------------------------------ commands

def _command(d: Path, case: Path, rng) -> list[str]:
    """One command on the profile ``d``, plain text twice as often as each other view."""
    html = case / "report.html"
    return _pick(rng, [
        ["report", str(d)],
        ["report", str(d)],
        ["report", str(d), "--format", "json"],
        ["report", str(d), "--format", "json", "--top", "3"],
        ["report", str(d), "--format", "html", "-o", str(html)],
        ["suggest", str(d)],
        ["suggest", str(d), "--target", "2s"],
        ["suggest", str(d), "--format", "json"],
        ["topology", "--profile", str(d)],
        ["report", "--diff", str(d), str(d)],
    ])


def _is_text(argv: list[str]) -> bool:
    return "--format" not in argv or argv[argv.index("--format") + 1] == "text"


# ------------------------------------------------------------------------------ inotify

class _Watch:
    """Opens of files in one directory, seen with inotify(7) (IN_OPEN)."""

    IN_OPEN, IN_ACCESS, IN_NONBLOCK = 0x20, 0x1, 0o4000

    def __init__(self, directory: Path):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(self.IN_NONBLOCK)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, str(directory).encode(),
                                                 self.IN_OPEN | self.IN_ACCESS) < 0:
            raise OSError(ctypes.get_errno(), "inotify")

    def events(self) -> list[str]:
        out, buf = [], b""
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            buf += chunk
        while len(buf) >= 16:
            _wd, _mask, _cookie, n = struct.unpack("iIII", buf[:16])
            out.append(buf[16 : 16 + n].rstrip(b"\0").decode(errors="replace"))
            buf = buf[16 + n :]
        return out

    def close(self):
        os.close(self.fd)


# ------------------------------------------------------------------------------- running

@dataclass
class Outcome:
    kind: str
    status: int | None
    stderr: str
    rss: int  # bytes
    seconds: float
    detail: str = ""


def _child(argv: list[str], out_path: Path, err_path: Path, as_limit: int, entry) -> None:
    """Runs `numaprof argv` (``entry(argv)``) in this (forked) process; never returns."""
    code = 99
    try:
        import faulthandler

        faulthandler.disable()  # a crash is this harness's to report, not pytest's
        for fd, p in ((1, out_path), (2, err_path)):
            f = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                      line_buffering=False)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      line_buffering=True)
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if entry is None:
            from numaprof.cli.main import main as entry
        try:
            entry(argv)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001 - an exception out of main(): a bug
        import traceback

        traceback.print_exc()
        code = 98
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        os._exit(code)


def run_forked(argv: list[str], case: Path, timeout: float, as_limit: int,
               entry=None) -> Outcome:
    """Runs one command in a forked child (``entry``: instead of numaprof's main, to test
    this harness); returns what happened, ``kind`` filled for a hang or a crash."""
    out_path, err_path = case / "stdout", case / "stderr"
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(argv, out_path, err_path, as_limit, entry)
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
        hung = not ready
        if hung:
            os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    finally:
        os.close(pidfd)
    seconds = time.monotonic() - t0
    err = err_path.read_bytes().decode("utf-8", "replace") if err_path.exists() else ""
    rss = usage.ru_maxrss * 1024
    if hung:
        return Outcome("hang", None, err, rss, seconds)
    if os.WIFSIGNALED(status):
        return Outcome("crash", -os.WTERMSIG(status), err, rss, seconds)
    code = os.WEXITSTATUS(status)
    return Outcome("", code, err, rss, seconds)


def classify(o: Outcome, argv: list[str], profile: Path, case: Path, opened: list[str],
             rss_limit: int) -> Outcome:
    """Fills ``o.kind`` (see the module docstring) and ``o.detail``."""
    if o.kind:
        return o
    lines = [ln for ln in o.stderr.splitlines() if ln.strip()]
    out = (case / "stdout").read_bytes().decode("utf-8", "replace")
    texts = [("stderr", o.stderr)] + ([("stdout", out)] if _is_text(argv) else [])
    bad = [(name, m.group()) for name, t in texts for m in [CONTROL.search(t)] if m]
    if o.status == 70 or o.status in (98, 99) or "Traceback" in o.stderr:
        o.kind, o.detail = "internal", (lines[-1] if lines else "")
    elif opened:
        o.kind, o.detail = "escaped", ", ".join(sorted(set(opened)))
    elif bad:
        o.kind, o.detail = "control", f"{bad[0][0]}: {bad[0][1]!r}"
    elif o.rss > rss_limit:
        o.kind, o.detail = "memory", f"{o.rss / 2**20:.0f} MiB"
    elif o.status == 0:
        ok = all(ln.startswith("numaprof: ") for ln in lines)
        o.kind, o.detail = ("ok", "") if ok else ("unclean", "stderr: " + " | ".join(lines)[:300])
    elif o.status == 2 and len(lines) == 1 and lines[0].startswith("numaprof: "):
        if str(profile) in lines[0] or "--target" in argv:
            o.kind = "refused"
        else:
            o.kind, o.detail = "unclean", "names no file: " + lines[0]
    else:
        o.kind, o.detail = "unclean", f"exit {o.status}: " + " | ".join(lines)[:300]
    return o


@dataclass
class Result:
    tallies: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)  # (case number, mutations, argv, outcome)
    peak_rss: int = 0
    seconds: float = 0.0
    slowest: float = 0.0


def _seed_dirs() -> list[Path]:
    return sorted(p for p in SEEDS.iterdir() if (p / "manifest.json").is_file())


def make_case(rng: random.Random, base: Path, number: int) -> tuple[Path, Path, list[str]]:
    """A mutated copy of a seed profile under ``base``: (case dir, profile dir, mutations)."""
    case = base / f"case{number}"
    if case.exists():
        shutil.rmtree(case)
    case.mkdir(parents=True)
    outside = case / "outside"
    outside.mkdir()
    (outside / "secret").write_text("double *LEAKED_SECRET = malloc(8);\n" * 40)
    prof = case / "prof"
    shutil.copytree(_pick(rng, _seed_dirs()), prof, symlinks=True)
    done = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        try:
            done.append(_pick(rng, MUTATIONS)(rng, prof, outside))
        except (OSError, ValueError, IndexError, KeyError, TypeError) as e:
            done.append(f"(mutation failed: {type(e).__name__})")
    return case, prof, done


def warm_up() -> None:
    """Imports what the commands import, in this process, so that forked cases do not."""
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    for name in ("matplotlib.pyplot", "numaprof.cli.main", "numaprof.analyzer.core",
                 "numaprof.cli.render.html_report", "numaprof.cli.render.json_report",
                 "numaprof.cli.render.json_suggest", "numaprof.cli.render.text_diff",
                 "numaprof.cli.render.text_report", "numaprof.cli.render.text_suggest",
                 "numaprof.cli.render.text_topology", "numaprof.recommender",
                 "numaprof.recommender.fixes", "numaprof.recommender.targets"):
        importlib.import_module(name)
    from numaprof.analyzer import srcnames

    for lang in ("c", "cpp", "fortran"):
        srcnames._parser(lang)


def run(cases: int, seed: int, base: Path, *, timeout: float = 60.0,
        rss_limit: int = 1 << 30, as_limit: int = 8 << 30, keep: bool = False,
        progress=None) -> Result:
    """Runs ``cases`` fuzz cases from ``seed`` under ``base``; returns the tallies."""
    warm_up()
    rng = random.Random(seed)
    res = Result()
    t_start = time.monotonic()
    for i in range(cases):
        case, prof, muts = make_case(rng, base, i)
        argv = _command(prof, case, rng)
        watch = _Watch(case / "outside")
        try:
            o = run_forked(argv, case, timeout, as_limit)
            opened = [e for e in watch.events() if e]
        finally:
            watch.close()
        o = classify(o, argv, prof, case, opened, rss_limit)
        res.tallies[o.kind] += 1
        res.peak_rss = max(res.peak_rss, o.rss)
        res.slowest = max(res.slowest, o.seconds)
        if o.kind not in PASS:
            res.failures.append((i, muts, argv, o))
        if progress:
            progress(i, muts, argv, o)
        if not keep or o.kind in PASS:
            _rmtree(case)
    res.seconds = time.monotonic() - t_start
    return res


def sweep(base: Path, *, timeout: float = 60.0, rss_limit: int = 1 << 30,
          as_limit: int = 8 << 30, progress=None) -> Result:
    """Every column of every seed with all its rows set to each extreme value of its
    width (0, the largest, the sign bit...), through `report` and `suggest --format
    json`: the values one bit flip at a time rarely reaches."""
    warm_up()
    res = Result()
    t_start = time.monotonic()
    n = 0
    for seed in _seed_dirs():
        for col in sorted(seed.glob("*.col")):
            try:
                size = int(col.read_bytes()[10:11])
            except ValueError:
                continue
            for value in _EXTREMES.get(size, ()):
                for argv_tail in ([], ["--format", "json"]):
                    case = base / f"sweep{n}"
                    n += 1
                    prof = case / "prof"
                    shutil.copytree(seed, prof)
                    raw = bytearray((prof / col.name).read_bytes())
                    rows = (len(raw) - 16) // size
                    raw[16 : 16 + rows * size] = value.to_bytes(size, "little") * rows
                    (prof / col.name).write_bytes(bytes(raw))
                    argv = ["report" if not argv_tail else "suggest", str(prof), *argv_tail]
                    o = run_forked(argv, case, timeout, as_limit)
                    o = classify(o, argv, prof, case, [], rss_limit)
                    muts = [f"all rows of {seed.name}/{col.name} = {value}"]
                    res.tallies[o.kind] += 1
                    res.peak_rss = max(res.peak_rss, o.rss)
                    res.slowest = max(res.slowest, o.seconds)
                    if o.kind not in PASS:
                        res.failures.append((n - 1, muts, argv, o))
                    if progress:
                        progress(n - 1, muts, argv, o)
                    _rmtree(case)
    res.seconds = time.monotonic() - t_start
    return res


def _rmtree(path: Path) -> None:
    for p in path.rglob("*"):
        try:
            if not p.is_symlink() and p.is_dir():
                p.chmod(stat.S_IRWXU)
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)
