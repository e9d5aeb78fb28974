"""`aerostream process` as the tests run it: a pipeline file in a folder of
its own (its local state store there too), the S3 variables of a moto
server, the log in a file; started, killed with SIGKILL, or stopped with
SIGTERM (which takes a last checkpoint)."""

import os
import shutil
import signal
import subprocess
import tempfile

import servers
from broker import binary


class Process:
    def __init__(self, pipeline, s3, name="process"):
        """`pipeline(dir)`: the pipeline file's text, given the folder."""
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"aerostream-{name}-")
        self.pipeline = os.path.join(self.dir, "pipeline.yaml")
        with open(self.pipeline, "w") as f:
            f.write(pipeline(self.dir))
        self.env = dict(os.environ, **servers.s3_env(s3), RUST_LOG="info")
        self.log_path = os.path.join(self.dir, "process.log")
        self.proc = None

    def start(self):
        log = open(self.log_path, "a")
        self.proc = subprocess.Popen([binary(), "process", "--pipeline", self.pipeline],
                                     stdout=log, stderr=subprocess.STDOUT, env=self.env)
        return self

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def alive(self):
        assert self.proc.poll() is None, f"{self.name} exited:\n{self.log()[-4000:]}"

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        """SIGTERM, which takes a last checkpoint; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
