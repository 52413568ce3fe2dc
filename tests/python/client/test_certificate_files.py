"""Issue 46 item 11: ``client_cert``, ``client_key`` and ``ca_bundle`` name regular files of
bounded size. A FIFO (which hung ``Client()`` for ever, deaf to Ctrl-C), a device
(``/dev/zero`` was read until memory ran out), a directory or a file larger than 4 MiB is a
``ConfigurationError`` at once; an encrypted key is called encrypted. Each special file is
tried in a child process with a time and memory limit, so a regression fails rather than
hangs the suite."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import fxpay
from fxpay.testing import Sandbox

from conftest import need_program

CHILD = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    import fxpay
    field, path = sys.argv[1], sys.argv[2]
    try:
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", **{field: path})
    except fxpay.ConfigurationError as e:
        print("ConfigurationError:", e)
    else:
        print("accepted")
    """
)


def made_in_child(field: str, path: str) -> str:
    """What ``Client(**{field: path})`` does, in a child given 20 s and 2 GiB."""
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, field, path], capture_output=True, text=True, timeout=20, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"Client({field}={path!r}) was still running after 20 s")
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def refusal(field: str, path: object, kind: str) -> str:
    return f'ConfigurationError: {field} "{path}" is {kind}, not a regular file: give the path of a PEM file'


@pytest.mark.parametrize("field", ["client_cert", "ca_bundle"])
def test_a_fifo_is_refused_at_once(tmp_path: Path, field: str) -> None:
    fifo = tmp_path / "identity.pem"
    os.mkfifo(fifo)
    out = made_in_child(field, str(fifo))
    assert out == refusal(field, fifo, "a FIFO (named pipe)"), out


@pytest.mark.parametrize(("path", "kind"), [("/dev/zero", "a device"), ("/dev/null", "a device"), ("/tmp", "a directory")])
@pytest.mark.parametrize("field", ["client_cert", "ca_bundle"])
def test_a_device_or_a_directory_is_refused_at_once(field: str, path: str, kind: str) -> None:
    out = made_in_child(field, path)
    assert out == refusal(field, path, kind), out


def test_a_file_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "bundle.pem"
    with big.open("wb") as f:
        f.truncate(4 * 1024 * 1024 + 1)
    with pytest.raises(fxpay.ConfigurationError, match="larger than 4 MiB"):
        fxpay.Client("id", "secret", base_url="http://127.0.0.1:9", ca_bundle=big)


def test_a_key_behind_a_fifo_is_refused_too(tmp_path: Path) -> None:
    with Sandbox(tls=True, client_auth=True) as sb:
        assert sb.client_cert is not None
        cert_only = tmp_path / "cert.pem"
        cert_only.write_bytes(Path(sb.client_cert).read_bytes())
        fifo = tmp_path / "key.pem"
        os.mkfifo(fifo)
        script = CHILD.replace("**{field: path}", "client_cert=sys.argv[3], client_key=path")
        try:
            argv = [sys.executable, "-c", script, "client_key", str(fifo), str(cert_only)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
        except subprocess.TimeoutExpired:
            pytest.fail("Client(client_key=<a FIFO>) was still running after 20 s")
        assert done.stdout.strip() == refusal("client_key", fifo, "a FIFO (named pipe)"), (done.stdout, done.stderr[-2000:])


@pytest.mark.parametrize(
    "args",
    [["pkcs8", "-topk8", "-v2", "aes-256-cbc"], ["pkey", "-traditional", "-aes256"]],
    ids=["pkcs8", "traditional"],
)
def test_an_encrypted_key_is_called_encrypted(tmp_path: Path, args: list[str]) -> None:
    openssl = need_program("openssl")
    with Sandbox(tls=True, client_auth=True) as sb:
        assert sb.client_cert is not None
        assert sb.client_key is not None
        locked = tmp_path / "locked.pem"
        subprocess.run([openssl, *args, "-in", sb.client_key, "-out", str(locked), "-passout", "pass:passphrase"], check=True)
        assert b"ENCRYPTED" in locked.read_bytes()
        with pytest.raises(fxpay.ConfigurationError) as caught:
            fxpay.Client(
                sb.client_id, sb.client_secret, base_url=sb.base_url, ca_bundle=sb.ca_bundle, client_cert=sb.client_cert, client_key=locked
            )
        text = str(caught.value)
        assert "holds an encrypted private key" in text, text
        assert "no private key" not in text, text
        # The same key decrypted is taken.
        with fxpay.Client(
            sb.client_id,
            sb.client_secret,
            base_url=sb.base_url,
            ca_bundle=sb.ca_bundle,
            client_cert=sb.client_cert,
            client_key=sb.client_key,
        ) as c:
            assert c.create_quote(buy_currency="USD", buy_amount="100", sell_currency="AUD")
