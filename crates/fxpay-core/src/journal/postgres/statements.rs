//! The SQL a PostgreSQL journal runs, as text: every statement goes out in the simple query
//! protocol (one round trip; several in one message are one transaction, one commit), with
//! its values as literals. A literal is quoted as PostgreSQL reads it with
//! `standard_conforming_strings` on, which every connection checks (`connection::vet`): a
//! quote is doubled, a backslash is itself. Text PostgreSQL cannot hold (a NUL) is refused.
//! The statements are `fxpay.postgres_journal`'s, on the table as PostgreSQL resolved it.
use crate::error::{Error, Result};

/// The key of the journal's identity row: it starts with a control character, which no
/// caller's key may hold.
pub(crate) const IDENTITY_KEY: &str = "\x01journal";

/// `text` as an SQL string literal.
pub(crate) fn literal(text: &str) -> Result<String> {
    if text.contains('\0') {
        return Err(Error::journal(
            "PostgresJournal: a value holds a NUL character, which PostgreSQL cannot store; nothing was sent",
        ));
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        if c == '\'' {
            out.push('\'');
        }
        out.push(c);
    }
    out.push('\'');
    Ok(out)
}

/// `Some(text)` as a literal, `None` as NULL.
fn nullable(text: Option<&str>) -> Result<String> {
    text.map_or_else(|| Ok("NULL".to_owned()), literal)
}

/// `name` as a quoted SQL identifier.
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The statements on one resolved table (schema, name), with the identity row's text.
pub(crate) struct Statements {
    /// `schema.name`, unquoted (as the identity row says it).
    pub name: String,
    /// The table, quoted and schema-qualified.
    t: String,
    /// The identity row's text (the journal this process opened).
    pub ident: String,
}

impl Statements {
    pub(crate) fn new(schema: &str, name: &str, ident: String) -> Statements {
        Statements {
            name: format!("{schema}.{name}"),
            t: format!("{}.{}", self::ident(schema), self::ident(name)),
            ident,
        }
    }

    /// The stored text of `key`.
    pub(crate) fn get(&self, key: &str) -> Result<String> {
        Ok(format!(
            "SELECT data FROM {} WHERE key = {}",
            self.t,
            literal(key)?
        ))
    }

    /// The keys and stored texts of `keys` that exist.
    pub(crate) fn get_many<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> Result<String> {
        let mut list = String::new();
        for k in keys {
            if !list.is_empty() {
                list.push_str(", ");
            }
            list.push_str(&literal(k)?);
        }
        if list.is_empty() {
            list.push_str("NULL");
        }
        Ok(format!(
            "SELECT key, data FROM {} WHERE key IN ({list})",
            self.t
        ))
    }

    /// Inserts the entry where its key is free, and only where this journal's identity row
    /// still is (a TRUNCATE, or a DROP and a new journal, under a live process is caught).
    pub(crate) fn claim(
        &self,
        key: &str,
        state: &str,
        result: Option<&str>,
        data: &str,
    ) -> Result<String> {
        Ok(format!(
            "INSERT INTO {t} (key, state, result, data) SELECT {}, {}, {}, {} \
             WHERE EXISTS (SELECT 1 FROM {t} WHERE key = {} AND data = {}) ON CONFLICT (key) DO NOTHING",
            literal(key)?,
            literal(state)?,
            nullable(result)?,
            literal(data)?,
            literal(IDENTITY_KEY)?,
            literal(&self.ident)?,
            t = self.t,
        ))
    }

    /// Replaces the entry stored as `old` (text).
    pub(crate) fn swap(
        &self,
        key: &str,
        state: &str,
        result: Option<&str>,
        data: &str,
        old: &str,
    ) -> Result<String> {
        Ok(format!(
            "UPDATE {} SET state = {}, result = {}, data = {}, updated_at = now() WHERE key = {} AND data = {}",
            self.t,
            literal(state)?,
            nullable(result)?,
            literal(data)?,
            literal(key)?,
            literal(old)?,
        ))
    }

    /// The first entry (by when it was made) whose result is `result`.
    pub(crate) fn find(&self, result: &str) -> Result<String> {
        Ok(format!(
            "SELECT data FROM {} WHERE result = {} ORDER BY seq LIMIT 1",
            self.t,
            literal(result)?
        ))
    }

    /// Every key and entry that is pending or unknown, by when it was made.
    pub(crate) fn candidates(&self) -> String {
        format!(
            "SELECT key, data FROM {} WHERE state IN ('pending', 'unknown') ORDER BY seq",
            self.t
        )
    }
}

