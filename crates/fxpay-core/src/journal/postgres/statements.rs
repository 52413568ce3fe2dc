//! The SQL a PostgreSQL journal runs: `fxpay.postgres_journal`'s statements, on the table as
//! PostgreSQL resolved it. The statements of keyed calls take their values as parameters
//! and are prepared once per connection; the rare ones (opening, `create`) go out as text,
//! their values as literals, quoted as PostgreSQL reads them with
//! `standard_conforming_strings` on, which every connection checks (`connection::vet`): a
//! quote is doubled, a backslash is itself. Text PostgreSQL cannot hold (a NUL) is refused.
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

/// `name` as a quoted SQL identifier.
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The statements on one resolved table (schema, name), with the identity row's text. Each
/// takes its values as parameters (`$1`...), as text, and is prepared once per connection.
pub(crate) struct Statements {
    /// `schema.name`, unquoted (as the identity row says it).
    pub name: String,
    /// The identity row's text (the journal this process opened).
    pub ident: String,
    /// The stored text of a key (`$1`).
    pub get: String,
    /// The keys and stored texts of the keys in `$1` (an array).
    pub get_many: String,
    /// Inserts the entry (`$1` key, `$2` state, `$3` result, `$4` data) where its key is
    /// free, and only where this journal's identity row (`$5` key, `$6` text) still is (a
    /// TRUNCATE, or a DROP and a new journal, under a live process is caught).
    pub claim: String,
    /// Replaces the entry of key `$4` stored as `$5` by (`$1` state, `$2` result, `$3` data).
    pub swap: String,
    /// The first entry (by when it was made) whose result is `$1`.
    pub find: String,
    /// Every key and entry that is pending or unknown, by when it was made.
    pub candidates: String,
}

impl Statements {
    pub(crate) fn new(schema: &str, name: &str, ident: String) -> Statements {
        let t = format!("{}.{}", self::ident(schema), self::ident(name));
        Statements {
            name: format!("{schema}.{name}"),
            ident,
            get: format!("SELECT data FROM {t} WHERE key = $1::text"),
            get_many: format!("SELECT key, data FROM {t} WHERE key = ANY($1::text[])"),
            claim: format!(
                "INSERT INTO {t} (key, state, result, data) SELECT $1::text, $2::text, $3::text, $4::text \
                 WHERE EXISTS (SELECT 1 FROM {t} WHERE key = $5::text AND data = $6::text) ON CONFLICT (key) DO NOTHING"
            ),
            swap: format!(
                "UPDATE {t} SET state = $1::text, result = $2::text, data = $3::text, updated_at = now() \
                 WHERE key = $4::text AND data = $5::text"
            ),
            find: format!("SELECT data FROM {t} WHERE result = $1::text ORDER BY seq LIMIT 1"),
            candidates: format!(
                "SELECT key, data FROM {t} WHERE state IN ('pending', 'unknown') ORDER BY seq"
            ),
        }
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
    fn the_statements_name_the_quoted_table() {
        let st = Statements::new("pay ments", "j\"1", String::new());
        assert_eq!(st.name, "pay ments.j\"1");
        assert!(
            st.get.contains(r#"FROM "pay ments"."j""1" WHERE"#),
            "{}",
            st.get
        );
        assert!(st
            .claim
            .contains(r#"EXISTS (SELECT 1 FROM "pay ments"."j""1" WHERE key = $5"#));
    }

    #[test]
    fn an_identity_names_its_table() {
        let made = r#"{"journal": "fxpay-journal:1", "table": "public.j"}"#;
        assert_eq!(identity_table(made).as_deref(), Some("public.j"));
        assert_eq!(identity_table("not json"), None);
    }
}
