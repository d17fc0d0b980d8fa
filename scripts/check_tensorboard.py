#!/usr/bin/env python3
"""check_tensorboard.py - check pbx-train's TensorBoard event files with
TensorBoard's own reader.

Usage: check_tensorboard.py DIR TAG=STEP:VALUE [TAG=STEP:VALUE ...]

Reads every events.out.tfevents.* file in DIR with
tensorboard.backend.event_processing (the code TensorBoard itself runs) and
checks that:
  * each file is whole TFRecord framing with valid CRCs (TensorBoard's reader
    stops at the first bad record, so the records it returns must add up to
    the file's size);
  * each file starts with the Event{file_version: "brain.Event:2"};
  * every TAG has a scalar at STEP equal to VALUE rounded to float32
    ("nan" allowed; the last event wins when a step repeats).

Exit status: 0 all good, 1 a check failed, 2 bad usage, 77 TensorBoard is
not installed (ctest treats 77 as "skipped": see tests/runtime).  Used by the
runtime_tensorboard test, which writes known scalars with src/runtime/metrics.
"""
import glob
import math
import os
import struct
import sys

SKIP = 77


def parse_expectation(arg):
    """'loss=10:0.5' -> ('loss', 10, 0.5)."""
    tag, eq, rest = arg.rpartition("=")
    step, colon, value = rest.partition(":")
    if not eq or not colon or not tag:
        raise ValueError(f"bad expectation '{arg}' (want TAG=STEP:VALUE)")
    return tag, int(step), float(value)


def as_float32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def check_file(path, event_file_loader, event_pb2):
    """Whole framing and the file_version record; returns a list of problems."""
    records = list(event_file_loader.RawEventFileLoader(path).Load())
    framed = sum(12 + len(r) + 4 for r in records)
    size = os.path.getsize(path)
    problems = []
    if framed != size:
        problems.append(f"{path}: TensorBoard read {framed} of {size} bytes "
                        "(bad CRC or framing after that)")
    if not records:
        problems.append(f"{path}: no records")
    elif event_pb2.Event.FromString(records[0]).file_version != "brain.Event:2":
        problems.append(f"{path}: first record is not file_version brain.Event:2")
    return problems


def check_scalar(acc, tag, step, want):
    if tag not in acc.Tags().get("scalars", []):
        return f"{tag}: no such scalar tag (have {sorted(acc.Tags()['scalars'])})"
    at_step = [e for e in acc.Scalars(tag) if e.step == step]
    if not at_step:
        return f"{tag}: no value at step {step}"
    got, want32 = at_step[-1].value, as_float32(want)
    if got == want32 or (math.isnan(got) and math.isnan(want32)):
        return None
    return f"{tag}@{step}: got {got!r}, want {want32!r}"


def main(argv):
    if len(argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        from tensorboard.backend.event_processing import event_file_loader
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
        from tensorboard.compat.proto import event_pb2
    except ImportError as e:
        print(f"SKIP: TensorBoard's Python package is not importable ({e}); "
              "install it with 'pip install tensorboard' to run this check")
        return SKIP
    directory = argv[1]
    try:
        expected = [parse_expectation(a) for a in argv[2:]]
    except ValueError as e:
        print(f"check_tensorboard: {e}", file=sys.stderr)
        return 2

    files = sorted(glob.glob(os.path.join(directory, "events.out.tfevents.*")))
    problems = [] if files else [f"{directory}: no events.out.tfevents.* files"]
    for path in files:
        problems += check_file(path, event_file_loader, event_pb2)
    acc = EventAccumulator(directory, size_guidance={"scalars": 0})
    acc.Reload()
    for tag, step, value in expected:
        p = check_scalar(acc, tag, step, value)
        if p:
            problems.append(p)

    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        return 1
    print(f"ok: {len(expected)} scalars in {len(files)} event file(s) under {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
