# Run by `perf script -s` (perf's embedded Python, no numpy): writes one fixed-size record
# per sample into $NUMAPROF_PERF_OUT for numaprof.analyzer.perf_import to convert.
import os
import struct

RECORD = struct.Struct("<QQQQQQIIIIB7x")  # time ip addr data_src phys_addr _ pid tid cpu weight user
_out = open(os.environ["NUMAPROF_PERF_OUT"], "wb")
_comms = {}


def process_event(param_dict):
    s = param_dict["sample"]
    user = 1 if s.get("cpumode", 2) == 2 else 0
    _comms[(s["pid"], s["tid"])] = param_dict.get("comm", "")
    cpu = s.get("cpu", 0xFFFFFFFF)
    _out.write(RECORD.pack(s["time"], s["ip"], s.get("addr", 0), s.get("datasrc", 0),
                           s.get("phys_addr", 0), 0, s["pid"] & 0xFFFFFFFF,
                           s["tid"] & 0xFFFFFFFF, cpu & 0xFFFFFFFF,
                           s.get("weight", 0) & 0xFFFFFFFF, user))


def trace_end():
    _out.close()
    with open(os.environ["NUMAPROF_PERF_OUT"] + ".comm", "w") as f:
        for (pid, tid), comm in sorted(_comms.items()):
            f.write(f"{pid}\t{tid}\t{comm}\n")
