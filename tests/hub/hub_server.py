#!/usr/bin/env python3
"""A local stand-in for the Hugging Face Hub's public HTTP interface, for `deltafin setup`'s
tests (tests/e2e/setup_hub.sh). Serves one directory as one repository, on loopback only:

  GET /api/models/ORG/NAME/revision/REV        {"id", "sha"}; 404 RevisionNotFound otherwise
  GET /api/models/ORG/NAME/tree/COMMIT?recursive=true[&cursor=K]
                                                the listing (lfs.oid = SHA-256 for *.safetensors,
                                                the git blob SHA-1 otherwise), paged with Link
  GET /ORG/NAME/resolve/COMMIT/PATH             302 to /cdn/PATH?commit=... (as the Hub does)
  GET /cdn/PATH                                 the bytes, with Range

Faults, each for the test that asks for it:
  --drop PATH:BYTES     the first response for PATH longer than BYTES stops after BYTES body bytes
                        (the connection is closed)
  --flip PATH:OFFSET    the first response for PATH that covers OFFSET carries that byte flipped
  --status PATH:CODE    every request for PATH answers CODE
  --token T             every API and resolve request needs "Authorization: Bearer T" (401 otherwise)
A fault plan per path, for the network-fault tests (tests/e2e/setup_network_faults.sh); COUNT is
how many times the fault fires (default 1; "always": every time):
  --reset PATH:OFFSET[:COUNT]          a response covering file byte OFFSET stops there with a TCP
                                       reset (RST, not FIN); a request starting at OFFSET is reset
                                       at once. OFFSET +N: N bytes into any response longer than N
  --stall PATH:OFFSET:SECONDS[:COUNT]  a response covering OFFSET (or +N, as above) sends nothing
                                       for SECONDS there, then goes on (if the client is still there)
  --status-first PATH:CODE[:COUNT]     the first COUNT requests for PATH answer CODE; PATH is a
                                       file, or @revision / @tree for the API's requests
  PATH * is any file (a plan for the file itself comes first).
  --request-log FILE                   one line per file request: "PATH START END" (bytes asked)
  --rate BYTES_PER_S    each response is sent at most this fast (so a test can kill a download)
The chosen port (--port, or any free one) is written to --port-file once the server listens.

--write-static DIR writes the same repository as static files instead (the revision and tree
replies, and resolve paths as symlinks to the checkpoint's files), for a fast static server
such as nginx to serve (tools/bench/setup_rate.sh); nothing is served then.
"""
import argparse
import hashlib
import http.server
import json
import os
import re
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse

