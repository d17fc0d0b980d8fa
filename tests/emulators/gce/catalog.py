"""catalog.py - the zones, machine types, accelerator types, image projects
and quota names the emulator knows, with Compute Engine's figures."""

# name: (guestCpus, memoryMb, built-in GPUs)
MACHINE_TYPES = {
    "e2-micro": (2, 1024), "e2-small": (2, 2048), "e2-medium": (2, 4096),
    "e2-standard-2": (2, 8192), "e2-standard-4": (4, 16384), "e2-standard-8": (8, 32768),
    "n1-standard-1": (1, 3840), "n1-standard-2": (2, 7680), "n1-standard-4": (4, 15360),
    "n1-standard-8": (8, 30720), "n1-standard-16": (16, 61440), "n1-standard-32": (32, 122880),
    "n1-highmem-8": (8, 53248), "n2-standard-2": (2, 8192), "n2-standard-4": (4, 16384),
    "n2-standard-8": (8, 32768), "a2-highgpu-1g": (12, 87040), "g2-standard-4": (4, 16384),
}

# name: (description, maximumCardsPerInstance, regional quota metric)
ACCELERATOR_TYPES = {
    "nvidia-tesla-t4": ("NVIDIA T4", 4, "NVIDIA_T4_GPUS"),
    "nvidia-tesla-v100": ("NVIDIA V100", 8, "NVIDIA_V100_GPUS"),
    "nvidia-tesla-p100": ("NVIDIA P100", 4, "NVIDIA_P100_GPUS"),
    "nvidia-tesla-a100": ("NVIDIA A100 40GB", 16, "NVIDIA_A100_GPUS"),
    "nvidia-l4": ("NVIDIA L4", 8, "NVIDIA_L4_GPUS"),
}

DISK_TYPES = ("pd-standard", "pd-balanced", "pd-ssd", "pd-extreme", "hyperdisk-balanced")

DEFAULT_ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "europe-west4-a")

# Quota metrics the emulator counts (per region): INSTANCES, CPUS and the
# GPU metrics above.
def region_of(zone):
    return zone.rsplit("-", 1)[0]
