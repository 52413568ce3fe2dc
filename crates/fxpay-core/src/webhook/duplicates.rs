//! Duplicate keys (after the schema check): refused in the objects the schema interprets
//! (the top-level object, `eventBody` and each `errors` entry), whatever the key; inside
//! values it does not interpret the last duplicate wins, as with Python's `json.loads`. A
//! second pass over the text that keeps only keys.
use crate::error::{Error, Result};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// Refuses duplicate keys in the objects the schema interprets. Only called on bodies that
/// passed the schema check, so their shapes are known.
pub(super) fn check(text: &str) -> Result<()> {
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = Object {
        path: Cow::Borrowed(""),
        level: Level::Top,
    };
    seed.deserialize(&mut de).map_err(|e| {
        // The visitor's own message, without the position serde_json appends to it.
        let text = e.to_string();
        let msg = text
            .rsplit_once(" at line ")
            .map_or(text.as_str(), |(m, _)| m);
        Error::WebhookPayload(msg.to_string())
    })
}

/// A key as shown in a message: at most 64 characters of it.
fn shown(key: &str) -> String {
    match key.char_indices().nth(64) {
        Some((end, _)) => format!("{}...", &key[..end]),
        None => key.to_string(),
    }
}

#[derive(Clone, Copy)]
enum Level {
    Top,
    EventBody,
    ErrorEntry,
}

/// An interpreted object: every key once; nested interpreted objects checked the same way.
struct Object<'p> {
    path: Cow<'p, str>,
    level: Level,
}

impl<'de> DeserializeSeed<'de> for Object<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Object<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        let mut seen = Seen::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if seen.contains(&key) {
                let key = shown(&key);
                let name = if self.path.is_empty() {
                    key
                } else {
                    format!("{}.{key}", self.path)
                };
                return Err(serde::de::Error::custom(format!(
                    "the key {name} appears more than once"
                )));
            }
            match (self.level, key.as_ref()) {
                (Level::Top, "eventBody") => map.next_value_seed(Object {
                    path: Cow::Borrowed("eventBody"),
                    level: Level::EventBody,
                })?,
                (Level::EventBody, "errors") => map.next_value_seed(Entries)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            seen.insert(key);
        }
        Ok(())
    }
}

/// The keys of one object so far: a short list scanned in order (the usual case, a handful
/// of keys), turned into a hash set once it grows, so a body with many keys stays linear.
pub(super) enum Seen<'de> {
    Few(Vec<Cow<'de, str>>),
    Many(HashSet<Cow<'de, str>>),
}

impl Default for Seen<'_> {
    fn default() -> Self {
        Seen::Few(Vec::new())
    }
}

impl<'de> Seen<'de> {
    pub(super) const FEW: usize = 16;

    pub(super) fn contains(&self, key: &str) -> bool {
        match self {
            Seen::Few(v) => v.iter().any(|k| k == key),
            Seen::Many(h) => h.contains(key),
        }
    }

    pub(super) fn insert(&mut self, key: Cow<'de, str>) {
        match self {
            Seen::Few(v) if v.len() < Self::FEW => v.push(key),
            Seen::Few(v) => {
                let mut h: HashSet<Cow<'de, str>> = v.drain(..).collect();
                h.insert(key);
                *self = Seen::Many(h);
            }
            Seen::Many(h) => {
                h.insert(key);
            }
        }
    }

    /// Whether the keys are held in a hash set (for the tests).
    #[cfg(test)]
    pub(super) fn is_many(&self) -> bool {
        matches!(self, Seen::Many(_))
    }
}

/// `eventBody.errors`: an array of interpreted objects (or null / empty on success).
struct Entries;

impl<'de> DeserializeSeed<'de> for Entries {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Entries {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array or null")
    }

    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        let mut i = 0usize;
        while seq
            .next_element_seed(Object {
                path: Cow::Owned(format!("eventBody.errors[{i}]")),
                level: Level::ErrorEntry,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
}
