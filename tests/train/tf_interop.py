#!/usr/bin/env python3
"""tf_interop.py PBX_TRAIN TFR_DUMP WORKDIR - TFRecord interop with TensorFlow.

1. `pbx-train pack` writes Fashion-MNIST's test split; TensorFlow's
   tf.data.TFRecordDataset and tf.io.parse_single_example (the
   tf.train.Example parser) read it back with the same images and labels as
   the IDX files (read here with gzip + numpy, not with pbx).
2. TensorFlow's tf.io.TFRecordWriter writes tf.train.Example records (3
   channels, an extra float feature pbx must ignore, two shards); pbx's
   loader (tfr_dump) reads the same pixels, HWC, and labels.
Exit 77 (skip) when tensorflow or Fashion-MNIST is missing.
"""
import gzip
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
FM = os.environ.get("PBX_FASHION_DIR", "/usr/share/datasets/fashion-mnist")
try:
    import numpy as np
    import tensorflow as tf
except ImportError as e:
    print(f"skip: {e}")
    sys.exit(77)
if not os.path.exists(f"{FM}/t10k-images-idx3-ubyte.gz"):
    print(f"skip: no Fashion-MNIST in {FM}")
    sys.exit(77)

pbx_train, tfr_dump, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)


def idx(path, header):
    with gzip.open(path) as f:
        return np.frombuffer(f.read()[header:], dtype=np.uint8)


def pbx_to_tf():
    out = os.path.join(work, "pbx")
    subprocess.run([pbx_train, "pack", "fashion-mnist", FM, out, "--split", "test",
                    "--shards", "2"], check=True)
    images = idx(f"{FM}/t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1)
    labels = idx(f"{FM}/t10k-labels-idx1-ubyte.gz", 8)
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "height": tf.io.FixedLenFeature([], tf.int64),
        "width": tf.io.FixedLenFeature([], tf.int64),
        "channels": tf.io.FixedLenFeature([], tf.int64),
    }
    files = sorted(tf.io.gfile.glob(os.path.join(out, "fashion-mnist-test-*.tfrecord")))
    assert [os.path.basename(f) for f in files] == [
        "fashion-mnist-test-00000-of-00002.tfrecord",
        "fashion-mnist-test-00001-of-00002.tfrecord"], files
    n = 0
    for raw in tf.data.TFRecordDataset(files):
        ex = tf.io.parse_single_example(raw, spec)
        h, w, c = int(ex["height"]), int(ex["width"]), int(ex["channels"])
        img = np.frombuffer(ex["image"].numpy(), dtype=np.uint8).reshape(h, w, c)
        if not np.array_equal(img, images[n]) or int(ex["label"]) != labels[n]:
            sys.exit(f"not ok: record {n} differs from the IDX files")
        n += 1
    if n != len(labels):
        sys.exit(f"not ok: TensorFlow read {n} records, IDX has {len(labels)}")
    print(f"ok: TensorFlow reads pbx-train pack's {n} records = IDX images and labels")


def tf_to_pbx():
    rng = np.random.default_rng(5)
    h, w, c = 5, 4, 3
    images = rng.integers(0, 256, size=(23, h, w, c), dtype=np.uint8)
    labels = rng.integers(0, 7, size=23)
    labels[3] = 6  # the largest label, so nclasses is 7
    for s, (lo, hi) in enumerate([(0, 11), (11, 23)]):
        path = os.path.join(work, f"tf-{s:05d}-of-00002.tfrecord")
        with tf.io.TFRecordWriter(path) as wr:
            for i in range(lo, hi):
                f = {
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[images[i].tobytes()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[labels[i]])),
                    "height": tf.train.Feature(int64_list=tf.train.Int64List(value=[h])),
                    "width": tf.train.Feature(int64_list=tf.train.Int64List(value=[w])),
                    "channels": tf.train.Feature(int64_list=tf.train.Int64List(value=[c])),
                    "weight": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5, 2.0])),
                }
                ex = tf.train.Example(features=tf.train.Features(feature=f))
                wr.write(ex.SerializeToString())
    out = subprocess.run([tfr_dump, os.path.join(work, "tf-*.tfrecord")], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    if out[0] != f"23 {c} {h} {w} 7":
        sys.exit(f"not ok: pbx read the header {out[0]!r}")
    for i, line in enumerate(out[1:]):
        lab, hexpix = line.split()
        if int(lab) != labels[i] or bytes.fromhex(hexpix) != images[i].tobytes():
            sys.exit(f"not ok: pbx read record {i} differently")
    if len(out) != 24:
        sys.exit(f"not ok: pbx read {len(out) - 1} records of 23")
    print("ok: pbx-train reads TensorFlow's 23 records = the images and labels written")


pbx_to_tf()
tf_to_pbx()
print("all ok")
