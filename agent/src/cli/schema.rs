//! `aerostream schema list|get|register|check`: the schema registry
//! (Confluent's Schema Registry API, docs/schema-registry.md) from the
//! command line, over HTTP to any agent's registry.

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::{json, Value};

use super::http::{self, segment};
use super::output::{print_json, print_text, Format, Table};

const MEDIA: &str = "application/vnd.schemaregistry.v1+json";

#[derive(clap::Args)]
pub struct SchemaArgs {
    /// An agent's schema registry, host:port or http://host:port.
    #[arg(
        long,
        env = "AEROSTREAM_SCHEMA_REGISTRY",
        default_value = "127.0.0.1:8081",
        global = true
    )]
    registry: String,
    /// USER:PASSWORD for the registry's Basic login (a SCRAM user), when
    /// the cluster authenticates clients.
    #[arg(long, env = "AEROSTREAM_SCHEMA_REGISTRY_AUTH", global = true)]
    basic_auth: Option<String>,
    /// `table` for people, `json` for scripts.
    #[arg(long, value_enum, default_value = "table", global = true)]
    output: Format,
    #[command(subcommand)]
    command: SchemaCommand,
}

#[derive(clap::Subcommand)]
enum SchemaCommand {
    /// Every subject with its latest version, id and type.
    List {
        /// Only subjects whose names start with this.
        #[arg(long)]
        prefix: Option<String>,
        /// Soft-deleted subjects too.
        #[arg(long)]
        deleted: bool,
    },
    /// A subject's version (the latest by default): id, type, references
    /// and the schema.
    Get {
        subject: String,
        #[arg(long, default_value = "latest")]
        version: String,
    },
    /// Registers the schema in FILE under SUBJECT (a new version when it
    /// differs from the subject's versions and is compatible with them).
    Register {
        subject: String,
        /// The schema's text (`-` for standard input).
        #[arg(long)]
        file: String,
        #[command(flatten)]
        kind: SchemaKind,
    },
    /// Whether the schema in FILE may become SUBJECT's next version under
    /// the subject's compatibility level; exits with status 1 when not.
    Check {
        subject: String,
        #[arg(long)]
        file: String,
        #[command(flatten)]
        kind: SchemaKind,
        /// Check against this version only (`latest` or a number) instead
        /// of the versions the level names.
        #[arg(long)]
        version: Option<String>,
    },
}

#[derive(clap::Args)]
struct SchemaKind {
    /// AVRO, JSON or PROTOBUF.
    #[arg(long = "type", default_value = "AVRO")]
    schema_type: String,
    /// A reference, NAME=SUBJECT:VERSION (repeatable).
    #[arg(long = "reference", value_parser = reference)]
    references: Vec<Value>,
}

fn reference(s: &str) -> Result<Value, String> {
    let (name, rest) = s
        .split_once('=')
        .ok_or("a reference is NAME=SUBJECT:VERSION")?;
    let (subject, version) = rest
        .rsplit_once(':')
        .ok_or("a reference is NAME=SUBJECT:VERSION")?;
    let version: i32 = version
        .parse()
        .map_err(|_| format!("reference {name}: version {version} is not a number"))?;
    Ok(json!({ "name": name, "subject": subject, "version": version }))
}

struct Registry {
    addr: String,
    auth: Option<String>,
}

impl Registry {
    /// The JSON answer, or the registry's error as one line.
    async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        http::json_call(
            "the schema registry",
            &self.addr,
            method,
            path,
            body,
            MEDIA,
            self.auth.as_deref(),
        )
        .await
    }
}

fn read_schema(file: &str) -> anyhow::Result<String> {
    if file == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .context("read the schema from standard input")?;
        return Ok(s);
    }
    std::fs::read_to_string(file).with_context(|| format!("read the schema from {file}"))
}

fn schema_body(file: &str, kind: &SchemaKind) -> anyhow::Result<Value> {
    let ty = kind.schema_type.to_ascii_uppercase();
    if !matches!(ty.as_str(), "AVRO" | "JSON" | "PROTOBUF") {
        bail!("--type is AVRO, JSON or PROTOBUF, not {}", kind.schema_type);
    }
    Ok(json!({
        "schema": read_schema(file)?,
        "schemaType": ty,
        "references": kind.references,
    }))
}

#[derive(Serialize)]
struct Listed {
    subject: String,
    version: i64,
    id: i64,
    schema_type: String,
}

