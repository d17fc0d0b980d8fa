#!/usr/bin/env python3
"""gpu_torch.py - train-step throughput of pbx-train's cnn-bn and
mini-alexnet in PyTorch on one GPU, eager or torch.compile, for
bench/gpu.sh.

The models are pbx-train's built-ins (src/train/model.c):
  cnn-bn        conv3x3(32, pad 1)-BN-ReLU-maxpool2, conv3x3(64, pad 1)-BN-
                ReLU-maxpool2, FC 128-ReLU-dropout 0.25, FC 10
  mini-alexnet  (conv5x5(64, pad 2)-ReLU-maxpool3/2 pad 1-LRN(9, 0.001,
                0.75, 1)) x 2, FC 384-ReLU, FC 192-ReLU, FC 10
with softmax cross-entropy and SGD (lr 0.05, momentum 0.9, Nesterov,
weight decay 5e-4), fp32 with TF32 off (as pbx-train), cuDNN autotuning on
(PyTorch's best case), on random 1x28x28 inputs already on the GPU (so no
data loading is timed, unlike pbx-train, which copies every batch over).
Prints one JSON line: framework, version, mode, model, batch,
images_per_s (median over timed windows after warm-up), peak_allocated_mib
and peak_reserved_mib (PyTorch's allocator; bench/gpu.sh also samples the
whole process with nvidia-smi).
"""
import argparse
import json
import statistics
import time


def build(nn, name):
    if name == "cnn-bn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
            nn.Linear(128, 10))
    if name == "mini-alexnet":
        return nn.Sequential(
            nn.Conv2d(1, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1),
            nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0),
            nn.Conv2d(64, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1),
            nn.LocalResponseNorm(9, alpha=0.001, beta=0.75, k=1.0),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 384), nn.ReLU(), nn.Linear(384, 192),
            nn.ReLU(), nn.Linear(192, 10))
    raise SystemExit(f"unknown model {name}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="cnn-bn")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--window", type=int, default=20)
    a = p.parse_args()

    import torch
    import torch.nn as nn
    if not torch.cuda.is_available():
        raise SystemExit("gpu_torch.py: PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = build(nn, a.model).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    loss_fn = nn.CrossEntropyLoss()
    run = torch.compile(model) if a.mode == "compile" else model
    x = torch.randn(a.batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(run(x), y)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    rates = []
    for _ in range(max(1, a.steps // a.window)):
        t = time.perf_counter()
        for _ in range(a.window):
            step()
        torch.cuda.synchronize()
        rates.append(a.window * a.batch / (time.perf_counter() - t))
    print(json.dumps({
        "framework": "pytorch", "version": torch.__version__, "mode": a.mode,
        "model": a.model, "batch": a.batch,
        "images_per_s": statistics.median(rates),
        "peak_allocated_mib": torch.cuda.max_memory_allocated() / 2**20,
        "peak_reserved_mib": torch.cuda.max_memory_reserved() / 2**20,
        "gpu": torch.cuda.get_device_name(0)}))


if __name__ == "__main__":
    main()
