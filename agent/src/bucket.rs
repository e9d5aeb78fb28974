//! `aerostream bucket check`: whether the bucket behind `--object-store` has
//! the lifecycle rules AeroStream relies on, and (`--apply`) installing the
//! missing ones; and the same check in the background at `serve` start-up.
//! The work is in the `lifecycle` crate, linked behind the
//! `bucket-lifecycle` feature so the AWS SDK stays out of builds without it.

use crate::config::Settings;

#[derive(clap::Args)]
pub struct BucketArgs {
    #[command(subcommand)]
    pub command: BucketCommand,
}

#[derive(clap::Subcommand)]
pub enum BucketCommand {
    /// Check the bucket's lifecycle rules (abort incomplete multipart
    /// uploads, expire PREFIX/tombstones/). Exit status: 0 all in place,
    /// 1 missing or wrong, 2 could not check, 3 not checkable on this store
    /// (GCS, Azure).
    Check(CheckArgs),
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// The broker's object store: s3://bucket/prefix (gs:// and az:// are
    /// recognised but cannot be checked); the same AWS_* environment
    /// variables as `serve` configure the client.
    #[arg(long, env = "AEROSTREAM_OBJECT_STORE")]
    pub object_store: String,
    /// Install the missing rules and fix AeroStream's own wrong ones, keeping
    /// every other rule of the bucket as it is; prints what it changed.
    #[arg(long)]
    pub apply: bool,
}

/// Exit statuses of `bucket check`.
#[cfg_attr(
    not(feature = "bucket-lifecycle"),
    expect(dead_code, reason = "without the feature only ERROR is returned")
)]
pub mod exit {
    pub const OK: i32 = 0;
    pub const RULES_MISSING: i32 = 1;
    pub const ERROR: i32 = 2;
    pub const UNSUPPORTED_STORE: i32 = 3;
}

/// Runs `bucket check`; returns the exit status.
#[cfg(feature = "bucket-lifecycle")]
pub fn run(args: &BucketArgs) -> i32 {
    let BucketCommand::Check(check) = &args.command;
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            return exit::ERROR;
        }
    };
    rt.block_on(check::run(check))
}

#[cfg(not(feature = "bucket-lifecycle"))]
pub fn run(_args: &BucketArgs) -> i32 {
    eprintln!(
        "error: this aerostream was built without the bucket-lifecycle feature; \
         see docs/tiering.md for the rules to set"
    );
    exit::ERROR
}

/// Checks the bucket's rules in the background, off the start-up path: a
/// warning per rule missing, an info line when they may not be read. Never
/// fails start-up.
#[cfg(feature = "bucket-lifecycle")]
pub fn spawn_startup_check(s: &Settings) {
    let Some(url) = s.object_store.clone() else {
        return;
    };
    let tombstones = s.object_store_tombstones;
    tokio::spawn(async move {
        let env = cache::StoreEnv::from_process();
        for notice in lifecycle::startup_notices(&url, &env, tombstones).await {
            match notice {
                lifecycle::Notice::Warn(line) => tracing::warn!("{line}"),
                lifecycle::Notice::Info(line) => tracing::info!("{line}"),
            }
        }
    });
}

#[cfg(not(feature = "bucket-lifecycle"))]
pub fn spawn_startup_check(_s: &Settings) {}

#[cfg(feature = "bucket-lifecycle")]
mod check {
    use cache::StoreEnv;
    use lifecycle::{Bucket, Store};

    use super::{exit, CheckArgs};

    pub async fn run(args: &CheckArgs) -> i32 {
        let env = StoreEnv::from_process();
        let url = args.object_store.as_str();
        let (bucket, layout) = match lifecycle::store(url, &env) {
            Ok(Store::S3 { bucket, layout }) => (bucket, layout),
            Ok(Store::Unsupported { kind, scheme }) => {
                println!(
                    "cannot check lifecycle rules on {kind} ({scheme}://): AeroStream reads them \
                     on S3 only; {}",
                    lifecycle::terraform_pointer(kind)
                );
                return exit::UNSUPPORTED_STORE;
            }
            Ok(Store::Local) => {
                println!("{url} is not a bucket: a local store has no lifecycle rules to check");
                return exit::OK;
            }
            Err(e) => return fail(&e),
        };
        let b = match Bucket::connect(bucket, layout, &env).await {
            Ok(b) => b,
            Err(e) => return fail(&e),
        };
        let root = match b.layout().root() {
            "" => "(none)".to_string(),
            r => r.to_string(),
        };
        println!("bucket {} (S3), cluster prefix {root}", b.name());
        let mut checked = match b.check().await {
            Ok(c) => c,
            Err(e) => return fail(&e),
        };
        for line in checked.lines(&b) {
            println!("  {line}");
        }
        if args.apply && !checked.report.all_good() {
            let plan = match b.apply(&checked).await {
                Ok(p) => p,
                Err(e) => return fail(&e),
            };
            if plan.changes.is_empty() {
                println!("changed nothing");
            } else {
                println!(
                    "changed the bucket's lifecycle configuration (other rules kept as they were):"
                );
            }
            for line in lifecycle::plan_lines(&plan, b.layout()) {
                println!("  {line}");
            }
            checked = match b.check().await {
                Ok(c) => c,
                Err(e) => return fail(&e),
            };
            println!("now:");
            for line in checked.lines(&b) {
                println!("  {line}");
            }
        }
        if checked.report.all_good() {
            println!("all lifecycle rules AeroStream relies on are in place");
            exit::OK
        } else {
            let missing = checked
                .report
                .findings
                .iter()
                .any(|f| !matches!(f.status, lifecycle::rules::Status::Present { .. }));
            if missing && !args.apply {
                println!(
                    "run `aerostream bucket check --object-store {url} --apply` to install the \
                     missing rules (other rules are kept)"
                );
            }
            if !checked.report.hazards.is_empty() {
                println!("rules marked DANGER are not changed by --apply: edit them yourself");
            }
            exit::RULES_MISSING
        }
    }

    fn fail(e: &lifecycle::LifecycleError) -> i32 {
        eprintln!("error: {e}");
        exit::ERROR
    }
}
