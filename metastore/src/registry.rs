//! The schema registry's state: schemas by global id, subjects and their
//! versions, compatibility levels and modes, as Confluent's Schema Registry
//! keeps them, replicated through the metastore so every agent serves the
//! same ids. Parsing and compatibility checks are not done here (the
//! `registry` crate does them before a registration is proposed); this
//! module keeps the rules that need the state: one id per distinct schema,
//! versions in order, deletes soft before hard, references kept alive.
//!
//! A registration names the latest version its compatibility check saw
//! (`expect_latest`); if the subject moved on meanwhile it is refused as
//! stale and the caller checks again, so two agents registering at once
//! cannot both skip each other's check.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::MetaError;

/// Confluent's error codes that the state decides.
pub mod code {
    pub const SUBJECT_NOT_FOUND: u32 = 40401;
    pub const VERSION_NOT_FOUND: u32 = 40402;
    pub const SCHEMA_NOT_FOUND: u32 = 40403;
    pub const SUBJECT_SOFT_DELETED: u32 = 40404;
    pub const SUBJECT_NOT_SOFT_DELETED: u32 = 40405;
    pub const VERSION_SOFT_DELETED: u32 = 40406;
    pub const VERSION_NOT_SOFT_DELETED: u32 = 40407;
    pub const INCOMPATIBLE: u32 = 409;
    pub const INVALID_SCHEMA: u32 = 42201;
    pub const INVALID_VERSION: u32 = 42202;
    pub const INVALID_COMPATIBILITY: u32 = 42203;
    pub const INVALID_MODE: u32 = 42204;
    pub const OPERATION_NOT_PERMITTED: u32 = 42205;
    pub const REFERENCE_EXISTS: u32 = 42206;
    pub const STORE_ERROR: u32 = 50001;
}

/// The largest schema text accepted (Confluent's default request limit is
/// far larger; a schema is metadata, and every agent keeps every one).
pub const MAX_SCHEMA_BYTES: usize = 512 << 10;

/// A reference from a schema to a subject's version, by the name the
/// schema uses for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SchemaRef {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// A registered schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSchema {
    /// `AVRO`, `PROTOBUF` or `JSON`.
    pub schema_type: String,
    /// The text as first registered.
    pub schema: String,
    /// What identifies it (the `registry` crate's canonical text).
    pub canonical: String,
    #[serde(default)]
    pub references: Vec<SchemaRef>,
}

impl StoredSchema {
    fn same_as(&self, other: &StoredSchema) -> bool {
        self.schema_type == other.schema_type
            && self.canonical == other.canonical
            && self.references == other.references
    }
}

/// One version of a subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubjectVersion {
    pub id: i32,
    /// Soft-deleted: hidden from reads unless asked for, still holding its
    /// id and version number.
    #[serde(default)]
    pub deleted: bool,
}

/// A subject: its versions and its own settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    pub versions: BTreeMap<i32, SubjectVersion>,
    /// Overrides the global level (`PUT /config/{subject}`).
    #[serde(default)]
    pub compatibility: Option<String>,
    /// Overrides the global mode (`PUT /mode/{subject}`).
    #[serde(default)]
    pub mode: Option<String>,
}

impl Subject {
    pub fn live(&self) -> impl DoubleEndedIterator<Item = (i32, SubjectVersion)> + '_ {
        self.versions
            .iter()
            .filter(|(_, v)| !v.deleted)
            .map(|(n, v)| (*n, *v))
    }

    pub fn latest_live(&self) -> Option<(i32, SubjectVersion)> {
        self.live().next_back()
    }
}

/// The whole registry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryState {
    /// The id the next new schema gets (ids start at 1, never reused).
    #[serde(default)]
    next_id: i32,
    #[serde(default)]
    schemas: BTreeMap<i32, Arc<StoredSchema>>,
    #[serde(default)]
    subjects: BTreeMap<String, Arc<Subject>>,
    #[serde(default)]
    compatibility: Option<String>,
    #[serde(default)]
    mode: Option<String>,
}

/// A change to the registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegistryCommand {
    /// Registers `schema` under `subject`: the version it already has
    /// there, or a new version (with the id the same schema has anywhere,
    /// or a new id). `expect_latest` is the latest live version the
    /// caller's compatibility check saw (`None`: none); `id` and `version`
    /// are given in IMPORT mode only.
    Register {
        subject: String,
        schema: StoredSchema,
        expect_latest: Option<i32>,
        #[serde(default)]
        id: Option<i32>,
        #[serde(default)]
        version: Option<i32>,
    },
    /// Soft-deletes a version, or removes a soft-deleted one (`permanent`).
    DeleteVersion {
        subject: String,
        version: i32,
        permanent: bool,
    },
    /// Soft-deletes every version of a subject, or removes a subject whose
    /// versions are all soft-deleted (`permanent`).
    DeleteSubject { subject: String, permanent: bool },
    /// Sets (`Some`) or clears (`None`) the level of a subject, or the
    /// global one (`subject: None`; clearing it restores BACKWARD).
    SetCompatibility {
        subject: Option<String>,
        level: Option<String>,
    },
    /// Sets or clears the mode, as `SetCompatibility` the level.
    SetMode {
        subject: Option<String>,
        mode: Option<String>,
    },
}

