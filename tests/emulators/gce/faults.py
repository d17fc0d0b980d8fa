"""faults.py - failures on demand, set by command-line flags or by
POST /_emulator/faults (a JSON object of the keys below, merged):

  throttle        fraction of compute calls refused, half 429 RESOURCE_EXHAUSTED,
                  half 403 rateLimitExceeded (nothing done)
  throttle_next   the next N compute calls throttled
  unavailable     fraction refused with 503 backendError (nothing done)
  unavailable_next  the next N compute calls refused with 503
  lost_reply      fraction of mutating calls done, then answered 503 (the
                  retry with the same requestId must find the first operation)
  quota           {"INSTANCES": 2, "CPUS": 16, "NVIDIA_T4_GPUS": 4, ...} per region:
                  an insert over a limit ends DONE with QUOTA_EXCEEDED
  stockout        zones where inserts end DONE with ZONE_RESOURCE_POOL_EXHAUSTED
  op_delay        seconds per operation step (PENDING -> RUNNING -> DONE; an
                  instance PROVISIONING -> STAGING -> RUNNING)
  slow_ops, slow_op_delay   fraction of operations that take slow_op_delay per step
  never_boot      instance names that become RUNNING without a node body (no sshd)
  never_boot_nth  the Nth instance created (1-based, counted from start) never boots
  storage_503     the next N Cloud Storage calls answered 503 backendError (nothing done)
  storage_429     the next N Cloud Storage calls answered 429 rateLimitExceeded (nothing done)
  storage_corrupt the next N object downloads (alt=media) with one byte flipped, headers
                  (x-goog-hash, Content-Length) unchanged
  storage_cut     the next N object downloads send the whole Content-Length header, half
                  the body, and close the connection
  storage_garble_cut  the next N object downloads as storage_cut, with one byte a quarter
                  into the body flipped first (a reply corrupted, then cut: the retry
                  brings good bytes over bad ones a reader may have taken)
  storage_upload_cut  the next N resumable chunks (PUT with a byte range) are cut
                  half-way: the session keeps what came, rounded down to 256 KiB, and
                  the connection closes with no answer
  storage_upload_503  the next N resumable chunks answered 503 backendError (nothing kept)
  storage_rate    object downloads (alt=media) send their bytes at most this many a
                  second each, as one connection of a real store is limited by the
                  network (0: as fast as the emulator can)
  storage_latency seconds each Cloud Storage call waits before its answer (at most
                  1), as a real store's round trip does (0: none)
"""

import random
import threading

DEFAULTS = {
    "throttle": 0.0, "throttle_next": 0, "unavailable": 0.0, "unavailable_next": 0,
    "lost_reply": 0.0, "quota": {}, "stockout": [], "op_delay": 0.1, "slow_ops": 0.0,
    "slow_op_delay": 5.0, "never_boot": [], "never_boot_nth": 0,
    "storage_503": 0, "storage_429": 0, "storage_corrupt": 0, "storage_cut": 0,
    "storage_garble_cut": 0,
    "storage_upload_cut": 0, "storage_upload_503": 0, "storage_rate": 0,
    "storage_latency": 0.0,
}


class Faults:
    def __init__(self, seed):
        self.lock = threading.Lock()
        self.cfg = dict(DEFAULTS, quota={}, stockout=[], never_boot=[])
        self.rng = random.Random(seed)

    def update(self, changes):
        """Merges CHANGES (validated: unknown keys and bad types raise ValueError)."""
        with self.lock:
            new = dict(self.cfg)
            for k, v in changes.items():
                if k not in DEFAULTS:
                    raise ValueError("unknown fault %r" % k)
                want = type(DEFAULTS[k])
                if want is float and isinstance(v, int) and not isinstance(v, bool):
                    v = float(v)
                if not isinstance(v, want) or isinstance(v, bool):
                    raise ValueError("fault %r wants a %s" % (k, want.__name__))
                if want is float and not (0.0 <= v <= 1.0) and k not in ("op_delay", "slow_op_delay"):
                    raise ValueError("fault %r is a fraction in [0, 1]" % k)
                if want in (float, int) and v < 0:
                    raise ValueError("fault %r must not be negative" % k)
                if want is dict and not all(isinstance(n, (int, float)) and not isinstance(n, bool)
                                            and n >= 0 for n in v.values()):
                    raise ValueError("fault %r maps quota names to limits (numbers)" % k)
                if want is list and not all(isinstance(n, str) for n in v):
                    raise ValueError("fault %r is a list of names" % k)
                new[k] = v
            self.cfg = new

    def snapshot(self):
        with self.lock:
            return dict(self.cfg)

    def refusal(self):
        """'throttle', 'unavailable' or None for the compute call now arriving."""
        with self.lock:
            c = self.cfg
            if c["throttle_next"] > 0:
                c["throttle_next"] -= 1
                return "throttle"
            if c["unavailable_next"] > 0:
                c["unavailable_next"] -= 1
                return "unavailable"
            if c["throttle"] and self.rng.random() < c["throttle"]:
                return "throttle"
            if c["unavailable"] and self.rng.random() < c["unavailable"]:
                return "unavailable"
            return None

    def take(self, key):
        """Whether a counted fault (storage_*) fires now; counts it down."""
        with self.lock:
            if self.cfg[key] > 0:
                self.cfg[key] -= 1
                return True
            return False

    def value(self, key):
        with self.lock:
            return self.cfg[key]

    def chance(self, key):
        with self.lock:
            return bool(self.cfg[key]) and self.rng.random() < self.cfg[key]

    def coin(self):
        with self.lock:
            return self.rng.random() < 0.5

    def op_delay(self):
        with self.lock:
            slow = self.cfg["slow_ops"] and self.rng.random() < self.cfg["slow_ops"]
            return self.cfg["slow_op_delay"] if slow else self.cfg["op_delay"]
