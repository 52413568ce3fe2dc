"""A fresh process's first TLS call costs no entropy gathering: aws-lc (rustls' crypto) is
built without its CPU-jitter entropy source (.cargo/config.toml), which spent about 20 ms of
CPU on the first random number of every process (its first handshake). Counted as CPU time
of the whole process around the first call (a token request over TLS h2 to a loopback
sandbox): 2.8 ms in a debug build without it, 22 ms in a release build with it."""

from __future__ import annotations

import subprocess
import sys

from fxpay.testing import Sandbox

FIRST_CALL = """
import sys, time, fxpay
c = fxpay.Client(sys.argv[1], sys.argv[2], base_url=sys.argv[3], ca_bundle=sys.argv[4])
t = time.process_time()
c._payments_token()
print((time.process_time() - t) * 1000)
"""


def test_the_first_tls_call_of_a_process_gathers_no_jitter_entropy() -> None:
    with Sandbox(tls=True) as sb:
        assert sb.ca_bundle is not None
        cpu_ms = []
        for _ in range(3):
            r = subprocess.run(
                [sys.executable, "-c", FIRST_CALL, sb.client_id, sb.client_secret, sb.base_url, sb.ca_bundle],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert r.returncode == 0, r.stderr
            cpu_ms.append(float(r.stdout))
    print("CPU of the first call (ms):", cpu_ms)
    # The least of three: a busy host adds to some runs, never takes from them.
    assert min(cpu_ms) < 10.0, cpu_ms