/// What a registry command answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegistryOutput {
    Registered { id: i32, version: i32 },
    Versions(Vec<i32>),
    Version(i32),
    Done,
}

/// The two settings a subject (or the registry) has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The compatibility level (`/config`).
    Compatibility,
    /// The mode (`/mode`).
    Mode,
}

pub const DEFAULT_COMPATIBILITY: &str = "BACKWARD";
pub const DEFAULT_MODE: &str = "READWRITE";

fn refuse<T>(code: u32, message: impl Into<String>) -> Result<T, MetaError> {
    Err(MetaError::Registry {
        code,
        message: message.into(),
    })
}

impl RegistryState {
    // ---- reads ---------------------------------------------------------------

    pub fn schema(&self, id: i32) -> Option<&StoredSchema> {
        self.schemas.get(&id).map(Arc::as_ref)
    }

    pub fn subject(&self, name: &str) -> Option<&Subject> {
        self.subjects.get(name).map(Arc::as_ref)
    }

    /// Subjects with a version (a live one, unless `deleted`).
    pub fn subjects(&self, deleted: bool) -> impl Iterator<Item = (&String, &Subject)> {
        self.subjects
            .iter()
            .map(|(n, s)| (n, s.as_ref()))
            .filter(move |(_, s)| {
                if deleted {
                    !s.versions.is_empty()
                } else {
                    s.latest_live().is_some()
                }
            })
    }

    /// Where schema `id` is registered: (subject, version, soft-deleted).
    pub fn uses_of(&self, id: i32) -> Vec<(&str, i32, bool)> {
        let mut out = Vec::new();
        for (name, s) in &self.subjects {
            for (n, v) in &s.versions {
                if v.id == id {
                    out.push((name.as_str(), *n, v.deleted));
                }
            }
        }
        out
    }

