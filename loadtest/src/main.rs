//! The `loadtest` command line: `run` one workload against a broker,
//! `compare` result files side by side, `check` workload files.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use loadtest::driver::bootstrap::{check_bootstrap, DriverKind};
use loadtest::driver::kafka::KafkaDriver;
use loadtest::driver::native::{NativeDriver, NativeOptions, RuntimeMode};
use loadtest::driver::Driver;
use loadtest::report::{summary_text, RunResult};
use loadtest::runner::{self, RunOptions};
use loadtest::workload::{parse_duration, Overrides, Rate, Workload};

#[derive(Parser)]
#[command(
    name = "loadtest",
    version,
    about = "OpenMessaging-Benchmark-style load generator for Kafka-wire brokers and AeroStream's native protocol"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn duration_arg(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

#[derive(Subcommand)]
enum Command {
    /// Run one workload against a broker and report.
    Run {
        /// Workload YAML file.
        #[arg(long)]
        workload: PathBuf,
        /// How to reach the broker: `kafka` (librdkafka over the Kafka wire)
        /// or `native` (the SDK over AeroStream's native protocol).
        #[arg(long, default_value = "kafka")]
        driver: DriverKind,
        /// Broker bootstrap address: HOST:PORT[,HOST:PORT…] for --driver
        /// kafka; aero://HOST:PORT (TCP) or aero+quic://HOST:PORT (QUIC) for
        /// --driver native (the agent's --native-addr, shown as native=… in
        /// its ready line).
        #[arg(long)]
        bootstrap: String,
        /// For aero+quic://: a PEM file of CA certificates to trust (an
        /// agent writes its own to <data dir>/native-tls/ca.pem); repeat
        /// for several.
        #[arg(long)]
        native_tls_ca: Vec<PathBuf>,
        /// For aero+quic://: trust any server certificate (test agents only).
        #[arg(long)]
        native_insecure: bool,
        /// Where the native driver runs the SDK: `shared:N` (one runtime of
        /// N worker threads for all clients; `shared` is shared:1) or
        /// `per-client` (a current-thread runtime per client).
        #[arg(long, default_value_t = RuntimeMode::default())]
        native_runtime: RuntimeMode,
        /// Name of the broker in reports.
        #[arg(long, default_value = "broker")]
        broker_label: String,
        /// Sample these processes' CPU and RSS (the broker; several agents
        /// of a cluster are summed), e.g. 4242 or 4242,4243,4244.
        #[arg(long, value_delimiter = ',')]
        broker_pid: Vec<u32>,
        /// Write the result as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Override the workload's total rate (msg/s, e.g. 20k, or `max`).
        #[arg(long)]
        rate: Option<Rate>,
        #[arg(long, value_parser = duration_arg)]
        warmup: Option<Duration>,
        #[arg(long, value_parser = duration_arg)]
        duration: Option<Duration>,
        #[arg(long, value_parser = duration_arg)]
        drain_timeout: Option<Duration>,
        /// Use an existing topic instead of creating a fresh one.
        #[arg(long)]
        topic: Option<String>,
        /// Do not create the topic (it must exist).
        #[arg(long)]
        no_create: bool,
        /// Delete the topic afterwards.
        #[arg(long)]
        delete_topic: bool,
        #[arg(long, default_value_t = 1)]
        replication_factor: u16,
        /// Interval of the progress line.
        #[arg(long, value_parser = duration_arg, default_value = "5s")]
        progress: Duration,
        /// Also fail (exit 3) on any error, not only on lost messages.
        #[arg(long)]
        strict: bool,
    },
    /// Print a side-by-side markdown table of result files.
    Compare {
        /// Row the ratios are taken against: a broker label (default
        /// `aerostream`) when the results compare brokers, a way in
        /// (default `kafka`; `native-tcp`, `native-quic`) when they compare
        /// the drivers of one broker, `BROKER / WAY` when both vary.
        #[arg(long)]
        baseline: Option<String>,
        /// Write the table here as well as to stdout.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Result JSON files.
        #[arg(required = true)]
        results: Vec<PathBuf>,
    },
    /// Validate workload files.
    Check {
        #[arg(required = true)]
        workloads: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("loadtest: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn real_main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Command::Run {
            workload,
            driver,
            bootstrap,
            native_runtime,
            native_tls_ca,
            native_insecure,
            broker_label,
            broker_pid,
            json,
            rate,
            warmup,
            duration,
            drain_timeout,
            topic,
            no_create,
            delete_topic,
            replication_factor,
            progress,
            strict,
        } => {
            let w = Workload::from_file(&workload)?.with_overrides(&Overrides {
                rate,
                warmup,
                duration,
                drain_timeout,
            })?;
            check_bootstrap(driver, &bootstrap)?;
            let driver: Arc<dyn Driver> = match driver {
                DriverKind::Kafka => Arc::new(KafkaDriver::new(&bootstrap, &w)),
                DriverKind::Native => {
                    let native = NativeDriver::new(
                        NativeOptions {
                            url: bootstrap.clone(),
                            runtime: native_runtime,
                            tls_ca: native_tls_ca,
                            insecure: native_insecure,
                        },
                        &w,
                    )?;
                    for note in native.notes() {
                        println!("note: the native driver has no equivalent of {note}; ignored");
                    }
                    Arc::new(native)
                }
            };
            println!("driver {} ({bootstrap})", driver.name());
            let mut opts = RunOptions::new(w, &broker_label, &bootstrap);
            opts.broker_pid = broker_pid;
            opts.topic = topic;
            opts.create_topic = !no_create;
            opts.delete_topic = delete_topic;
            opts.replication_factor = replication_factor;
            opts.progress_every = progress;
            let result = runner::run(driver, &opts, &mut |line| println!("{line}"))?;
            println!("{}", summary_text(&result));
            if let Some(path) = json {
                result.write_json(&path)?;
                println!("result written to {}", path.display());
            }
            if !result.verdict.delivery_ok {
                eprintln!();
                eprintln!("!!! DELIVERY CHECK FAILED: {}", result.verdict.message);
                eprintln!("!!! consumers did not receive every acknowledged message intact");
                return Ok(ExitCode::from(2));
            }
            if strict && !result.verdict.clean {
                eprintln!(
                    "loadtest: --strict: the run had {} errors",
                    result.errors.total()
                );
                return Ok(ExitCode::from(3));
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare {
            baseline,
            out,
            results,
        } => {
            let runs = results
                .iter()
                .map(|p| RunResult::read_json(p))
                .collect::<Result<Vec<_>, _>>()?;
            let table = loadtest::compare::markdown(&runs, baseline.as_deref());
            print!("{table}");
            if let Some(path) = out {
                std::fs::write(&path, &table)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { workloads } => {
            for path in workloads {
                let w = Workload::from_file(&path)?;
                println!(
                    "{}: ok ({}, {} partitions, {}+{} clients, rate {})",
                    path.display(),
                    w.name,
                    w.partitions,
                    w.producers,
                    w.consumers,
                    w.rate
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
