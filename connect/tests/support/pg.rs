//! A throwaway PostgreSQL server for the PostgreSQL connectors' tests:
//! Debian's server binaries (`/usr/lib/postgresql/*/bin`), a data dir of
//! its own, a free port on 127.0.0.1, trust authentication. As root (as CI
//! runs) the server runs as the `postgres` user, since PostgreSQL refuses
//! to run as root. Without the binaries the tests say so loudly and are
//! skipped; `scripts/setup.sh` installs them, so CI always runs them.

use std::path::PathBuf;
use std::process::Command;

pub struct TestDb {
    dir: tempfile::TempDir,
    bindir: PathBuf,
    as_postgres: bool,
    pub port: u16,
}

fn bindir() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").exists())
        .collect();
    // the newest: 15 after 9.6
    found.sort_by_key(|b| {
        b.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .map(|v| {
                v.split('.')
                    .map(|p| p.parse::<u32>().unwrap_or(0))
                    .collect::<Vec<_>>()
            })
    });
    found.pop()
}

impl TestDb {
    /// A running server, or None (with a loud message) when PostgreSQL is
    /// not installed.
    pub fn start() -> Option<TestDb> {
        let Some(bindir) = bindir() else {
            eprintln!(
                "\n!!!!!!!! PostgreSQL IS NOT INSTALLED (no /usr/lib/postgresql/*/bin/initdb): \
                 the PostgreSQL connector tests are SKIPPED; run scripts/setup.sh !!!!!!!!\n"
            );
            return None;
        };
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| o.stdout.starts_with(b"0\n"))
            .unwrap_or(false);
        let dir = tempfile::Builder::new()
            .prefix("aerostream-pg-")
            .tempdir()
            .unwrap();
        if as_postgres {
            let chown = Command::new("chown")
                .arg("postgres:postgres")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(chown.success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let db = TestDb {
            dir,
            bindir,
            as_postgres,
            port,
        };
        let data = db.dir.path().join("data");
        let out = db
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["--auth=trust", "-U", "postgres", "--no-sync"])
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {out:?}");
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            db.dir.path().display()
        );
        let out = db
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(db.dir.path().join("log"))
            .args(["-w", "-o", &options, "start"])
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl start: {out:?}");
        Some(db)
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bindir.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A client of its own, for the test's statements.
    pub async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
    }
}
