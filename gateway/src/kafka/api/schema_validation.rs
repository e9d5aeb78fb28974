//! Broker-side schema validation (`confluent.value.schema.validation`,
//! `confluent.key.schema.validation`): the ids a produced batch's values
//! (keys) must carry, read from the schema registry once per batch.
//!
//! Subjects follow the default subject name strategy of the registry's
//! serializers: `<topic>-value` and `<topic>-key`. Only live versions
//! count: a soft-deleted version's id no longer admits records. The log
//! checks each record against the ids in the walk that already counts and
//! frames the batch's records (`storage::schema_ids`), so a batch is
//! decompressed once; a topic without validation pays one config lookup
//! per batch and nothing per record.

use std::collections::BTreeMap;

use metastore::topic_config::{KEY_SCHEMA_VALIDATION, VALUE_SCHEMA_VALIDATION};
use metastore::TopicInfo;
use storage::{SchemaRule, SubjectIds};

use crate::broker::Broker;

/// Whether a Boolean topic config whose default is false is on. Values
/// were validated when set; anything but `true` is off.
fn enabled(configs: &BTreeMap<String, String>, key: &str) -> bool {
    configs
        .get(key)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The ids the records of a batch produced to `topic` must carry, or
/// `None` when the topic validates neither keys nor values.
pub(super) fn rule(b: &Broker, topic: &TopicInfo) -> Option<Box<SchemaRule>> {
    let key = enabled(&topic.configs, KEY_SCHEMA_VALIDATION).then(|| format!("{}-key", topic.name));
    let value =
        enabled(&topic.configs, VALUE_SCHEMA_VALIDATION).then(|| format!("{}-value", topic.name));
    if key.is_none() && value.is_none() {
        return None;
    }
    // one short read of the registry, no await while it is held
    let (key_ids, value_ids) = b.node.catalog.read(|s| {
        let live = |subject: Option<&String>| -> Option<Vec<i32>> {
            let subject = subject?;
            Some(
                s.registry()
                    .subject(subject)
                    .map_or_else(Vec::new, |s| s.live().map(|(_, v)| v.id).collect()),
            )
        };
        (live(key.as_ref()), live(value.as_ref()))
    });
    Some(Box::new(SchemaRule {
        key: key.zip(key_ids).map(|(k, ids)| SubjectIds::new(k, ids)),
        value: value.zip(value_ids).map(|(v, ids)| SubjectIds::new(v, ids)),
    }))
}
