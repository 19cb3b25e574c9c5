"""Unit conversions: every SI factor of the project lives here, and nowhere else.

Inside dnnbench every quantity is SI (seconds, bytes, bit/s, multiply-adds) and every name carries
its unit. User-facing inputs in datasheet units (Gbit/s, GiB, µs) are converted here, once.
"""

from __future__ import annotations

BITS_PER_BYTE = 8
KIB = 2**10
MIB = 2**20
GIB = 2**30

KILO = 1e3
MEGA = 1e6
GIGA = 1e9
TERA = 1e12

#: Bits of one fp32 value: the default width of weights, activations and gradients on the wire.
FP32_BITS = 32
FP32_BYTES = 4


def gbit_per_s_to_bits_per_s(gbit_per_s: float) -> float:
    return gbit_per_s * GIGA


def bits_per_s_to_gbit_per_s(bits_per_s: float) -> float:
    return bits_per_s / GIGA


def us_to_s(us: float) -> float:
    return us * 1e-6


def s_to_ms(s: float) -> float:
    return s * 1e3


def gib_to_bytes(gib: float) -> int:
    return int(round(gib * GIB))


def mib_to_bytes(mib: float) -> int:
    return int(round(mib * MIB))