pub async fn run(args: SchemaArgs) -> anyhow::Result<()> {
    let registry = Registry {
        addr: http::address(&args.registry, "--registry")?.to_owned(),
        auth: args.basic_auth.clone(),
    };
    let out = args.output;
    match args.command {
        SchemaCommand::List { prefix, deleted } => {
            let mut path = format!("/schemas?latestOnly=true&deleted={deleted}");
            if let Some(p) = prefix {
                path.push_str(&format!("&subjectPrefix={}", segment(&p)));
            }
            let rows = registry.call("GET", &path, None).await?;
            let listed: Vec<Listed> = rows
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .map(|r| Listed {
                            subject: r["subject"].as_str().unwrap_or_default().to_owned(),
                            version: r["version"].as_i64().unwrap_or_default(),
                            id: r["id"].as_i64().unwrap_or_default(),
                            schema_type: r["schemaType"].as_str().unwrap_or("AVRO").to_owned(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            match out {
                Format::Json => print_json(&listed)?,
                Format::Table => {
                    let mut t = Table::new(&["SUBJECT", "VERSION", "ID", "TYPE"]);
                    for l in &listed {
                        t.row(vec![
                            l.subject.clone(),
                            l.version.to_string(),
                            l.id.to_string(),
                            l.schema_type.clone(),
                        ]);
                    }
                    t.print();
                }
            }
        }
        SchemaCommand::Get { subject, version } => {
            let v = registry
                .call(
                    "GET",
                    &format!(
                        "/subjects/{}/versions/{}",
                        segment(&subject),
                        segment(&version)
                    ),
                    None,
                )
                .await?;
            match out {
                Format::Json => print_json(&v)?,
                Format::Table => {
                    let schema = v["schema"].as_str().unwrap_or_default();
                    // JSON schemas (Avro, JSON Schema) pretty-printed
                    let shown = serde_json::from_str::<Value>(schema)
                        .ok()
                        .and_then(|j| serde_json::to_string_pretty(&j).ok())
                        .unwrap_or_else(|| schema.to_owned());
                    print_text(&format!(
                        "subject: {}\nversion: {}\nid: {}\ntype: {}\nreferences: {}\n\n{shown}",
                        v["subject"].as_str().unwrap_or_default(),
                        v["version"],
                        v["id"],
                        v["schemaType"].as_str().unwrap_or("AVRO"),
                        v.get("references")
                            .map_or("none".to_owned(), Value::to_string),
                    ));
                }
            }
        }
        SchemaCommand::Register {
            subject,
            file,
            kind,
        } => {
            let body = schema_body(&file, &kind)?;
            let path = format!("/subjects/{}/versions", segment(&subject));
            let id = registry.call("POST", &path, Some(&body)).await?;
            // the version the schema is under, now
            let found = registry
                .call(
                    "POST",
                    &format!("/subjects/{}", segment(&subject)),
                    Some(&body),
                )
                .await?;
            let answer = json!({ "subject": subject, "id": id["id"], "version": found["version"] });
            match out {
                Format::Json => print_json(&answer)?,
                Format::Table => print_text(&format!(
                    "registered under {subject}: version {}, id {}",
                    found["version"], id["id"]
                )),
            }
        }
        SchemaCommand::Check {
            subject,
            file,
            kind,
            version,
        } => {
            let body = schema_body(&file, &kind)?;
            let path = match &version {
                Some(v) => format!(
                    "/compatibility/subjects/{}/versions/{}?verbose=true",
                    segment(&subject),
                    segment(v)
                ),
                None => format!(
                    "/compatibility/subjects/{}/versions?verbose=true",
                    segment(&subject)
                ),
            };
            let v = registry.call("POST", &path, Some(&body)).await?;
            let compatible = v["is_compatible"].as_bool().unwrap_or(false);
            match out {
                Format::Json => print_json(&v)?,
                Format::Table => {
                    if compatible {
                        print_text(&format!("compatible with {subject}"));
                    } else {
                        let mut text = format!("NOT compatible with {subject}:");
                        for m in v["messages"].as_array().into_iter().flatten() {
                            text.push_str(&format!("\n  - {}", m.as_str().unwrap_or_default()));
                        }
                        print_text(&text);
                    }
                }
            }
            if !compatible {
                std::process::exit(1);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_path_segments_are_read_and_written() {
        assert_eq!(
            reference("Address=address-value:2").unwrap(),
            json!({"name": "Address", "subject": "address-value", "version": 2})
        );
        assert!(reference("Address").is_err());
        assert!(reference("A=s:x").is_err());
        assert_eq!(segment("orders-value"), "orders-value");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }
}