/// The table a statement names: `name` or `schema.name` as given, each part an SQL
/// identifier (letters, digits and `_`, not starting with a digit, at most 50 characters,
/// so that the index names made from it stay within PostgreSQL's 63).
pub(crate) fn table_parts(table: &str) -> Result<Vec<String>> {
    let parts: Vec<String> = table.split('.').map(str::to_owned).collect();
    let ok = |p: &String| {
        let mut chars = p.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && p.len() <= 50
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if parts.len() > 2 || !parts.iter().all(ok) {
        return Err(Error::Configuration(format!(
            "table must be an SQL identifier (letters, digits and _, not starting with a digit, \
             at most 50 characters), optionally schema-qualified, got {table:?}"
        )));
    }
    Ok(parts)
}

/// The (schema, name) PostgreSQL resolves `parts` to (the search path for an unqualified
/// name): one row, or none when there is no such table.
pub(crate) fn resolve(parts: &[String]) -> Result<String> {
    let quoted: Vec<String> = parts.iter().map(|p| ident(p)).collect();
    Ok(format!(
        "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE c.oid = to_regclass({})",
        literal(&quoted.join("."))?
    ))
}

/// The statements that make the journal in `schema`: its table, its indexes and its
/// identity row (`IF NOT EXISTS`, `ON CONFLICT DO NOTHING`): `fxpay.postgres_journal`'s DDL.
pub(crate) fn ddl(schema: &str, name: &str) -> Result<Vec<String>> {
    let t = format!("{}.{}", ident(schema), ident(name));
    let result_index = ident(&format!("{name}_result"));
    let open_index = ident(&format!("{name}_open"));
    Ok(vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {t} ( key text PRIMARY KEY, seq bigint GENERATED BY DEFAULT AS IDENTITY, \
             state text NOT NULL, result text, data text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        ),
        format!("CREATE INDEX IF NOT EXISTS {result_index} ON {t} (result) WHERE result IS NOT NULL"),
        format!(
            "CREATE INDEX IF NOT EXISTS {open_index} ON {t} (seq) WHERE state IN ('pending', 'unknown')"
        ),
        // The journal's identity: a random id, and the table it was made in (schema and name,
        // as PostgreSQL resolved them), so that a copy or a shadowing table is told apart.
        format!(
            "INSERT INTO {t} (key, state, data) SELECT {}, 'journal', json_build_object(\
             'journal', 'fxpay-journal:' || md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text), \
             'table', n.nspname || '.' || c.relname)::text \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass({}) \
             ON CONFLICT (key) DO NOTHING",
            literal(IDENTITY_KEY)?,
            literal(&t)?
        ),
    ])
}

/// The table an identity row says its journal was made in.
pub(crate) fn identity_table(ident: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(ident).ok()?;
    v.get("table")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_doubles_its_quotes_and_keeps_backslashes() {
        assert_eq!(literal("it's").expect("test"), "'it''s'");
        assert_eq!(literal(r"a\'b").expect("test"), r"'a\''b'");
        assert_eq!(literal("''").expect("test"), "''''''");
        assert!(literal("a\0b").is_err());
    }

    #[test]
    fn an_identifier_doubles_its_double_quotes() {
        assert_eq!(ident("fx\"pay"), "\"fx\"\"pay\"");
    }

    #[test]
    fn a_table_is_one_or_two_identifiers() {
        assert_eq!(
            table_parts("fxpay_journal").expect("test"),
            ["fxpay_journal"]
        );
        assert_eq!(table_parts("pay.j_1").expect("test"), ["pay", "j_1"]);
        for bad in ["", "1a", "a.b.c", "a-b", "a;drop", &"x".repeat(51), "a."] {
            assert!(table_parts(bad).is_err(), "{bad:?}");
        }
        assert!(table_parts(&"x".repeat(50)).is_ok());
    }

    #[test]
    fn a_claim_names_the_identity_row() {
        let st = Statements::new("public", "j", "{\"journal\": \"x'y\"}".into());
        let sql = st.claim("k'1", "pending", None, "{}").expect("test");
        assert!(sql.contains("'k''1', 'pending', NULL, '{}'"), "{sql}");
        assert!(
            sql.contains("'\x01journal' AND data = '{\"journal\": \"x''y\"}'"),
            "{sql}"
        );
        assert!(st.get_many([]).expect("test").ends_with("IN (NULL)"));
    }

    #[test]
    fn an_identity_names_its_table() {
        let made = r#"{"journal": "fxpay-journal:1", "table": "public.j"}"#;
        assert_eq!(identity_table(made).as_deref(), Some("public.j"));
        assert_eq!(identity_table("not json"), None);
    }
}
