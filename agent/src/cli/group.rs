//! `aerostream group list|describe`: consumer groups as any Kafka admin
//! tool sees them (ListGroups on every broker; DescribeGroups and
//! OffsetFetch on the group's coordinator; ListOffsets on each partition's
//! leader for the log end, hence the lag).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::bail;
use bytes::Buf;
use kafka_protocol::messages::{
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    ConsumerProtocolAssignment, DescribeGroupsRequest, GroupId, ListGroupsRequest,
    ListOffsetsRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use serde::Serialize;

use super::client::{broker, describe_error, error_name, topic_name, Client};
use super::output::{print_json, print_text, Format, Table};
use super::Common;

#[derive(clap::Args)]
pub struct GroupArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: GroupCommand,
}

#[derive(clap::Subcommand)]
enum GroupCommand {
    /// List the consumer groups of every broker.
    List,
    /// Show a group's state, members with their assignment, and committed
    /// offsets with the log end and lag of each partition.
    Describe { group: String },
}

pub async fn run(args: GroupArgs) -> anyhow::Result<()> {
    let mut client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    match args.command {
        GroupCommand::List => list(&mut client, args.common.output).await,
        GroupCommand::Describe { group } => describe(&mut client, args.common.output, &group).await,
    }
}

#[derive(Serialize)]
struct GroupSummary {
    group: String,
    state: String,
    protocol_type: String,
    coordinator: i32,
}

async fn list(client: &mut Client, out: Format) -> anyhow::Result<()> {
    let meta = client.metadata(Some(&[]), false).await?;
    let mut nodes: Vec<i32> = meta.brokers.iter().map(|b| b.node_id.0).collect();
    nodes.sort_unstable();
    let mut groups = Vec::new();
    let mut answered = 0;
    // every coordinator lists only its own groups; one broker down still
    // leaves the others' groups worth showing
    for &node in &nodes {
        let resp = match client
            .call_node(node, &ListGroupsRequest::default(), 0, 4)
            .await
        {
            Ok(r) if r.error_code == 0 => r,
            Ok(r) => {
                eprintln!(
                    "warning: broker {node} cannot list its groups: {}",
                    error_name(r.error_code)
                );
                continue;
            }
            Err(e) => {
                eprintln!("warning: broker {node} cannot list its groups: {e:#}");
                continue;
            }
        };
        answered += 1;
        groups.extend(resp.groups.iter().map(|g| GroupSummary {
            group: g.group_id.to_string(),
            state: g.group_state.to_string(),
            protocol_type: g.protocol_type.to_string(),
            coordinator: node,
        }));
    }
    if answered == 0 && !nodes.is_empty() {
        bail!("no broker could list its groups");
    }
    groups.sort_by(|a, b| a.group.cmp(&b.group));
    if out == Format::Json {
        return print_json(&groups);
    }
    let mut table = Table::new(&["GROUP", "STATE", "PROTOCOL TYPE", "COORDINATOR"]);
    for g in &groups {
        table.row(vec![
            g.group.clone(),
            if g.state.is_empty() { "-" } else { &g.state }.to_owned(),
            g.protocol_type.clone(),
            g.coordinator.to_string(),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Serialize)]
struct Assigned {
    topic: String,
    partitions: Vec<i32>,
}

#[derive(Serialize)]
struct Member {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    assignment: Vec<Assigned>,
}

#[derive(Serialize)]
struct PartitionOffset {
    topic: String,
    partition: i32,
    /// `None` when the group has committed nothing for this partition.
    committed_offset: Option<i64>,
    log_end_offset: Option<i64>,
    lag: Option<i64>,
    member_id: Option<String>,
}

#[derive(Serialize)]
struct GroupDescription {
    group: String,
    coordinator: i32,
    state: String,
    protocol_type: String,
    protocol: String,
    members: Vec<Member>,
    offsets: Vec<PartitionOffset>,
}

async fn describe(client: &mut Client, out: Format, group: &str) -> anyhow::Result<()> {
    let coordinator = find_coordinator(client, group).await?;
    let req = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_string(group.to_owned()))]);
    let resp = client.call_node(coordinator, &req, 0, 5).await?;
    let Some(g) = resp.groups.first() else {
        bail!("the coordinator did not describe group {group}");
    };
    if g.error_code != 0 {
        bail!(describe_error(
            group,
            g.error_code,
            g.error_message.as_ref()
        ));
    }
    let consumer = g.protocol_type.as_str() == "consumer";
    let members: Vec<Member> = g
        .members
        .iter()
        .map(|m| Member {
            member_id: m.member_id.to_string(),
            group_instance_id: m.group_instance_id.as_ref().map(|i| i.to_string()),
            client_id: m.client_id.to_string(),
            client_host: m.client_host.to_string(),
            assignment: if consumer {
                decode_assignment(&m.member_assignment)
            } else {
                Vec::new()
            },
        })
        .collect();
    // Kafka reports an unknown group as Dead with no error
    if g.group_state.as_str() == "Dead" && members.is_empty() {
        bail!("group {group} does not exist");
    }
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    for m in &members {
        for a in &m.assignment {
            for p in &a.partitions {
                owner.insert((a.topic.clone(), *p), m.member_id.clone());
            }
        }
    }
    let committed = committed_offsets(client, coordinator, group).await?;
    // every partition that is committed or assigned
    let partitions: BTreeSet<(String, i32)> = committed
        .keys()
        .cloned()
        .chain(owner.keys().cloned())
        .collect();
    let ends = log_ends(client, &partitions).await?;
    let offsets: Vec<PartitionOffset> = partitions
        .into_iter()
        .map(|key| {
            let committed_offset = committed.get(&key).copied();
            let log_end_offset = ends.get(&key).copied();
            let lag = match (committed_offset, log_end_offset) {
                (Some(c), Some(e)) => Some((e - c).max(0)),
                _ => None,
            };
            PartitionOffset {
                member_id: owner.get(&key).cloned(),
                topic: key.0,
                partition: key.1,
                committed_offset,
                log_end_offset,
                lag,
            }
        })
        .collect();
    let desc = GroupDescription {
        group: group.to_owned(),
        coordinator,
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        protocol: g.protocol_data.to_string(),
        members,
        offsets,
    };
    if out == Format::Json {
        return print_json(&desc);
    }
    print_text(&render(&desc));
    Ok(())
}

