//! The `loadtest` command line: `run` one workload against a broker,
//! `compare` result files side by side, `check` workload files.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use loadtest::driver::kafka::KafkaDriver;
use loadtest::report::{summary_text, RunResult};
use loadtest::runner::{self, RunOptions};
use loadtest::workload::{parse_duration, Overrides, Rate, Workload};

#[derive(Parser)]
#[command(
    name = "loadtest",
    version,
    about = "OpenMessaging-Benchmark-style load generator for Kafka-wire brokers"
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
        /// Broker bootstrap address, HOST:PORT.
        #[arg(long)]
        bootstrap: String,
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
        /// Broker label the ratios are taken against.
        #[arg(long, default_value = "aerostream")]
        baseline: String,
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
            bootstrap,
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
            let driver = Arc::new(KafkaDriver::new(&bootstrap, &w));
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
            let table = loadtest::compare::markdown(&runs, &baseline);
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
