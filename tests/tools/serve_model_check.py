#!/usr/bin/env python3
"""serve-model end to end, bounded (about 30 s), on loopback only (issue 46).

Starts serve-model on free ports (--port 0; the port is read from its log), always stops it, and checks:
  * outputs equal run-model's for the same inputs: exactly without batching (JSON, .npy and .npz
    bodies, both bundled models behind one server, and Silero VAD: three inputs, one 0-d and a state
    whose first axis is not the batch, so it runs outside the batching queue), to 1e-5 with dynamic
    batching (rows computed in a batch may round differently, include/whittle/batching_session.h);
  * GET /v1/models, /v1/models/NAME, /healthz and the Prometheus text of /metrics;
  * 2,000 predict requests from 8 concurrent clients with dynamic batching: 0 errors;
  * 3 reloads during that load (two :reload after an atomic rename, alternating the CNN and MLP files,
    and one SIGHUP): 0 failed requests, each answer the CNN's or the MLP's;
  * a failed reload (a broken file) keeps the old model and answers 500 with the reason;
  * 56 malformed requests (bad JSON, wrong dtype, rank and dims, unknown model, bodies over the limit
    with Content-Length and chunked, a deflate bomb .npz, disconnects mid-body, a stalled client,
    garbage request lines, huge headers, deep nesting, ...): each a 4xx or a closed connection,
    and the server still answers /healthz and predicts;
  * X-Deadline-Ms: 504 when a request's deadline passes in the queue; a full queue answers 503;
  * SIGTERM: a request waiting in the queue is still answered, then exit status 0 after "stopped".
Usage: serve_model_check.py --bin BUILD/bin --models MODELS_DIR --vad SILERO_VAD.onnx
"""
import argparse
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile

try:
    import numpy as np
except ImportError:  # the check venv has numpy; a bare python3 may not
    print("serve_model_check: SKIP (numpy is not installed for this Python)")
    sys.exit(77)

HOST = "127.0.0.1"
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Server:
    """serve-model on a free loopback port; stop() always ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, binary, args, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([binary] + args + ["--port", "0", "--host", HOST],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        self.port = None
        deadline = time.time() + 20
        while time.time() < deadline and self.proc.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log_path).read())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.02)
        if self.port is None:
            self.stop()
            raise RuntimeError("serve-model did not start:\n" + open(log_path).read())

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def text(self):
        return open(self.log_path).read()


def request(port, method, path, body=None, headers=None, timeout=30):
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        conn.close()


def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def npz_bytes(compressed=False, **arrays):
    b = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(b, **arrays)
    return b.getvalue()


def predict(port, model, x, fmt="json", conn=None):
    """Logits for x from the server in the given body format; raises on a non-200 answer."""
    if fmt == "json":
        body, ct = json.dumps({"inputs": {"image": x.tolist()}}), "application/json"
    elif fmt == "npy":
        body, ct = npy_bytes(x), "application/x-npy"
    else:
        body, ct = npz_bytes(image=x), "application/x-npz"
    path = "/v1/models/%s:predict" % model
    if conn is None:
        status, rct, data = request(port, "POST", path, body, {"Content-Type": ct})
    else:
        conn.request("POST", path, body=body, headers={"Content-Type": ct})
        r = conn.getresponse()
        status, rct, data = r.status, r.getheader("Content-Type"), r.read()
    if status != 200:
        raise RuntimeError("HTTP %d: %s" % (status, data[:300]))
    if fmt == "json":
        check(rct.startswith("application/json"), "JSON answer's Content-Type is %s" % rct)
        return np.array(json.loads(data)["outputs"]["logits"], dtype=np.float32)
    if fmt == "npy":
        check(rct == "application/x-npy", ".npy answer's Content-Type is %s" % rct)
        return np.load(io.BytesIO(data))
    check(rct == "application/x-npz", ".npz answer's Content-Type is %s" % rct)
    return np.load(io.BytesIO(data))["logits"]


def run_model_logits(bin_dir, model, x, tmp):
    """run-model's logits for x (the reference)."""
    d = tempfile.mkdtemp(dir=tmp)
    np.save(os.path.join(d, "x.npy"), x)
    subprocess.run([os.path.join(bin_dir, "run-model"), model, "--input", "image=" + os.path.join(d, "x.npy"),
                    "--output-dir", d], check=True, stdout=subprocess.DEVNULL, timeout=60)
    return np.load(os.path.join(d, "logits.npy"))