fn render(desc: &GroupDescription) -> String {
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    let total_lag: i64 = desc.offsets.iter().filter_map(|o| o.lag).sum();
    let mut text = format!(
        "Group: {}  State: {}  Protocol: {}/{}  Coordinator: {}  Members: {}  Lag: {}\n\n",
        desc.group,
        desc.state,
        if desc.protocol_type.is_empty() {
            "-"
        } else {
            &desc.protocol_type
        },
        if desc.protocol.is_empty() {
            "-"
        } else {
            &desc.protocol
        },
        desc.coordinator,
        desc.members.len(),
        total_lag
    );
    if !desc.members.is_empty() {
        let mut table = Table::new(&["MEMBER", "CLIENT ID", "HOST", "ASSIGNMENT"]);
        for m in &desc.members {
            let assignment = m
                .assignment
                .iter()
                .map(|a| {
                    let parts: Vec<String> = a.partitions.iter().map(|p| p.to_string()).collect();
                    format!("{}:{}", a.topic, parts.join(","))
                })
                .collect::<Vec<_>>()
                .join(" ");
            table.row(vec![
                m.member_id.clone(),
                m.client_id.clone(),
                m.client_host.clone(),
                assignment,
            ]);
        }
        text.push_str(&table.render());
        text.push('\n');
    }
    let mut table = Table::new(&[
        "TOPIC",
        "PARTITION",
        "COMMITTED",
        "LOG END",
        "LAG",
        "MEMBER",
    ]);
    for o in &desc.offsets {
        table.row(vec![
            o.topic.clone(),
            o.partition.to_string(),
            dash(o.committed_offset),
            dash(o.log_end_offset),
            dash(o.lag),
            o.member_id.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    text.push_str(&table.render());
    text
}

/// The broker coordinating `group`, learned into the client's broker list.
async fn find_coordinator(client: &mut Client, group: &str) -> anyhow::Result<i32> {
    client.find_coordinator(group, 0).await
}

/// The consumer protocol's assignment of a member, or nothing if it does
/// not parse (a group of another protocol type).
fn decode_assignment(raw: &bytes::Bytes) -> Vec<Assigned> {
    let mut buf = raw.clone();
    if buf.remaining() < 2 {
        return Vec::new();
    }
    // later versions only add fields: read them as the newest we know
    let version = buf.get_i16().clamp(0, 3);
    match ConsumerProtocolAssignment::decode(&mut buf, version) {
        Ok(a) => a
            .assigned_partitions
            .iter()
            .map(|tp| {
                let mut partitions = tp.partitions.clone();
                partitions.sort_unstable();
                Assigned {
                    topic: tp.topic.to_string(),
                    partitions,
                }
            })
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The group's committed offsets, by (topic, partition).
async fn committed_offsets(
    client: &mut Client,
    coordinator: i32,
    group: &str,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    // v1 cannot ask for "every topic"; v2-7 name the group once
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(None);
    let resp = client.call_node(coordinator, &req, 2, 7).await?;
    if resp.error_code != 0 {
        bail!(describe_error(group, resp.error_code, None));
    }
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            if p.error_code != 0 {
                bail!(describe_error(
                    &format!("{}/{}", t.name.as_str(), p.partition_index),
                    p.error_code,
                    None
                ));
            }
            if p.committed_offset >= 0 {
                out.insert((t.name.to_string(), p.partition_index), p.committed_offset);
            }
        }
    }
    Ok(out)
}

/// The log end offset (high watermark) of each partition, asked of its leader.
async fn log_ends(
    client: &mut Client,
    partitions: &BTreeSet<(String, i32)>,
) -> anyhow::Result<BTreeMap<(String, i32), i64>> {
    let mut out = BTreeMap::new();
    if partitions.is_empty() {
        return Ok(out);
    }
    let topics: Vec<String> = partitions
        .iter()
        .map(|(t, _)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let meta = client.metadata(Some(&topics), false).await?;
    // leader -> topic -> partitions
    let mut by_leader: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
    for t in &meta.topics {
        let Some(name) = t.name.as_ref() else {
            continue;
        };
        for p in &t.partitions {
            let key = (name.to_string(), p.partition_index);
            if partitions.contains(&key) && p.leader_id.0 >= 0 {
                by_leader
                    .entry(p.leader_id.0)
                    .or_default()
                    .entry(key.0)
                    .or_default()
                    .push(key.1);
            }
        }
    }
    for (leader, topics) in by_leader {
        let req = ListOffsetsRequest::default()
            .with_replica_id(broker(-1))
            .with_topics(
                topics
                    .iter()
                    .map(|(t, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(
                                ps.iter()
                                    .map(|p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(*p)
                                            .with_current_leader_epoch(-1)
                                            .with_timestamp(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let resp = client.call_node(leader, &req, 1, 7).await?;
        for t in &resp.topics {
            for p in &t.partitions {
                if p.error_code == 0 {
                    out.insert((t.name.to_string(), p.partition_index), p.offset);
                }
            }
        }
    }
    Ok(out)
}