    /// Ids of the schemas that reference `subject`'s `version`.
    pub fn referenced_by(&self, subject: &str, version: i32) -> Vec<i32> {
        self.schemas
            .iter()
            .filter(|(_, s)| {
                s.references
                    .iter()
                    .any(|r| r.subject == subject && r.version == version)
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// `setting` for `subject`: its own, else the global one, else the
    /// default (BACKWARD, READWRITE).
    pub fn setting(&self, setting: Setting, subject: Option<&str>) -> &str {
        subject
            .and_then(|s| self.own_setting(setting, Some(s)))
            .or(self.own_setting(setting, None))
            .unwrap_or(match setting {
                Setting::Compatibility => DEFAULT_COMPATIBILITY,
                Setting::Mode => DEFAULT_MODE,
            })
    }

    /// `setting` as set on `subject` itself (`None`: the global one).
    pub fn own_setting(&self, setting: Setting, subject: Option<&str>) -> Option<&str> {
        let (level, mode) = match subject {
            Some(s) => {
                let s = self.subjects.get(s)?;
                (&s.compatibility, &s.mode)
            }
            None => (&self.compatibility, &self.mode),
        };
        match setting {
            Setting::Compatibility => level.as_deref(),
            Setting::Mode => mode.as_deref(),
        }
    }

    /// The level for `subject` (its own, else the global one).
    pub fn compatibility(&self, subject: Option<&str>) -> &str {
        self.setting(Setting::Compatibility, subject)
    }

    /// The mode for `subject` (its own, else the global one).
    pub fn mode(&self, subject: Option<&str>) -> &str {
        self.setting(Setting::Mode, subject)
    }

    /// The id a schema like `schema` already has, if any.
    pub fn id_of(&self, schema: &StoredSchema) -> Option<i32> {
        self.schemas
            .iter()
            .find(|(_, s)| s.same_as(schema))
            .map(|(id, _)| *id)
    }

    // ---- changes ---------------------------------------------------------------

    pub(crate) fn apply(&mut self, command: RegistryCommand) -> Result<RegistryOutput, MetaError> {
        match command {
            RegistryCommand::Register {
                subject,
                schema,
                expect_latest,
                id,
                version,
            } => self.register(subject, schema, expect_latest, id, version),
            RegistryCommand::DeleteVersion {
                subject,
                version,
                permanent,
            } => self.delete_version(&subject, version, permanent),
            RegistryCommand::DeleteSubject { subject, permanent } => {
                self.delete_subject(&subject, permanent)
            }
            RegistryCommand::SetCompatibility { subject, level } => {
                self.set(Setting::Compatibility, subject, level);
                Ok(RegistryOutput::Done)
            }
            RegistryCommand::SetMode { subject, mode } => {
                self.set(Setting::Mode, subject, mode);
                Ok(RegistryOutput::Done)
            }
        }
    }

    /// Sets or clears `setting` on `subject`, or globally.
    fn set(&mut self, setting: Setting, subject: Option<String>, value: Option<String>) {
        let slot = |level: &mut Option<String>, mode: &mut Option<String>| match setting {
            Setting::Compatibility => *level = value.clone(),
            Setting::Mode => *mode = value.clone(),
        };
        match subject {
            Some(s) => {
                let entry = Arc::make_mut(self.subjects.entry(s.clone()).or_default());
                slot(&mut entry.compatibility, &mut entry.mode);
                self.forget_if_empty(&s);
            }
            None => slot(&mut self.compatibility, &mut self.mode),
        }
    }

    fn register(
        &mut self,
        subject: String,
        schema: StoredSchema,
        expect_latest: Option<i32>,
        id: Option<i32>,
        version: Option<i32>,
    ) -> Result<RegistryOutput, MetaError> {
        if subject.is_empty() || subject.chars().any(char::is_control) {
            return refuse(
                code::INVALID_SCHEMA,
                "a subject name must be non-empty text",
            );
        }
        if schema.schema.len() > MAX_SCHEMA_BYTES {
            return refuse(
                code::INVALID_SCHEMA,
                format!("a schema may have at most {MAX_SCHEMA_BYTES} bytes"),
            );
        }
        let mode = self.mode(Some(&subject)).to_owned();
        if mode == "READONLY" {
            return refuse(
                code::OPERATION_NOT_PERMITTED,
                format!("Subject {subject} is in read-only mode"),
            );
        }
        if (id.is_some() || version.is_some()) && mode != "IMPORT" {
            return refuse(
                code::OPERATION_NOT_PERMITTED,
                "a schema id or version may be given in IMPORT mode only",
            );
        }
        for r in &schema.references {
            let found = self
                .subjects
                .get(&r.subject)
                .and_then(|s| s.versions.get(&r.version));
            if found.is_none() {
                return refuse(
                    code::INVALID_SCHEMA,
                    format!(
                        "Invalid schema: reference {} names version {} of subject {}, which does not exist",
                        r.name, r.version, r.subject
                    ),
                );
            }
        }
        let current = self.subjects.get(&subject).cloned().unwrap_or_default();
        // the same schema is already a live version of the subject
        if let Some((n, v)) = current
            .live()
            .find(|(_, v)| self.schemas.get(&v.id).is_some_and(|s| s.same_as(&schema)))
        {
            if id.is_none_or(|want| want == v.id) {
                return Ok(RegistryOutput::Registered {
                    id: v.id,
                    version: n,
                });
            }
        }
        let latest = current.latest_live().map(|(n, _)| n);
        if mode != "IMPORT" && latest != expect_latest {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "subject {subject} changed while the schema was checked (latest version {latest:?}, checked against {expect_latest:?})"
                ),
            });
        }
        let id = match id {
            Some(want) => {
                if want < 1 {
                    return refuse(
                        code::INVALID_SCHEMA,
                        format!("schema id {want} is not valid"),
                    );
                }
                if self.schemas.get(&want).is_some_and(|s| !s.same_as(&schema)) {
                    return refuse(
                        code::OPERATION_NOT_PERMITTED,
                        format!("schema id {want} is already the id of another schema"),
                    );
                }
                want
            }
            None => match self.id_of(&schema) {
                Some(existing) => existing,
                None => self.next_id.max(1),
            },
        };
        let highest = current.versions.keys().next_back().copied().unwrap_or(0);
        let version = match version {
            Some(v) if v <= highest || v < 1 => {
                return refuse(
                    code::INVALID_VERSION,
                    format!("version {v} is not above the subject's latest version {highest}"),
                );
            }
            Some(v) => v,
            None => highest
                .checked_add(1)
                .ok_or_else(|| MetaError::invalid_request("the subject has no version left"))?,
        };
        self.schemas.entry(id).or_insert_with(|| Arc::new(schema));
        self.next_id = self.next_id.max(id.saturating_add(1)).max(2);
        let entry = self.subjects.entry(subject).or_default();
        Arc::make_mut(entry)
            .versions
            .insert(version, SubjectVersion { id, deleted: false });
        Ok(RegistryOutput::Registered { id, version })
    }

