#!/usr/bin/env python3
"""test_proxy.py - proxy.py, the test site's HTTP proxy, on loopback: an
allowed CONNECT is tunnelled both ways and another refused 403; its index
host answers PEP 503 pages and the wheel's bytes; a --forward host is
passed on to its upstream, path as asked; any other host is refused 403;
every request is in the log as "METHOD TARGET STATUS"."""
import http.client
import http.server
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def echo_server():
    """A TCP server on 127.0.0.1 that sends back what it gets; its port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)

    def serve():
        while True:
            c, _ = srv.accept()
            data = c.recv(1024)
            c.sendall(b"echo:" + data)
            c.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


class Upstream(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        body = ("upstream saw %s host=%s" % (self.path, self.headers.get("Host"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class ProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pbx-proxy-test.")
        cls.wheels = os.path.join(cls.tmp, "wheels")
        os.mkdir(cls.wheels)
        with open(os.path.join(cls.wheels, "Demo_Pkg-1.0-py3-none-any.whl"), "wb") as f:
            f.write(b"wheel bytes")
        cls.echo = echo_server()
        cls.up = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
        threading.Thread(target=cls.up.serve_forever, daemon=True).start()
        cls.log = os.path.join(cls.tmp, "proxy.log")
        port_file = os.path.join(cls.tmp, "port")
        cls.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "proxy.py"), "--log", cls.log,
                                     "--port-file", port_file, "--index", "index.test.invalid=" + cls.wheels,
                                     "--connect", "127.0.0.1:%d" % cls.echo,
                                     "--forward", "mirror.test.invalid=127.0.0.1:%d" % cls.up.server_address[1]])
        end = time.time() + 20
        while not os.path.exists(port_file) and time.time() < end:
            time.sleep(0.05)
        cls.port = int(open(port_file).read())

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait()
        cls.up.shutdown()

    def get(self, url):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", url)
        r = c.getresponse()
        return r.status, r.read()

    def connect(self, target):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(1024)
            if not chunk:
                break
            head += chunk
        return s, head

    def logged(self, line):
        with open(self.log) as f:
            return line in f.read().splitlines()

    def test_connect_allowed(self):
        s, head = self.connect("127.0.0.1:%d" % self.echo)
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), head)
        s.sendall(b"hello")
        self.assertEqual(s.recv(1024), b"echo:hello")
        s.close()
        self.assertTrue(self.logged("CONNECT 127.0.0.1:%d 200" % self.echo))

    def test_connect_refused(self):
        s, head = self.connect("127.0.0.1:1")
        self.assertTrue(head.startswith(b"HTTP/1.1 403"), head)
        s.close()
        self.assertTrue(self.logged("CONNECT 127.0.0.1:1 403"))

    def test_index(self):
        status, body = self.get("http://index.test.invalid/simple/")
        self.assertEqual(status, 200)
        self.assertIn(b'href="/simple/demo-pkg/"', body)
        status, body = self.get("http://index.test.invalid/simple/Demo.Pkg/")
        self.assertEqual(status, 200)
        self.assertIn(b'href="/files/Demo_Pkg-1.0-py3-none-any.whl"', body)
        self.assertEqual(self.get("http://index.test.invalid/files/Demo_Pkg-1.0-py3-none-any.whl"),
                         (200, b"wheel bytes"))
        self.assertEqual(self.get("http://index.test.invalid/simple/nothing/")[0], 404)
        self.assertEqual(self.get("http://index.test.invalid/files/..%2Fproxy.log")[0], 404)

    def test_forward(self):
        status, body = self.get("http://mirror.test.invalid/debian/x?y=1")
        self.assertEqual((status, body), (200, b"upstream saw /debian/x?y=1 host=mirror.test.invalid"))
        self.assertTrue(self.logged("GET http://mirror.test.invalid/debian/x?y=1 200"))

    def test_other_host_refused(self):
        self.assertEqual(self.get("http://elsewhere.test.invalid/")[0], 403)
        self.assertEqual(self.get("/not-a-proxy-request")[0], 403)
        self.assertTrue(self.logged("GET http://elsewhere.test.invalid/ 403"))


if __name__ == "__main__":
    unittest.main()