# ---- malformed requests over raw sockets -------------------------------------------------------

def raw(port, data, read=True, timeout=10, close_early=False):
    """Sends bytes; returns the answer's status code, or 0 when the connection closed without one."""
    s = socket.create_connection((HOST, port), timeout=timeout)
    try:
        try:
            for i in range(0, len(data), 1 << 20):
                s.sendall(data[i:i + (1 << 20)])
        except OSError:
            pass  # the server may answer and close before the body is all sent
        if close_early or not read:
            return -1
        got = b""
        try:
            while b"\r\n" not in got and len(got) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
        except OSError:
            return 0
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        return int(m.group(1)) if m else 0
    finally:
        s.close()


def post_raw(path, ct, body, extra=b""):
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: " +
            ct.encode() + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


def malformed_cases(max_body):
    p = "/v1/models/cnn:predict"
    j = "application/json"
    big = b" " * (max_body + (1 << 20))
    chunked = (b"POST " + p.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + (b"100000\r\n" + b" " * 0x100000 + b"\r\n") * (max_body // 0x100000 + 2))
    bomb = npz_bytes(compressed=True, image=np.zeros((4096, 1, 28, 28), np.float32))  # ~12 MB inflated
    good = json.dumps({"inputs": {"image": np.zeros((1, 1, 28, 28)).tolist()}}).encode()
    cases = [
        ("bad JSON", post_raw(p, j, b'{"inputs": {"image": [[1, 2,'), {400}),
        ("not JSON at all", post_raw(p, j, b"\x00\xff garbage"), {400}),
        ("empty body", post_raw(p, j, b""), {400}),
        ("strings for float32", post_raw(p, j, b'{"inputs": {"image": [[["a"]]]}}'), {400}),
        ("NaN literal", post_raw(p, j, b'{"inputs": {"image": [NaN]}}'), {400}),
        ("wrong rank", post_raw(p, j, b'{"inputs": {"image": [[0.5, 0.25]]}}'), {400}),
        ("wrong dims", post_raw(p, j, json.dumps({"inputs": {"image": np.zeros((1, 1, 27, 28)).tolist()}}).encode()), {400}),
        ("ragged lists", post_raw(p, j, b'{"inputs": {"image": [[[[1, 2], [3]]]]}}'), {400}),
        ("unknown input name", post_raw(p, j, b'{"inputs": {"x": [1]}}'), {400}),
        ("input given twice", post_raw(p, j, good[:-2] + b', "image": [1]}}'), {400}),
        ("unknown top-level key", post_raw(p, j, b'{"instances": [1]}'), {400}),
        ("int64 .npy for float32", post_raw(p, "application/x-npy", npy_bytes(np.zeros((1, 1, 28, 28), np.int64))), {400}),
        ("truncated .npy", post_raw(p, "application/x-npy", npy_bytes(np.zeros((1, 1, 28, 28), np.float32))[:100]), {400}),
        ("big-endian .npy", post_raw(p, "application/x-npy", npy_bytes(np.zeros((1, 1, 28, 28), ">f4"))), {400}),
        ("garbage .npz", post_raw(p, "application/x-npz", b"PK\x03\x04" + b"\x01" * 200), {400}),
        ("deflate bomb .npz", post_raw(p, "application/x-npz", bomb), {400}),
        (".npz with a wrong member", post_raw(p, "application/x-npz", npz_bytes(other=np.zeros((1, 1, 28, 28), np.float32))), {400}),
        ("unknown model", post_raw("/v1/models/nope:predict", j, good), {404}),
        ("unknown endpoint", post_raw("/v2/whatever", j, good), {404}),
        ("GET on :predict", b"GET " + p.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", {405}),
        ("PUT", b"PUT " + p.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", {405}),
        ("unsupported Content-Type", post_raw(p, "text/csv", good), {415}),
        ("bad X-Deadline-Ms", post_raw(p, j, good, b"X-Deadline-Ms: soon\r\n"), {400}),
        ("body over the limit", post_raw(p, j, big), {413, 0}),
        ("chunked body over the limit", chunked, {413, 0}),
        ("deep nesting", post_raw(p, j, b'{"inputs": {"image": ' + b"[" * 100000 + b"}}"), {400}),
        ("garbage request line", b"\x16\x03\x01\x00 garbage\r\n\r\n", {400, 0}),
        ("huge header", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"x" * 70000 + b"\r\n\r\n", {400, 431, 0}),
        ("overlong path", b"GET /" + b"a" * 10000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", {414, 400, 0}),
    ]
    return cases, good


def run_malformed(port, max_body, total):
    cases, good = malformed_cases(max_body)
    sent = 0
    # Clients that hang up mid-body (no answer expected: the server must just go on).
    req = post_raw("/v1/models/cnn:predict", "application/json", good)
    for _ in range(4):
        raw(port, req[:len(req) // 2], close_early=True)
        sent += 1
    # A client that stalls past the server's --io-timeout-s: closed, or a 4xx.
    stalled = {}

    def stall():
        s = socket.create_connection((HOST, port), timeout=10)
        try:
            s.sendall(req[:len(req) // 3])
            time.sleep(3)
            try:
                s.sendall(req[len(req) // 3:])
                got = s.recv(4096)
            except OSError:
                got = b""
            m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
            stalled["status"] = int(m.group(1)) if m else 0
        finally:
            s.close()

    staller = threading.Thread(target=stall)
    staller.start()
    i = 0
    while sent < total - 1:
        name, data, expected = cases[i % len(cases)]
        status = raw(port, data)
        check(status in expected or (0 in expected and status == 0),
              "malformed '%s': HTTP %s, expected %s" % (name, status, sorted(expected)))
        sent += 1
        i += 1
    staller.join()
    sent += 1
    check(stalled.get("status") == 0 or 400 <= stalled.get("status", 0) < 500,
          "stalled client: got HTTP %s, expected a closed connection or a 4xx" % stalled.get("status"))
    return sent


# ---- the checks ------------------------------------------------------------------------------

def check_metadata(port):
    status, ct, body = request(port, "GET", "/v1/models")
    models = {m["name"]: m for m in json.loads(body)["models"]} if status == 200 else {}
    check(status == 200 and set(models) == {"cnn", "mlp", "vad"}, "GET /v1/models lists cnn, mlp, vad: %s" % body[:200])
    if "cnn" in models:
        inp = models["cnn"]["inputs"][0]
        check(inp == {"name": "image", "dtype": "float32", "shape": ["batch", 1, 28, 28]}, "cnn input: %s" % inp)
        check(models["cnn"]["outputs"][0]["name"] == "logits", "cnn output: %s" % models["cnn"]["outputs"])
    status, _, body = request(port, "GET", "/v1/models/mlp")
    check(status == 200 and json.loads(body)["name"] == "mlp", "GET /v1/models/mlp: %d" % status)
    status, ct, body = request(port, "GET", "/v1/models/nope")
    check(status == 404 and "error" in json.loads(body), "GET /v1/models/nope: %d %s" % (status, body))
    status, _, body = request(port, "GET", "/healthz")
    check(status == 200, "GET /healthz: %d" % status)


def check_exact(port, bin_dir, models_dir, tmp):
    """Without batching, the server's logits are run-model's, bit for bit, in every body format."""
    rng = np.random.default_rng(46)
    for model in ("cnn", "mlp"):
        path = os.path.join(models_dir, model + ".onnx")
        for rows in (1, 3):
            x = rng.random((rows, 1, 28, 28), dtype=np.float32)
            ref = run_model_logits(bin_dir, path, x, tmp)
            for fmt in ("json", "npy", "npz"):
                got = predict(port, model, x, fmt)
                check(got.shape == ref.shape and np.array_equal(got, ref),
                      "%s %s rows=%d: max |diff| %g vs run-model" % (model, fmt, rows,
                                                                     np.abs(got - ref).max() if got.shape == ref.shape else -1))


def check_vad(port, bin_dir, vad, tmp):
    """A three-input model (float32 audio, a [2, 1, 128] state, a 0-d int64 rate) as .npz and JSON."""
    rng = np.random.default_rng(3)
    feeds = {"input": rng.standard_normal((1, 512)).astype(np.float32) * 0.1,
             "state": np.zeros((2, 1, 128), np.float32), "sr": np.array(16000, np.int64)}
    d = tempfile.mkdtemp(dir=tmp)
    args = [os.path.join(bin_dir, "run-model"), vad, "--output-dir", d]
    for name, a in feeds.items():
        np.save(os.path.join(d, name + ".npy"), a)
        args += ["--input", "%s=%s" % (name, os.path.join(d, name + ".npy"))]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, timeout=60)
    ref = {k: np.load(os.path.join(d, k + ".npy")) for k in ("output", "stateN")}
    status, ct, data = request(port, "POST", "/v1/models/vad:predict", npz_bytes(**feeds), {"Content-Type": "application/x-npz"})
    got = np.load(io.BytesIO(data)) if status == 200 else {}
    check(status == 200 and all(np.array_equal(got[k], ref[k]) for k in ref),
          "vad .npz: HTTP %d, outputs equal run-model's" % status)
    body = json.dumps({"inputs": {"input": feeds["input"].tolist(), "state": feeds["state"].tolist(), "sr": 16000}})
    status, ct, data = request(port, "POST", "/v1/models/vad:predict", body, {"Content-Type": "application/json"})
    out = json.loads(data).get("outputs", {}) if status == 200 else {}
    check(status == 200 and all(np.array_equal(np.array(out[k], np.float32), ref[k]) for k in ref),
          "vad JSON: HTTP %d, outputs equal run-model's" % status)
    status, _, data = request(port, "POST", "/v1/models/vad:predict", npy_bytes(feeds["input"]), {"Content-Type": "application/x-npy"})
    check(status == 400, "vad .npy (three inputs): HTTP %d, expected 400" % status)


def load_with_reloads(port, server, served, cnn_file, mlp_file, x, refs, requests=2000, clients=8):
    """`requests` predicts from `clients` threads while the served file is swapped and reloaded."""
    done = [0]
    errors = []
    lock = threading.Lock()
    per_client = requests // clients

    def client(k):
        conn = http.client.HTTPConnection(HOST, port, timeout=30)
        for i in range(per_client):
            row = (k * per_client + i) % len(x)
            try:
                got = predict(port, "cnn", x[row:row + 1], "json", conn)
                if not any(np.allclose(got, r[row:row + 1], rtol=0, atol=1e-5) for r in refs):
                    errors.append("row %d: an answer that is neither model's" % row)
            except Exception as e:  # noqa: BLE001 - every failure counts
                errors.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=30)
            with lock:
                done[0] += 1
        conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    reload_results = []
    for step, source in enumerate((mlp_file, cnn_file, mlp_file)):
        while done[0] < requests * (step + 1) // 4 and any(t.is_alive() for t in threads):
            time.sleep(0.005)
        shutil.copyfile(source, served + ".tmp")
        os.rename(served + ".tmp", served)  # atomic replace
        if step < 2:
            status, _, body = request(port, "POST", "/v1/models/cnn:reload", b"")
            reload_results.append(status == 200)
        else:
            before = server.text().count("reloaded cnn")
            server.proc.send_signal(signal.SIGHUP)
            t0 = time.time()
            while server.text().count("reloaded cnn") == before and time.time() - t0 < 10:
                time.sleep(0.01)
            reload_results.append(server.text().count("reloaded cnn") > before)
    for t in threads:
        t.join()
    check(not errors, "%d of %d requests failed during reloads; first: %s" % (len(errors), requests, errors[:1]))
    check(reload_results == [True, True, True], "reloads under load (:reload, :reload, SIGHUP): %s" % reload_results)
    print("load: %d requests from %d clients, 3 reloads, %d errors" % (requests, clients, len(errors)), flush=True)


def check_failed_reload(port, served, mlp_file, x, mlp_ref):
    status, _, body = request(port, "GET", "/v1/models/cnn")
    generation = json.loads(body)["generation"]
    with open(served + ".tmp", "wb") as f:
        f.write(b"this is not an onnx model")
    os.rename(served + ".tmp", served)
    status, _, body = request(port, "POST", "/v1/models/cnn:reload", b"")
    check(status == 500 and "still serving the previous model" in json.loads(body).get("error", ""),
          "failed reload answers 500 with the reason: %d %s" % (status, body[:200]))
    got = predict(port, "cnn", x[:1])
    check(np.allclose(got, mlp_ref[:1], rtol=0, atol=1e-5), "after a failed reload the previous model still answers")
    status, _, body = request(port, "GET", "/v1/models/cnn")
    info = json.loads(body)
    check(info["generation"] == generation and "last_reload_error" in info,
          "failed reload keeps the generation and reports the error: %s" % body[:300])
    shutil.copyfile(mlp_file, served)


def check_metrics(port, min_requests):
    status, ct, body = request(port, "GET", "/metrics")
    text = body.decode()
    check(status == 200 and ct.startswith("text/plain"), "GET /metrics: %d %s" % (status, ct))
    m = re.search(r'^whittle_requests_total\{model="cnn",code="200"\} (\d+)$', text, re.M)
    check(m and int(m.group(1)) >= min_requests, "whittle_requests_total for cnn 200: %s" % (m and m.group(1)))
    for needle in ('whittle_request_errors_total{model="cnn",code="400"}', 'whittle_requests_total{model="_unknown",code="404"}',
                   'whittle_batch_rows_bucket{model="cnn",le="8"}', 'whittle_queue_depth{model="cnn"}',
                   'whittle_request_duration_seconds_bucket{model="cnn",le="+Inf"}',
                   'whittle_request_latency_seconds{model="cnn",quantile="0.99"}',
                   'whittle_model_reloads_total{model="cnn",result="error"} 1', "# TYPE whittle_batch_rows histogram"):
        check(needle in text, "/metrics has %s" % needle)


def check_deadline_and_queue(bin_dir, models_dir, tmp):
    """A request whose deadline passes while its batch waits: 504. A full queue: 503. Drain on SIGTERM."""
    server = Server(os.path.join(bin_dir, "serve-model"),
                    [os.path.join(models_dir, "cnn.onnx"), "--max-batch", "8", "--max-delay-ms", "300",
                     "--max-queue", "1", "--batch-policy", "timeout"], os.path.join(tmp, "server_deadline.log"))
    try:
        body = json.dumps({"inputs": {"image": np.zeros((1, 1, 28, 28)).tolist()}})
        status, _, data = request(server.port, "POST", "/v1/models/cnn:predict", body,
                                  {"Content-Type": "application/json", "X-Deadline-Ms": "5"})
        check(status == 504, "deadline of 5 ms under a 300 ms batching delay: HTTP %d %s" % (status, data[:200]))
        results = {}

        def one(k):
            results[k] = request(server.port, "POST", "/v1/models/cnn:predict", body, {"Content-Type": "application/json"})[0]

        first = threading.Thread(target=one, args=(0,))
        first.start()
        time.sleep(0.1)  # the first waits in the queue (300 ms for company); the queue holds one
        one(1)
        first.join()
        check(results.get(0) == 200 and results.get(1) == 503, "queue of one: statuses %s (expected 200, 503)" % results)
        # SIGTERM while a request waits in the queue: it is answered, then the server exits 0.
        results.clear()
        waiting = threading.Thread(target=one, args=(2,))
        waiting.start()
        time.sleep(0.1)
        server.proc.send_signal(signal.SIGTERM)
        waiting.join()
        try:
            rc = server.proc.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        check(results.get(2) == 200 and rc == 0, "drain on SIGTERM: the queued request got %s, exit status %s" %
              (results.get(2), rc))
    finally:
        server.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--vad", required=True, help="tests/corpus/control_flow/silero_vad.onnx")
    args = ap.parse_args()
    start = time.time()
    tmp = tempfile.mkdtemp(prefix="serve_model_check_")
    serve = os.path.join(args.bin, "serve-model")
    cnn_file, mlp_file = os.path.join(args.models, "cnn.onnx"), os.path.join(args.models, "mlp.onnx")
    servers = []
    try:
        # 1. No batching: exact outputs, metadata.
        a = Server(serve, [cnn_file, "mlp=" + mlp_file, "vad=" + args.vad], os.path.join(tmp, "server_a.log"))
        servers.append(a)
        check_metadata(a.port)
        check_exact(a.port, args.bin, args.models, tmp)
        check_vad(a.port, args.bin, args.vad, tmp)
        check(a.stop() == 0 and "stopped" in a.text(), "server A exits 0 after SIGTERM")

        # 2. Dynamic batching on a file we may replace: load, reloads, failed reload, malformed, metrics.
        served = os.path.join(tmp, "served.onnx")
        shutil.copyfile(cnn_file, served)
        max_body = 2 << 20
        b = Server(serve, ["cnn=" + served, "--max-batch", "8", "--max-delay-ms", "2", "--max-body-mb", "2",
                           "--io-timeout-s", "2", "--keep-alive-s", "2"], os.path.join(tmp, "server_b.log"))
        servers.append(b)
        x = np.random.default_rng(7).random((64, 1, 28, 28), dtype=np.float32)
        cnn_ref = run_model_logits(args.bin, cnn_file, x, tmp)
        mlp_ref = run_model_logits(args.bin, mlp_file, x, tmp)
        got = predict(b.port, "cnn", x[:5])
        check(np.allclose(got, cnn_ref[:5], rtol=0, atol=1e-5), "batched server: 5 rows equal run-model's to 1e-5")
        load_with_reloads(b.port, b, served, cnn_file, mlp_file, x, [cnn_ref, mlp_ref])
        check_failed_reload(b.port, served, mlp_file, x, mlp_ref)
        sent = run_malformed(b.port, max_body, 56)
        status, _, _ = request(b.port, "GET", "/healthz")
        check(status == 200, "after %d malformed requests /healthz answers 200 (got %d)" % (sent, status))
        got = predict(b.port, "cnn", x[:2])
        check(np.allclose(got, mlp_ref[:2], rtol=0, atol=1e-5), "after the malformed requests predict still answers")
        check_metrics(b.port, 2000)
        check(b.stop() == 0 and "stopped" in b.text(), "server B exits 0 after SIGTERM")

        # 3. Deadlines and the bounded queue.
        check_deadline_and_queue(args.bin, args.models, tmp)
    finally:
        for s in servers:
            s.stop()
    elapsed = time.time() - start
    print("serve_model_check: %s in %.1f s" % ("FAILED (%d)" % len(FAILURES) if FAILURES else "OK", elapsed))
    if FAILURES:
        for f in FAILURES:
            print("  -", f)
        print("logs kept in", tmp)
        return 1
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
