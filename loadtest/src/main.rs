//! The `loadtest` command line: `run` one workload against a broker,
//! `compare` result files side by side, `check` workload files, and
//! `mock-broker`: librdkafka's mock cluster as the floor to measure against.

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
use loadtest::mock_broker::{MockBroker, MockTopic};
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

fn key_value_arg(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not KEY=VALUE")),
    }
}

#[derive(Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "parsed once per process; boxing the run's arguments buys nothing"
)]
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
        /// Set a consumer client property on top of the workload's
        /// `consumer_config` (KEY=VALUE; repeat for several), recorded in the
        /// result's workload. side-by-side.sh uses it for the floor only:
        /// fetch.wait.max.ms=1, because librdkafka's mock cluster holds an
        /// empty fetch for the whole wait even when records arrive.
        #[arg(long, value_parser = key_value_arg)]
        consumer_config: Vec<(String, String)>,
        /// Set a property of every Kafka client of the run (producers,
        /// consumers, the admin client) under the workload's own
        /// (KEY=VALUE; repeat for several), recorded in the result's
        /// workload: how to reach a TLS or SASL listener, e.g.
        /// security.protocol=ssl and ssl.ca.location=ca.pem. TLS needs a
        /// loadtest built with `--features tls`.
        #[arg(long, value_parser = key_value_arg)]
        client_config: Vec<(String, String)>,
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
    /// Serve librdkafka's built-in mock cluster (one broker on a free port
    /// of 127.0.0.1) until SIGTERM or SIGINT: the floor, a Kafka-wire broker
    /// that does the least possible work, to measure what the load generator
    /// itself costs. Prints `loadtest mock-broker listening kafka=HOST:PORT
    /// topics=NAME:PARTITIONS,…` when ready. The mock does not implement
    /// CreateTopics: its topics are made here, and runs use them with
    /// `loadtest run --topic NAME --no-create`.
    MockBroker {
        /// Topic to create; repeat for several.
        #[arg(long = "topic", required = true)]
        topics: Vec<String>,
        /// Partitions of each topic.
        #[arg(
            long,
            conflicts_with = "workload",
            required_unless_present = "workload"
        )]
        partitions: Option<u32>,
        /// Take the partition count from this workload file.
        #[arg(long)]
        workload: Option<PathBuf>,
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
            consumer_config,
            client_config,
            topic,
            no_create,
            delete_topic,
            replication_factor,
            progress,
            strict,
        } => {
            let mut w = Workload::from_file(&workload)?.with_overrides(&Overrides {
                rate,
                warmup,
                duration,
                drain_timeout,
            })?;
            for (k, v) in consumer_config {
                println!("consumer config {k}={v} (given on the command line)");
                w.consumer_config.insert(k, v);
            }
            for (k, v) in client_config {
                println!("client config {k}={v} (given on the command line)");
                w.client_config.insert(k, v);
            }
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
        Command::MockBroker {
            topics,
            partitions,
            workload,
        } => {
            let partitions = match (partitions, workload) {
                (Some(n), _) => n,
                (None, Some(path)) => Workload::from_file(&path)?.partitions,
                (None, None) => anyhow::bail!("give --partitions or --workload"),
            };
            let topics: Vec<MockTopic> = topics
                .into_iter()
                .map(|name| MockTopic { name, partitions })
                .collect();
            let broker = MockBroker::start(&topics)?;
            // stdout is line-buffered: the line is out before we wait.
            println!("{}", broker.ready_line());
            wait_for_stop_signal()?;
            println!("loadtest mock-broker stopping");
            drop(broker);
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

/// Blocks until SIGTERM or SIGINT.
fn wait_for_stop_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal runtime")?;
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok::<(), anyhow::Error>(())
    })
}