args = None
lock = threading.Lock()
drops, flips, statuses = {}, {}, {}
resets, stalls, status_first = {}, {}, {}  # path -> [offset, count], [offset, seconds, count], [code, count]
listing = []


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def build_listing(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir != ".":
            out.append({"type": "directory", "path": rel_dir, "oid": "0" * 40, "size": 0})
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            size = os.path.getsize(full)
            if name.endswith(".safetensors"):
                h = hashlib.sha256()
                with open(full, "rb") as f:
                    for block in iter(lambda: f.read(1 << 22), b""):
                        h.update(block)
                out.append({"type": "file", "path": rel, "size": size, "oid": "1" * 40,
                            "lfs": {"oid": h.hexdigest(), "size": size, "pointerSize": 134}})
            else:
                with open(full, "rb") as f:
                    out.append({"type": "file", "path": rel, "size": size, "oid": git_blob_sha1(f.read())})
    return out


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        if args.log:
            sys.stderr.write("hub_server: " + (fmt % a) + "\n")

    def reply(self, code, body=b"", headers=None):
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, code, error_code, message):
        self.reply(code, json.dumps({"error": message}).encode(),
                   {"Content-Type": "application/json", "X-Error-Code": error_code, "X-Error-Message": message})

    def authorized(self):
        if not args.token:
            return True
        if self.headers.get("Authorization") == "Bearer " + args.token:
            return True
        self.error(401, "RepoNotFound", "Invalid username or password.")
        return False

    def injected_status(self, key):
        """Answers an injected status for `key` if its plan says so (True then)."""
        with lock:
            plan = status_first.get(key)
            if (not plan or plan[1] == 0) and not key.startswith("@"):
                plan = status_first.get("*")
            if not plan or plan[1] == 0:
                return False
            if plan[1] > 0:
                plan[1] -= 1
        self.error(plan[0], "Injected", "injected failure %d" % plan[0])
        return True

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(u.path)
        query = urllib.parse.parse_qs(u.query)
        repo = args.repo
        if path.startswith("/cdn/"):
            return self.serve_file(path[len("/cdn/"):])
        if not self.authorized():
            return
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/revision/(.+)", path)
        if m:
            if m.group(1) != repo:
                return self.error(404, "RepoNotFound", "Repository not found")
            if m.group(2) not in (args.branch, args.commit):
                return self.error(404, "RevisionNotFound", "Invalid rev id: " + m.group(2))
            if self.injected_status("@revision"):
                return
            return self.reply(200, json.dumps({"id": repo, "sha": args.commit}).encode(),
                              {"Content-Type": "application/json"})
        m = re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)", path)
        if m:
            if m.group(1) != repo:
                return self.error(404, "RepoNotFound", "Repository not found")
            if m.group(2) not in (args.branch, args.commit):
                return self.error(404, "RevisionNotFound", "Invalid rev id: " + m.group(2))
            if self.injected_status("@tree"):
                return
            start = int(query.get("cursor", ["0"])[0])
            page = listing[start:start + args.page_size]
            headers = {"Content-Type": "application/json"}
            if start + args.page_size < len(listing):
                headers["Link"] = '<%s?recursive=true&cursor=%d>; rel="next"' % (u.path, start + args.page_size)
            return self.reply(200, json.dumps(page).encode(), headers)
        m = re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m:
            if m.group(1) != repo:
                return self.error(404, "RepoNotFound", "Repository not found")
            if m.group(2) not in (args.branch, args.commit):
                return self.error(404, "RevisionNotFound", "Invalid rev id: " + m.group(2))
            rel = m.group(3)
            if rel in statuses:
                return self.error(statuses[rel], "Injected", "injected failure %d" % statuses[rel])
            if self.injected_status(rel):
                return
            return self.reply(302, b"", {"Location": "/cdn/" + urllib.parse.quote(rel) + "?commit=" + args.commit})
        self.error(404, "EntryNotFound", "no such path")

    def serve_file(self, rel):
        full = os.path.realpath(os.path.join(args.root, rel))
        if not full.startswith(os.path.realpath(args.root) + os.sep) or not os.path.isfile(full):
            return self.error(404, "EntryNotFound", "Entry not found")
        size = os.path.getsize(full)
        start, end, code = 0, size - 1, 200
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m:
                return self.reply(416, b"", {"Content-Range": "bytes */%d" % size})
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if start > end:
                return self.reply(416, b"", {"Content-Range": "bytes */%d" % size})
            code = 206
        if args.request_log:
            with lock, open(args.request_log, "a") as log:
                log.write("%s %d %d\n" % (rel, start, end))
        with open(full, "rb") as f:
            f.seek(start)
            body = bytearray(f.read(end - start + 1))
        cut = None
        reset_at = stall_at = None  # body offsets where this response is reset / stalls
        stall_s = 0
        def at(offset):  # where in this body a planned file offset (or +N) falls, or None
            if isinstance(offset, str):
                n = int(offset[1:])
                return n if n < end - start + 1 else None
            return offset - start if start <= offset <= end else None

        with lock:
            for plan in (resets.get(rel), resets.get("*")):
                if plan and plan[1] != 0 and at(plan[0]) is not None:
                    reset_at = at(plan[0])
                    plan[1] -= plan[1] > 0
                    break
            for plan in (stalls.get(rel), stalls.get("*")):  # only a stall before the reset is reached
                if plan and plan[2] != 0 and at(plan[0]) is not None and (reset_at is None or at(plan[0]) < reset_at):
                    stall_at, stall_s = at(plan[0]), plan[1]
                    plan[2] -= plan[2] > 0
                    break
            if rel in drops and drops[rel] < len(body):  # a response long enough to be cut
                cut = drops.pop(rel)
            sent_end = end if cut is None else start + cut - 1
            if rel in flips and start <= flips[rel] <= sent_end:  # only a byte that is sent
                body[flips[rel] - start] ^= 0x5A
                del flips[rel]
        self.send_response(code)
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        data = bytes(body) if cut is None else bytes(body[:cut])
        if reset_at is not None:
            data = data[:reset_at]
        step = 1 << 16
        try:
            i = 0
            while i < len(data):
                n = step if stall_at is None or i >= stall_at else min(step, stall_at - i)
                self.wfile.write(data[i:i + n])
                i += n
                if args.rate:
                    time.sleep(n / args.rate)
                if stall_at is not None and i == stall_at:
                    self.wfile.flush()
                    time.sleep(stall_s)
                    stall_at = None
            if stall_at is not None and stall_at >= len(data):  # a stall at the very end
                self.wfile.flush()
                time.sleep(stall_s)
        except OSError:  # the client gave up (a stall it timed out)
            self.close_connection = True
            return
        if reset_at is not None:
            self.wfile.flush()
            time.sleep(0.5)  # the bytes sent reach the client before the reset (an RST drops unread ones)
            # SO_LINGER 0: close() sends RST, as a reset connection does (not a FIN).
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        if cut is not None:
            self.wfile.flush()
            self.close_connection = True


