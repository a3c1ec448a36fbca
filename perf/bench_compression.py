"""Body codecs of the client SDK on realistic message bodies: MB/s compressing and decompressing, and
the ratio, per codec and level.

    PYTHONPATH=src python perf/bench_compression.py [--bodies 200] [--seconds 1] [--repeat 5] [--json]

Bodies are generated order events of ~8 KiB of JSON (a customer, an address, 20-40 line items with
SKUs, names, prices and tags; a fixed seed, so every run and revision sees the same bytes), each
compressed on its own as a producer does. zlib at levels 1, 5 (RocketMQ's compressLevel, what the
SDK sends) and 9; lz4 as sent (frame format, independent blocks); zstd at 3 (its own default) and 5
(what the SDK sends, RocketMQ's level). MB/s count the uncompressed bytes, both ways. Each figure is
the median of ``--repeat`` runs, the codecs interleaved run by run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import zlib
from collections.abc import Callable

import zstandard
from report import JSON_HELP, Report

from rmq.protocol.compression import compress_body, decompress_body


def order_event(rng: random.Random, n: int) -> bytes:
    """One order event as a shop would publish it, ~8 KiB of JSON."""
    words = ["red", "blue", "cotton", "steel", "large", "small", "organic", "classic", "pro", "lite", "eco", "max"]
    items = []
    for i in range(rng.randint(20, 40)):
        items.append(
            {
                "lineId": i + 1,
                "sku": f"SKU-{rng.randint(10000, 99999)}-{rng.choice('ABCDEFGH')}",
                "name": " ".join(rng.choice(words) for _ in range(3)).title(),
                "quantity": rng.randint(1, 5),
                "unitPrice": round(rng.uniform(1, 500), 2),
                "currency": "EUR",
                "tags": rng.sample(words, 3),
                "warehouse": rng.choice(["AMS-1", "FRA-2", "DUB-1"]),
            }
        )
    event = {
        "eventType": "OrderCreated",
        "eventId": f"{rng.getrandbits(128):032x}",
        "occurredAt": f"2026-11-25T00:{n % 60:02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}Z",
        "orderId": f"ORD-{1_000_000 + n}",
        "customer": {
            "id": f"C-{rng.randint(1, 10**6)}",
            "email": f"user{rng.randint(1, 10**6)}@example.com",
            "segment": rng.choice(["retail", "business", "vip"]),
        },
        "shippingAddress": {
            "street": f"{rng.randint(1, 300)} {rng.choice(words).title()} Street",
            "city": rng.choice(["Amsterdam", "Berlin", "Dublin", "Lisbon"]),
            "postalCode": f"{rng.randint(1000, 9999)} {rng.choice('ABCDEFGH')}{rng.choice('ABCDEFGH')}",
            "country": rng.choice(["NL", "DE", "IE", "PT"]),
        },
        "items": items,
        "total": round(sum(it["unitPrice"] * it["quantity"] for it in items), 2),
        "payment": {"method": rng.choice(["card", "ideal", "paypal"]), "status": "AUTHORIZED"},
    }
    return json.dumps(event, indent=1).encode()


def zlib_codec(level: int) -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    return (lambda b: zlib.compress(b, level)), zlib.decompress


def zstd_codec(level: int) -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    compressor, decompressor = zstandard.ZstdCompressor(level=level), zstandard.ZstdDecompressor()
    return compressor.compress, decompressor.decompress


def sdk_codec(name: str) -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    """What the SDK itself sends and reads (threshold 0: every body compressed)."""
    flag = compress_body(b"x", 0, compression=name)[1]
    return (lambda b: compress_body(b, 0, compression=name)[0]), (lambda d: decompress_body(d, flag))


CODECS = {
    "zlib level 1": zlib_codec(1),
    "zlib level 5 (SDK)": sdk_codec("zlib"),
    "zlib level 9": zlib_codec(9),
    "lz4 frame (SDK)": sdk_codec("lz4"),
    "zstd level 3": zstd_codec(3),
    "zstd level 5 (SDK)": sdk_codec("zstd"),
}


def rate(fn: Callable[[bytes], bytes], inputs: list[bytes], counted: int, seconds: float) -> float:
    """MB/s of ``counted`` bytes per pass over ``inputs``, passes repeated for ``seconds``."""
    passes, started = 0, time.perf_counter()
    while True:
        for item in inputs:
            fn(item)
        passes += 1
        elapsed = time.perf_counter() - started
        if elapsed >= seconds:
            return passes * counted / elapsed / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=200, help="order events compressed one by one")
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one run")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (the median is printed)")
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    args = parser.parse_args()
    report = Report(args.json)
    rng = random.Random(13)
    bodies = [order_event(rng, n) for n in range(args.bodies)]
    raw = sum(len(b) for b in bodies)
    report.line(
        f"{len(bodies)} JSON order events, {raw / len(bodies) / 1024:.1f} KiB on average, median of {args.repeat}"
    )
    compressed = {name: [c(b) for b in bodies] for name, (c, _d) in CODECS.items()}
    for name, (_c, decompress) in CODECS.items():
        assert [decompress(d) for d in compressed[name]] == bodies, name
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in CODECS}
    for _ in range(args.repeat):
        for name, (compress, decompress) in CODECS.items():
            runs[name].append(
                (rate(compress, bodies, raw, args.seconds), rate(decompress, compressed[name], raw, args.seconds))
            )
    for name, results in runs.items():
        comp = statistics.median(r[0] for r in results)
        decomp = statistics.median(r[1] for r in results)
        ratio = raw / sum(len(d) for d in compressed[name])
        report.figure(f"{name} compress", comp, "MB/s")
        report.figure(f"{name} decompress", decomp, "MB/s")
        report.figure(f"{name} ratio", ratio, "x")
        report.line(f"{name:20s}: compress {comp:8.1f} MB/s  decompress {decomp:8.1f} MB/s  ratio {ratio:5.2f}")
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
