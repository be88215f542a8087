# Run by `perf script -s` (perf's embedded Python, no numpy): writes one fixed-size record
# per sample into $NUMAPROF_PERF_OUT for numaprof.analyzer.perf_import to convert, the
# threads' names into $NUMAPROF_PERF_OUT.comm and, into $NUMAPROF_PERF_OUT.events, each
# event's name and perf_event_attr.read_format (the record's event index is the line).
import os
import struct

# time ip addr data_src phys_addr event pid tid cpu weight user
RECORD = struct.Struct("<QQQQQQIIIIB7x")
ATTR_READ_FORMAT = struct.Struct("<32xQ")  # perf_event_attr: type, size, config, period, sample_type, read_format
_out = open(os.environ["NUMAPROF_PERF_OUT"], "wb")
_comms = {}
_events = {}


def process_event(param_dict):
    s = param_dict["sample"]
    user = 1 if s.get("cpumode", 2) == 2 else 0
    _comms[(s["pid"], s["tid"])] = param_dict.get("comm", "")
    name = param_dict.get("ev_name", "")
    if name not in _events:
        attr = param_dict.get("attr") or b""
        fmt = ATTR_READ_FORMAT.unpack_from(attr)[0] if len(attr) >= ATTR_READ_FORMAT.size else 0
        _events[name] = (len(_events), fmt)
    event = _events[name][0]
    cpu = s.get("cpu", 0xFFFFFFFF)
    _out.write(RECORD.pack(s["time"], s["ip"], s.get("addr", 0), s.get("datasrc", 0),
                           s.get("phys_addr", 0), event, s["pid"] & 0xFFFFFFFF,
                           s["tid"] & 0xFFFFFFFF, cpu & 0xFFFFFFFF,
                           s.get("weight", 0) & 0xFFFFFFFF, user))


def trace_end():
    _out.close()
    base = os.environ["NUMAPROF_PERF_OUT"]
    with open(base + ".comm", "w") as f:
        for (pid, tid), comm in sorted(_comms.items()):
            f.write(f"{pid}\t{tid}\t{comm}\n")
    with open(base + ".events", "w") as f:
        for name, (_, fmt) in sorted(_events.items(), key=lambda kv: kv[1][0]):
            f.write(f"{name}\t{fmt}\n")
