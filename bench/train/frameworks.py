#!/usr/bin/env python3
"""frameworks.py - train-step throughput of cnn-bn in PyTorch, MXNet or
TensorFlow on the CPU, for bench/train/vs_pytorch.sh.

The model is pbx-train's built-in cnn-bn: conv3x3(32, pad 1)-BN-ReLU-
maxpool2, conv3x3(64, pad 1)-BN-ReLU-maxpool2, FC 128-ReLU-dropout 0.25,
FC 10, softmax cross-entropy, SGD (momentum 0.9, Nesterov, weight decay
5e-4), on random 1x28x28 inputs.  Prints one JSON line:
{"framework", "version", "images_per_s", "peak_rss_kb", ...}; images/s is
the median over timed windows after warm-up steps.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time


def windows(step, steps, batch, warmup, window):
    for _ in range(warmup):
        step()
    rates = []
    for _ in range(max(1, steps // window)):
        t = time.perf_counter()
        for _ in range(window):
            step()
        rates.append(window * batch / (time.perf_counter() - t))
    return statistics.median(rates)


def run_torch(a):
    import torch
    import torch.nn as nn
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(a.batch, 1, 28, 28)
    y = torch.randint(0, 10, (a.batch,))
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    return torch.__version__, windows(step, a.steps, a.batch, a.warmup, a.window)


def run_mxnet(a):
    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import mxnet as mx
    from mxnet import autograd, gluon, nd
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(32, 3, padding=1), gluon.nn.BatchNorm(), gluon.nn.Activation("relu"),
            gluon.nn.MaxPool2D(2),
            gluon.nn.Conv2D(64, 3, padding=1), gluon.nn.BatchNorm(), gluon.nn.Activation("relu"),
            gluon.nn.MaxPool2D(2),
            gluon.nn.Flatten(), gluon.nn.Dense(128, activation="relu"), gluon.nn.Dropout(0.25),
            gluon.nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(net.collect_params(), "nag",
                            {"learning_rate": 0.05, "momentum": 0.9, "wd": 5e-4})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = nd.random.normal(shape=(a.batch, 1, 28, 28))
    y = nd.random.randint(0, 10, shape=(a.batch,)).astype("float32")

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(a.batch)
        loss.wait_to_read()
    return mx.__version__, windows(step, a.steps, a.batch, a.warmup, a.window)


def run_tensorflow(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    L = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        L.Conv2D(32, 3, padding="same"), L.BatchNormalization(), L.ReLU(), L.MaxPool2D(2),
        L.Conv2D(64, 3, padding="same"), L.BatchNormalization(), L.ReLU(), L.MaxPool2D(2),
        L.Flatten(), L.Dense(128, activation="relu"), L.Dropout(0.25), L.Dense(10)])
    opt = tf.keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x = tf.random.normal((a.batch, 28, 28, 1))  # NHWC: TF's CPU layout
    y = tf.random.uniform((a.batch,), 0, 10, dtype=tf.int32)

    @tf.function(jit_compile=False)
    def step_fn():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        g = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(g, model.trainable_variables))
        return loss

    def step():
        step_fn().numpy()
    return tf.__version__, windows(step, a.steps, a.batch, a.warmup, a.window)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--framework", choices=["torch", "mxnet", "tensorflow"], required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--window", type=int, default=5)
    a = p.parse_args()
    fn = {"torch": run_torch, "mxnet": run_mxnet, "tensorflow": run_tensorflow}[a.framework]
    try:
        version, ips = fn(a)
    except Exception as e:  # report, do not crash the whole benchmark
        print(json.dumps({"framework": a.framework, "error": "%s: %s" % (type(e).__name__, e)}))
        return 1
    print(json.dumps({"framework": a.framework, "version": version, "batch": a.batch,
                      "threads": a.threads, "images_per_s": round(ips, 1),
                      "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