def write_static(out):
    api = os.path.join(out, "api", "models", args.repo)
    os.makedirs(os.path.join(api, "revision"), exist_ok=True)
    os.makedirs(os.path.join(api, "tree"), exist_ok=True)
    for rev in (args.branch, args.commit):
        with open(os.path.join(api, "revision", rev), "w") as f:
            json.dump({"id": args.repo, "sha": args.commit}, f)
    with open(os.path.join(api, "tree", args.commit), "w") as f:
        json.dump(listing, f)
    for e in listing:
        if e["type"] != "file":
            continue
        link = os.path.join(out, args.repo, "resolve", args.commit, e["path"])
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if not os.path.lexists(link):
            os.symlink(os.path.realpath(os.path.join(args.root, e["path"])), link)


def parse_count(text):
    return -1 if text == "always" else int(text)


def parse_plans(items, fields):
    """PATH:V1[:V2...][:COUNT] -> {PATH: [V1, ..., COUNT]} (COUNT 1 unless given)."""
    out = {}
    for item in items or []:
        parts = item.rsplit(":", fields)
        if len(parts) == fields + 1:
            path, vals, count = parts[0], parts[1:fields], parse_count(parts[fields])
        else:
            parts = item.rsplit(":", fields - 1)
            path, vals, count = parts[0], parts[1:], 1
        conv = lambda v: v if v.startswith("+") else float(v) if "." in v else int(v)
        out[path] = [conv(v) for v in vals] + [count]
    return out


def parse_pairs(items, conv):
    out = {}
    for item in items or []:
        p, v = item.rsplit(":", 1)
        out[p] = conv(v)
    return out


def main():
    global args, listing, drops, flips, statuses, resets, stalls, status_first
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--repo", default="deltafin-test/small")
    ap.add_argument("--branch", default="main")
    ap.add_argument("--commit", default="")
    ap.add_argument("--port-file", default="")
    ap.add_argument("--port", type=int, default=0)  # 0: any free port
    ap.add_argument("--write-static", default="")
    ap.add_argument("--page-size", type=int, default=1000)
    ap.add_argument("--token", default="")
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--drop", action="append")
    ap.add_argument("--flip", action="append")
    ap.add_argument("--status", action="append")
    ap.add_argument("--reset", action="append")
    ap.add_argument("--stall", action="append")
    ap.add_argument("--status-first", action="append")
    ap.add_argument("--request-log", default="")
    ap.add_argument("--log", action="store_true")
    args = ap.parse_args()
    listing = build_listing(args.root)
    if not args.commit:
        args.commit = hashlib.sha1(json.dumps(listing, sort_keys=True).encode()).hexdigest()
    if args.write_static:
        return write_static(args.write_static)
    if not args.port_file:
        ap.error("--port-file is required to serve")
    drops = parse_pairs(args.drop, int)
    flips = parse_pairs(args.flip, int)
    statuses = parse_pairs(args.status, int)
    resets = parse_plans(args.reset, 2)
    stalls = parse_plans(args.stall, 3)
    status_first = parse_plans(args.status_first, 2)

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    srv = Server(("127.0.0.1", args.port), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
