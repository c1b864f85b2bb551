"""Load on the reward server, on loopback only, bounded in time and request count.

Starts a real ``reward-sandbox serve`` (in-memory cache, default limits except a short read
timeout) and measures:

- cold: one client, batches of 8 programs never seen before (real compiles: grading throughput);
- warm: 1, 10 and 50 concurrent clients sending batches of 8 already-graded programs (cache hits:
  the HTTP + JSON + queue cost of the service itself), throughput and p50/p95 request latency;
- slow clients: N connections sending half a request; /healthz latency meanwhile, open fds
  during and after the read timeout;
- oversized body: a chunked body (no Content-Length) of 2x the limit; bytes the server took
  before its 413, and its RSS after;
- server RSS before and after everything.

Prints a Markdown table (and writes JSON with --json). Every phase has a deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import select
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from baselines import provenance  # noqa: E402

TOKEN = "bench-token"
BATCH = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def post(url: str, jobs: list[dict], timeout: float = 300) -> float:
    """One batch; its latency in seconds (raises on any failure: a benchmark must not hide errors)."""
    body = json.dumps({"jobs": jobs}).encode()
    request = urllib.request.Request(
        f"{url}/v1/grade", data=body, headers={"Authorization": f"Bearer {TOKEN}"}, method="POST"
    )
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        results = json.loads(response.read())["results"]
    elapsed = time.perf_counter() - start
    if [r["id"] for r in results] != [j["id"] for j in jobs]:
        raise RuntimeError("results out of order")
    return elapsed


def healthz_latency(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(f"{url}/healthz", timeout=30) as response:
        response.read()
    return time.perf_counter() - start


def program(n: int, salt: str) -> dict:
    return {
        "id": f"{salt}-{n}",
        "source": f"pub fn f() -> u64 {{ {n} }}\n// {salt}",
        "tests": f"#[test]\nfn t() {{ assert_eq!(f(), {n}); }}",
    }


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def load(url: str, clients: int, requests_per_client: int, pool: list[dict]) -> dict:
    """``clients`` threads, each sending ``requests_per_client`` batches drawn from ``pool``."""

    def one(c: int) -> list[float]:
        out = []
        for r in range(requests_per_client):
            jobs = [dict(pool[(c * 7 + r * BATCH + j) % len(pool)], id=f"{c}-{r}-{j}") for j in range(BATCH)]
            out.append(post(url, jobs))
        return out

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as executor:
        latencies = [x for per_client in executor.map(one, range(clients)) for x in per_client]
    wall = time.perf_counter() - start
    return {
        "clients": clients,
        "requests": len(latencies),
        "jobs": len(latencies) * BATCH,
        "jobs_per_s": len(latencies) * BATCH / wall,
        "p50_ms": percentile(latencies, 50) * 1000,
        "p95_ms": percentile(latencies, 95) * 1000,
    }


def slow_clients(url: str, port: int, pid: int, count: int, read_timeout_s: float) -> dict:
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(b"POST /v1/grade HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n")  # never finished
        socks.append(sock)
    time.sleep(0.3)
    during = open_fds(pid)
    health_ms = healthz_latency(url) * 1000
    time.sleep(read_timeout_s + 1.5)
    after = open_fds(pid)
    dropped = 0
    for sock in socks:
        sock.settimeout(0.5)
        try:
            dropped += sock.recv(1) == b""
        except OSError:
            dropped += 1
        sock.close()
    return {"connections": count, "fds_during": during, "fds_after": after, "healthz_ms": health_ms, "dropped": dropped}


def oversized_chunked(port: int, pid: int, limit_mb: float) -> dict:
    chunk = b"x" * (1 << 16)
    total = int(2 * limit_mb * (1 << 20))
    sent = 0
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            f"POST /v1/grade HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        status = "none"
        try:
            while sent < total:
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                sent += len(chunk)
                if select.select([sock], [], [], 0)[0]:  # the server answered: stop sending
                    break
            else:
                sock.sendall(b"0\r\n\r\n")
            status = sock.recv(64).split(b" ")[1].decode()
        except (OSError, IndexError):
            status = "reset"  # the server closed on us (its 413 lost to the reset)
    return {
        "sent_mb": sent / 2**20,
        "status": status,
        "seconds": time.perf_counter() - start,
        "rss_after_mb": rss_mb(pid),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2, help="server grading workers")
    parser.add_argument("--slow-clients", type=int, default=500, help="half-sent connections")
    parser.add_argument("--read-timeout-s", type=float, default=3.0, help="server read timeout")
    parser.add_argument("--max-request-mb", type=float, default=32.0, help="server body limit")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "REWARD_SANDBOX_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "reward_sandbox.cli", "serve", "--port", str(port), "--no-cache"]
    command += ["--workers", str(args.workers), "--read-timeout-s", str(args.read_timeout_s)]
    command += [
        "--max-request-mb",
        str(args.max_request_mb),
        "--max-connections",
        "1024",
        "--max-connections-per-ip",
        "0",
    ]
    server = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                healthz_latency(url)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log = server.stderr.read().decode() if server.stderr else ""
                    raise SystemExit(f"server did not start: {log}") from None
                time.sleep(0.1)
        figures: dict = {
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "workers": args.workers,
            "rss_start_mb": rss_mb(server.pid),
        }
        salt = str(time.time_ns())
        cold = [program(n, salt) for n in range(24)]
        figures["cold"] = load(url, 1, 3, cold)  # 24 new programs: every one compiled and run
        figures["warm"] = [load(url, c, r, cold) for c, r in ((1, 20), (10, 6), (50, 2))]
        figures["rss_after_load_mb"] = rss_mb(server.pid)
        figures["slow"] = slow_clients(url, port, server.pid, args.slow_clients, args.read_timeout_s)
        figures["oversized"] = oversized_chunked(port, server.pid, args.max_request_mb)
        figures["rss_end_mb"] = rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
    print_table(figures)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        figures["provenance"] = provenance()  # commit, host, command, time
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


def print_table(f: dict) -> None:
    print(f"reward server load, {f['date']}, {f['machine']}, server workers={f['workers']}")
    print("| case | clients | requests x 8 jobs | jobs/s | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|")
    rows = [("cold (new programs)", f["cold"])] + [("warm (cache hits)", w) for w in f["warm"]]
    for name, r in rows:
        print(
            f"| {name} | {r['clients']} | {r['requests']} | {r['jobs_per_s']:.1f} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} |"
        )
    s, o = f["slow"], f["oversized"]
    print()
    print(
        f"- slow clients: {s['connections']} half-sent requests -> server fds {s['fds_during']} while held, "
        f"{s['fds_after']} after the read timeout ({s['dropped']} dropped); /healthz meanwhile {s['healthz_ms']:.0f} ms"
    )
    print(
        f"- oversized chunked body: answered {o['status']} after {o['sent_mb']:.0f} MB sent ({o['seconds']:.1f} s); "
        f"server RSS after {o['rss_after_mb']:.0f} MB"
    )
    print(
        f"- server RSS: {f['rss_start_mb']:.0f} MB at start, {f['rss_after_load_mb']:.0f} MB after the load, "
        f"{f['rss_end_mb']:.0f} MB at the end"
    )


if __name__ == "__main__":
    sys.exit(main())