    /// Refuses to delete `subject`'s `version` while a live schema
    /// references it.
    fn check_unreferenced(&self, subject: &str, version: i32) -> Result<(), MetaError> {
        let by: Vec<i32> = self
            .referenced_by(subject, version)
            .into_iter()
            .filter(|id| self.uses_of(*id).iter().any(|(_, _, deleted)| !deleted))
            .collect();
        if by.is_empty() {
            Ok(())
        } else {
            refuse(
                code::REFERENCE_EXISTS,
                format!(
                    "One or more references exist to the schema {{subject={subject},version={version}}}: schema ids {by:?}"
                ),
            )
        }
    }

    fn delete_version(
        &mut self,
        subject: &str,
        version: i32,
        permanent: bool,
    ) -> Result<RegistryOutput, MetaError> {
        self.check_writable(subject)?;
        let Some(s) = self
            .subjects
            .get(subject)
            .filter(|s| !s.versions.is_empty())
        else {
            return refuse(
                code::SUBJECT_NOT_FOUND,
                format!("Subject '{subject}' not found."),
            );
        };
        let Some(v) = s.versions.get(&version).copied() else {
            return refuse(
                code::VERSION_NOT_FOUND,
                format!("Version {version} not found."),
            );
        };
        if permanent && !v.deleted {
            return refuse(
                code::VERSION_NOT_SOFT_DELETED,
                format!(
                    "Subject '{subject}' Version {version} was not deleted first before being permanently deleted"
                ),
            );
        }
        if !permanent && v.deleted {
            return refuse(
                code::VERSION_SOFT_DELETED,
                format!(
                    "Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete permanently"
                ),
            );
        }
        self.check_unreferenced(subject, version)?;
        let entry = self.subjects.entry(subject.to_owned()).or_default();
        let s = Arc::make_mut(entry);
        if permanent {
            s.versions.remove(&version);
        } else if let Some(v) = s.versions.get_mut(&version) {
            v.deleted = true;
        }
        if permanent {
            self.forget_unused(v.id);
            self.forget_if_empty(subject);
        }
        Ok(RegistryOutput::Version(version))
    }

    fn delete_subject(
        &mut self,
        subject: &str,
        permanent: bool,
    ) -> Result<RegistryOutput, MetaError> {
        self.check_writable(subject)?;
        let Some(s) = self
            .subjects
            .get(subject)
            .filter(|s| !s.versions.is_empty())
        else {
            return refuse(
                code::SUBJECT_NOT_FOUND,
                format!("Subject '{subject}' not found."),
            );
        };
        let live: Vec<i32> = s.live().map(|(n, _)| n).collect();
        let all: Vec<i32> = s.versions.keys().copied().collect();
        if permanent && !live.is_empty() {
            return refuse(
                code::SUBJECT_NOT_SOFT_DELETED,
                format!(
                    "Subject '{subject}' was not deleted first before being permanently deleted"
                ),
            );
        }
        if !permanent && live.is_empty() {
            return refuse(
                code::SUBJECT_SOFT_DELETED,
                format!(
                    "Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
                ),
            );
        }
        for v in &all {
            self.check_unreferenced(subject, *v)?;
        }
        let entry = self.subjects.entry(subject.to_owned()).or_default();
        let s = Arc::make_mut(entry);
        if permanent {
            let ids: Vec<i32> = s.versions.values().map(|v| v.id).collect();
            s.versions.clear();
            s.compatibility = None;
            s.mode = None;
            for id in ids {
                self.forget_unused(id);
            }
            self.forget_if_empty(subject);
            Ok(RegistryOutput::Versions(all))
        } else {
            for v in s.versions.values_mut() {
                v.deleted = true;
            }
            Ok(RegistryOutput::Versions(live))
        }
    }

    fn check_writable(&self, subject: &str) -> Result<(), MetaError> {
        if self.mode(Some(subject)) == "READONLY" {
            return refuse(
                code::OPERATION_NOT_PERMITTED,
                format!("Subject {subject} is in read-only mode"),
            );
        }
        Ok(())
    }

    /// Drops schema `id` once no subject version holds it.
    fn forget_unused(&mut self, id: i32) {
        if self.uses_of(id).is_empty() {
            self.schemas.remove(&id);
        }
    }

    /// Drops a subject with no version and no settings of its own.
    fn forget_if_empty(&mut self, subject: &str) {
        if self
            .subjects
            .get(subject)
            .is_some_and(|s| s.versions.is_empty() && s.compatibility.is_none() && s.mode.is_none())
        {
            self.subjects.remove(subject);
        }
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
